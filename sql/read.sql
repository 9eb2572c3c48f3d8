-- read: cfeed.read, cfeed.head, cfeed.cursor_at, cfeed.wait without contention,
-- backfilled history, and the join pattern with its plan.
\i test/regress_setup.sql

SELECT cfeed.create_feed('r', 2);
SELECT cfeed.create_feed('big', 2);

-- a new shard: head is the start value, nothing to read, cursor_at gives the start
SELECT cfeed.head(1, 0), cfeed.cursor_at(1, 0, now()), (SELECT count(*) FROM cfeed.read(1, 0)) AS rows;

-- unstamped changes are invisible to readers and do not move the head
SELECT count(cfeed.publish(1, 0)) FROM generate_series(1, 3);
SELECT count(*) AS rows, cfeed.head(1, 0) FROM cfeed.read(1, 0);

-- history backfilled into the migration range (stamped in 2001)
INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number, stamped_at)
VALUES (1, 0, 1, 10, '2001-01-01 00:00:00+00'), (1, 0, 2, 11, '2001-01-02 00:00:00+00'),
       (1, 0, 3, 12, '2001-01-03 00:00:00+00');

-- sweep A stamps the three pending changes; sweep B two more, 10 ms apart
SELECT clock_timestamp() AS t_before \gset
SELECT FROM pg_sleep(0.01);
SELECT feed_id, shard, change_count, last_change_sequence_number FROM cfeed.sweep();
SELECT FROM pg_sleep(0.01);
SELECT clock_timestamp() AS t_mid \gset
SELECT FROM pg_sleep(0.01);
SELECT count(cfeed.publish(1, 0)) FROM generate_series(1, 2);
SELECT feed_id, shard, change_count, last_change_sequence_number FROM cfeed.sweep();
SELECT FROM pg_sleep(0.01);
SELECT clock_timestamp() AS t_after \gset

-- from the beginning (cursor null): backfilled history first, then the stamped changes
SELECT change_sequence_number, change_id, stamped_at IS NOT NULL AS stamped
FROM cfeed.read(1, 0);
-- read returns exactly what the table holds, stamped_at included
SELECT count(*) AS mismatches FROM cfeed.read(1, 0) r
FULL JOIN (SELECT * FROM cfeed.change WHERE feed_id = 1 AND shard = 0
           AND change_sequence_number IS NOT NULL) c USING (change_sequence_number)
WHERE r.change_id IS DISTINCT FROM c.change_id OR r.stamped_at IS DISTINCT FROM c.stamped_at;
-- a history row whose stamped_at the owner cleared (history may be edited):
-- read() returns it null, as the table holds it
BEGIN;
UPDATE cfeed.change SET stamped_at = NULL
WHERE feed_id = 1 AND shard = 0 AND change_sequence_number = 11;
SELECT change_sequence_number, change_id, stamped_at FROM cfeed.read(1, 0, 10, 1);
ROLLBACK;
-- a change deleted earlier in the same statement (a data-modifying WITH that
-- read() runs after) is not read, as after a DELETE statement
BEGIN;
WITH gone AS (DELETE FROM cfeed.change
              WHERE feed_id = 1 AND shard = 0 AND change_sequence_number = 11 RETURNING change_id)
SELECT r.change_sequence_number
FROM (SELECT count(*) AS n FROM gone) g, LATERAL cfeed.read(1, 0, 10 + 0 * g.n, 2) r;
ROLLBACK;
-- after a cursor inside the history, at the start value, and inside the live range
SELECT change_sequence_number FROM cfeed.read(1, 0, 11);
SELECT change_sequence_number FROM cfeed.read(1, 0, 2000000000000000);
SELECT change_sequence_number FROM cfeed.read(1, 0, cursor => 2000000000000003);
-- at and beyond the head: nothing
SELECT count(*) FROM cfeed.read(1, 0, 2000000000000005);
SELECT count(*) FROM cfeed.read(1, 0, 9000000000000000);
-- max_count limits, 0 returns nothing
SELECT change_sequence_number FROM cfeed.read(1, 0, NULL, 2);
SELECT change_sequence_number FROM cfeed.read(1, 0, 12, max_count => 1);
SELECT count(*) FROM cfeed.read(1, 0, NULL, 0);
-- with wait_ms and nothing new, it waits and returns nothing; with rows there, it does not wait
SELECT count(*) FROM cfeed.read(1, 0, 2000000000000005, 10, 20);
SELECT change_sequence_number FROM cfeed.read(1, 0, 2000000000000004, 10, 60000);
-- an empty shard of the same feed
SELECT count(*) FROM cfeed.read(1, 1);

-- paging with the cursor visits every change once, in order
CREATE FUNCTION pg_temp.page_all(f int, s int, page int) RETURNS bigint[] LANGUAGE plpgsql AS $$
DECLARE
	cur bigint := NULL;
	got bigint[] := '{}';
	r record;
	n int;
BEGIN
	LOOP
		n := 0;
		FOR r IN SELECT * FROM cfeed.read(f, s, cur, page) LOOP
			got := got || r.change_sequence_number;
			cur := r.change_sequence_number;
			n := n + 1;
		END LOOP;
		EXIT WHEN n = 0;
	END LOOP;
	RETURN got;
END $$;
SELECT pg_temp.page_all(1, 0, 2) = (SELECT array_agg(change_sequence_number ORDER BY change_sequence_number)
                                    FROM cfeed.change WHERE feed_id = 1 AND shard = 0) AS pages_cover_all;

-- head is the shard's last stamped number, = cfeed.shard.last_change_sequence_number
SELECT cfeed.head(1, 0), cfeed.head(1, 1),
       cfeed.head(1, 0) = (SELECT last_change_sequence_number FROM cfeed.shard WHERE feed_id = 1 AND shard = 0) AS same;

-- wait returns the head at once when it is past the cursor, and after the timeout when not
SELECT cfeed.wait(1, 0, 2000000000000001, 60000);
SELECT cfeed.wait(1, 0, 2000000000000005, 10);
SELECT cfeed.wait(1, 0, 2000000000000005, timeout_ms => 0);

-- cursor_at: before sweep A -> the start value; between the sweeps -> A's last
-- number; after B or in the future -> the head
SELECT cfeed.cursor_at(1, 0, :'t_before') AS before_a,
       cfeed.cursor_at(1, 0, :'t_mid') AS between,
       cfeed.cursor_at(1, 0, :'t_after') AS after_b,
       cfeed.cursor_at(1, 0, now() + interval '1 day') AS future,
       cfeed.cursor_at(1, 0, 'infinity') AS infinity;
-- reading from cursor_at(t) returns exactly the changes stamped at or after t
SELECT change_sequence_number FROM cfeed.read(1, 0, cfeed.cursor_at(1, 0, :'t_mid'));
SELECT count(*) FROM cfeed.read(1, 0, cfeed.cursor_at(1, 0, :'t_before'));
-- "at or after": at B's own stamped_at, B is included; a microsecond later it is not
SELECT stamped_at AS t_b FROM cfeed.change WHERE change_sequence_number = 2000000000000004 \gset
SELECT cfeed.cursor_at(1, 0, :'t_b') AS at_b,
       cfeed.cursor_at(1, 0, :'t_b'::timestamptz + interval '1 microsecond') AS just_after_b;
-- a time before the backfilled history (stamped in 2001): reading from cursor_at
-- returns the history as well, like a null cursor
SELECT count(*) FROM cfeed.read(1, 0, cfeed.cursor_at(1, 0, '2000-01-01 00:00:00+00'));
SELECT count(*) FROM cfeed.read(1, 0, cfeed.cursor_at(1, 0, '-infinity'));
-- between two backfilled changes: from the later one on
SELECT count(*) FROM cfeed.read(1, 0, cfeed.cursor_at(1, 0, '2001-01-01 12:00:00+00'));
-- an empty shard: the start value
SELECT cfeed.cursor_at(1, 1, :'t_mid');

-- the clock going back (a failover to a server whose clock is behind): the
-- head of shard 1 was stamped a day ahead of this clock (copied in, as a
-- restore does); a later sweep stamps no earlier than it, so stamped_at never
-- decreases with the numbers and cursor_at still finds every change stamped at
-- or after a time
SET session_replication_role = replica;
INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number, stamped_at, written_at)
VALUES (1, 1, 4, 2000000000000001, now() + interval '1 day', now() - interval '1 hour');
RESET session_replication_role;
SELECT count(cfeed.publish(1, 1)) FROM generate_series(1, 2);
SELECT feed_id, shard, change_count, last_change_sequence_number FROM cfeed.sweep();
SELECT count(*) AS stamps,
       bool_and(stamped_at = (SELECT stamped_at FROM cfeed.change
                              WHERE feed_id = 1 AND shard = 1
                                AND change_sequence_number = 2000000000000001)) AS not_before_head
FROM cfeed.change WHERE feed_id = 1 AND shard = 1;
SELECT count(*) FROM cfeed.read(1, 1, cfeed.cursor_at(1, 1, now() + interval '12 hours'));
SELECT cfeed.cursor_at(1, 1, now() + interval '2 days') = cfeed.head(1, 1) AS after_all;
-- each shard by its own head: shard 0, swept with shard 1, keeps the clock's
-- time; shard 1's head deleted, its highest stamp left still holds it back
DELETE FROM cfeed.change WHERE feed_id = 1 AND shard = 1 AND change_sequence_number = cfeed.head(1, 1);
SELECT count(cfeed.publish(1, s)) FROM generate_series(0, 1) s;
SELECT feed_id, shard, change_count FROM cfeed.sweep() ORDER BY shard;
SELECT shard, max(stamped_at) > now() + interval '12 hours' AS a_day_ahead
FROM cfeed.change WHERE feed_id = 1 AND change_sequence_number > 2000000000000000
GROUP BY shard ORDER BY shard;
SELECT count(*) FROM cfeed.read(1, 1, cfeed.cursor_at(1, 1, now() + interval '12 hours'));

-- the join pattern: an application table joined by change_id
CREATE TABLE myevent (change_id bigint PRIMARY KEY, payload text NOT NULL);
INSERT INTO myevent SELECT cfeed.publish(2, i % 2), 'event ' || i FROM generate_series(1, 2010) i;
SELECT feed_id, shard, change_count, last_change_sequence_number FROM cfeed.sweep() ORDER BY 1, 2;
ANALYZE cfeed.change, myevent;
-- the default max_count is 1000
SELECT count(*), min(change_sequence_number), max(change_sequence_number) FROM cfeed.read(2, 0);
-- it returns the right rows, in order
SELECT e.payload, c.change_sequence_number
FROM myevent e JOIN cfeed.change c USING (change_id)
WHERE c.feed_id = 2 AND c.shard = 1 AND c.change_sequence_number > 2000000000000998
ORDER BY c.change_sequence_number LIMIT 100;
SELECT count(*), min(n), max(n),
       bool_and(payload = 'event ' || ((n - 2000000000000000) * 2 - 1)) AS right_rows
FROM (SELECT e.payload, c.change_sequence_number
      FROM myevent e JOIN cfeed.change c USING (change_id)
      WHERE c.feed_id = 2 AND c.shard = 1 AND c.change_sequence_number > 2000000000000100
      ORDER BY c.change_sequence_number LIMIT 100) AS s(payload, n);
-- and it is a range scan of change_sequence_idx, without a Sort
EXPLAIN (COSTS OFF)
SELECT e.payload, c.change_sequence_number
FROM myevent e JOIN cfeed.change c USING (change_id)
WHERE c.feed_id = 2 AND c.shard = 1 AND c.change_sequence_number > 2000000000000000
ORDER BY c.change_sequence_number LIMIT 100;
-- also as a prepared statement, as drivers run it
PREPARE seed_read(int, int, bigint) AS
SELECT e.payload, c.change_sequence_number
FROM myevent e JOIN cfeed.change c USING (change_id)
WHERE c.feed_id = $1 AND c.shard = $2 AND c.change_sequence_number > $3
ORDER BY c.change_sequence_number LIMIT 100;
EXPLAIN (COSTS OFF) EXECUTE seed_read(2, 0, 2000000000000000);
EXECUTE seed_read(2, 0, 2000000000001002);

DROP TABLE myevent;
DROP EXTENSION cfeed;
