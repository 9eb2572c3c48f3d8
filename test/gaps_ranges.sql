-- test/gaps_ranges.sql: test/gaps.sql for the shards stored in ranges,
-- whose numbers are in their stamps: the number of range shards whose
-- numbers above the start value, as read() gives them, are not start+1 ..
-- start+n without duplicates, with the head the highest.  Read by
-- test/t/CfeedCheck.pm (check_invariants, CFEED_TEST_STORAGE=ranges) and
-- test/matrix/dump.sh.
SELECT count(*) FROM (
	SELECT s.start_sequence_number AS st, s.last_change_sequence_number AS last,
	       count(r.change_sequence_number) AS n,
	       count(DISTINCT r.change_sequence_number) AS nd,
	       COALESCE(min(r.change_sequence_number), s.start_sequence_number + 1) AS lo,
	       COALESCE(max(r.change_sequence_number), s.start_sequence_number) AS hi
	FROM cfeed.shard s
	LEFT JOIN LATERAL (SELECT x.change_sequence_number
					   FROM cfeed.read(s.feed_id, s.shard, s.start_sequence_number, 100000000) x) r ON true
	WHERE s.storage = 'ranges'
	GROUP BY s.feed_id, s.shard, s.start_sequence_number, s.last_change_sequence_number) x
WHERE n <> nd OR lo <> st + 1 OR hi <> st + n OR last <> hi
