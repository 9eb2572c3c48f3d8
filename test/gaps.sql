-- test/gaps.sql: the number of shards whose numbers are not gapless (0 when
-- all are): per shard, the numbers above the start value must be start+1 ..
-- start+n without duplicates, and the head the highest.  Read by
-- test/t/CfeedCheck.pm (check_invariants) and test/matrix/dump.sh, in any
-- schema version: a shard stored in rows has its numbers in cfeed.change, a
-- shard stored in ranges (storage, since 1.9) in its stamps, as read()
-- gives them.
SELECT count(*) FROM (
	SELECT s.start_sequence_number AS st, s.last_change_sequence_number AS last,
	       count(c.n) AS n,
	       count(DISTINCT c.n) AS nd,
	       COALESCE(min(c.n), s.start_sequence_number + 1) AS lo,
	       COALESCE(max(c.n), s.start_sequence_number) AS hi
	FROM cfeed.shard s
	LEFT JOIN LATERAL (
		SELECT x.change_sequence_number AS n FROM cfeed.change x
		WHERE COALESCE(to_jsonb(s) ->> 'storage', 'rows') = 'rows'
		  AND x.feed_id = s.feed_id AND x.shard = s.shard
		  AND x.change_sequence_number > s.start_sequence_number
		UNION ALL
		SELECT r.change_sequence_number
		FROM cfeed.read(s.feed_id, s.shard, s.start_sequence_number, 100000000) r
		WHERE to_jsonb(s) ->> 'storage' = 'ranges') c ON true
	GROUP BY s.feed_id, s.shard, s.start_sequence_number, s.last_change_sequence_number) x
WHERE n <> nd OR lo <> st + 1 OR hi <> st + n OR last <> hi
