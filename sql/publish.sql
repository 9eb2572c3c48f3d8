-- publish: the write path (cfeed.publish, plain INSERT, the change guard),
-- cfeed.shard_for and cfeed.channel.
\i test/regress_setup.sql

SELECT cfeed.create_feed('orders', 4);
SELECT cfeed.create_feed('audit', 1);
SELECT cfeed.create_feed('seven', 7);

-- publish with the default change_id draws from cfeed.change_id (starts at 1000000000000000)
SELECT cfeed.publish(1, 0);
SELECT cfeed.publish(feed_id => 1, shard => 3);
-- an explicit change_id is recorded as given and returned
SELECT cfeed.publish(1, 1, 42);
-- one change_id may go to several feeds
SELECT cfeed.publish(2, 0, cfeed.publish(1, 2));
-- the sequence was used exactly three times
SELECT last_value FROM cfeed.change_id;

-- the rows: unstamped, written_at and writer_xid filled in
SELECT feed_id, shard, change_id, change_sequence_number, stamped_at,
       written_at IS NOT NULL AS has_written_at, writer_xid IS NOT NULL AS has_writer_xid
FROM cfeed.change ORDER BY change_id, feed_id;

-- written_at is the transaction's start and writer_xid its top-level xid, also from a subtransaction
BEGIN;
SAVEPOINT sp;
SELECT cfeed.publish(1, 0, 100) AS change_id;
RELEASE SAVEPOINT sp;
SELECT written_at = now() AS written_at_is_xact_start,
       writer_xid = pg_current_xact_id() AS writer_xid_is_top_xid
FROM cfeed.change WHERE change_id = 100;
COMMIT;

-- a plain INSERT works like publish
INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (1, 1, 101);
-- a writer cannot choose writer_xid: the guard replaces it with its own
BEGIN;
INSERT INTO cfeed.change (feed_id, shard, change_id, writer_xid) VALUES (1, 1, 102, '5');
SELECT writer_xid = pg_current_xact_id() AS writer_xid_forced FROM cfeed.change WHERE change_id = 102;
COMMIT;

-- a rolled-back publish leaves nothing
BEGIN;
SELECT cfeed.publish(1, 0, 103);
ROLLBACK;
SELECT count(*) AS rolled_back_rows FROM cfeed.change WHERE change_id = 103;

-- a change for a missing feed or shard fails at the INSERT itself (23503), not at commit
BEGIN;
INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (1, 4, 104);
ROLLBACK;
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (1, 4, 104)$$),
  ($$INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (99, 0, 104)$$),
  ($$INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number) VALUES (99, 0, 104, 1)$$),
  -- a null feed_id or shard is a not-null violation (23502), not a missing feed
  ($$INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (NULL, 0, 104)$$),
  ($$INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (99, NULL, 104)$$),
  ($$SELECT cfeed.publish(1, 4, 104)$$),
  ($$SELECT cfeed.publish(99, 0, 104)$$)
) AS t(cmd);

-- a writer may not stamp: numbers above the start value and stamped_at are refused (22023)
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number) VALUES (1, 0, 105, 2000000000000001)$$),
  ($$INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number) VALUES (1, 0, 105, 9000000000000000)$$),
  ($$INSERT INTO cfeed.change (feed_id, shard, change_id, stamped_at) VALUES (1, 0, 105, now())$$)
) AS t(cmd);

-- backfilling history in the migration range (at or below the start value) is
-- accepted, with stamped_at defaulting to the transaction start or as given
BEGIN;
INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number)
VALUES (1, 0, 1, 1), (1, 0, 2, 2), (1, 0, 3, 2000000000000000);
INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number, stamped_at)
VALUES (1, 0, 4, 5, '2001-02-03 04:05:06+00');
SELECT change_id, change_sequence_number, stamped_at = now() AS stamped_now,
       stamped_at = '2001-02-03 04:05:06+00' AS stamped_as_given
FROM cfeed.change WHERE change_sequence_number IS NOT NULL ORDER BY change_sequence_number;
COMMIT;
-- backfilling does not move the shard's head
SELECT last_change_sequence_number FROM cfeed.shard WHERE feed_id = 1 AND shard = 0;
-- a number used twice in a shard is refused by the unique index
SELECT pg_temp.err($$INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number) VALUES (1, 0, 106, 1)$$);

-- the refused inserts above wrote nothing
SELECT count(*) AS changes FROM cfeed.change;

-- shard_for: FNV-1a 32-bit of the UTF-8 bytes mod the shard count.  Expected
-- values computed independently (Python):
--   ''            2166136261  %4=1 %7=2      'foobar'      3214735720 %4=0 %7=0
--   'a'           3826002220  %4=0 %7=5      'customer-42' 4268273086 %4=2 %7=0
--   'b'           3876335077  %4=1 %7=6      'order:1'      459235474 %4=2 %7=5
--   'order:2'      442457855  %4=3 %7=0      'ü' (c3 bc)    295556170 %4=2 %7=0
--   '日本'        2670128721  %4=1 %7=1      'é' (c3 a9)    513665217 %4=1 %7=2
SELECT key, cfeed.shard_for(1, key) AS of_4, cfeed.shard_for(3, key) AS of_7,
       cfeed.shard_for(2, key) AS of_1
FROM (VALUES (''), ('a'), ('b'), ('foobar'), ('customer-42'), ('order:1'), ('order:2'),
             ('ü'), ('日本'), ('é')) AS t(key)
ORDER BY key COLLATE "C";
-- 'key-1'..'key-1000': mod 4 -> 249/250/252/249, mod 7 -> 149/134/143/141/140/159/134,
-- sum(i * shard mod 7) = 1497449 (Python)
SELECT cfeed.shard_for(1, 'key-' || i) AS shard, count(*) FROM generate_series(1, 1000) i
GROUP BY 1 ORDER BY 1;
SELECT cfeed.shard_for(3, 'key-' || i) AS shard, count(*) FROM generate_series(1, 1000) i
GROUP BY 1 ORDER BY 1;
SELECT sum(i * cfeed.shard_for(3, 'key-' || i)) FROM generate_series(1, 1000) i;
-- stable: the same key always gives the same shard, across calls and plans
SELECT count(DISTINCT cfeed.shard_for(1, 'customer-42')) AS distinct_shards
FROM generate_series(1, 100);
-- shard_for needs shards numbered 0..n-1 (55000 otherwise)
INSERT INTO cfeed.shard (feed_id, shard) VALUES (2, 5);
SELECT pg_temp.err($$SELECT cfeed.shard_for(2, 'a')$$);

-- how publish writes: directly (src/append.c), holding its feed's
-- shards lock (share, advisory key 0x6368) instead of the foreign key's
-- row lock, or by an INSERT wherever the direct write would not have the
-- INSERT's exact semantics (RLS, column grants: sql/hardening_rls.sql and
-- sql/security.sql; added triggers, and the cases below)
CREATE TEMP VIEW my_shards_locks AS
SELECT classid AS feed_id, mode FROM pg_locks
WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND objsubid = 25448;
-- since 1.6 the INSERT's own shard check (change_guard) takes the same lock:
-- the calls of change_guard tell the INSERT (the backend's counts, which
-- are not flushed within a transaction: compared within one)
SET track_functions = 'all';
CREATE FUNCTION pg_temp.guard_calls() RETURNS bigint LANGUAGE sql AS $$
SELECT COALESCE(sum(calls), 0) FROM pg_stat_xact_user_functions
WHERE schemaname = 'cfeed' AND funcname = '_change_guard' $$;
BEGIN;
SELECT pg_temp.guard_calls() AS calls_before \gset
SELECT cfeed.publish(1, 2, 200);
SELECT *, pg_temp.guard_calls() - :calls_before AS sql_inserts FROM my_shards_locks;
COMMIT;
-- a read-only transaction refuses it (25006), as it refuses the INSERT
BEGIN READ ONLY;
SELECT pg_temp.err($$SELECT cfeed.publish(1, 0, 201)$$);
ROLLBACK;
-- a trigger added to cfeed.change fires for publish: the INSERT runs
CREATE TABLE p_seen (change_id bigint);
CREATE FUNCTION p_seen_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.p_seen VALUES (NEW.change_id);
	RETURN NEW;
END $$;
CREATE TRIGGER p_seen AFTER INSERT ON cfeed.change FOR EACH ROW EXECUTE FUNCTION p_seen_change();
BEGIN;
SELECT pg_temp.guard_calls() AS calls_before \gset
SELECT cfeed.publish(1, 2, 202);
SELECT pg_temp.guard_calls() - :calls_before AS sql_inserts;
COMMIT;
DROP TRIGGER p_seen ON cfeed.change;
SELECT cfeed.publish(1, 2, 203);
SELECT change_id FROM p_seen;
-- feed 2 has shards 0 and 5 (numbered otherwise than 0..n-1): its shards
-- take the INSERT, a missing one still fails (42704)
BEGIN;
SELECT pg_temp.guard_calls() AS calls_before \gset
SELECT cfeed.publish(2, 5, 204), cfeed.publish(2, 0, 205);
SELECT pg_temp.guard_calls() - :calls_before AS sql_inserts;
COMMIT;
SELECT pg_temp.err($$SELECT cfeed.publish(2, 1, 206)$$);
-- a shard added in this transaction is published to at once (by the INSERT:
-- since 1.9 adding an open shard holds the feed's shards lock in exclusive
-- mode, as closing one does), and forgotten if it rolls back
BEGIN;
INSERT INTO cfeed.shard (feed_id, shard) VALUES (3, 7);
SELECT pg_temp.guard_calls() AS calls_before \gset
SELECT cfeed.publish(3, 7, 207);
SELECT *, pg_temp.guard_calls() - :calls_before AS sql_inserts FROM my_shards_locks;
COMMIT;
BEGIN;
INSERT INTO cfeed.shard (feed_id, shard) VALUES (3, 8);
SELECT cfeed.publish(3, 8, 208);
ROLLBACK;
SELECT pg_temp.err($$SELECT cfeed.publish(3, 8, 209)$$);
SELECT cfeed.publish(3, 7, 210);
SELECT feed_id, shard, change_id, change_sequence_number, writer_xid IS NOT NULL AS has_writer_xid
FROM cfeed.change WHERE change_id BETWEEN 200 AND 299 ORDER BY change_id;

-- the shard check of cfeed.change (1.6: change_guard; a foreign key before)
-- holds no lock on the shard's row
BEGIN;
INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (1, 0, 300);
SELECT xmax = '0'::xid AS shard_row_unlocked FROM cfeed.shard_config WHERE feed_id = 1 AND shard = 0;
ROLLBACK;
-- a shard with changes, pending or stamped, cannot go away (23503), by
-- DELETE, an UPDATE of its key, its feed's DELETE, or a TRUNCATE that leaves
-- cfeed.change; one without changes can
SELECT cfeed.create_feed('gone', 3, feed_id => 50);
INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (50, 1, 301);
CREATE TEMP VIEW gone_refused AS
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$DELETE FROM cfeed.shard WHERE feed_id = 50 AND shard = 1$$),
  ($$DELETE FROM cfeed.shard_config WHERE feed_id = 50 AND shard = 1$$),
  ($$UPDATE cfeed.shard_config SET shard = 5 WHERE feed_id = 50 AND shard = 1$$),
  ($$UPDATE cfeed.shard_config SET feed_id = 1, shard = 9 WHERE feed_id = 50 AND shard = 1$$),
  ($$DELETE FROM cfeed.feed WHERE feed_id = 50$$),
  ($$TRUNCATE cfeed.shard_config CASCADE$$)
) AS t(cmd);
SELECT * FROM gone_refused;
SELECT count(*) AS stamped FROM cfeed.sweep() WHERE feed_id = 50;
SELECT * FROM gone_refused;
DELETE FROM cfeed.shard WHERE feed_id = 50 AND shard = 2;
UPDATE cfeed.shard_config SET shard = 7 WHERE feed_id = 50 AND shard = 0;
SELECT shard FROM cfeed.shard WHERE feed_id = 50 ORDER BY shard;
-- no check in replica mode (logical replication's apply), as the foreign
-- key's did not fire there; nor on rows that carry another transaction's
-- writer_xid or written_at inserted by the extension's owner (pg_restore,
-- which may copy cfeed.change before cfeed.shard_config); anyone else's are
-- checked
BEGIN;
SET LOCAL session_replication_role = replica;
INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (50, 9, 302);
ROLLBACK;
BEGIN;
INSERT INTO cfeed.change (feed_id, shard, change_id, writer_xid) VALUES (50, 9, 303, '5');
SELECT count(*) AS restored FROM cfeed.change WHERE change_id = 303;
ROLLBACK;
-- a dumped row may carry the restoring transaction's xid: its written_at
-- tells it too
BEGIN;
INSERT INTO cfeed.change (feed_id, shard, change_id, written_at, writer_xid)
VALUES (50, 9, 305, '2026-01-01 00:00+00', pg_current_xact_id());
SELECT count(*) AS restored FROM cfeed.change WHERE change_id = 305;
ROLLBACK;
CREATE ROLE regress_publish_writer;
GRANT INSERT ON cfeed.change TO regress_publish_writer;
SELECT cfeed.grant_write_all('regress_publish_writer');
SET ROLE regress_publish_writer;
SELECT pg_temp.err($$INSERT INTO cfeed.change (feed_id, shard, change_id, writer_xid) VALUES (50, 9, 304, '5')$$) AS not_owner;
RESET ROLE;
DROP OWNED BY regress_publish_writer;
DROP ROLE regress_publish_writer;
DELETE FROM cfeed.change WHERE feed_id = 50;
DELETE FROM cfeed.feed WHERE feed_id = 50;
SELECT count(*) AS gone_shards FROM cfeed.shard_config WHERE feed_id = 50;

-- one statement that takes a shard away and writes a change to it fails
-- (23503) whichever part runs first, as the foreign key's checks at the
-- statement's end did: each side sees the other's rows of the same command
-- (feed 30 is stored in rows in every pass: changes are moved between its
-- shards below, which a shard stored in ranges refuses, ranges.sql)
SET cfeed.default_storage = rows;
SELECT cfeed.create_feed('same', 3, feed_id => 30);
INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (30, 0, 3000);
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$WITH d AS (DELETE FROM cfeed.shard_config WHERE feed_id = 30 AND shard = 2) INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (30, 2, 3001)$$),
  ($$WITH i AS (INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (30, 1, 3002)) DELETE FROM cfeed.shard_config WHERE feed_id = 30 AND shard = 1$$),
  ($$WITH d AS (DELETE FROM cfeed.shard_config WHERE feed_id = 30 AND shard = 2 RETURNING shard) SELECT cfeed.publish(30, shard, 3003) FROM d$$),
  ($$WITH d AS (DELETE FROM cfeed.shard_config WHERE feed_id = 30 AND shard = 1) SELECT cfeed.publish(30, 1, 3004)$$),
  ($$WITH d AS (UPDATE cfeed.shard_config SET shard = 5 WHERE feed_id = 30 AND shard = 2) INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (30, 2, 3005)$$),
  ($$WITH d AS (DELETE FROM cfeed.shard_config WHERE feed_id = 30 AND shard = 2) UPDATE cfeed.change SET shard = 2 WHERE change_id = 3000$$),
  ($$WITH c AS (INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (30, 1, 3006)) DELETE FROM cfeed.feed WHERE feed_id = 30$$)
) AS t(cmd);
SELECT shard, change_id FROM cfeed.change WHERE feed_id = 30 ORDER BY change_id;
SELECT shard FROM cfeed.shard WHERE feed_id = 30 ORDER BY shard;
-- a shard the statement added before can be written to; one whose changes
-- the statement deleted before can go (the main statement runs before its
-- WITH's; in the other order both are refused, where the foreign key's
-- check at the statement's end accepted them)
WITH c AS (INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (30, 3, 3007))
INSERT INTO cfeed.shard (feed_id, shard) VALUES (30, 3);
SELECT shard FROM cfeed.change WHERE change_id = 3007;
WITH s AS (DELETE FROM cfeed.shard_config WHERE feed_id = 30 AND shard = 3)
DELETE FROM cfeed.change WHERE feed_id = 30 AND shard = 3;
SELECT shard FROM cfeed.shard WHERE feed_id = 30 ORDER BY shard;
-- an UPDATE cannot move a change to a missing shard or feed (23503), a
-- pending one nor backfilled history; it can to an existing shard
INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number) VALUES (30, 0, 3010, 7);
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$UPDATE cfeed.change SET shard = 99 WHERE change_id = 3000$$),
  ($$UPDATE cfeed.change SET feed_id = 99 WHERE change_id = 3000$$),
  ($$UPDATE cfeed.change SET shard = 99 WHERE change_id = 3010$$),
  ($$UPDATE cfeed.change SET shard = 99, change_sequence_number = 8 WHERE change_id = 3010$$),
  ($$UPDATE cfeed.change SET shard = 1 WHERE change_id = 3000$$),
  ($$UPDATE cfeed.change SET shard = 2 WHERE change_id = 3010$$)
) AS t(cmd);
SELECT shard, change_id FROM cfeed.change WHERE feed_id = 30 ORDER BY change_id;
-- not in replica mode, as the foreign key's check did not fire there
BEGIN;
SET LOCAL session_replication_role = replica;
UPDATE cfeed.change SET shard = 99 WHERE change_id = 3000;
SELECT shard FROM cfeed.change WHERE change_id = 3000;
ROLLBACK;
-- a written_at of the transaction's start or later is not a restored row's:
-- the owner's INSERT is checked as anyone's (22023, 23503)
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$INSERT INTO cfeed.change (feed_id, shard, change_id, written_at, change_sequence_number) VALUES (30, 0, 3020, clock_timestamp(), 5000000000000000)$$),
  ($$INSERT INTO cfeed.change (feed_id, shard, change_id, written_at) VALUES (30, 9, 3021, clock_timestamp())$$),
  ($$INSERT INTO cfeed.change (feed_id, shard, change_id, written_at, change_sequence_number) VALUES (30, 0, 3022, now() - interval '1 day', 5000000000000000)$$)
) AS t(cmd);
SELECT change_id, change_sequence_number FROM cfeed.change WHERE change_id BETWEEN 3020 AND 3029;
-- in replica mode a shard with changes can go (a subscriber applies its
-- publisher's DELETE), as the foreign key's NO ACTION did not fire there
BEGIN;
SET LOCAL session_replication_role = replica;
DELETE FROM cfeed.shard_config WHERE feed_id = 30 AND shard = 1;
SELECT (SELECT count(*) FROM cfeed.shard_config WHERE feed_id = 30 AND shard = 1) AS shards,
       (SELECT count(*) FROM cfeed.change WHERE feed_id = 30 AND shard = 1) AS changes;
ROLLBACK;
DELETE FROM cfeed.change WHERE feed_id = 30;
DELETE FROM cfeed.feed WHERE feed_id = 30;
RESET cfeed.default_storage;

-- channel: cfeed_<feed_id>_<shard>
SELECT cfeed.channel(1, 0), cfeed.channel(1, 3), cfeed.channel(3, 6);

-- shard_config may be truncated with cfeed.change (and with the tables
-- that reference it, listed or not)
TRUNCATE cfeed.shard_config, cfeed.lease, cfeed.change;
SELECT (SELECT count(*) FROM cfeed.shard) AS shards, (SELECT count(*) FROM cfeed.change) AS changes;

DROP EXTENSION cfeed;
