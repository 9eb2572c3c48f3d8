-- security: what writers, readers and strangers may do (docs/security.md).
\i test/regress_setup.sql
GRANT EXECUTE ON FUNCTION pg_temp.err(text) TO PUBLIC;

CREATE ROLE regress_cfeed_writer;
CREATE ROLE regress_cfeed_reader;
CREATE ROLE regress_cfeed_stranger;
CREATE ROLE regress_cfeed_sweeper;
GRANT INSERT ON cfeed.change TO regress_cfeed_writer;
SELECT cfeed.grant_write_all('regress_cfeed_writer');
GRANT USAGE ON SEQUENCE cfeed.change_id TO regress_cfeed_writer;
GRANT SELECT ON cfeed.change, cfeed.shard TO regress_cfeed_reader;
GRANT EXECUTE ON FUNCTION cfeed.sweep(int) TO regress_cfeed_sweeper;
GRANT EXECUTE ON PROCEDURE cfeed.sweep_loop(int, int, int, int, int, bigint, int) TO regress_cfeed_sweeper;

SELECT cfeed.create_feed('sec', 2);
-- the reader reads feed 1 (per-feed grants: sql/read_access.sql)
SELECT cfeed.grant_read(1, 'regress_cfeed_reader');

-- PUBLIC: USAGE on the schema only, no privilege on any table, view or sequence
SELECT has_schema_privilege('public', 'cfeed', 'USAGE') AS usage,
       has_schema_privilege('public', 'cfeed', 'CREATE') AS "create";
SELECT c.relname, a.privilege_type FROM pg_class c,
       aclexplode(coalesce(c.relacl, acldefault(CASE WHEN c.relkind = 'S' THEN 's' ELSE 'r' END::"char", c.relowner))) a
WHERE c.relnamespace = 'cfeed'::regnamespace AND a.grantee = 0 ORDER BY 1, 2;
SELECT c.relname,
       has_table_privilege('regress_cfeed_stranger', c.oid, 'SELECT') AS sel,
       has_table_privilege('regress_cfeed_stranger', c.oid, 'INSERT') AS ins,
       has_table_privilege('regress_cfeed_stranger', c.oid, 'UPDATE') AS upd,
       has_table_privilege('regress_cfeed_stranger', c.oid, 'DELETE') AS del,
       has_table_privilege('regress_cfeed_stranger', c.oid, 'TRUNCATE') AS trunc
FROM pg_class c WHERE c.relnamespace = 'cfeed'::regnamespace AND c.relkind IN ('r', 'v')
ORDER BY 1;
SELECT has_sequence_privilege('public', 'cfeed.change_id', 'USAGE') AS seq_usage;
-- PUBLIC may not sweep; it may execute the other (SECURITY INVOKER) functions
SELECT p.oid::regprocedure AS function, has_function_privilege('public', p.oid, 'EXECUTE') AS public_execute,
       prosecdef
FROM pg_proc p WHERE pronamespace = 'cfeed'::regnamespace ORDER BY p.oid::regprocedure::text;
-- any SECURITY DEFINER function pins search_path
SELECT p.oid::regprocedure AS unpinned_definer FROM pg_proc p
WHERE pronamespace = 'cfeed'::regnamespace AND prosecdef
  AND NOT coalesce(proconfig, '{}') && ARRAY['search_path=pg_catalog, pg_temp', 'search_path=pg_catalog,pg_temp'];

-- writer: publishes and inserts without SELECT on the catalogs
SET ROLE regress_cfeed_writer;
SELECT cfeed.publish(1, 0) - 1000000000000000 AS id;
SELECT cfeed.publish(1, 1, 1000000000000100) - 1000000000000000 AS id;
INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (1, 0, nextval('cfeed.change_id'));
-- ... and backfills history into the migration range
INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number) VALUES (1, 1, 1, 1);
-- unknown feeds and shards are still reported as such
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$SELECT cfeed.publish(1, 5)$$),
  ($$SELECT cfeed.publish(9, 0)$$),
  ($$INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (1, 5, 1)$$)
) AS t(cmd);
-- but cannot sweep, read, stamp or touch the catalogs (42501)
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$SELECT * FROM cfeed.sweep()$$),
  ($$CALL cfeed.sweep_loop(0, 0, 0, 0, NULL, NULL, NULL)$$),
  ($$SELECT * FROM cfeed.read(1, 0)$$),
  ($$SELECT cfeed.head(1, 0)$$),
  ($$SELECT cfeed.cursor_at(1, 0, now())$$),
  ($$SELECT cfeed.wait(1, 0, 0, 0)$$),
  ($$SELECT count(*) FROM cfeed.change$$),
  ($$SELECT count(*) FROM cfeed.feed$$),
  ($$SELECT cfeed.create_feed('mine')$$),
  ($$UPDATE cfeed.change SET change_sequence_number = 5$$),
  ($$UPDATE cfeed.shard SET last_change_sequence_number = 5$$),
  ($$DELETE FROM cfeed.change$$)
) AS t(cmd);
RESET ROLE;
SELECT feed_id, shard, change_id, change_sequence_number
FROM cfeed.change ORDER BY change_id;

-- the owner sweeps
SELECT feed_id, shard, change_count, last_change_sequence_number FROM cfeed.sweep() ORDER BY 1, 2;

-- reader: reads, heads, cursors and waits, but cannot publish, insert or sweep
SET ROLE regress_cfeed_reader;
SELECT change_sequence_number, change_id - 1000000000000000 AS id FROM cfeed.read(1, 0);
SELECT cfeed.head(1, 0), cfeed.head(1, 1), cfeed.cursor_at(1, 0, now()),
       cfeed.wait(1, 0, 2000000000000000, 0), cfeed.channel(1, 0);
-- whether a cursor read a shard to its end (cfeed._consumed's probe), and
-- whether a shard has ended (cfeed.shard's, of a range shard): an answer
SELECT cfeed._read_to_end(1, 0, 0) AS read_to_end, cfeed._shard_ended(1, 0) AS shard_ended;
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$SELECT cfeed.publish(1, 0)$$),
  ($$SELECT cfeed.publish(1, 0, 5)$$),
  ($$INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (1, 0, 5)$$),
  ($$SELECT * FROM cfeed.sweep()$$),
  ($$CALL cfeed.sweep_loop(0, 0, 0, 0, NULL, NULL, NULL)$$),
  ($$UPDATE cfeed.shard SET longpoll = false$$)
) AS t(cmd);
RESET ROLE;

-- stranger: nothing but the name of a channel and a shard for a key
SET ROLE regress_cfeed_stranger;
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$SELECT cfeed.publish(1, 0)$$),
  ($$SELECT cfeed.publish(1, 0, 5)$$),
  ($$INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (1, 0, 5)$$),
  ($$SELECT * FROM cfeed.read(1, 0)$$),
  ($$SELECT cfeed.head(1, 0)$$),
  ($$SELECT cfeed.cursor_at(1, 0, now())$$),
  ($$SELECT cfeed.wait(1, 0, 0, 0)$$),
  ($$SELECT * FROM cfeed.sweep()$$),
  ($$CALL cfeed.sweep_loop(0, 0, 0, 0, NULL, NULL, NULL)$$),
  ($$SELECT cfeed.create_feed('theirs')$$),
  ($$SELECT count(*) FROM cfeed.shard$$),
  ($$SELECT count(*) FROM cfeed.stats$$),
  ($$SELECT count(*) FROM cfeed.sweepers$$),
  ($$SELECT cfeed.channel(1, 0)$$),
  ($$SELECT cfeed.shard_for(1, 'k')$$)
) AS t(cmd);
-- cfeed._consumed's probe and cfeed.shard's ended run below the read
-- policy: a stranger gets no answer
SELECT cfeed._read_to_end(1, 0, 0) AS read_to_end, cfeed._shard_ended(1, 0) AS shard_ended;
RESET ROLE;

-- a role granted EXECUTE on sweep and sweep_loop by the owner may sweep
SELECT cfeed.publish(1, 1, 1000000000000200) - 1000000000000000 AS id;
SET ROLE regress_cfeed_sweeper;
SELECT pg_temp.err($$SELECT * FROM cfeed.sweep()$$);
CALL cfeed.sweep_loop(0, 0, 0, 0, NULL, NULL, NULL);
RESET ROLE;
SELECT count(*) AS pending FROM cfeed.change WHERE change_sequence_number IS NULL;

-- an operator with the documented grants reads the monitoring views whole;
-- without the EXECUTE grants the helper functions refuse
CREATE ROLE regress_cfeed_operator;
GRANT SELECT ON cfeed.stats, cfeed.sweepers, cfeed.consumer_lag, cfeed.groups TO regress_cfeed_operator;
SELECT cfeed.grant_read_all('regress_cfeed_operator');
SET ROLE regress_cfeed_operator;
SELECT pg_temp.err($$SELECT * FROM cfeed.stats$$) AS stats_without_execute;
SELECT pg_temp.err($$SELECT * FROM cfeed.sweepers$$) AS sweepers_without_execute;
RESET ROLE;
GRANT EXECUTE ON FUNCTION cfeed._retention_held_by(int, int), cfeed._sweepers() TO regress_cfeed_operator;
SET ROLE regress_cfeed_operator;
SELECT feed_id, shard, pending, retention_held_by FROM cfeed.stats ORDER BY 1, 2;
SELECT count(*) AS sweepers FROM (SELECT * FROM cfeed.sweepers) s;
SELECT count(*) AS leases FROM (SELECT * FROM cfeed.consumer_lag) l;
SELECT count(*) AS groups FROM (SELECT * FROM cfeed.groups) g;
RESET ROLE;

-- nothing the refused roles tried changed the feed
SELECT feed_id, shard, change_id, change_sequence_number
FROM cfeed.change ORDER BY change_id;
SELECT feed_id, shard, last_change_sequence_number, longpoll FROM cfeed.shard ORDER BY 1, 2;

DROP EXTENSION cfeed;
DROP ROLE regress_cfeed_writer, regress_cfeed_reader, regress_cfeed_stranger, regress_cfeed_sweeper, regress_cfeed_operator;
