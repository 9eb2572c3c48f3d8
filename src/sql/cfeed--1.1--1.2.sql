/* src/sql/cfeed--1.1--1.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION cfeed UPDATE TO '1.2'" to load this file. \quit

/*
 * 1.2: a guard trigger on cfeed.shard_config, so that tracked writes need
 * not lock a shard's row.
 *
 * A change of a tracked table is written directly (heap and indexes, see
 * src/track_insert.c).  Up to 1.1 it took the foreign key's lock, the shard
 * row FOR KEY SHARE, found with an index scan of the feed's shards at every
 * statement: under concurrent writers every shard row carries a multixact of
 * its lockers, and the lock is a WAL record.  From 1.2 a direct writer takes
 * a heavyweight lock on the feed's set of shards in share mode (one per feed
 * and transaction, however many shards a bulk write touches) and keeps the
 * feed's shard count in memory; this trigger makes both sound.  Before a
 * shard row goes away (DELETE, or an UPDATE of its key) it takes that lock in
 * exclusive mode, so it waits for the transactions writing changes to the
 * feed, as the foreign key's lock made it wait for those writing to the
 * shard; and every INSERT, DELETE or key UPDATE sends an invalidation of
 * cfeed.shard_config, which makes every backend read the shard counts again.
 * Enabled always: shards deleted with session_replication_role = replica
 * must wait for writers too.
 *
 * The foreign key stays: SQL inserts into cfeed.change (publish(), and the
 * tracked writes that take the SQL path) keep checking it.  A library of 1.2
 * running a database still at 1.0 or 1.1 sees no guard and writes tracked
 * changes through SQL until ALTER EXTENSION cfeed UPDATE.
 */
CREATE FUNCTION cfeed._shard_config_guard() RETURNS trigger
	LANGUAGE c AS 'MODULE_PATHNAME', 'cfeed_shard_config_guard';
COMMENT ON FUNCTION cfeed._shard_config_guard() IS 'internal: a shard that goes away waits for the tracked writes to it; shard counts cached by backends are invalidated';
REVOKE ALL ON FUNCTION cfeed._shard_config_guard() FROM PUBLIC;

CREATE TRIGGER shard_config_guard BEFORE INSERT OR DELETE OR UPDATE OF feed_id, shard
	ON cfeed.shard_config FOR EACH ROW EXECUTE FUNCTION cfeed._shard_config_guard();
ALTER TABLE cfeed.shard_config ENABLE ALWAYS TRIGGER shard_config_guard;
