-- test/gaps.sql: the number of shards whose numbers are not gapless (0 when
-- all are): per shard, the numbers above the start value must be start+1 ..
-- start+n without duplicates, and the head the highest.  Read by
-- test/t/CfeedCheck.pm (check_invariants) and test/matrix/dump.sh.  Shards
-- stored in rows only (in any schema version): a range shard's numbers are
-- in its stamps (dump.sh checks them through read()).
SELECT count(*) FROM (
	SELECT s.start_sequence_number AS st, s.last_change_sequence_number AS last,
	       count(c.change_sequence_number) AS n,
	       count(DISTINCT c.change_sequence_number) AS nd,
	       COALESCE(min(c.change_sequence_number), s.start_sequence_number + 1) AS lo,
	       COALESCE(max(c.change_sequence_number), s.start_sequence_number) AS hi
	FROM cfeed.shard s
	LEFT JOIN cfeed.change c ON c.feed_id = s.feed_id AND c.shard = s.shard
	     AND c.change_sequence_number > s.start_sequence_number
	WHERE COALESCE(to_jsonb(s) ->> 'storage', 'rows') = 'rows'
	GROUP BY s.feed_id, s.shard, s.start_sequence_number, s.last_change_sequence_number) x
WHERE n <> nd OR lo <> st + 1 OR hi <> st + n OR last <> hi
