/* src/sql/cfeed--1.5--1.6.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION cfeed UPDATE TO '1.6'" to load this file. \quit

/*
 * 1.6: cfeed.change has no foreign key; change_guard checks the shard.
 *
 * The foreign key change_shard_fkey checked every SQL INSERT into
 * cfeed.change (the seed's pattern: the application's row, then
 * INSERT INTO cfeed.change in the same transaction) with an SPI query that
 * locked the shard's row of cfeed.shard_config FOR KEY SHARE: a WAL record
 * per change and, with concurrent writers of a shard, a new multixact every
 * couple of changes, on a row every writer of the shard locks.  Since 1.2
 * cfeed.publish and tracked writes check the shard without it: they hold
 * their feed's shards lock in share mode, and shard_config_guard makes a
 * shard that goes away take it in exclusive mode (src/shards.c).  Now the
 * SQL INSERTs do the same:
 *
 *  - change_guard fires for every row (its WHEN clause goes, which cost a
 *    pg_current_xact_id() call per row and a parse of the clause at every
 *    executor start) and checks the shard as the direct writers do: 23503
 *    at the INSERT for a missing feed or shard, as the foreign key did.
 *    Like the foreign key's check it does not check in replica mode
 *    (logical replication's apply); nor does it for rows that carry
 *    another transaction's writer_xid, or a written_at earlier than the
 *    inserting transaction's start, when the inserting user has the
 *    privileges of the extension's owner: a restore, whose pg_dump orders
 *    extension tables by their foreign keys only and may now copy
 *    cfeed.change before cfeed.shard_config.
 *  - change_shard_guard checks the new shard of an UPDATE that moves a
 *    change to another feed or shard (23503), as the foreign key's check of
 *    an UPDATE did, and like it fires in origin mode only.
 *  - shard_config_guard, after it has waited for the feed's writers,
 *    refuses (23503) to delete a shard, or change its key, while changes of
 *    it exist (the foreign key's NO ACTION), DELETE FROM cfeed.feed's
 *    cascade included; not in replica mode, where the foreign key's check
 *    did not fire (a subscriber applies its publisher's DELETE).
 *  - shard_config_truncate refuses (23503) a TRUNCATE of cfeed.shard_config
 *    that leaves changes in cfeed.change, as the foreign key did.
 *
 * Both sides look at the catalogs with SnapshotSelf, which sees the rows
 * written by the current command too: a statement that takes a shard away
 * and writes a change to it, as with a data-modifying WITH, fails whichever
 * part runs first, as the foreign key's checks at the statement's end did.
 *
 * The library's change_guard checks the shard only when the trigger has no
 * WHEN clause: a database still at 1.5 or earlier keeps its foreign key
 * until ALTER EXTENSION cfeed UPDATE.
 */
ALTER TABLE cfeed.change DROP CONSTRAINT change_shard_fkey;

CREATE OR REPLACE TRIGGER change_guard BEFORE INSERT ON cfeed.change FOR EACH ROW
	EXECUTE FUNCTION cfeed._change_guard();
ALTER TABLE cfeed.change ENABLE ALWAYS TRIGGER change_guard;
COMMENT ON FUNCTION cfeed._change_guard() IS 'internal: checks an inserted change''s shard (the foreign key of cfeed.change) and refuses writer-chosen sequence numbers outside the migration range';

CREATE FUNCTION cfeed._change_shard_guard() RETURNS trigger
	LANGUAGE c AS 'MODULE_PATHNAME', 'cfeed_change_shard_guard';
COMMENT ON FUNCTION cfeed._change_shard_guard() IS 'internal: checks the shard a change is moved to (the foreign key of cfeed.change)';
REVOKE ALL ON FUNCTION cfeed._change_shard_guard() FROM PUBLIC;

CREATE TRIGGER change_shard_guard BEFORE UPDATE OF feed_id, shard ON cfeed.change
	FOR EACH ROW
	WHEN (NEW.feed_id IS DISTINCT FROM OLD.feed_id OR NEW.shard IS DISTINCT FROM OLD.shard)
	EXECUTE FUNCTION cfeed._change_shard_guard();

COMMENT ON FUNCTION cfeed._shard_config_guard() IS 'internal: a shard that goes away waits for the writes to its feed and is refused while it has changes; shard counts cached by backends are invalidated';

CREATE FUNCTION cfeed._shard_config_truncate() RETURNS trigger
	LANGUAGE c AS 'MODULE_PATHNAME', 'cfeed_shard_config_truncate';
COMMENT ON FUNCTION cfeed._shard_config_truncate() IS 'internal: refuses a TRUNCATE of cfeed.shard_config that leaves changes in cfeed.change';
REVOKE ALL ON FUNCTION cfeed._shard_config_truncate() FROM PUBLIC;

CREATE TRIGGER shard_config_truncate AFTER TRUNCATE ON cfeed.shard_config
	FOR EACH STATEMENT EXECUTE FUNCTION cfeed._shard_config_truncate();
ALTER TABLE cfeed.shard_config ENABLE ALWAYS TRIGGER shard_config_truncate;
