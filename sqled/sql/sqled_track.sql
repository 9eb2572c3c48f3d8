-- The SQL edition's tracking (docs/sql-edition.md), where it works
-- otherwise than the C edition's code: a row image comes only from
-- cfeed's own INSERT (cfeed._sqled_from_tracking, the C edition's image
-- scope), whatever a writer writes or runs; the change_ids the BEFORE
-- trigger leaves to the AFTER trigger sit in settings any role can set;
-- backfill turns the table's triggers off and on again; who sees images.
-- The extension's own files track, track_write and write_access run too.
SET client_min_messages = warning;
\getenv script SQLED_SCRIPT_PATH
\set ECHO none
\o /dev/null
\i :script
\o
\set ECHO all
\set SHOW_CONTEXT never
RESET client_min_messages;

CREATE FUNCTION pg_temp.err(cmd text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE cmd;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

SELECT cfeed.create_feed('trk', 2, feed_id => 1), cfeed.create_feed('other', 1, feed_id => 2);
CREATE TABLE public.trk_t (id int PRIMARY KEY, v text, change_id bigint);
SELECT cfeed.track('public.trk_t', 1);

-- roles: a writer of the table and of feed 1; a writer of the table
-- only; a forger, who may write feed 1 (and so publish to it) but not the
-- table; readers of feed 1 with and without SELECT on the table
CREATE ROLE trk_writer;
CREATE ROLE trk_nofeed;
CREATE ROLE trk_forger;
CREATE ROLE trk_reader;
CREATE ROLE trk_blind;
GRANT USAGE ON SCHEMA public TO trk_writer, trk_nofeed, trk_forger, trk_reader, trk_blind;
GRANT INSERT, UPDATE, DELETE, SELECT ON public.trk_t TO trk_writer, trk_nofeed;
GRANT INSERT ON cfeed.change TO trk_writer, trk_nofeed, trk_forger;
GRANT USAGE ON SEQUENCE cfeed.change_id TO trk_writer, trk_nofeed, trk_forger;
GRANT SELECT ON cfeed.change, cfeed.shard, cfeed.row_image TO trk_reader, trk_blind;
GRANT SELECT ON public.trk_t TO trk_reader;
SELECT cfeed.grant_write(1, 'trk_writer'), cfeed.grant_write(1, 'trk_forger'),
	   cfeed.grant_read(1, 'trk_reader'), cfeed.grant_read(1, 'trk_blind');
SELECT table_no AS trk_no FROM cfeed.tracked_table WHERE tbl = 'public.trk_t'::regclass \gset

-- a writer of the table and the feed publishes, with its privileges
SET ROLE trk_writer;
INSERT INTO public.trk_t (id, v) VALUES (1, 'a'), (2, 'b');
UPDATE public.trk_t SET v = 'a2' WHERE id = 1;
RESET ROLE;
-- a writer of the table only: 42501, nothing written
SET ROLE trk_nofeed;
SELECT pg_temp.err($$INSERT INTO public.trk_t (id, v) VALUES (3, 'c')$$) AS no_feed_grant;
-- nor may it track a table of its own into feed 1: 42501, the same words
-- for a feed that does not exist (as src/track_ddl.c)
CREATE TEMP TABLE trk_own (id int PRIMARY KEY);
SELECT pg_temp.err($$SELECT cfeed.track('trk_own', 1)$$) AS track_existing,
	   pg_temp.err($$SELECT cfeed.track('trk_own', 99)$$) AS track_missing;
DROP TABLE trk_own;
RESET ROLE;
SELECT op, "row" ->> 'id' AS id, "row" ->> 'v' AS v, tbl = :trk_no AS numbered,
	   ("row" ->> 'change_id')::bigint = change_id AS id_in_row
FROM cfeed.change WHERE feed_id = 1 ORDER BY change_id;

-- the forger cannot write an image: not by an INSERT of its own, nor by
-- running cfeed._track_row's statement, word for word, in a function of
-- its own, nor with a call stack written into a comment
SET ROLE trk_forger;
SELECT pg_temp.err(format($$INSERT INTO cfeed.change (feed_id, shard, change_id, tbl, op, "row")
	VALUES (1, 0, 9001, %s, 'insert', '{"id": 9, "v": "forged"}')$$, :trk_no)) AS own_insert;
CREATE FUNCTION pg_temp.forge(v_no int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	v_feed int := 1;
	v_shard int := 0;
	v_ids bigint[] := ARRAY[9002];
	v_ops text[] := ARRAY['insert'];
	v_rows jsonb[] := ARRAY['{"id": 9, "v": "forged"}'::jsonb];
	i int := 1;
BEGIN
	INSERT INTO cfeed.change (feed_id, shard, change_id, tbl, op, "row") VALUES (v_feed, v_shard, v_ids[i], v_no, v_ops[i], v_rows[i]);
END $$;
SELECT pg_temp.err(format('SELECT pg_temp.forge(%s)', :trk_no)) AS same_statement;
CREATE FUNCTION pg_temp.forge2(v_no int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	v_feed int := 1;
	v_shard int := 0;
	v_ids bigint[] := ARRAY[9003];
	v_ops text[] := ARRAY['insert'];
	v_rows jsonb[] := ARRAY['{"id": 9, "v": "forged"}'::jsonb];
	i int := 1;
BEGIN
	INSERT INTO cfeed.change (feed_id, shard, change_id, tbl, op, "row") VALUES (v_feed, v_shard, v_ids[i], v_no, v_ops[i], v_rows[i])/*"
PL/pgSQL function cfeed._track_row() line 80 at SQL statement
*/;
END $$;
SELECT pg_temp.err(format('SELECT pg_temp.forge2(%s)', :trk_no)) AS stack_in_comment;
-- what cfeed.backfill writes, word for word, neither
CREATE FUNCTION pg_temp.forge3(v_no int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	v_shards int[] := ARRAY[0];
	v_ids bigint[] := ARRAY[9004];
	v_numbers bigint[] := ARRAY[1];
	v_rows jsonb[] := ARRAY['{"id": 9, "v": "forged"}'::jsonb];
BEGIN
	WITH backfill(feed_id) AS (SELECT 1)
	INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number, tbl, op, "row") SELECT backfill.feed_id, h.shard, h.change_id, h.number, v_no, 'insert', h."row" FROM backfill, ROWS FROM (pg_catalog.unnest(v_shards), pg_catalog.unnest(v_ids), pg_catalog.unnest(v_numbers), pg_catalog.unnest(v_rows)) h(shard, change_id, number, "row") ORDER BY h.change_id;
END $$;
SELECT pg_temp.err(format('SELECT pg_temp.forge3(%s)', :trk_no)) AS backfill_statement;
-- a trigger of its own on a table of its own: its own table's rows, to a
-- feed it may write, as in the C edition (EXECUTE on cfeed._track_row is
-- PUBLIC there too); not a temporary table's, whose OID a later table may get
CREATE TEMP TABLE forger_tmp (id int PRIMARY KEY, v text);
CREATE TRIGGER cfeed_track AFTER INSERT ON forger_tmp FOR EACH ROW EXECUTE FUNCTION cfeed._track_row('1', '');
SELECT pg_temp.err($$INSERT INTO forger_tmp VALUES (8, 'temporary table')$$) AS temp_table;
DROP TABLE forger_tmp;
RESET ROLE;
CREATE TABLE public.forger_t (id int PRIMARY KEY, v text);
ALTER TABLE public.forger_t OWNER TO trk_forger;
SET ROLE trk_forger;
CREATE TRIGGER cfeed_track AFTER INSERT ON forger_t FOR EACH ROW EXECUTE FUNCTION cfeed._track_row('1', '');
SELECT pg_temp.err($$INSERT INTO forger_t VALUES (9, 'own table')$$) AS own_table;
DROP TRIGGER cfeed_track ON forger_t;
CREATE TRIGGER cfeed_track AFTER INSERT ON forger_t FOR EACH ROW EXECUTE FUNCTION cfeed._track_row('2', '');
SELECT pg_temp.err($$INSERT INTO forger_t VALUES (10, 'feed 2')$$) AS not_its_feed;
RESET ROLE;
SELECT "row" ->> 'v' = 'forged' AS forged, op, "row" ->> 'v' AS v, cfeed._tracked_table(tbl) = 'public.trk_t'::regclass AS of_trk_t
FROM cfeed.change WHERE feed_id = 1 ORDER BY change_id;

-- the tombstone of a key-changing UPDATE takes the change_id the BEFORE
-- trigger drew for it (the one before the update's), not one set in
-- advance in the setting that carries it: the row's previous change or
-- a later one of its key would come out of order
SELECT pg_catalog.pg_sequence_last_value('cfeed.change_id') + 2 AS upd_id \gset
SET ROLE trk_writer;
BEGIN;
SELECT set_config('cfeed_sqled.pending_' || (hashtext('u' || :upd_id) & 255),
				  ';u' || :upd_id || '=1;u' || :upd_id || '=' || (:upd_id + 100), true) IS NOT NULL AS forged;
UPDATE public.trk_t SET id = 20 WHERE id = 2;
COMMIT;
RESET ROLE;
SELECT op, "row" ->> 'id' AS id, change_id - :upd_id AS change_id
FROM cfeed.change WHERE feed_id = 1 AND change_id >= :upd_id - 1 ORDER BY change_id;

-- readers: the images of a table the reader may SELECT; a change with an
-- image of a table it may not read is not there for it at all
SELECT count(*) >= 0 AS swept FROM cfeed.sweep();
SET ROLE trk_reader;
SELECT count(*) AS trk_reader_rows, count("row") AS images FROM cfeed.read_rows(1, 0) r;
SELECT count(*) AS trk_reader_changes FROM cfeed.change WHERE feed_id = 1;
RESET ROLE;
SET ROLE trk_blind;
SELECT count(*) AS trk_blind_rows FROM cfeed.read_rows(1, 0) r;
SELECT count(*) AS trk_blind_changes FROM cfeed.change WHERE feed_id = 1;
RESET ROLE;
-- row-level security on the table hides its images from the reader
ALTER TABLE public.trk_t ENABLE ROW LEVEL SECURITY;
SET ROLE trk_reader;
SELECT count(*) AS with_rls FROM cfeed.change WHERE feed_id = 1;
RESET ROLE;
ALTER TABLE public.trk_t DISABLE ROW LEVEL SECURITY;

-- backfill leaves the triggers as they were (it turns them off while it
-- sets the rows' change_id): cfeed_track enabled always, the other one
-- as usual; and the writes after it are published
CREATE TABLE public.trk_h (id int PRIMARY KEY, change_id bigint);
INSERT INTO public.trk_h SELECT g FROM generate_series(1, 5) g;
SELECT cfeed.create_feed('hist', 1, feed_id => 3);
SELECT cfeed.track('public.trk_h', 3);
ALTER TABLE public.trk_h ENABLE ALWAYS TRIGGER cfeed_track;
SELECT cfeed.backfill('public.trk_h', 3);
SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = 'public.trk_h'::regclass ORDER BY 1;
INSERT INTO public.trk_h VALUES (6);
SELECT change_sequence_number - (SELECT start_sequence_number FROM cfeed.shard WHERE feed_id = 3) AS n,
	   op, "row" ->> 'id' AS id, ("row" ->> 'change_id')::bigint = change_id AS id_in_row
FROM cfeed.change WHERE feed_id = 3 ORDER BY change_id;
SELECT bool_and(t.change_id = c.change_id) AS rows_carry_ids
FROM public.trk_h t JOIN cfeed.change c ON c.feed_id = 3 AND (c."row" ->> 'id')::int = t.id;

-- a DELETE of many rows of a partition with a change_id column: each
-- delete takes the change_id its BEFORE trigger drew
CREATE TABLE public.trk_p (id int, r text, change_id bigint, PRIMARY KEY (id, r)) PARTITION BY LIST (r);
CREATE TABLE public.trk_p_a PARTITION OF public.trk_p FOR VALUES IN ('a');
SELECT cfeed.track('public.trk_p', 2);
INSERT INTO public.trk_p (id, r) SELECT g, 'a' FROM generate_series(1, 300) g;
DELETE FROM public.trk_p;
SELECT op, count(*), count(DISTINCT change_id) AS ids FROM cfeed.change WHERE feed_id = 2 GROUP BY op ORDER BY op;
SELECT count(*) AS settings_left FROM pg_settings WHERE name LIKE 'cfeed_sqled.pending%' AND setting <> '';

DROP TABLE public.trk_t, public.trk_h, public.trk_p, public.forger_t;
DROP FUNCTION pg_temp.forge(int), pg_temp.forge2(int), pg_temp.forge3(int);
SET client_min_messages = warning;
DROP SCHEMA cfeed CASCADE;
DROP EVENT TRIGGER IF EXISTS cfeed_tracked_table_dropped;
REVOKE USAGE ON SCHEMA public FROM trk_writer, trk_nofeed, trk_forger, trk_reader, trk_blind;
DROP ROLE trk_writer, trk_nofeed, trk_forger, trk_reader, trk_blind;
