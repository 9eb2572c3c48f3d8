-- learn: what a role can learn about feeds it was not granted, as
-- docs/security.md ("What each role can learn") states it, checked.
\i test/regress_setup.sql
GRANT EXECUTE ON FUNCTION pg_temp.err(text) TO PUBLIC;
-- explain_lines(sql): the lines of EXPLAIN ANALYZE of sql, as the caller
CREATE FUNCTION pg_temp.explain_lines(cmd text) RETURNS SETOF text LANGUAGE plpgsql AS $$
BEGIN
	RETURN QUERY EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || cmd;
END $$;
GRANT EXECUTE ON FUNCTION pg_temp.explain_lines(text) TO PUBLIC;

SELECT cfeed.create_feed('lr_open', 1), cfeed.create_feed('lr_secret', 1);
INSERT INTO cfeed.change (feed_id, shard, change_id)
SELECT 2, 0, g FROM generate_series(1, 25) g;
INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (1, 0, 100);
SELECT count(*) AS stamped FROM cfeed.sweep();

-- a table-level reader of feed 1; a function-only reader (read grant, no
-- table privilege); a role with LOGIN only
CREATE ROLE regress_lr_table_reader;
GRANT SELECT ON cfeed.change, cfeed.shard, cfeed.lease TO regress_lr_table_reader;
SELECT count(*) AS leases_of_feed_2 FROM cfeed.acquire('lr_g', 2, 'lr_owner');
SELECT cfeed.grant_read(1, 'regress_lr_table_reader');
CREATE ROLE regress_lr_nobody LOGIN;

-- the functions: 42501 for feed 2, the same words whether it exists or not
SET ROLE regress_lr_table_reader;
SELECT pg_temp.err($$SELECT * FROM cfeed.read(2, 0)$$) AS existing,
       pg_temp.err($$SELECT * FROM cfeed.read(3, 0)$$) AS missing,
       pg_temp.err($$SELECT cfeed.head(2, 0)$$) AS head;
-- plain SQL shows no row of feed 2 ...
SELECT feed_id, count(*) FROM cfeed.change GROUP BY 1 ORDER BY 1;
SELECT feed_id, shard FROM cfeed.shard ORDER BY 1, 2;
-- ... nor does EXPLAIN ANALYZE: the read policy's check gives the index
-- scan the condition feed_id = ANY (the reader's feeds), so no row of
-- feed 2 is fetched for the policy to remove, and the plan counts none
-- (1.8 counted them, "Rows Removed by Filter": how many changes of feed 2
-- lay in a range, and so, by halving ranges, its head).  The same for the
-- view cfeed.shard, whose count told a feed's shards, and cfeed.lease.
SELECT q, count(*) FILTER (WHERE l ~ 'Rows Removed') AS removed_lines,
       max(substring(l FROM 'actual rows=(\d+)')::int) AS most_rows,
       bool_or(l ~ 'Index Cond: \(\(feed_id = ANY \(cfeed._readable_feeds\(\)\)\)') AS feeds_in_index
FROM (VALUES ('change', $$SELECT 1 FROM cfeed.change WHERE feed_id = 2 AND shard = 0
                          AND change_sequence_number > 2000000000000000$$),
             ('change, missing feed', $$SELECT 1 FROM cfeed.change WHERE feed_id = 3 AND shard = 0
                          AND change_sequence_number > 2000000000000000$$),
             ('shard', $$SELECT 1 FROM cfeed.shard WHERE feed_id = 2$$),
             ('shard, missing feed', $$SELECT 1 FROM cfeed.shard WHERE feed_id = 3$$),
             ('shard of the reader''s feed', $$SELECT 1 FROM cfeed.shard WHERE feed_id = 1$$),
             ('lease', $$SELECT 1 FROM cfeed.lease WHERE group_name = 'lr_g' AND feed_id = 2$$)) v(q, cmd)
CROSS JOIN LATERAL pg_temp.explain_lines(cmd) l
GROUP BY q ORDER BY q;
RESET ROLE;
-- a plan kept while its role read every feed (no condition then) is made
-- again once it no longer does: it depends on cfeed.read_grant
SELECT cfeed.grant_read_all('regress_lr_table_reader');
SET ROLE regress_lr_table_reader;
SET plan_cache_mode = force_generic_plan;
PREPARE lr_kept(int) AS SELECT count(*) FROM cfeed.change
	WHERE feed_id = $1 AND shard = 0 AND change_sequence_number > 2000000000000000;
EXECUTE lr_kept(2);
RESET ROLE;
SELECT cfeed.revoke_read_all('regress_lr_table_reader');
SET ROLE regress_lr_table_reader;
EXECUTE lr_kept(2);
SELECT count(*) FILTER (WHERE l ~ 'Rows Removed') AS removed_lines,
       bool_or(l ~ 'feed_id = ANY \(cfeed._readable_feeds\(\)\)') AS feeds_in_index
FROM pg_temp.explain_lines('EXECUTE lr_kept(2)') l;
DEALLOCATE lr_kept;
RESET plan_cache_mode;
RESET ROLE;

-- a role with LOGIN only: no table, view or function of a feed
SET ROLE regress_lr_nobody;
SELECT pg_temp.err($$EXPLAIN SELECT 1 FROM cfeed.change WHERE feed_id = 2$$) AS explain_change,
       pg_temp.err($$SELECT * FROM cfeed.stats$$) AS stats,
       pg_temp.err($$SELECT cfeed.head(2, 0)$$) AS head,
       pg_temp.err($$SELECT cfeed.shard_for(2, 'k')$$) AS shard_for;
-- nor whether a feed exists, or its shards: shard_for and channel raise the
-- same 42501 for a feed that exists and one that does not (1.8 computed the
-- shard of an existing feed and told a missing one by 42704)
SELECT pg_temp.err($$SELECT cfeed.shard_for(3, 'k')$$) AS shard_for_missing,
       pg_temp.err($$SELECT cfeed.channel(2, 0)$$) AS channel,
       pg_temp.err($$SELECT cfeed.channel(3, 0)$$) AS channel_missing;
-- nor by tracking a table of its own (a temporary one): track() refuses a
-- feed it may not write with the same words whether the feed exists or not
-- (up to 1.8 it tracked the table into an existing feed, and told a missing
-- one by 42704)
CREATE TEMP TABLE lr_own (id int PRIMARY KEY);
SELECT pg_temp.err($$SELECT cfeed.track('lr_own', 2)$$) AS track_existing,
       pg_temp.err($$SELECT cfeed.track('lr_own', 3)$$) AS track_missing;
SELECT count(*) AS tracking_triggers FROM pg_trigger WHERE tgrelid = 'lr_own'::regclass;
DROP TABLE lr_own;
-- nor by firing cfeed's guards on a table of its own shaped like theirs:
-- PUBLIC may not use them in a trigger, and they run only on cfeed's
-- tables (up to 1.8 _change_guard checked the feed and shard of the row
-- for it, 23503 for a missing one, and took the feed's shards lock, which
-- held up reshard and set_storage)
CREATE TEMP TABLE lr_rows (feed_id int NOT NULL, shard int NOT NULL, change_id bigint NOT NULL,
	change_sequence_number bigint, stamped_at timestamptz, written_at timestamptz NOT NULL DEFAULT now(),
	writer_xid xid8 NOT NULL DEFAULT '1', tbl int, op text, "row" jsonb);
SELECT p.proname,
       pg_temp.err(format($$CREATE TRIGGER t BEFORE INSERT ON lr_rows FOR EACH ROW EXECUTE FUNCTION cfeed.%I();
           INSERT INTO lr_rows (feed_id, shard, change_id) VALUES (2, 0, 1)$$, p.proname)) AS existing,
       pg_temp.err(format($$CREATE TRIGGER t BEFORE INSERT ON lr_rows FOR EACH ROW EXECUTE FUNCTION cfeed.%I();
           INSERT INTO lr_rows (feed_id, shard, change_id) VALUES (3, 0, 1)$$, p.proname)) AS missing
FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
WHERE p.pronamespace = 'cfeed'::regnamespace AND p.prorettype = 'trigger'::regtype AND l.lanname = 'c'
  AND p.proname NOT IN ('_track_row', '_track_change_id', '_track_truncate', '_read_grant_changed')
ORDER BY 1;
SELECT count(*) AS cfeed_locks FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 25448;
RESET ROLE;
-- a role that may execute them (here the superuser) cannot fire them on
-- another table either: nothing of the row is looked at
SELECT p.proname,
       pg_temp.err(format($$CREATE TRIGGER t BEFORE INSERT ON lr_rows FOR EACH ROW EXECUTE FUNCTION cfeed.%I();
           INSERT INTO lr_rows (feed_id, shard, change_id) VALUES (3, 0, 1)$$, p.proname)) AS fired
FROM pg_proc p
WHERE p.oid IN ('cfeed._change_guard'::regproc, 'cfeed._change_stamp_guard'::regproc,
                'cfeed._shard_config_guard'::regproc, 'cfeed._stamp_replicated'::regproc)
ORDER BY 1;
DROP TABLE lr_rows;
-- a reader of the feed may: the shard of a key and the channel of a shard
SET ROLE regress_lr_table_reader;
SELECT cfeed.shard_for(1, 'k') AS shard_for_readable, cfeed.channel(1, 0) AS channel_readable,
       pg_temp.err($$SELECT cfeed.channel(1, 5)$$) AS channel_missing_shard;
RESET ROLE;

-- pg_locks, readable by everyone: a writing transaction holds its feed's
-- shards lock, whose tag is the feed id (advisory, objsubid 25448)
BEGIN;
SELECT cfeed.publish(2, 0) > 0 AS written;
SET LOCAL ROLE regress_lr_nobody;
SELECT locktype, classid AS feed_id, objsubid, mode, pid = pg_backend_pid() AS writer_pid
FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 25448;
ROLLBACK;

DROP OWNED BY regress_lr_table_reader, regress_lr_nobody;
DROP ROLE regress_lr_table_reader, regress_lr_nobody;
