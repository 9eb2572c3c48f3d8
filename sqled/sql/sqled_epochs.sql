-- Feed epochs in the SQL edition (docs/sql-edition.md, docs/replication.md):
-- the first sweep that stamps on a (cluster, timeline, server start,
-- database) records an epoch and every shard's head before its stamps;
-- cfeed.epoch() and cfeed.resume_cursor() as in the C edition.  Numbers
-- relative to the start value.
\i test/regress_setup.sql
SELECT (date_part('epoch', clock_timestamp()) * 1000000)::bigint AS before_us \gset

-- no epoch before the first sweep that stamps: idle sweeps write nothing
SELECT cfeed.epoch();
SELECT cfeed.create_feed('e1', 2), cfeed.create_feed('e2');
SELECT count(*) FROM cfeed.sweep();
SELECT cfeed.epoch(), (SELECT count(*) FROM cfeed.epoch) AS epochs;

-- the first stamps: one epoch, keyed as the C edition keys it, numbered at
-- least the time it began in microseconds; every shard's head from before
-- the stamps
SELECT count(cfeed.publish(1, 0)) FROM generate_series(1, 3);
SELECT count(cfeed.publish(2, 0));
SELECT feed_id, shard, change_count FROM cfeed.sweep() ORDER BY 1, 2;
SELECT e.epoch = cfeed.epoch() AS current, e.epoch >= :before_us AS from_the_clock,
       e.system_identifier = (SELECT system_identifier FROM pg_control_system()) AS system_identifier,
       e.timeline, e.server_start = pg_postmaster_start_time() AS server_start,
       e.database = (SELECT oid FROM pg_database WHERE datname = current_database()) AS database
FROM cfeed.epoch e;
SELECT feed_id, shard, head - 2000000000000000 AS head FROM cfeed.epoch_head ORDER BY 1, 2;
-- later stamps on the same server, in this session and another: no new epoch
SELECT count(cfeed.publish(1, 1));
SELECT count(*) FROM cfeed.sweep();
\c
SELECT count(cfeed.publish(1, 1));
SELECT count(*) FROM cfeed.sweep();
SELECT count(*) AS epochs FROM cfeed.epoch;
-- an epoch begun by a sweep that rolls back is not recorded (a new
-- session: this one has seen its epoch)
SELECT cfeed.epoch() AS first_epoch \gset
\c
BEGIN;
DELETE FROM cfeed.epoch;
SELECT count(cfeed.publish(1, 0));
SELECT count(*) FROM cfeed.sweep();
SELECT count(*) AS epochs, min(epoch) > :first_epoch AS newer FROM cfeed.epoch;
ROLLBACK;
SELECT count(*) AS epochs, cfeed.epoch() = :first_epoch AS same FROM cfeed.epoch;

-- the first epoch as if an earlier server start (or timeline, or cluster)
-- had recorded it: the next sweep that stamps, in a new session, begins
-- another, numbered above it, with the heads before its stamps; an idle
-- sweep does not
UPDATE cfeed.epoch SET server_start = server_start - interval '1 day';
\c
SELECT count(*) FROM cfeed.sweep();
SELECT count(*) AS epochs FROM cfeed.epoch;
SELECT count(cfeed.publish(1, 0)) FROM generate_series(1, 2);
SELECT feed_id, shard, change_count FROM cfeed.sweep() ORDER BY 1, 2;
SELECT count(*) AS epochs, max(epoch) > :first_epoch AS newer, cfeed.epoch() = max(epoch) AS current
FROM cfeed.epoch;
SELECT feed_id, shard, head - 2000000000000000 AS head FROM cfeed.epoch_head
WHERE epoch = cfeed.epoch() ORDER BY 1, 2;
SELECT cfeed.epoch() AS second_epoch \gset
CREATE FUNCTION pg_temp.err(cmd text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE cmd;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
GRANT EXECUTE ON FUNCTION pg_temp.err(text) TO PUBLIC;

-- resume_cursor: a cursor saved under the current epoch stays; one saved
-- under the first stays at or below the second's head (3) and goes back to
-- it above; under an epoch this database does not know, every epoch counts
-- (the lowest head, 0); a null cursor stays null
SELECT c AS cursor,
       cfeed.resume_cursor(1, 0, 2000000000000000 + c, :second_epoch) - 2000000000000000 AS under_second,
       cfeed.resume_cursor(1, 0, 2000000000000000 + c, :first_epoch) - 2000000000000000 AS under_first,
       cfeed.resume_cursor(1, 0, 2000000000000000 + c, 0) - 2000000000000000 AS under_unknown
FROM (VALUES (0), (2), (3), (5)) AS t(c) ORDER BY c;
SELECT cfeed.resume_cursor(1, 0, NULL, :first_epoch) IS NULL AS null_cursor;
-- a shard without heads in later epochs keeps its cursor
SELECT cfeed.create_feed('e3');
SELECT cfeed.resume_cursor(3, 0, 2000000000000005, :first_epoch) - 2000000000000000 AS new_shard;
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$SELECT cfeed.resume_cursor(NULL, 0, 1, 0)$$),
  ($$SELECT cfeed.resume_cursor(1, NULL, 1, 0)$$),
  ($$SELECT cfeed.resume_cursor(1, 0, 1, NULL)$$),
  ($$SELECT cfeed.resume_cursor(99, 0, 1, 0)$$),
  ($$SELECT cfeed.resume_cursor(1, 7, 1, 0)$$)
) AS t(cmd);

-- privileges: a reader of feed 1 (SELECT on cfeed.shard) resumes on feed 1
-- and learns nothing of feed 2's epochs; a role without SELECT on
-- cfeed.shard may not; any role may ask for the epoch; none but the owner
-- records or changes epochs
CREATE ROLE sqled_ep_reader;
CREATE ROLE sqled_ep_nobody;
GRANT SELECT ON cfeed.shard TO sqled_ep_reader;
SELECT cfeed.grant_read(1, 'sqled_ep_reader'), cfeed.grant_read(2, 'sqled_ep_nobody');
SET ROLE sqled_ep_reader;
SELECT cfeed.epoch() = :second_epoch AS epoch;
SELECT cfeed.resume_cursor(1, 0, 2000000000000005, :first_epoch) - 2000000000000000 AS resumed;
SELECT pg_temp.err($$SELECT cfeed.resume_cursor(2, 0, 2000000000000005, 0)$$);
SELECT DISTINCT feed_id FROM cfeed._sqled_epoch_heads ORDER BY 1;
SET ROLE sqled_ep_nobody;
SELECT cfeed.epoch() = :second_epoch AS epoch;
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$SELECT cfeed.resume_cursor(2, 0, 2000000000000005, 0)$$),
  ($$SELECT count(*) FROM cfeed.epoch$$),
  ($$SELECT count(*) FROM cfeed.epoch_head$$),
  ($$DELETE FROM cfeed.epoch$$),
  ($$SELECT cfeed._sqled_epoch_begin('{1}', '{0}', '{1}')$$)
) AS t(cmd);
RESET ROLE;
DROP OWNED BY sqled_ep_reader, sqled_ep_nobody;
DROP ROLE sqled_ep_reader, sqled_ep_nobody;

-- where a service refuses pg_control_system() and the WAL functions to the
-- owner of cfeed's tables, its epochs are recorded with 0 for the system
-- identifier and the timeline (an owner that is no superuser, here)
BEGIN;
REVOKE EXECUTE ON FUNCTION pg_control_system(), pg_walfile_name(pg_lsn) FROM PUBLIC;
CREATE ROLE sqled_ep_owner;
GRANT EXECUTE ON FUNCTION cfeed._sqled_epoch_begin(int[], int[], int[]) TO sqled_ep_owner;
GRANT SELECT, INSERT ON cfeed.epoch, cfeed.epoch_head TO sqled_ep_owner;
GRANT SELECT ON cfeed.shard TO sqled_ep_owner;
SET ROLE sqled_ep_owner;
SELECT pg_temp.err($$SELECT system_identifier FROM pg_control_system()$$);
SELECT cfeed._sqled_epoch_begin('{}', '{}', '{}');
RESET ROLE;
SELECT count(*) AS epochs, (array_agg(system_identifier ORDER BY epoch DESC))[1] AS system_identifier,
       (array_agg(timeline ORDER BY epoch DESC))[1] AS timeline
FROM cfeed.epoch;
ROLLBACK;
