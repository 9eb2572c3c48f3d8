-- sweep: cfeed.sweep and cfeed.sweep_loop, gapless numbering, change_id order,
-- sweep groups, batches (guarantees 1, 2, 4, 5 in one session); stamps are
-- written directly (src/direct.c) with an UPDATE's semantics: what a DBA adds
-- to cfeed.change is honoured.
\i test/regress_setup.sql

-- stamped(): every stamped change, ids and numbers relative to their bases
CREATE FUNCTION pg_temp.stamped() RETURNS TABLE (feed_id int, shard int, id bigint, n bigint)
LANGUAGE sql AS $$
	SELECT feed_id, shard, change_id - 1000000000000000, change_sequence_number - 2000000000000000
	FROM cfeed.change WHERE change_sequence_number IS NOT NULL
	ORDER BY feed_id, shard, change_sequence_number
$$;

SELECT cfeed.create_feed('two', 2);
SELECT cfeed.create_feed('other-group', 1, sweep_group => 1);
SELECT cfeed.create_feed('quiet', 1, longpoll => false);

-- a sweep with nothing to stamp returns no rows and changes nothing
SELECT * FROM cfeed.sweep();
SELECT count(*) AS swept_shards FROM cfeed.shard WHERE last_sweep_time IS NOT NULL;

-- ids 0-2 to 1/0, 3-4 to 1/1, 5 to group 1, 6 to feed 3
SELECT count(cfeed.publish(1, 0)) FROM generate_series(1, 3);
SELECT count(cfeed.publish(1, 1)) FROM generate_series(1, 2);
SELECT cfeed.publish(2, 0) - 1000000000000000 AS id;
SELECT cfeed.publish(3, 0) - 1000000000000000 AS id;

-- sweep() sweeps group 0: one row per shard that got changes, with its new last number
SELECT feed_id, shard, change_count, last_change_sequence_number, lag_ms >= 0 AS lag_ok
FROM cfeed.sweep() ORDER BY feed_id, shard;
-- numbers start at start+1 and follow change_id order; group 1's change is untouched
SELECT * FROM pg_temp.stamped();
SELECT feed_id, shard, change_id - 1000000000000000 AS pending_id
FROM cfeed.change WHERE change_sequence_number IS NULL ORDER BY change_id;

-- sweep(1) stamps group 1 only
SELECT feed_id, shard, change_count, last_change_sequence_number FROM cfeed.sweep(1);
SELECT count(*) AS pending FROM cfeed.change WHERE change_sequence_number IS NULL;

-- a second sweep finds nothing new
SELECT * FROM cfeed.sweep();
SELECT * FROM cfeed.sweep(1);

-- one stamped_at per sweep, never before the change was written; last_sweep_time
-- set on the shards that got changes and equal to their stamped_at
SELECT feed_id, shard, count(DISTINCT stamped_at) AS stamp_times,
       bool_and(stamped_at >= written_at) AS after_write,
       bool_and(stamped_at = (SELECT last_sweep_time FROM cfeed.shard s
                              WHERE s.feed_id = c.feed_id AND s.shard = c.shard)) AS is_last_sweep_time
FROM cfeed.change c GROUP BY feed_id, shard ORDER BY feed_id, shard;
SELECT count(DISTINCT stamped_at) AS sweeps FROM cfeed.change;

-- within one sweep, changes are numbered in change_id order, not insert order
BEGIN;
SELECT cfeed.publish(1, 0, 1000000000000050), cfeed.publish(1, 0, 1000000000000040),
       cfeed.publish(1, 0, 1000000000000045);
COMMIT;
-- ... nor commit order: the lower change_id commits last
SELECT cfeed.publish(1, 1, 1000000000000031);
SELECT cfeed.publish(1, 1, 1000000000000021);
SELECT feed_id, shard, change_count, last_change_sequence_number FROM cfeed.sweep() ORDER BY 1, 2;
SELECT * FROM pg_temp.stamped() WHERE id >= 20;

-- rolled-back changes are never stamped
BEGIN;
SELECT cfeed.publish(1, 0, 1000000000000060);
ROLLBACK;
BEGIN;
SELECT cfeed.publish(1, 0, 1000000000000061);
SAVEPOINT s;
SELECT cfeed.publish(1, 0, 1000000000000062);
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT feed_id, shard, change_count, last_change_sequence_number FROM cfeed.sweep();
SELECT * FROM pg_temp.stamped() WHERE id >= 60;

-- later sequence ids must lie above the explicit ones used so far
SELECT setval('cfeed.change_id', 1000000000000999) - 1000000000000000 AS id;

-- gapless over many sweeps of changes spread over shards and groups (guarantees 1 and 5)
DO $$
BEGIN
	FOR i IN 1..20 LOOP
		PERFORM cfeed.publish(1 + i % 3, CASE WHEN i % 3 = 0 THEN i % 2 ELSE 0 END)
		FROM generate_series(1, i);
		PERFORM cfeed.sweep(0);
		IF i % 4 = 0 THEN
			PERFORM cfeed.sweep(1);
		END IF;
	END LOOP;
END $$;
SELECT * FROM cfeed.sweep(1);
SELECT s.feed_id, s.shard, count(c.*) AS stamped,
       min(c.change_sequence_number) = s.start_sequence_number + 1 AS starts_after_start,
       max(c.change_sequence_number) - min(c.change_sequence_number) + 1 = count(c.*) AS gapless,
       max(c.change_sequence_number) = s.last_change_sequence_number AS head_is_max,
       count(DISTINCT c.change_id) = count(c.*) AS once_each
FROM cfeed.shard s LEFT JOIN cfeed.change c USING (feed_id, shard)
GROUP BY s.feed_id, s.shard, s.start_sequence_number, s.last_change_sequence_number
ORDER BY 1, 2;
SELECT count(*) AS pending FROM cfeed.change WHERE change_sequence_number IS NULL;
-- and within every shard, a higher number never has a lower change_id
SELECT count(*) AS out_of_order FROM (
	SELECT change_id < lag(change_id) OVER (PARTITION BY feed_id, shard ORDER BY change_sequence_number) AS bad
	FROM cfeed.change) t WHERE bad;

-- cfeed.sweep_batch_size splits a backlog, lowest change_ids first
SET cfeed.sweep_batch_size = 2;
SELECT cfeed.publish(3, 0, id) FROM (VALUES (1000000000005005), (1000000000005001),
       (1000000000005004), (1000000000005002), (1000000000005003)) AS t(id);
SELECT feed_id, shard, change_count, last_change_sequence_number FROM cfeed.sweep();
SELECT change_id - 1000000000000000 AS id, change_sequence_number - 2000000000000000 AS n
FROM cfeed.change WHERE change_id > 1000000000005000 AND change_sequence_number IS NOT NULL ORDER BY 2;
SELECT feed_id, shard, change_count, last_change_sequence_number FROM cfeed.sweep();
SELECT feed_id, shard, change_count, last_change_sequence_number FROM cfeed.sweep();
SELECT * FROM cfeed.sweep();
SELECT change_id - 1000000000000000 AS id, change_sequence_number - 2000000000000000 AS n
FROM cfeed.change WHERE change_id > 1000000000005000 ORDER BY 2;
RESET cfeed.sweep_batch_size;

-- moving a shard to another group moves its sweeping with it
UPDATE cfeed.shard SET sweep_group = 1 WHERE feed_id = 1 AND shard = 1;
SELECT cfeed.publish(1, 1, 1000000000006000);
SELECT * FROM cfeed.sweep(0);
SELECT feed_id, shard, change_count, last_change_sequence_number FROM cfeed.sweep(1);
UPDATE cfeed.shard SET sweep_group = 0 WHERE feed_id = 1 AND shard = 1;

-- sweep_loop with duration 0 runs exactly one iteration and reports what it stamped
SELECT count(cfeed.publish(1, s % 2)) FROM generate_series(1, 3) s;
CALL cfeed.sweep_loop(0, 0, 0, 0, NULL, NULL, NULL) \gset
SELECT :change_count AS change_count, :iterations AS iterations, :max_lag_ms >= 0 AS lag_ok;
-- with nothing to stamp: 0 changes, no lag, still one iteration
CALL cfeed.sweep_loop(0, 0, 0, 0, NULL, NULL, NULL);
-- named arguments; another group
SELECT cfeed.publish(2, 0) > 0 AS published;
CALL cfeed.sweep_loop(sweep_group => 1, wait_ms => 0, duration_ms => 0, sleep_ms => 0,
                      change_count => NULL, max_lag_ms => NULL, iterations => NULL) \gset
SELECT :change_count AS change_count, :iterations AS iterations;
-- with a duration it sweeps repeatedly, committing each sweep
CALL cfeed.sweep_loop(0, 0, 100, 10, NULL, NULL, NULL) \gset
SELECT :change_count AS change_count, :iterations > 1 AS several_iterations;
-- sweep_loop commits, so it refuses to run inside a transaction block (25000)
BEGIN;
SELECT pg_temp.err($$CALL cfeed.sweep_loop(0, 0, 0, 0, NULL, NULL, NULL)$$);
ROLLBACK;
SELECT pg_temp.err($$CALL cfeed.sweep_loop(0, 0, 0, 0, NULL, NULL, NULL)$$);
-- a sweep writes: not in a read-only transaction (25006; before 1.9's fix
-- sweep() and sweep_loop() stamped and committed there)
SELECT cfeed.publish(2, 0) > 0 AS published;
BEGIN READ ONLY;
SELECT pg_temp.err($$SELECT * FROM cfeed.sweep(1)$$) AS read_only_sweep;
ROLLBACK;
SET default_transaction_read_only = on;
CALL cfeed.sweep_loop(1, 0, 0, 0, NULL, NULL, NULL);
RESET default_transaction_read_only;
SELECT count(*) AS still_pending FROM cfeed.change WHERE feed_id = 2 AND change_sequence_number IS NULL;
SELECT sum(change_count) AS swept FROM cfeed.sweep(1);
-- everything is stamped, gapless
SELECT s.feed_id, s.shard, count(c.*) AS stamped,
       max(c.change_sequence_number) - min(c.change_sequence_number) + 1 = count(c.*) AS gapless,
       max(c.change_sequence_number) = s.last_change_sequence_number AS head_is_max
FROM cfeed.shard s LEFT JOIN cfeed.change c USING (feed_id, shard)
GROUP BY s.feed_id, s.shard, s.last_change_sequence_number ORDER BY 1, 2;
SELECT count(*) AS pending FROM cfeed.change WHERE change_sequence_number IS NULL;

-- a sweeper's stamps cannot be undone or redone by hand
SELECT pg_temp.err($$UPDATE cfeed.shard SET last_change_sequence_number = 2000000000000000 WHERE feed_id = 3$$);
SELECT cfeed.head(3, 0) - 2000000000000000 AS head;

-- what a DBA adds to cfeed.change is honoured when stamping: indexes are
-- maintained (plain and partial ones directly, others through the SQL
-- update), an UPDATE trigger fires, row-level security does not apply to the
-- owner, and a publication of its updates does not stop stamping
CREATE INDEX s_stamped_at ON cfeed.change (stamped_at);
CREATE INDEX s_shard1 ON cfeed.change (change_sequence_number) WHERE shard = 1;
SELECT count(cfeed.publish(1, s % 2)) FROM generate_series(1, 6) s;
SELECT shard, change_count FROM cfeed.sweep() ORDER BY 1;
CREATE INDEX s_mod ON cfeed.change ((change_sequence_number % 5));
SELECT count(cfeed.publish(1, s % 2)) FROM generate_series(1, 6) s;
SELECT shard, change_count FROM cfeed.sweep() ORDER BY 1;
-- amcheck: every index holds exactly the entries of the rows it should
CREATE EXTENSION amcheck;
SELECT c.relname, bt_index_check(c.oid, heapallindexed => true) AS "error if incomplete"
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid = 'cfeed.change'::regclass ORDER BY 1;
DROP EXTENSION amcheck;
DROP INDEX cfeed.s_stamped_at, cfeed.s_shard1, cfeed.s_mod;
CREATE TABLE s_stamps (n bigint);
CREATE FUNCTION s_stamp_seen() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.s_stamps VALUES (NEW.change_sequence_number - 2000000000000000);
	RETURN NEW;
END $$;
CREATE TRIGGER s_stamp_seen AFTER UPDATE ON cfeed.change FOR EACH ROW EXECUTE FUNCTION s_stamp_seen();
SELECT cfeed.publish(3, 0) > 0 AS published;
SELECT shard, change_count, last_change_sequence_number - 2000000000000000 AS last FROM cfeed.sweep();
DROP TRIGGER s_stamp_seen ON cfeed.change;
SELECT cfeed.publish(3, 0) > 0 AS published;
SELECT shard, change_count, last_change_sequence_number - 2000000000000000 AS last FROM cfeed.sweep();
SELECT n AS trigger_saw FROM s_stamps;
ALTER TABLE cfeed.change ENABLE ROW LEVEL SECURITY;
SELECT cfeed.publish(3, 0) > 0 AS published;
SELECT shard, change_count, last_change_sequence_number - 2000000000000000 AS last FROM cfeed.sweep();
ALTER TABLE cfeed.change DISABLE ROW LEVEL SECURITY;
-- a publication of its updates: cfeed.change's replica identity is the
-- whole row (no column set identifies a change), so stamping goes on
SELECT relreplident FROM pg_class WHERE oid = 'cfeed.change'::regclass;
-- (wal_level's warning, which PostgreSQL words differently by version, kept out)
SET client_min_messages = error;
CREATE PUBLICATION s_changes FOR TABLE cfeed.change;
CREATE PUBLICATION s_all FOR ALL TABLES;
RESET client_min_messages;
SELECT cfeed.publish(3, 0) > 0 AS published;
SELECT shard, change_count, last_change_sequence_number - 2000000000000000 AS last FROM cfeed.sweep();
DROP PUBLICATION s_changes;
SELECT cfeed.publish(3, 0) > 0 AS published;
SELECT shard, change_count, last_change_sequence_number - 2000000000000000 AS last FROM cfeed.sweep();
DROP PUBLICATION s_all;

-- a sweep checks the head its backend's previous sweep left (a forward
-- probe) and reads it from the index when that is not the highest number;
-- a number whose change was deleted is never issued again: with the last
-- change deleted by hand, the next change gets the number after it
SELECT max(change_sequence_number) - 2000000000000000 AS head FROM cfeed.change WHERE feed_id = 3;
DELETE FROM cfeed.change WHERE feed_id = 3
  AND change_sequence_number = (SELECT max(change_sequence_number) FROM cfeed.change WHERE feed_id = 3);
SELECT last_change_sequence_number - 2000000000000000 AS head_after_delete FROM cfeed.shard WHERE feed_id = 3;
SELECT cfeed.publish(3, 0) > 0 AS published;
SELECT shard, change_count, last_change_sequence_number - 2000000000000000 AS last FROM cfeed.sweep();
-- and a number stamped above it meanwhile (as a restore does) is seen
INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number, stamped_at, writer_xid)
VALUES (3, 0, 99, 2000000000000090, now(), '1');
SELECT cfeed.publish(3, 0) > 0 AS published;
SELECT shard, change_count, last_change_sequence_number - 2000000000000000 AS last FROM cfeed.sweep();
-- gapless but for the one number deleted by hand on feed 3
SELECT s.feed_id, s.shard, count(c.*) AS stamped,
       max(c.change_sequence_number) - min(c.change_sequence_number) + 1 - count(c.*) AS missing
FROM cfeed.shard s LEFT JOIN cfeed.change c USING (feed_id, shard)
GROUP BY s.feed_id, s.shard ORDER BY 1, 2;

DROP EXTENSION cfeed;
