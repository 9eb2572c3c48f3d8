-- operations: what an operator does to cfeed's tables never breaks the
-- numbering: a shard moved between sweep groups, a sweep and a publish in
-- one transaction, DELETE and TRUNCATE of stamped changes, and the objects a
-- DBA can attach to cfeed.change (each honoured by the direct write paths
-- exactly as by the SQL INSERT and UPDATE they stand in for).
\i test/regress_setup.sql

SELECT cfeed.create_feed('ops', 2, feed_id => 71);
SELECT cfeed.create_feed('ops-b', 1, feed_id => 72);

-- a shard moved to another sweep group with a committed, unstamped change:
-- group 1's sweep passed over it while it was group 0's; once moved, group
-- 1's next sweep stamps it, before a later change of the shard
SELECT cfeed.publish(71, 1, 100) AS published;
SELECT * FROM cfeed.sweep(1);
UPDATE cfeed.shard SET sweep_group = 1 WHERE feed_id = 71 AND shard = 1;
SELECT cfeed.publish(71, 1, 101) AS published;
SELECT feed_id, shard, change_count FROM cfeed.sweep(0);
SELECT feed_id, shard, change_count, last_change_sequence_number - 2000000000000000 AS last
FROM cfeed.sweep(1);
SELECT change_id, change_sequence_number - 2000000000000000 AS n
FROM cfeed.change WHERE feed_id = 71 AND shard = 1 ORDER BY n;
-- and back: group 0 stamps what was published while it moved
SELECT cfeed.publish(71, 1, 102) AS published;
SELECT * FROM cfeed.sweep(0);
UPDATE cfeed.shard SET sweep_group = 0 WHERE feed_id = 71 AND shard = 1;
SELECT feed_id, shard, change_count FROM cfeed.sweep(1);
SELECT feed_id, shard, change_count, last_change_sequence_number - 2000000000000000 AS last
FROM cfeed.sweep(0);
-- updating only longpoll moves nothing
UPDATE cfeed.shard SET longpoll = false WHERE feed_id = 71 AND shard = 1;
SELECT sweep_group, longpoll FROM cfeed.shard WHERE feed_id = 71 AND shard = 1;
UPDATE cfeed.shard SET longpoll = true WHERE feed_id = 71 AND shard = 1;

-- a change published after a sweep, in the sweep's own transaction, is
-- stamped by the next sweep of the same session
BEGIN;
SELECT cfeed.publish(71, 0, 200) AS published;
SELECT feed_id, shard, change_count FROM cfeed.sweep();
SELECT cfeed.publish(71, 0, 201) AS published;
COMMIT;
SELECT feed_id, shard, change_count, last_change_sequence_number - 2000000000000000 AS last
FROM cfeed.sweep();
SELECT count(*) AS pending FROM cfeed.change WHERE change_sequence_number IS NULL;

-- a number is never issued twice: DELETE of a shard's head row (alone, or
-- with others) and TRUNCATE keep it; numbering goes on above it
SELECT cfeed.publish(72, 0, g) IS NOT NULL AS published FROM generate_series(300, 304) g;
SELECT feed_id, shard, change_count, last_change_sequence_number - 2000000000000000 AS last
FROM cfeed.sweep();
DELETE FROM cfeed.change WHERE feed_id = 72 AND change_sequence_number >= 2000000000000004;
SELECT last_change_sequence_number - 2000000000000000 AS head,
       cfeed.head(72, 0) - 2000000000000000 AS "head()"
FROM cfeed.shard WHERE feed_id = 72;
SELECT cfeed.publish(72, 0, 305) AS published;
SELECT feed_id, shard, change_count, last_change_sequence_number - 2000000000000000 AS last
FROM cfeed.sweep();
-- deleting rows below the head (as retention does) records nothing: the
-- deleted head stays the one deleted above
DELETE FROM cfeed.change WHERE feed_id = 72 AND change_sequence_number <= 2000000000000002;
SELECT deleted_head - 2000000000000000 AS deleted_head FROM cfeed.shard_config WHERE feed_id = 72;
-- a rolled-back DELETE of the head leaves nothing behind
BEGIN;
DELETE FROM cfeed.change WHERE feed_id = 72;
ROLLBACK;
SELECT deleted_head - 2000000000000000 AS deleted_head FROM cfeed.shard_config WHERE feed_id = 72;
-- TRUNCATE: every shard's head is kept, pending changes go with the rest
SELECT cfeed.publish(72, 0, 306) AS pending;
TRUNCATE cfeed.change;
SELECT feed_id, shard, last_change_sequence_number - 2000000000000000 AS head
FROM cfeed.shard ORDER BY 1, 2;
SELECT cfeed.publish(72, 0, 307) AS published;
SELECT feed_id, shard, change_count, last_change_sequence_number - 2000000000000000 AS last
FROM cfeed.sweep();
-- in REPEATABLE READ, whose snapshot can miss the latest stamps, TRUNCATE is refused
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pg_temp.err('TRUNCATE cfeed.change');
ROLLBACK;
-- a reader from the beginning sees only what is left, in order
SELECT change_id, change_sequence_number - 2000000000000000 AS n FROM cfeed.read(72, 0);

-- a stamped change keeps its number where it was stamped: moving it to
-- another shard or renumbering it is refused (22023); its other columns may
-- change (clearing a row image, say), and backfilled history may be edited
-- within the migration range
SELECT pg_temp.err($$UPDATE cfeed.change SET feed_id = 71 WHERE change_id = 307$$);
SELECT pg_temp.err($$UPDATE cfeed.change SET change_sequence_number = change_sequence_number + 10 WHERE change_id = 307$$);
SELECT pg_temp.err($$UPDATE cfeed.change SET stamped_at = now() - interval '1 day' WHERE change_id = 307$$);
SELECT pg_temp.err($$UPDATE cfeed.change SET "row" = '{}', shard = shard WHERE change_id = 307$$);
INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number) VALUES (72, 0, 308, 1999999999999990);
SELECT pg_temp.err($$UPDATE cfeed.change SET change_sequence_number = 1999999999999991 WHERE change_id = 308$$);
SELECT pg_temp.err($$UPDATE cfeed.change SET change_sequence_number = 2000000000000100 WHERE change_id = 308$$);
SELECT change_id, change_sequence_number - 2000000000000000 AS n FROM cfeed.read(72, 0);
DELETE FROM cfeed.change WHERE change_id = 308;

/*
 * What a DBA attaches to cfeed.change is honoured by the direct paths
 * (cfeed.publish, a tracked table's trigger, the sweep's stamps) exactly as
 * by the INSERT and UPDATE they stand in for: the same outcome, the same
 * rows.  Each block attaches one object, writes the same change once with
 * publish(), once tracked and once with INSERT, sweeps, and detaches it.
 */
CREATE TABLE ops_t (id int PRIMARY KEY, v text);
SELECT cfeed.track('ops_t', 72);
-- try(n): publish change n, then a tracked row n (its change_id from the
-- sequence), then INSERT change n + 1
CREATE FUNCTION pg_temp.try(n bigint) RETURNS TABLE (path text, outcome text) LANGUAGE sql AS $$
	SELECT 'publish', pg_temp.err(format('SELECT cfeed.publish(72, 0, %s)', n))
	UNION ALL
	SELECT 'tracked', pg_temp.err(format('INSERT INTO ops_t VALUES (%s, %L)', n, 'v' || n))
	UNION ALL
	SELECT 'insert', pg_temp.err(format('INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (72, 0, %s)', n + 1))
$$;
-- the changes written since: (change_id, whether tracked, stamped)
CREATE VIEW ops_written AS
	SELECT change_id, tbl IS NOT NULL AS tracked, change_sequence_number IS NOT NULL AS stamped
	FROM cfeed.change WHERE feed_id = 72 AND change_id >= 1000 ORDER BY change_id, tracked;

-- a NOT NULL constraint a DBA adds (on a table with no null op left):
-- publish() and INSERT leave op null and are refused alike (23502); a
-- tracked change has an op
TRUNCATE cfeed.change;
ALTER TABLE cfeed.change ALTER COLUMN op SET NOT NULL;
SELECT * FROM pg_temp.try(1020);
ALTER TABLE cfeed.change ALTER COLUMN op DROP NOT NULL;

-- a rule: its action runs for every path, on INSERT and on the stamping UPDATE
CREATE TABLE ops_log (what text, change_id bigint);
CREATE RULE ops_ins AS ON INSERT TO cfeed.change DO ALSO INSERT INTO ops_log VALUES ('insert', NEW.change_id);
CREATE RULE ops_upd AS ON UPDATE TO cfeed.change DO ALSO INSERT INTO ops_log VALUES ('update', NEW.change_id);
SELECT * FROM pg_temp.try(1000);
SELECT count(*) AS changes FROM cfeed.sweep();
SELECT what, change_id, count(*) FROM ops_log GROUP BY 1, 2 ORDER BY 1, 2;
DROP RULE ops_ins ON cfeed.change;
DROP RULE ops_upd ON cfeed.change;
-- a rule that does instead nothing: no change is written by any path
CREATE RULE ops_nothing AS ON INSERT TO cfeed.change DO INSTEAD NOTHING;
SELECT * FROM pg_temp.try(1010);
DROP RULE ops_nothing ON cfeed.change;

-- a CHECK constraint that every path's row violates
ALTER TABLE cfeed.change ADD CONSTRAINT ops_check CHECK (feed_id <> 72) NOT VALID;
SELECT * FROM pg_temp.try(1030);
ALTER TABLE cfeed.change DROP CONSTRAINT ops_check;

-- a foreign key to another table: the published change and the tracked
-- one (with an id from the sequence) are not there, the inserted one is
CREATE TABLE ops_ids (id bigint PRIMARY KEY);
INSERT INTO ops_ids VALUES (1041);
ALTER TABLE cfeed.change ADD CONSTRAINT ops_fk FOREIGN KEY (change_id) REFERENCES ops_ids NOT VALID;
SELECT * FROM pg_temp.try(1040);
ALTER TABLE cfeed.change DROP CONSTRAINT ops_fk;

-- a BEFORE trigger that changes the row, and one that skips it
CREATE FUNCTION ops_bump() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.change_id = 1052 THEN RETURN NULL; END IF;
	NEW.change_id := NEW.change_id + 100;
	RETURN NEW;
END $$;
CREATE TRIGGER ops_bump BEFORE INSERT ON cfeed.change FOR EACH ROW EXECUTE FUNCTION ops_bump();
SELECT * FROM pg_temp.try(1050);
SELECT * FROM pg_temp.try(1051);
DROP TRIGGER ops_bump ON cfeed.change;

-- a restrictive row-level security policy (on top of per-feed read
-- access's own) that every path's row violates, for a writer that is not
-- the owner
CREATE ROLE ops_writer;
GRANT INSERT, SELECT ON cfeed.change TO ops_writer;
SELECT cfeed.grant_write_all('ops_writer');
GRANT ALL ON ops_t TO ops_writer;
GRANT USAGE ON SEQUENCE cfeed.change_id TO ops_writer;
CREATE POLICY ops_only_low ON cfeed.change AS RESTRICTIVE FOR INSERT TO ops_writer
	WITH CHECK (feed_id <> 72);
SET ROLE ops_writer;
SELECT * FROM pg_temp.try(1060);
RESET ROLE;
DROP POLICY ops_only_low ON cfeed.change;

-- a stored generated column: written and recomputed by every path (without
-- the publication of all tables: PostgreSQL 18 refuses to UPDATE a table
-- whose replica identity, FULL for cfeed.change, holds a stored generated
-- column that a publication does not publish, docs/operations.md)
DROP PUBLICATION cfeed_regress_all;
ALTER TABLE cfeed.change ADD COLUMN ops_gen bigint GENERATED ALWAYS AS (change_id * 2) STORED;
SELECT * FROM pg_temp.try(1070);
SELECT count(*) AS changes FROM cfeed.sweep();
SELECT change_id, ops_gen FROM cfeed.change WHERE change_id BETWEEN 1070 AND 1071 ORDER BY 1, 2;
ALTER TABLE cfeed.change DROP COLUMN ops_gen;
SET client_min_messages = error;
CREATE PUBLICATION cfeed_regress_all FOR ALL TABLES;
RESET client_min_messages;

-- an expression index that is unique, and an exclusion constraint
CREATE UNIQUE INDEX ops_expr ON cfeed.change ((change_id % 1000)) WHERE change_id BETWEEN 1080 AND 1089;
SELECT * FROM pg_temp.try(1080);
DROP INDEX cfeed.ops_expr;
ALTER TABLE cfeed.change ADD CONSTRAINT ops_excl EXCLUDE USING btree (change_id WITH =)
	WHERE (change_id BETWEEN 1090 AND 1099);
SELECT * FROM pg_temp.try(1090);
SELECT * FROM pg_temp.try(1090);
ALTER TABLE cfeed.change DROP CONSTRAINT ops_excl;

-- everything written above is stamped, gaplessly, whichever path wrote it
SELECT count(*) AS changes FROM cfeed.sweep();
SELECT * FROM ops_written;
SELECT count(*) AS stamped,
       max(change_sequence_number) - min(change_sequence_number) + 1 AS span
FROM cfeed.change WHERE feed_id = 72;

-- the indexes hold exactly their rows
CREATE EXTENSION amcheck;
SELECT c.relname, bt_index_check(c.oid, heapallindexed => true) AS "error if incomplete"
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid = 'cfeed.change'::regclass ORDER BY 1;
DROP EXTENSION amcheck;

DROP TABLE ops_t, ops_log, ops_ids;
-- SET UNLOGGED of any table of cfeed is refused (0A000): a crash would empty
-- it, losing committed changes or numbers readers saw, which the sweeper
-- would then issue again; SET LOGGED and other tables' are PostgreSQL's
SELECT c.relname, pg_temp.err(format('ALTER TABLE cfeed.%I SET UNLOGGED', c.relname))
FROM pg_class c JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'cfeed'
WHERE c.relkind = 'r' ORDER BY c.relname;
SELECT pg_temp.err('ALTER TABLE IF EXISTS cfeed.stamp SET UNLOGGED, ADD COLUMN ops_x int');
SELECT pg_temp.err('ALTER SEQUENCE cfeed.change_id SET UNLOGGED');
SELECT count(*) AS unlogged FROM pg_class WHERE relnamespace = 'cfeed'::regnamespace AND relpersistence = 'u';
ALTER SEQUENCE cfeed.change_id SET LOGGED;
ALTER TABLE cfeed.change SET LOGGED;
CREATE TABLE ops_scratch (i int);
ALTER TABLE ops_scratch SET UNLOGGED;
DROP TABLE ops_scratch;
-- a table made unlogged past the guard (taken out of the extension for a
-- moment, as an operator could, or on a server without the preload, whose
-- hook refuses it): no sweep stamps into it (55000), and once it is logged
-- again the sweep stamps
ALTER EXTENSION cfeed DROP TABLE cfeed.change;
ALTER TABLE cfeed.change SET UNLOGGED;
ALTER EXTENSION cfeed ADD TABLE cfeed.change;
SELECT count(cfeed.publish(71, 0)) FROM generate_series(1, 2);
SELECT pg_temp.err('SELECT * FROM cfeed.sweep()');
ALTER TABLE cfeed.change SET LOGGED;
SELECT feed_id, shard, change_count FROM cfeed.sweep();
DROP VIEW ops_written;
DROP FUNCTION ops_bump();
DROP OWNED BY ops_writer;
DROP ROLE ops_writer;
DROP EXTENSION cfeed;
