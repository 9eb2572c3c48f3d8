-- hardening_privileges: what PUBLIC, a writer, a reader and a stranger may
-- do with every function, table and view (docs/security.md), every
-- SECURITY DEFINER function's pinned search_path, and a writer's forged
-- stamps; nothing any role does in a rolled-back call stays.
\i test/regress_setup.sql
\i test/hardening_setup.sql
-- the setup's pending change stamped: these checks start with none pending
SELECT feed_id, shard, change_count, last_change_sequence_number FROM cfeed.sweep();

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

DROP EXTENSION cfeed;
DROP TABLE public.h_plain;
DROP ROLE regress_cfeed_h_writer, regress_cfeed_h_reader, regress_cfeed_h_stranger;
