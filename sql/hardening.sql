-- hardening: bad input of every kind for every function (the SQLSTATEs of
-- docs/reference.md), privileges of writer/reader/stranger (docs/security.md),
-- a hostile search_path, and per-feed access with row-level security.
\i test/regress_setup.sql
GRANT EXECUTE ON FUNCTION pg_temp.err(text) TO PUBLIC;

SELECT cfeed.create_feed('h', 2);
SELECT cfeed.create_feed('h2', 1);
-- explicit change_ids below stay clear of the sequence's
SELECT setval('cfeed.change_id', 1000000001000000) > 0 AS moved;
SELECT cfeed.publish(1, 0, 1000000000000001), cfeed.publish(1, 1, 1000000000000002),
       cfeed.publish(2, 0, 1000000000000003);
SELECT feed_id, shard, change_count FROM cfeed.sweep() ORDER BY 1, 2;
SELECT cfeed.publish(1, 0, 1000000000000004);	-- left pending
SELECT shard, cursor, epoch FROM cfeed.acquire('g', 1, 'o', 600000);
CREATE TABLE public.h_plain (id int PRIMARY KEY, v text);
INSERT INTO public.h_plain VALUES (1, 'a');

-- everything the failing calls below must leave untouched
CREATE TEMP VIEW h_now AS
SELECT (SELECT count(*) FROM cfeed.feed) AS feeds,
       (SELECT count(*) FROM cfeed.shard_config) AS shards,
       (SELECT count(*) FROM cfeed.change) AS changes,
       (SELECT count(*) FROM cfeed.change WHERE change_sequence_number IS NULL) AS pending,
       (SELECT sum(change_sequence_number) FROM cfeed.change) AS numbers,
       (SELECT count(*) FROM cfeed.lease) AS leases,
       (SELECT string_agg(concat_ws(':', group_name, shard, owner, cursor, epoch), ',' ORDER BY shard)
        FROM cfeed.lease) AS lease_rows,
       (SELECT count(*) FROM cfeed.row_image) AS images,
       (SELECT count(*) FROM pg_trigger WHERE tgrelid = 'public.h_plain'::regclass) AS triggers;
CREATE TEMP TABLE h_state AS SELECT * FROM h_now;

-- 22004: NULL in each argument that needs a value, of every function (generated:
-- each call below is valid but for the one NULL)
CREATE TEMP TABLE h_call (fn text, kind text, args text[], nullable int[]);
INSERT INTO h_call VALUES
  ('cfeed.create_feed', 'f', '{''hn'',1,77,0,true,''c''}', '{3,6}'),
  ('cfeed.publish', 'f', '{1,0,1000000000000009}', '{}'),
  ('cfeed.shard_for', 'f', '{1,''k''}', '{}'),
  ('cfeed.sweep', 'f', '{0}', '{}'),
  ('cfeed.sweep_loop', 'p', '{0,0,0,0,"NULL","NULL","NULL"}', '{5,6,7}'),
  ('cfeed.read', 'f', '{1,0,"NULL",10,0}', '{3}'),
  ('cfeed.read_rows', 'f', '{1,0,"NULL",10,0}', '{3}'),
  ('cfeed.wait', 'f', '{1,0,0,0}', '{}'),
  ('cfeed.head', 'f', '{1,0}', '{}'),
  ('cfeed.cursor_at', 'f', '{1,0,now()}', '{}'),
  ('cfeed.channel', 'f', '{1,0}', '{}'),
  ('cfeed.acquire', 'f', '{''g'',1,''o'',1000,"NULL"}', '{5}'),
  ('cfeed.checkpoint', 'f', '{''g'',1,0,''o'',1,2000000000000001}', '{}'),
  ('cfeed.release', 'f', '{''g'',1,''o''}', '{}'),
  ('cfeed.seek', 'f', '{''g'',1,0,2000000000000001}', '{}'),
  ('cfeed.drop_group', 'f', '{''g'',1}', '{}'),
  ('cfeed.fail', 'f', '{''g'',1,0,''o'',1,2000000000000001,''e''}', '{}'),
  ('cfeed.read_group', 'f', '{''g'',1,0,"NULL",10}', '{4}'),
  ('cfeed.set_failure_policy', 'f', '{''g'',1,5,0,60000,false}', '{}'),
  ('cfeed.read_dead_letters', 'f', '{''g'',1,0,"NULL","NULL",10}', '{3,4,5}'),
  ('cfeed.resolve_dead_letter', 'f', '{''g'',1,0,2000000000000001}', '{}'),
  ('cfeed.apply_retention', 'f', '{false}', '{}'),
  ('cfeed.track', 'f', '{''public.h_plain'',1,''id''}', '{3}'),
  ('cfeed.untrack', 'f', '{''public.h_plain''}', '{}'),
  ('cfeed.backfill', 'f', '{''public.h_plain'',1,''id''}', '{3}'),
  ('cfeed.grant_read', 'f', '{1,0}', '{}'),
  ('cfeed.revoke_read', 'f', '{1,0}', '{}'),
  ('cfeed.grant_read_all', 'f', '{0}', '{}'),
  ('cfeed.revoke_read_all', 'f', '{0}', '{}'),
  ('cfeed.grant_write', 'f', '{1,0}', '{}'),
  ('cfeed.revoke_write', 'f', '{1,0}', '{}'),
  ('cfeed.grant_write_all', 'f', '{0}', '{}'),
  ('cfeed.revoke_write_all', 'f', '{0}', '{}'),
  ('cfeed.epoch', 'f', '{}', '{}'),
  ('cfeed.resume_cursor', 'f', '{1,0,2000000000000001,0}', '{3}');
-- every function of the extension (internal ones aside) is in the list
SELECT p.proname FROM pg_proc p
WHERE p.pronamespace = 'cfeed'::regnamespace AND p.proname NOT LIKE '\_%'
  AND 'cfeed.' || p.proname NOT IN (SELECT fn FROM h_call)
ORDER BY 1;
SELECT cmd, pg_temp.err(cmd)
FROM (SELECT CASE kind WHEN 'p' THEN 'CALL ' ELSE 'SELECT * FROM ' END || fn || '('
             || array_to_string(ARRAY(SELECT CASE WHEN j = i THEN 'NULL' ELSE args[j] END
                                      FROM generate_subscripts(args, 1) j ORDER BY j), ', ') || ')' AS cmd,
             fn, i
      FROM h_call, generate_subscripts(args, 1) i
      WHERE i <> ALL (nullable)) c
ORDER BY fn, i;
-- the internal helpers with NULL
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$SELECT cfeed._null_arg(NULL)$$),
  ($$SELECT cfeed._check_feed(NULL)$$),
  ($$SELECT cfeed._apply_retention(NULL)$$),
  ($$SELECT cfeed._apply_retention(10, NULL)$$),
  ($$SELECT cfeed._track_key(NULL, NULL::record)$$),
  ($$SELECT cfeed._retention_held_by(NULL, NULL)$$),
  ($$SELECT cfeed._held_lease(NULL, NULL, NULL, NULL, NULL)$$),
  ($$SELECT cfeed._not_a_dead_letter(NULL, NULL, NULL, NULL)$$)
) AS t(cmd);

-- negative and huge numbers: int max/min, bigint max/min
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$SELECT cfeed.create_feed('hx', -1)$$),
  ($$SELECT cfeed.create_feed('hx', 2147483647)$$),
  ($$SELECT cfeed.create_feed('hx', -2147483648)$$),
  ($$SELECT cfeed.create_feed('hx', 65537)$$),
  ($$SELECT cfeed.publish(-1, 0, 5)$$),
  ($$SELECT cfeed.publish(2147483647, 0, 5)$$),
  ($$SELECT cfeed.publish(-2147483648, 0, 5)$$),
  ($$SELECT cfeed.publish(1, -1, 5)$$),
  ($$SELECT cfeed.publish(1, 2147483647, 5)$$),
  ($$SELECT cfeed.publish(1, -2147483648, 5)$$),
  ($$SELECT cfeed.shard_for(-1, 'k')$$),
  ($$SELECT cfeed.shard_for(2147483647, 'k')$$),
  ($$SELECT * FROM cfeed.read(1, 0, NULL, -1)$$),
  ($$SELECT * FROM cfeed.read(1, 0, NULL, -2147483648)$$),
  ($$SELECT * FROM cfeed.read(1, 0, NULL, 10, -1)$$),
  ($$SELECT * FROM cfeed.read(1, 0, NULL, 10, -2147483648)$$),
  ($$SELECT * FROM cfeed.read(2147483647, 0)$$),
  ($$SELECT * FROM cfeed.read(1, -2147483648)$$),
  ($$SELECT * FROM cfeed.read_rows(1, 0, NULL, -1)$$),
  ($$SELECT * FROM cfeed.read_rows(1, 0, NULL, 10, -1)$$),
  ($$SELECT * FROM cfeed.read_rows(-1, 0)$$),
  ($$SELECT cfeed.wait(1, 0, 0, -1)$$),
  ($$SELECT cfeed.wait(1, 0, 0, -2147483648)$$),
  ($$SELECT cfeed.wait(-1, 0, 0, 0)$$),
  ($$SELECT cfeed.wait(1, 2147483647, 0, 0)$$),
  ($$SELECT cfeed.head(-2147483648, 0)$$),
  ($$SELECT cfeed.head(1, 2147483647)$$),
  ($$SELECT cfeed.cursor_at(-1, 0, now())$$),
  ($$SELECT cfeed.cursor_at(1, -1, now())$$),
  ($$SELECT cfeed.channel(-1, 0)$$),
  ($$SELECT cfeed.channel(1, 2147483647)$$),
  ($$SELECT * FROM cfeed.sweep(-2147483648)$$),
  ($$CALL cfeed.sweep_loop(0, -2147483648, 0, 0, NULL, NULL, NULL)$$),
  ($$CALL cfeed.sweep_loop(0, 0, -2147483648, 0, NULL, NULL, NULL)$$),
  ($$CALL cfeed.sweep_loop(0, 0, 0, -2147483648, NULL, NULL, NULL)$$),
  ($$SELECT * FROM cfeed.acquire('g', 1, 'o', 0)$$),
  ($$SELECT * FROM cfeed.acquire('g', 1, 'o', -2147483648)$$),
  ($$SELECT * FROM cfeed.acquire('g', -1, 'o')$$),
  ($$SELECT * FROM cfeed.acquire('g', 2147483647, 'o')$$),
  ($$SELECT cfeed.checkpoint('g', 1, 0, 'o', 1, 9223372036854775807)$$),
  ($$SELECT cfeed.checkpoint('g', 1, 0, 'o', 1, -9223372036854775808)$$),
  ($$SELECT cfeed.checkpoint('g', 1, 0, 'o', 9223372036854775807, 2000000000000001)$$),
  ($$SELECT cfeed.checkpoint('g', 1, 0, 'o', -9223372036854775808, 2000000000000001)$$),
  ($$SELECT cfeed.checkpoint('g', 1, -1, 'o', 1, 2000000000000001)$$),
  ($$SELECT cfeed.checkpoint('g', 1, 2147483647, 'o', 1, 2000000000000001)$$),
  ($$SELECT cfeed.checkpoint('g', -2147483648, 0, 'o', 1, 2000000000000001)$$),
  ($$SELECT cfeed.seek('g', 1, 0, 9223372036854775807)$$),
  ($$SELECT cfeed.seek('g', 1, -1, 0)$$),
  ($$SELECT cfeed.seek('g', 2147483647, 0, 0)$$),
  ($$SELECT cfeed.release('g', -1, 'o')$$),
  ($$SELECT cfeed.drop_group('g', 2147483647)$$),
  ($$SELECT cfeed._apply_retention(0)$$),
  ($$SELECT cfeed._apply_retention(-2147483648)$$),
  ($$SELECT cfeed.track('public.h_plain', -1)$$),
  ($$SELECT cfeed.track('public.h_plain', 2147483647)$$),
  ($$SELECT cfeed.backfill('public.h_plain', -1)$$),
  ($$SELECT cfeed.backfill('public.h_plain', 2147483647)$$)
) AS t(cmd);
-- extremes that are valid read and write nothing
SELECT count(*) FROM cfeed.read(1, 0, 9223372036854775807);
SELECT count(*) FROM cfeed.read(1, 0, -9223372036854775808);
SELECT count(*) FROM cfeed.read(1, 0, NULL, 2147483647);
SELECT count(*) FROM cfeed.read(1, 0, 9223372036854775807, 2147483647, 0);
SELECT count(*) FROM cfeed.read_rows(1, 0, -9223372036854775808, 2147483647);
SELECT cfeed.wait(1, 0, -9223372036854775808, 2147483647) = cfeed.head(1, 0) AS wait_returns_at_once;
SELECT cfeed.wait(1, 0, 9223372036854775807, 0) = cfeed.head(1, 0) AS wait_times_out_at_once;
SELECT cfeed.cursor_at(1, 0, 'infinity') = cfeed.head(1, 0) AS future_is_head,
       cfeed.cursor_at(1, 0, '-infinity') AS past_is_start;
SELECT count(*) FROM cfeed.sweep(2147483647);
SELECT cfeed.release('g', 1, 'nobody') AS released, cfeed.drop_group('nope', 1) AS dropped;

-- unknown feeds, shards, groups and leases name the object (42704)
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$SELECT cfeed.checkpoint('nope', 1, 0, 'o', 1, 2000000000000001)$$),
  ($$SELECT cfeed.checkpoint('g', 1, 7, 'o', 1, 2000000000000001)$$),
  ($$SELECT cfeed.checkpoint('g', 99, 0, 'o', 1, 2000000000000001)$$),
  ($$SELECT cfeed.seek('g', 1, 7, 0)$$),
  ($$SELECT cfeed.seek('g', 99, 0, 0)$$),
  ($$SELECT cfeed.release('g', 99, 'o')$$),
  ($$SELECT cfeed.drop_group('g', 99)$$),
  ($$SELECT * FROM cfeed.acquire('g', 99, 'o')$$),
  ($$SELECT * FROM cfeed.read_rows(1, 7)$$),
  ($$SELECT cfeed.track('public.h_plain', 99)$$),
  ($$SELECT cfeed.untrack('public.h_plain')$$),
  ($$SELECT cfeed.backfill('public.h_plain', 1)$$),
  ($$SELECT cfeed._check_feed(99)$$)
) AS t(cmd);
-- leases refused for a wrong owner or epoch (55000)
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$SELECT cfeed.checkpoint('g', 1, 0, 'other', 1, 2000000000000001)$$),
  ($$SELECT cfeed.checkpoint('g', 1, 0, 'o', 2, 2000000000000001)$$),
  ($$SELECT cfeed.checkpoint('g', 1, 0, 'o', 1, 1999999999999999)$$)
) AS t(cmd);

-- extreme strings: 10k characters (repetitive and incompressible), quotes,
-- backslashes, unicode, control characters, empty and blank
CREATE TEMP TABLE h_str (label text, s text);
INSERT INTO h_str VALUES
  ('10k x', repeat('x', 10000)),
  ('10k random', (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 313) i)),
  ('quote', $q$it's "q"$q$),
  ('backslash', E'a\\b\\'),
  ('unicode', 'fëed_日本_🙂'),
  ('newline', E'a\nb'),
  ('empty', ''),
  ('blank', ' ');
SELECT label, length(s),
       pg_temp.err(format('SELECT cfeed.create_feed(%L)', s)) AS create_feed,
       pg_temp.err(format('SELECT cfeed.create_feed(%L, comment => %L)', 'ok_' || length(s), s)) AS long_comment
FROM h_str ORDER BY label;
-- the comment was accepted for each: undo those feeds (they were valid)
DELETE FROM cfeed.feed WHERE name LIKE 'ok\_%';
SELECT label, cfeed.shard_for(1, s) BETWEEN 0 AND 1 AS shard_for_ok FROM h_str ORDER BY label;
SELECT label,
       left(pg_temp.err(format('SELECT cfeed.checkpoint(%L, 1, 0, %L, 1, 2000000000000001)', s, 'o')), 120) AS checkpoint_group,
       left(pg_temp.err(format('SELECT cfeed.checkpoint(%L, 1, 0, %L, 1, 2000000000000001)', 'g', s)), 120) AS checkpoint_owner,
       left(pg_temp.err(format('SELECT cfeed.release(%L, 1, %L)', s, s)), 60) AS release,
       pg_temp.err(format('SELECT cfeed.drop_group(%L, 1)', s)) AS drop_group
FROM h_str ORDER BY label;
-- acquire/seek with such names create leases (valid) or are refused: in a
-- transaction rolled back afterwards
BEGIN;
SELECT label,
       left(pg_temp.err(format('SELECT * FROM cfeed.acquire(%L, 1, %L)', s, 'o')), 100) AS acquire_group,
       left(pg_temp.err(format('SELECT * FROM cfeed.acquire(%L, 1, %L)', 'g2', s)), 100) AS acquire_owner,
       left(pg_temp.err(format('SELECT cfeed.seek(%L, 1, 0, 2000000000000000)', s)), 100) AS seek
FROM h_str ORDER BY label;
ROLLBACK;
-- track and backfill with odd key and order_by strings
SELECT label,
       left(pg_temp.err(format('SELECT cfeed.track(%L, 1, %L)', 'public.h_plain', s)), 100) AS track_key,
       left(pg_temp.err(format('SELECT cfeed.backfill(%L, 1, %L)', 'public.h_plain', s)), 100) AS backfill_order
FROM h_str ORDER BY label;
-- order_by of backfill on a tracked table: odd strings and an injection attempt
BEGIN;
SELECT cfeed.track('public.h_plain', 2);
SELECT label, left(pg_temp.err(format('SELECT cfeed.backfill(%L, 2, %L)', 'public.h_plain', s)), 100) AS backfill_order
FROM h_str ORDER BY label;
SELECT pg_temp.err($$SELECT cfeed.backfill('public.h_plain', 2, 'id; DROP TABLE public.h_plain')$$);
SELECT pg_temp.err($$SELECT cfeed.backfill('public.h_plain', 2, 'id) x; DROP TABLE public.h_plain; --')$$);
SELECT count(*) AS h_plain_still_there FROM public.h_plain;
ROLLBACK;

-- wrong types and casts fail before the function runs; track/untrack/backfill of
-- an OID that is no relation give 42P01
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$SELECT cfeed.publish('x', 0)$$),
  ($$SELECT cfeed.publish(1.5, 0)$$),
  ($$SELECT cfeed.publish(2147483648, 0)$$),
  ($$SELECT cfeed.publish(1, 0, 9223372036854775808)$$),
  ($$SELECT cfeed.publish(1, 0, 'abc')$$),
  ($$SELECT * FROM cfeed.read(1, 0, 'abc')$$),
  ($$SELECT * FROM cfeed.read(1, 0, NULL, 2147483648)$$),
  ($$SELECT cfeed.cursor_at(1, 0, 'not a time')$$),
  ($$SELECT cfeed.cursor_at(1, 0, 5)$$),
  ($$SELECT cfeed.create_feed(42)$$),
  ($$SELECT cfeed.create_feed('hx', longpoll => 'maybe')$$),
  ($$SELECT cfeed.track('no_such_table', 1)$$),
  ($$SELECT cfeed.track(0, 1)$$),
  ($$SELECT cfeed.track(4294967295, 1)$$),
  ($$SELECT cfeed.untrack(0)$$),
  ($$SELECT cfeed.backfill(0, 1)$$),
  ($$SELECT cfeed.untrack('pg_class')$$),
  ($$SELECT cfeed.track('pg_class', 1)$$),
  ($$SELECT cfeed.track('cfeed.change', 1)$$),
  ($$SELECT cfeed.track('cfeed.change_id', 1)$$),
  ($$SELECT * FROM cfeed.acquire('g', 1, 'o', 1000, 'yesterday-ish')$$)
) AS t(cmd);

-- none of the calls above wrote anything
SELECT b.feeds = a.feeds AS feeds, b.shards = a.shards AS shards, b.changes = a.changes AS changes,
       b.pending = a.pending AS pending, b.numbers = a.numbers AS numbers,
       b.leases = a.leases AS leases, b.lease_rows = a.lease_rows AS lease_rows,
       b.images = a.images AS images, b.triggers = a.triggers AS triggers
FROM h_state b, h_now a;
DROP VIEW h_now;
-- and the pending change is stamped normally afterwards
SELECT feed_id, shard, change_count, last_change_sequence_number FROM cfeed.sweep();

/*
 * Privileges (docs/security.md).
 */
CREATE ROLE regress_cfeed_h_writer;
CREATE ROLE regress_cfeed_h_reader;
CREATE ROLE regress_cfeed_h_stranger;
GRANT INSERT ON cfeed.change TO regress_cfeed_h_writer;
SELECT cfeed.grant_write_all('regress_cfeed_h_writer');
GRANT USAGE ON SEQUENCE cfeed.change_id TO regress_cfeed_h_writer;
GRANT SELECT ON cfeed.change, cfeed.shard TO regress_cfeed_h_reader;
SELECT cfeed.grant_read(1, 'regress_cfeed_h_reader');

-- PUBLIC: USAGE on the schema, nothing on any table, view or sequence, and
-- EXECUTE only on SECURITY INVOKER functions
SELECT has_schema_privilege('regress_cfeed_h_stranger', 'cfeed', 'USAGE') AS usage,
       has_schema_privilege('regress_cfeed_h_stranger', 'cfeed', 'CREATE') AS "create";
SELECT c.relname FROM pg_class c
WHERE c.relnamespace = 'cfeed'::regnamespace AND c.relkind IN ('r', 'v', 'S', 'm', 'p', 'f')
  AND (has_table_privilege('regress_cfeed_h_stranger', c.oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')
       OR (c.relkind = 'S' AND has_sequence_privilege('regress_cfeed_h_stranger', c.oid, 'USAGE, SELECT, UPDATE')))
ORDER BY 1;
SELECT p.oid::regprocedure AS definer_executable_by_public FROM pg_proc p
WHERE p.pronamespace = 'cfeed'::regnamespace AND p.prosecdef
  AND has_function_privilege('regress_cfeed_h_stranger', p.oid, 'EXECUTE');
-- every SECURITY DEFINER function pins search_path (and the list of them)
SELECT p.oid::regprocedure AS definer, p.proconfig FROM pg_proc p
WHERE p.pronamespace = 'cfeed'::regnamespace AND p.prosecdef ORDER BY p.oid::regprocedure::text;
SELECT p.oid::regprocedure AS unpinned_definer FROM pg_proc p
WHERE p.pronamespace = 'cfeed'::regnamespace AND p.prosecdef
  AND NOT coalesce(p.proconfig, '{}') && ARRAY['search_path=pg_catalog, pg_temp'];

-- the calls every role tries (valid for the owner)
CREATE TEMP TABLE h_priv (n int, cmd text);
GRANT SELECT ON h_priv TO PUBLIC;
INSERT INTO h_priv VALUES
  (1, $$SELECT cfeed.publish(1, 0, 1000000000000900) > 0$$),
  (2, $$INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (1, 0, 1000000000000901)$$),
  (3, $$SELECT count(*) FROM cfeed.read(1, 0)$$),
  (4, $$SELECT count(*) FROM cfeed.read_rows(1, 0)$$),
  (5, $$SELECT cfeed.head(1, 0) > 0$$),
  (6, $$SELECT cfeed.wait(1, 0, 0, 0) > 0$$),
  (7, $$SELECT cfeed.cursor_at(1, 0, now()) > 0$$),
  (8, $$SELECT count(*) FROM cfeed.sweep()$$),
  (9, $$CALL cfeed.sweep_loop(0, 0, 0, 0, NULL, NULL, NULL)$$),
  (10, $$SELECT cfeed.create_feed('mine')$$),
  (11, $$SELECT count(*) FROM cfeed.acquire('g', 1, 'o2', 1000)$$),
  (12, $$SELECT cfeed.checkpoint('g', 1, 0, 'o', 1, 2000000000000001)$$),
  (13, $$SELECT cfeed.release('g', 1, 'o')$$),
  (14, $$SELECT cfeed.seek('g', 1, 0, 2000000000000000)$$),
  (15, $$SELECT cfeed.drop_group('g', 1)$$),
  (16, $$SELECT cfeed.apply_retention()$$),
  (17, $$SELECT cfeed.track('public.h_plain', 1)$$),
  (18, $$SELECT cfeed.backfill('public.h_plain', 1)$$),
  (19, $$SELECT cfeed.channel(1, 0)$$),
  (20, $$SELECT cfeed.shard_for(1, 'k')$$),
  (21, $$SELECT count(*) FROM cfeed.stats$$),
  (22, $$SELECT count(*) FROM cfeed.sweepers$$),
  (23, $$SELECT count(*) FROM cfeed.consumer_lag$$),
  (24, $$SELECT count(*) FROM cfeed.groups$$),
  (25, $$SELECT count(*) FROM cfeed.feed$$),
  (26, $$SELECT count(*) FROM cfeed.lease$$),
  (27, $$UPDATE cfeed.change SET change_sequence_number = 5 WHERE false$$),
  (28, $$DELETE FROM cfeed.change WHERE false$$),
  (29, $$UPDATE cfeed.shard SET longpoll = true WHERE false$$),
  (30, $$SELECT nextval('cfeed.change_id') > 0$$),
  (31, $$SELECT cfeed._apply_retention()$$),
  (32, $$SELECT count(*) FROM cfeed._sweepers()$$),
  (33, $$SELECT cfeed._retention_held_by(1, 0)$$);
-- run as each role inside a transaction rolled back per role (the owner's
-- successes must not stay); the writer publishes but cannot read or stamp,
-- the reader reads, heads, waits and finds cursors but cannot write, the
-- stranger is refused (42501) for everything touching the feed
CREATE FUNCTION pg_temp.as_role(r text) RETURNS TABLE (n int, cmd text, result text)
LANGUAGE plpgsql AS $$
DECLARE
	c record;
BEGIN
	FOR c IN SELECT * FROM h_priv ORDER BY 1 LOOP
		n := c.n;
		cmd := c.cmd;
		BEGIN
			EXECUTE format('SET LOCAL ROLE %I', r);
			result := pg_temp.err(c.cmd);
			RESET ROLE;
			RAISE EXCEPTION 'undo' USING ERRCODE = 'P0001';
		EXCEPTION WHEN raise_exception THEN
			NULL;
		END;
		RETURN NEXT;
	END LOOP;
END $$;
SELECT w.n, w.cmd, w.result AS writer, r.result AS reader, s.result AS stranger
FROM pg_temp.as_role('regress_cfeed_h_writer') w
JOIN pg_temp.as_role('regress_cfeed_h_reader') r USING (n)
JOIN pg_temp.as_role('regress_cfeed_h_stranger') s USING (n)
ORDER BY n;
-- the owner can do all of it (same calls, rolled back)
SELECT n, cmd, result AS owner FROM pg_temp.as_role(current_user::text) ORDER BY n;
-- a writer cannot forge a stamp, nor stamp through the view
SET ROLE regress_cfeed_h_writer;
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number) VALUES (1, 0, 1000000000000902, 2000000000000999)$$),
  ($$INSERT INTO cfeed.change (feed_id, shard, change_id, stamped_at) VALUES (1, 0, 1000000000000903, now())$$),
  ($$INSERT INTO cfeed.change (feed_id, shard, change_id, writer_xid) VALUES (1, 0, 1000000000000904, '1')$$),
  ($$INSERT INTO cfeed.shard (feed_id, shard) VALUES (1, 9)$$)
) AS t(cmd);
RESET ROLE;
-- nothing any role did above stayed
SELECT (SELECT count(*) FROM cfeed.change) AS changes, (SELECT count(*) FROM cfeed.feed) AS feeds,
       (SELECT string_agg(concat_ws(':', group_name, shard, owner, cursor, epoch), ',' ORDER BY shard)
        FROM cfeed.lease) AS leases,
       (SELECT count(*) FROM pg_trigger WHERE tgrelid = 'public.h_plain'::regclass) AS triggers;

/*
 * A hostile search_path: a schema earlier on the path than pg_catalog with a
 * table named change and objects shadowing pg_catalog names.  Every shadow
 * records who called it (and the int and bigint operators and the functions
 * lie); cfeed must never call one, whoever runs it.  Each call's result is
 * kept and compared afterwards with the same call under a clean path.
 */
CREATE SCHEMA evil;
GRANT USAGE ON SCHEMA evil TO PUBLIC;
CREATE TABLE evil.log (who text, what text, phase text);
GRANT INSERT, SELECT ON evil.log TO PUBLIC;
CREATE TABLE evil.change (feed_id int, shard int, change_id bigint, change_sequence_number bigint);
INSERT INTO evil.change VALUES (1, 0, 666, 2000000000000001);
GRANT ALL ON evil.change TO PUBLIC;
CREATE FUNCTION evil.log(what text) RETURNS void LANGUAGE sql
	AS $$ INSERT INTO evil.log VALUES (current_user, what, current_setting('h.phase', true)) $$;
CREATE FUNCTION evil.int4eq(int, int) RETURNS bool LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.log('int4 ='); RETURN true; END $$;
CREATE OPERATOR evil.= (LEFTARG = int, RIGHTARG = int, FUNCTION = evil.int4eq);
CREATE FUNCTION evil.int4ne(int, int) RETURNS bool LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.log('int4 <>'); RETURN true; END $$;
CREATE OPERATOR evil.<> (LEFTARG = int, RIGHTARG = int, FUNCTION = evil.int4ne);
CREATE FUNCTION evil.int8gt(bigint, bigint) RETURNS bool LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.log('int8 >'); RETURN true; END $$;
CREATE OPERATOR evil.> (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = evil.int8gt);
CREATE FUNCTION evil.int8le(bigint, bigint) RETURNS bool LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.log('int8 <='); RETURN true; END $$;
CREATE OPERATOR evil.<= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = evil.int8le);
CREATE FUNCTION evil.tideq(tid, tid) RETURNS bool LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.log('tid ='); RETURN $1 OPERATOR(pg_catalog.=) $2; END $$;
CREATE OPERATOR evil.= (LEFTARG = tid, RIGHTARG = tid, FUNCTION = evil.tideq);
CREATE FUNCTION evil.tslt(timestamptz, timestamptz) RETURNS bool LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.log('timestamptz <'); RETURN $1 OPERATOR(pg_catalog.<) $2; END $$;
CREATE OPERATOR evil.< (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = evil.tslt);
CREATE FUNCTION evil.now() RETURNS timestamptz LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.log('now'); RETURN '2000-01-01'; END $$;
CREATE FUNCTION evil.clock_timestamp() RETURNS timestamptz LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.log('clock_timestamp'); RETURN '2000-01-01'; END $$;
CREATE FUNCTION evil.nextval(regclass) RETURNS bigint LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.log('nextval'); RETURN 1; END $$;
CREATE FUNCTION evil.pg_current_xact_id() RETURNS xid8 LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.log('pg_current_xact_id'); RETURN '1'; END $$;
CREATE FUNCTION evil.coalesce_ish(bigint, bigint) RETURNS bigint LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.log('max'); RETURN 0; END $$;
CREATE AGGREGATE evil.max(bigint) (SFUNC = evil.coalesce_ish, STYPE = bigint);
CREATE FUNCTION evil.int4max(int, int) RETURNS int LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.log('max'); RETURN 0; END $$;
CREATE AGGREGATE evil.max(int) (SFUNC = evil.int4max, STYPE = int);
CREATE FUNCTION evil.unnest(anyarray) RETURNS SETOF anyelement LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.log('unnest'); END $$;
CREATE FUNCTION evil.to_jsonb(anyelement) RETURNS jsonb LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.log('to_jsonb'); RETURN '{}'; END $$;
CREATE FUNCTION evil.generate_series(int, int) RETURNS SETOF int LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.log('generate_series'); RETURN NEXT 0; END $$;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA evil TO PUBLIC;
-- a role granted sweep by the owner: it must not get the owner's rights through the path
CREATE ROLE regress_cfeed_h_sweeper;
GRANT EXECUTE ON FUNCTION cfeed.sweep(int) TO regress_cfeed_h_sweeper;
CREATE TABLE public.h_tracked (id int PRIMARY KEY, v text);
SELECT cfeed.create_feed('hostile', 2, 10);
SELECT cfeed.track('public.h_tracked', 10);
INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number)
VALUES (1, 1, 1000000000000030, 5);	-- history, for cursor_at's history search
CREATE TEMP TABLE h_res (what text, val text);
GRANT INSERT ON h_res TO PUBLIC;

SET h.phase = 'owner';
SET search_path = evil, pg_catalog, public, pg_temp;
INSERT INTO h_res SELECT 'publish', cfeed.publish(1, 0, 1000000000000010);
INSERT INTO h_res SELECT 'publish default id', cfeed.publish(1, 1) OPERATOR(pg_catalog.>) 1000000000000000;
INSERT INTO h_tracked VALUES (1, 'a'), (2, 'b');
UPDATE h_tracked SET v = 'c' WHERE id OPERATOR(pg_catalog.=) 1;
DELETE FROM h_tracked WHERE id OPERATOR(pg_catalog.=) 2;
INSERT INTO h_res SELECT 'create_feed', pg_temp.err($$SELECT cfeed.create_feed('hostile2')$$);
INSERT INTO h_res SELECT 'shard_for', cfeed.shard_for(1, 'abc');
INSERT INTO h_res SELECT 'sweep', string_agg(concat_ws(':', feed_id, shard, change_count, last_change_sequence_number), ' ' ORDER BY feed_id, shard) FROM cfeed.sweep();
RESET search_path;
SELECT cfeed.publish(1, 0, 1000000000000011) AS published;
SET h.phase = 'granted sweeper';
SET ROLE regress_cfeed_h_sweeper;
SET search_path = evil, pg_catalog, public, pg_temp;
INSERT INTO h_res SELECT 'sweep as granted role', string_agg(concat_ws(':', feed_id, shard, change_count, last_change_sequence_number), ' ') FROM cfeed.sweep();
RESET ROLE;
SET h.phase = 'owner';
SET search_path = evil, pg_catalog, public, pg_temp;
CALL cfeed.sweep_loop(0, 0, 0, 0, NULL, NULL, NULL);
CREATE TEMP TABLE h_read AS SELECT * FROM cfeed.read(1, 0, 2000000000000001);
CREATE TEMP TABLE h_read_rows AS
	SELECT 0 AS s, * FROM cfeed.read_rows(10, 0) UNION ALL SELECT 1, * FROM cfeed.read_rows(10, 1);
INSERT INTO h_res SELECT 'head', cfeed.head(1, 0);
INSERT INTO h_res SELECT 'wait', cfeed.wait(1, 0, 2000000000000001, 0);
INSERT INTO h_res SELECT 'cursor_at future', cfeed.cursor_at(1, 0, 'infinity');
INSERT INTO h_res SELECT 'cursor_at past', cfeed.cursor_at(1, 0, '-infinity');
INSERT INTO h_res SELECT 'cursor_at history', cfeed.cursor_at(1, 1, '2000-01-01');
INSERT INTO h_res SELECT 'channel', cfeed.channel(1, 0);
INSERT INTO h_res SELECT 'acquire', string_agg(concat_ws(':', shard, cursor, epoch), ' ') FROM cfeed.acquire('hg', 1, 'ho', 600000);
INSERT INTO h_res SELECT 'checkpoint', pg_temp.err($$SELECT cfeed.checkpoint('hg', 1, 0, 'ho', 1, 2000000000000002)$$);
INSERT INTO h_res SELECT 'seek', cfeed.seek('hg', 1, 1, 2000000000000000);
INSERT INTO h_res SELECT 'release', cfeed.release('hg', 1, 'ho');
INSERT INTO h_res SELECT 'drop_group', cfeed.drop_group('hg', 1);
INSERT INTO h_res SELECT 'stats', count(*) FROM cfeed.stats;
INSERT INTO h_res SELECT 'grant_read', pg_temp.err($$SELECT cfeed.grant_read(1, 0)$$);
INSERT INTO h_res SELECT 'revoke_read', pg_temp.err($$SELECT cfeed.revoke_read(1, 0)$$);
INSERT INTO h_res SELECT 'untrack', pg_temp.err($$SELECT cfeed.untrack('public.h_tracked')$$);
RESET search_path;
RESET h.phase;
-- no shadow was ever called, by the caller or (worse) as the extension owner
-- for a role that was only granted sweep (cfeed pins search_path for all the
-- SQL it sends through SPI).
SELECT phase, who, what, count(*) FROM evil.log GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;
-- the results under the hostile path
SELECT what, val FROM h_res ORDER BY what;
-- reads under the hostile path equal reads under a clean path
SELECT (SELECT array_agg(change_sequence_number ORDER BY change_sequence_number) FROM h_read)
       = (SELECT array_agg(change_sequence_number ORDER BY change_sequence_number) FROM cfeed.read(1, 0, 2000000000000001)) AS read_same,
       (SELECT array_agg(change_id ORDER BY change_sequence_number) FROM h_read)
       = (SELECT array_agg(change_id ORDER BY change_sequence_number) FROM cfeed.read(1, 0, 2000000000000001)) AS read_ids_same,
       (SELECT count(*) FROM h_read) AS read_rows;
SELECT 0 AS s, change_sequence_number, op, "row" FROM cfeed.read_rows(10, 0)
UNION ALL SELECT 1, change_sequence_number, op, "row" FROM cfeed.read_rows(10, 1) ORDER BY 1, 2;
SELECT (SELECT array_agg(concat_ws(':', s, change_sequence_number, op, "row") ORDER BY s, change_sequence_number) FROM h_read_rows)
       = (SELECT array_agg(concat_ws(':', s, change_sequence_number, op, "row") ORDER BY s, change_sequence_number)
          FROM (SELECT 0 AS s, * FROM cfeed.read_rows(10, 0) UNION ALL SELECT 1, * FROM cfeed.read_rows(10, 1)) x) AS read_rows_same;
-- every shard is still gapless, and evil.change untouched
SELECT feed_id, shard, change_sequence_number, change_id - 1000000000000000 AS id FROM cfeed.change
ORDER BY 1, 2, 3;
SELECT * FROM evil.change;
DROP SCHEMA evil CASCADE;

/*
 * Per-feed access (1.4: grants, enforced by row-level security on
 * cfeed.change, sql/read_access.sql).  Reader 1 sees feed 1 only, reader 2
 * feed 2 only; a writer is restricted by a restrictive INSERT policy of the
 * DBA's, and the sweeper, which stamps as the extension's owner, is not
 * affected (a superuser owner always bypasses RLS; a non-superuser owner
 * does unless the table is FORCEd).
 */
CREATE ROLE regress_cfeed_h_reader1;
CREATE ROLE regress_cfeed_h_reader2;
GRANT SELECT ON cfeed.change, cfeed.shard TO regress_cfeed_h_reader1, regress_cfeed_h_reader2;
CREATE TABLE public.h_event (change_id bigint PRIMARY KEY, body text);
GRANT SELECT ON public.h_event TO regress_cfeed_h_reader1, regress_cfeed_h_reader2;
INSERT INTO public.h_event SELECT change_id, 'event ' || feed_id || '/' || shard FROM cfeed.change
WHERE feed_id IN (1, 2) ON CONFLICT DO NOTHING;
ALTER TABLE cfeed.change FORCE ROW LEVEL SECURITY;
SELECT cfeed.grant_read(1, 'regress_cfeed_h_reader1'), cfeed.grant_read(2, 'regress_cfeed_h_reader2');
CREATE POLICY h_writers ON cfeed.change AS RESTRICTIVE FOR INSERT TO regress_cfeed_h_writer
	WITH CHECK (feed_id = 2);
-- the writer may publish to feed 2 only
SET ROLE regress_cfeed_h_writer;
SELECT cfeed.publish(2, 0, 1000000000000020) AS published;
SELECT pg_temp.err($$SELECT cfeed.publish(1, 0, 1000000000000021)$$);
RESET ROLE;
-- stamping is unaffected by RLS (FORCEd, and no policy for the owner)
SELECT feed_id, shard, change_count, last_change_sequence_number FROM cfeed.sweep();
SET ROLE regress_cfeed_h_reader1;
SELECT 'reader1' AS who, f, pg_temp.err(format('SELECT cfeed.read(%s, 0)', f)) FROM generate_series(1, 2) f ORDER BY f;
SELECT 'reader1' AS who, count(*) AS changes FROM cfeed.read(1, 0);
SELECT e.body, c.change_sequence_number
FROM public.h_event e JOIN cfeed.change c USING (change_id)
WHERE c.feed_id IN (1, 2) AND c.shard = 0 AND c.change_sequence_number > 0
ORDER BY c.feed_id, c.change_sequence_number LIMIT 100;
-- a waiting read of a feed it may not read is refused (42501)
SELECT pg_temp.err($$SELECT count(*) FROM cfeed.read(2, 0, NULL, 10, 50)$$) AS waiting_read;
RESET ROLE;
SET ROLE regress_cfeed_h_reader2;
SELECT 'reader2' AS who, f, pg_temp.err(format('SELECT cfeed.read(%s, 0)', f)) FROM generate_series(1, 2) f ORDER BY f;
SELECT 'reader2' AS who, count(*) AS changes FROM cfeed.read(2, 0);
SELECT e.body, c.change_sequence_number
FROM public.h_event e JOIN cfeed.change c USING (change_id)
WHERE c.feed_id IN (1, 2) AND c.shard = 0 AND c.change_sequence_number > 0
ORDER BY c.feed_id, c.change_sequence_number LIMIT 100;
RESET ROLE;
-- the heads of the other feed are refused too, and cfeed.shard leaves it out
SET ROLE regress_cfeed_h_reader1;
SELECT pg_temp.err($$SELECT cfeed.head(2, 0)$$) AS feed2_head;
SELECT feed_id, shard FROM cfeed.shard ORDER BY 1, 2;
RESET ROLE;
DROP POLICY h_writers ON cfeed.change;
ALTER TABLE cfeed.change NO FORCE ROW LEVEL SECURITY;

DROP EXTENSION cfeed;
DROP TABLE public.h_plain, public.h_tracked, public.h_event;
DROP ROLE regress_cfeed_h_writer, regress_cfeed_h_reader, regress_cfeed_h_stranger,
          regress_cfeed_h_sweeper, regress_cfeed_h_reader1, regress_cfeed_h_reader2;
