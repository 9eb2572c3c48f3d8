-- catalogs: the objects the extension installs, create_feed, the shard guard,
-- and DROP EXTENSION leaving nothing behind.
\i test/regress_setup.sql

-- the extension is not relocatable and lives in schema cfeed
SELECT extname, extrelocatable, extnamespace::regnamespace FROM pg_extension WHERE extname = 'cfeed';

-- relations of schema cfeed
SELECT relname, relkind FROM pg_class
WHERE relnamespace = 'cfeed'::regnamespace ORDER BY relname;

-- user-visible columns, types, defaults, nullability of the catalogs
SELECT attrelid::regclass AS tbl, attname, format_type(atttypid, atttypmod) AS type,
       attnotnull, pg_get_expr(adbin, adrelid) AS default
FROM pg_attribute LEFT JOIN pg_attrdef ON adrelid = attrelid AND adnum = attnum
WHERE attrelid IN ('cfeed.feed'::regclass, 'cfeed.shard'::regclass, 'cfeed.change'::regclass)
  AND attnum > 0 AND NOT attisdropped
ORDER BY attrelid::regclass::text, attnum;

-- constraints: keys, name and shard checks (a change's shard is checked by
-- change_guard since 1.6, below; NOT NULL shows in pg_constraint from
-- PostgreSQL 18 on: left out)
SELECT conrelid::regclass AS tbl, conname, contype, pg_get_constraintdef(oid) AS def
FROM pg_constraint WHERE connamespace = 'cfeed'::regnamespace AND contype <> 'n'
ORDER BY conrelid::regclass::text, conname;

-- the triggers of cfeed's tables and views (A: enabled always)
SELECT tgrelid::regclass AS tbl, tgname, tgenabled, pg_get_triggerdef(oid) AS def
FROM pg_trigger
WHERE tgrelid IN (SELECT oid FROM pg_class WHERE relnamespace = 'cfeed'::regnamespace)
  AND NOT tgisinternal
ORDER BY tgrelid::regclass::text, tgname;

-- the readers' index and the sweeper's index
SELECT indexrelid::regclass AS idx, indisunique, pg_get_indexdef(indexrelid) AS def
FROM pg_index WHERE indrelid = 'cfeed.change'::regclass ORDER BY 1;

-- sequence change_id: start 1000000000000000, CACHE 1 (guarantee 4)
SELECT start_value, increment_by, cache_size, cycle FROM pg_sequences
WHERE schemaname = 'cfeed' AND sequencename = 'change_id';

-- tables and the sequence are dumped by pg_dump (pg_extension_config_dump)
SELECT c::regclass FROM pg_extension, unnest(extconfig) AS c
WHERE extname = 'cfeed' ORDER BY c::regclass::text;

-- functions: signatures, volatility, strictness (none may be STRICT), security
SELECT p.oid::regprocedure AS function, prokind, provolatile, proisstrict, prosecdef, proparallel,
       pg_get_function_result(p.oid) AS result
FROM pg_proc p WHERE pronamespace = 'cfeed'::regnamespace ORDER BY proname, p.oid::regprocedure::text COLLATE "C";

-- the settings functions run with beyond search_path: a function that turns
-- sequential scans off turns JIT off too (a plan with disable_cost passes
-- jit_above_cost, and every statement was compiled: apply_retention took
-- 0.2-1.3 s in a new session with jit on)
SELECT p.oid::regprocedure AS function, c AS setting
FROM pg_proc p, unnest(p.proconfig) AS c
WHERE pronamespace = 'cfeed'::regnamespace AND c NOT LIKE 'search_path=%'
ORDER BY 1, 2;

-- every public object has a comment
SELECT c.relname AS undocumented FROM pg_class c
WHERE relnamespace = 'cfeed'::regnamespace AND relkind IN ('r', 'S', 'v')
  AND obj_description(c.oid, 'pg_class') IS NULL
UNION ALL
SELECT p.oid::regprocedure::text FROM pg_proc p
WHERE pronamespace = 'cfeed'::regnamespace AND obj_description(p.oid, 'pg_proc') IS NULL;

-- create_feed with defaults: feed 1, one shard 0, group 0, longpoll, no comment
SELECT cfeed.create_feed('orders');
SELECT * FROM cfeed.feed ORDER BY feed_id;
SELECT * FROM cfeed.shard ORDER BY feed_id, shard;

-- create_feed with every argument, by name
SELECT cfeed.create_feed(name => 'events-2_X', shards => 3, feed_id => 10,
                         sweep_group => 7, longpoll => false, comment => 'three shards');
-- the default feed_id is one above the highest
SELECT cfeed.create_feed('next');
SELECT * FROM cfeed.feed ORDER BY feed_id;
SELECT feed_id, shard, sweep_group, longpoll, last_change_sequence_number,
       start_sequence_number, last_sweep_time IS NULL AS never_swept
FROM cfeed.shard ORDER BY feed_id, shard;

-- duplicates (name, feed_id) and bad names and shard counts are refused
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$SELECT cfeed.create_feed('orders')$$),
  ($$SELECT cfeed.create_feed('other', feed_id => 10)$$),
  ($$SELECT cfeed.create_feed('')$$),
  ($$SELECT cfeed.create_feed('has space')$$),
  ($$SELECT cfeed.create_feed('dot.ted')$$),
  ($$SELECT cfeed.create_feed('quote''s')$$),
  ($$SELECT cfeed.create_feed('naïve')$$),
  ($$SELECT cfeed.create_feed(repeat('x', 201))$$),
  ($$SELECT cfeed.create_feed('zero', 0)$$),
  ($$SELECT cfeed.create_feed('minus', -1)$$),
  ($$SELECT cfeed.create_feed('huge', 65537)$$)
) AS t(cmd);
-- a 200-character name is fine
SELECT cfeed.create_feed(repeat('y', 200), feed_id => 20);
-- the failures above wrote nothing
SELECT count(*) AS feeds, (SELECT count(*) FROM cfeed.shard) AS shards FROM cfeed.feed;

-- direct inserts into the catalogs obey the same rules
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$INSERT INTO cfeed.feed (feed_id, name) VALUES (30, 'bad name')$$),
  ($$INSERT INTO cfeed.feed (feed_id, name) VALUES (30, 'orders')$$),
  ($$INSERT INTO cfeed.shard (feed_id, shard) VALUES (1, -1)$$),
  ($$INSERT INTO cfeed.shard (feed_id, shard) VALUES (999, 0)$$)
) AS t(cmd);

-- a shard added by hand gets its start value recorded, custom or default
INSERT INTO cfeed.shard (feed_id, shard) VALUES (1, 1);
INSERT INTO cfeed.shard (feed_id, shard, last_change_sequence_number) VALUES (1, 2, 0);
SELECT feed_id, shard, last_change_sequence_number, start_sequence_number
FROM cfeed.shard WHERE feed_id = 1 ORDER BY shard;
-- a start value above the last number is refused
SELECT pg_temp.err($$INSERT INTO cfeed.shard (feed_id, shard, last_change_sequence_number, start_sequence_number) VALUES (1, 3, 5, 6)$$);

-- the numbering of a shard cannot be changed by hand (22023), the rest can
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$UPDATE cfeed.shard SET last_change_sequence_number = last_change_sequence_number + 1 WHERE feed_id = 1 AND shard = 0$$),
  ($$UPDATE cfeed.shard SET last_change_sequence_number = 0 WHERE feed_id = 1 AND shard = 0$$),
  ($$UPDATE cfeed.shard SET start_sequence_number = 0 WHERE feed_id = 1 AND shard = 0$$),
  ($$UPDATE cfeed.shard SET sweep_group = 3, longpoll = false WHERE feed_id = 1 AND shard = 0$$)
) AS t(cmd);
SELECT feed_id, shard, sweep_group, longpoll, last_change_sequence_number, start_sequence_number
FROM cfeed.shard WHERE feed_id = 1 ORDER BY shard;

-- DROP EXTENSION leaves nothing behind: no schema, no objects, no dependencies
DROP EXTENSION cfeed;
SELECT count(*) AS schemas FROM pg_namespace WHERE nspname = 'cfeed';
SELECT count(*) AS relations FROM pg_class WHERE relname IN ('feed', 'shard', 'change', 'change_id');
SELECT count(*) AS functions FROM pg_proc WHERE proname IN ('create_feed', 'publish', 'sweep', 'read', '_change_guard');
SELECT count(*) AS extension_deps FROM pg_depend
WHERE refclassid = 'pg_extension'::regclass AND NOT EXISTS (SELECT FROM pg_extension e WHERE e.oid = refobjid);
-- and it can be created again, empty
CREATE EXTENSION cfeed;
SELECT count(*) AS feeds FROM cfeed.feed;
DROP EXTENSION cfeed;
