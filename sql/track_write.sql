-- track_write: how the tracking trigger writes a change with its row image
-- (src/append.c inserts it directly, src/row_image.c builds the
-- image): images equal to_jsonb(row), the INSERT's privileges, row-level
-- security, triggers and indexes of cfeed.change are honoured, and state
-- cached per relation follows DDL.
\i test/regress_setup.sql

SELECT cfeed.create_feed('track-w', 2, feed_id => 606);

-- images equal to_jsonb(row) for every kind of column: NULLs, a dropped
-- column, a domain, arrays, composites, json, special floats, and a value
-- stored out of line (toasted)
CREATE DOMAIN w_posint AS int CHECK (VALUE > 0);
CREATE TYPE w_pair AS (a int, b text);
CREATE TABLE w_types (id int PRIMARY KEY, b bool, s smallint, i int, l bigint, t text,
	v varchar(10), c char(3), n numeric, f float8, f4 real, ts timestamptz, d date,
	u uuid, j json, jb jsonb, arr int[], tarr text[], p w_pair, dom w_posint,
	iv interval, by bytea, drop_me int, e text, change_id bigint);
ALTER TABLE w_types DROP COLUMN drop_me;
SELECT cfeed.track('w_types', 606);
INSERT INTO w_types VALUES
	(1, true, -32768, -2147483648, -9223372036854775808, E'he said "hi"\n\t\\ é 😀', 'v',
	 'c', 1.50, 'NaN', '-Infinity', '2024-01-02 03:04:05.678+02', '2024-01-02',
	 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"b":1,"a":[1,2],"a":3}', '{"z":{"y":null}}',
	 '{1,NULL,3}', '{"x",NULL}', ROW(1, 'p'), 5, '1 day 2 hours', '\x0102', NULL),
	(2, NULL, 32767, 2147483647, 9223372036854775807, '', NULL, NULL, -0.000001, 1e300,
	 3.25, 'infinity', '-infinity', NULL, '5', '"s"', '{}', NULL, NULL, NULL, NULL, NULL, 'x'),
	(3, false, 0, 0, 10000, (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 700) g),
	 NULL, NULL, 100000000, 0.1, 0, NULL, NULL, NULL, '[]', '[1,"2",{"3":4}]',
	 '{{1,2},{3,4}}', NULL, ROW(NULL, NULL), 1, NULL, NULL, NULL);
UPDATE w_types SET i = i - 1, t = t || '!' WHERE id = 2;
CREATE TEMP TABLE w_gone AS SELECT * FROM w_types WHERE id = 3;
DELETE FROM w_types WHERE id = 3;
SELECT img.op, (img."row" ->> 'id')::int AS id,
	   img."row" = to_jsonb(w) AND img."row"::text = to_jsonb(w)::text AS same
FROM cfeed.change img
JOIN (SELECT * FROM w_types UNION ALL SELECT * FROM w_gone) w ON w.change_id = img.change_id
WHERE img.feed_id = 606
ORDER BY img.change_id;
-- the tombstone of the deleted row is the row as it was
SELECT img."row" = (SELECT to_jsonb(g) FROM w_gone g) AS tombstone_same
FROM cfeed.change img WHERE img.feed_id = 606 AND img.op = 'delete';

-- DDL between writes, even within one statement: images and keys follow
-- the table's current columns
CREATE TABLE w_alter (k int PRIMARY KEY, v int);
SELECT cfeed.track('w_alter', 606);
DO $$
BEGIN
	INSERT INTO w_alter VALUES (1, 10);
	ALTER TABLE w_alter ALTER COLUMN v TYPE text USING v::text || 'x';
	INSERT INTO w_alter VALUES (2, 'twenty');
	ALTER TABLE w_alter ALTER COLUMN k TYPE text;
	INSERT INTO w_alter VALUES ('three', 'thirty');
	ALTER TABLE w_alter ADD COLUMN extra bool DEFAULT true;
	UPDATE w_alter SET v = v || '!' WHERE k = '1';
END $$;
SELECT count(*) >= 0 AS swept FROM cfeed.sweep();
SELECT r.op, r."row", s.shard = cfeed.shard_for(606, r."row" ->> 'k') AS key_sharded
FROM cfeed.shard s, cfeed.read_rows(606, s.shard) r
WHERE s.feed_id = 606 AND r.tbl = 'w_alter'::regclass
ORDER BY r.change_id;

-- a writer needs INSERT on cfeed.change and USAGE on cfeed.change_id;
-- INSERT granted on the columns is enough (the SQL path), INSERT on the
-- table takes the direct one
CREATE TABLE w_priv (id int PRIMARY KEY, v text);
SELECT cfeed.track('w_priv', 606);
CREATE ROLE track_writer;
GRANT USAGE ON SCHEMA public TO track_writer;
GRANT INSERT ON w_priv TO track_writer;
SET ROLE track_writer;
SELECT pg_temp.err($$INSERT INTO w_priv VALUES (1, 'no grants')$$);
RESET ROLE;
GRANT USAGE ON SEQUENCE cfeed.change_id TO track_writer;
SELECT cfeed.grant_write_all('track_writer');
GRANT INSERT (feed_id, shard, change_id, tbl, op) ON cfeed.change TO track_writer;
SET ROLE track_writer;
SELECT pg_temp.err($$INSERT INTO w_priv VALUES (2, 'no grant on the image column')$$);
RESET ROLE;
GRANT INSERT (feed_id, shard, change_id, tbl, op, "row") ON cfeed.change TO track_writer;
SET ROLE track_writer;
SELECT pg_temp.err($$INSERT INTO w_priv VALUES (3, 'column grant')$$);
RESET ROLE;
GRANT INSERT ON cfeed.change TO track_writer;
SET ROLE track_writer;
SELECT pg_temp.err($$INSERT INTO w_priv VALUES (4, 'table grants')$$);
RESET ROLE;
-- row-level security on cfeed.change applies to tracked changes (a
-- restrictive policy: cfeed's own lets every INSERT through, 1.4)
CREATE POLICY w_not_606 ON cfeed.change AS RESTRICTIVE FOR INSERT TO track_writer
	WITH CHECK (feed_id <> 606);
SET ROLE track_writer;
SELECT pg_temp.err($$INSERT INTO w_priv VALUES (5, 'refused by a policy')$$);
RESET ROLE;
DROP POLICY w_not_606 ON cfeed.change;
SELECT (i."row" ->> 'id')::int AS id, i."row" ->> 'v' AS v
FROM cfeed.change i WHERE cfeed._tracked_table(i.tbl) = 'w_priv'::regclass ORDER BY 1;
-- with parallel plans forced, the lookups of tracked tables' numbers (in
-- the owner's query and in a reader's policy) read with the query's
-- snapshot: no process in parallel mode may take a fresh one
CREATE ROLE w_par_reader;
GRANT USAGE ON SCHEMA cfeed TO w_par_reader;
GRANT SELECT ON cfeed.change TO w_par_reader;
GRANT SELECT ON w_priv TO w_par_reader;
SELECT cfeed.grant_read(606, 'w_par_reader');
SET ROLE w_par_reader;
SELECT count(*) AS readable FROM cfeed.change i WHERE i.feed_id = 606 AND i."row" IS NOT NULL;
RESET ROLE;
SELECT set_config(name, 'on', false) AS parallel_forced FROM pg_settings
WHERE name IN ('debug_parallel_query', 'force_parallel_mode');
SELECT count(cfeed._tracked_table(i.tbl)) AS numbered FROM cfeed.change i WHERE i.feed_id = 606;
-- and the functions that look at a shard's head or count read with it too
SELECT cfeed.head(606, 0) >= 2000000000000000 AS head, cfeed.cursor_at(606, 0, now()) > 0 AS cursor_at,
       cfeed.shard_for(606, 'k') >= 0 AS shard_for;
SET ROLE w_par_reader;
SELECT count(*) AS readable FROM cfeed.change i WHERE i.feed_id = 606 AND i."row" IS NOT NULL;
RESET ROLE;
SELECT set_config(name, 'off', false) AS parallel_forced FROM pg_settings
WHERE name IN ('debug_parallel_query', 'force_parallel_mode');
SELECT cfeed.revoke_read(606, 'w_par_reader');
REVOKE ALL ON cfeed.change, w_priv FROM w_par_reader;
REVOKE USAGE ON SCHEMA cfeed FROM w_par_reader;
DROP ROLE w_par_reader;
REVOKE ALL ON cfeed.change, cfeed.row_image FROM track_writer;
REVOKE ALL ON SEQUENCE cfeed.change_id FROM track_writer;
REVOKE ALL ON w_priv FROM track_writer;
REVOKE USAGE ON SCHEMA public FROM track_writer;
DROP ROLE track_writer;

-- a trigger someone adds to cfeed.change fires for tracked changes too
-- (with cfeed's pinned search_path: it runs inside cfeed's SQL)
CREATE TABLE w_seen (change_id bigint);
CREATE FUNCTION w_seen_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.w_seen VALUES (NEW.change_id);
	RETURN NEW;
END $$;
CREATE TRIGGER w_seen AFTER INSERT ON cfeed.change FOR EACH ROW EXECUTE FUNCTION w_seen_change();
INSERT INTO w_priv VALUES (6, 'seen');
DROP TRIGGER w_seen ON cfeed.change;
INSERT INTO w_priv VALUES (7, 'not seen');
SELECT (i."row" ->> 'id')::int AS id, s.change_id IS NOT NULL AS seen
FROM cfeed.change i LEFT JOIN w_seen s USING (change_id)
WHERE cfeed._tracked_table(i.tbl) = 'w_priv'::regclass AND (i."row" ->> 'id')::int >= 6 ORDER BY 1;

-- indexes someone adds to cfeed.change are maintained: a plain one, a
-- partial one, an expression index and a hash index
CREATE INDEX w_change_id ON cfeed.change (change_id);
CREATE INDEX w_change_shard0 ON cfeed.change (change_id) WHERE shard = 0;
INSERT INTO w_priv SELECT g, 'indexed' FROM generate_series(10, 29) g;
CREATE INDEX w_change_mod ON cfeed.change ((change_id % 7));
CREATE INDEX w_change_hash ON cfeed.change USING hash (change_id);
INSERT INTO w_priv SELECT g, 'indexed too' FROM generate_series(30, 49) g;
CREATE TEMP TABLE w_count AS
SELECT (SELECT count(*) FROM cfeed.change WHERE feed_id = 606) AS all_changes,
	   (SELECT count(*) FROM cfeed.change WHERE feed_id = 606 AND shard = 0) AS shard0,
	   (SELECT count(*) FROM cfeed.change WHERE feed_id = 606 AND change_id % 7 = 3) AS mod3;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM cfeed.change WHERE change_id > 0 AND feed_id = 606;
SELECT (SELECT count(*) FROM cfeed.change WHERE change_id > 0 AND feed_id = 606) = all_changes AS plain_index,
	   (SELECT count(*) FROM cfeed.change WHERE change_id > 0 AND shard = 0 AND feed_id = 606) = shard0 AS partial_index,
	   (SELECT count(*) FROM cfeed.change WHERE change_id % 7 = 3 AND feed_id = 606) = mod3 AS expression_index
FROM w_count;
DROP INDEX cfeed.w_change_id;
SELECT count(*) = (SELECT all_changes FROM w_count) AS hash_index
FROM cfeed.change c JOIN cfeed.change i USING (change_id, feed_id) WHERE c.feed_id = 606;
RESET enable_seqscan;
RESET enable_bitmapscan;
DROP INDEX cfeed.w_change_shard0, cfeed.w_change_mod, cfeed.w_change_hash;

-- a change_id published twice (the BEFORE trigger that draws change_ids
-- disabled, the column set by hand) is two changes, each with its image
ALTER TABLE w_types DISABLE TRIGGER cfeed_track_change_id;
INSERT INTO w_types (id, change_id) VALUES (10, 42);
INSERT INTO w_types (id, change_id) VALUES (11, 42);
ALTER TABLE w_types ENABLE TRIGGER cfeed_track_change_id;
SELECT op, "row" ->> 'id' AS id FROM cfeed.change WHERE change_id = 42 ORDER BY 2;

-- a feed whose shards are gone: the write fails (the FK check of a change to
-- a shard deleted meanwhile, 23503, is in test/specs/track_fk.spec)
CREATE TABLE w_one (id int PRIMARY KEY);
SELECT cfeed.create_feed('track-w1', 1, feed_id => 607);
SELECT cfeed.track('w_one', 607);
DELETE FROM cfeed.shard WHERE feed_id = 607;
SELECT pg_temp.err($$INSERT INTO w_one VALUES (1)$$);

-- cfeed's relation OIDs, cached per session, follow a rolled-back DROP
-- EXTENSION and a DROP and CREATE EXTENSION in the same session
SET client_min_messages = warning;
BEGIN;
DROP EXTENSION cfeed CASCADE;
ROLLBACK;
INSERT INTO w_priv VALUES (100, 'after a rolled-back drop');
DROP EXTENSION cfeed CASCADE;
CREATE EXTENSION cfeed;
RESET client_min_messages;
SELECT cfeed.create_feed('track-w2', 2, feed_id => 608);
SELECT cfeed.track('w_priv', 608);
INSERT INTO w_priv VALUES (101, 'after a new CREATE EXTENSION');
SELECT cfeed.publish(608, 1) > 0 AS published;
SELECT feed_id, op, "row" ->> 'v' AS v FROM cfeed.change WHERE "row" IS NOT NULL ORDER BY change_id;
