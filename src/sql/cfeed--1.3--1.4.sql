/* src/sql/cfeed--1.3--1.4.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION cfeed UPDATE TO '1.4'" to load this file. \quit

/*
 * ======================================================================
 * 1.4: the guarantees hold against what operators do to cfeed's tables
 * ======================================================================
 */

/*
 * A number is never issued twice, even when its change is deleted.
 *
 * A shard's head is the highest stamped number found in change_sequence_idx
 * (see cfeed.shard in the 1.0 script).  Up to 1.3, deleting the head row (a
 * DELETE by hand, a TRUNCATE) made the next sweep issue that number again to
 * another change, which a consumer whose cursor had passed it never saw.
 * From 1.4 the shard remembers the highest number whose change was deleted
 * while it was the shard's highest: the head is the greater of that and the
 * highest stamped row.  Retention never deletes the head row, so it never
 * writes here; a DELETE of the head, or TRUNCATE, does, once per statement
 * and shard.
 */
ALTER TABLE cfeed.shard_config ADD COLUMN deleted_head bigint;
COMMENT ON COLUMN cfeed.shard_config.deleted_head IS 'the highest number issued on the shard whose change has been deleted (DELETE of the head row, TRUNCATE); numbering goes on above it';

CREATE OR REPLACE VIEW cfeed.shard AS
	SELECT s.feed_id, s.shard, s.sweep_group, s.longpoll,
		   GREATEST(h.change_sequence_number, s.deleted_head, s.start_sequence_number)
			   AS last_change_sequence_number,
		   h.stamped_at AS last_sweep_time,
		   s.start_sequence_number
	FROM cfeed.shard_config s
	LEFT JOIN LATERAL (
		SELECT c.change_sequence_number, c.stamped_at
		FROM cfeed.change c
		WHERE c.feed_id OPERATOR(pg_catalog.=) s.feed_id
		  AND c.shard OPERATOR(pg_catalog.=) s.shard
		  AND c.change_sequence_number OPERATOR(pg_catalog.>) s.start_sequence_number
		ORDER BY c.change_sequence_number DESC
		LIMIT 1) h ON true;
COMMENT ON COLUMN cfeed.shard.last_change_sequence_number IS 'highest number issued on the shard: its highest stamped change, or a higher one whose change was deleted (its start value before the first stamp)';

/*
 * cfeed._change_deleted: after a DELETE on cfeed.change, for each shard
 * whose highest stamped row the statement deleted, remember that number.
 * A statement trigger with the deleted rows as a transition table: one
 * update per statement and shard, none for retention (it keeps the head
 * row).  Enabled always, so deletes applied by logical replication or made
 * with session_replication_role = replica count too.
 */
CREATE FUNCTION cfeed._change_deleted() RETURNS trigger
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	UPDATE cfeed.shard_config s
	SET deleted_head = GREATEST(s.deleted_head, d.top)
	FROM (SELECT o.feed_id, o.shard, max(o.change_sequence_number) AS top
		  FROM cfeed_deleted_changes o
		  WHERE o.change_sequence_number IS NOT NULL
		  GROUP BY o.feed_id, o.shard) d
	WHERE s.feed_id = d.feed_id AND s.shard = d.shard
	  AND d.top > GREATEST(s.start_sequence_number, s.deleted_head)
	  AND NOT EXISTS (SELECT FROM cfeed.change c
					  WHERE c.feed_id = d.feed_id AND c.shard = d.shard
						AND c.change_sequence_number > d.top);
	RETURN NULL;
END
$fn$;
COMMENT ON FUNCTION cfeed._change_deleted() IS 'internal: remembers the number of a deleted head row, so that it is never issued again';
REVOKE ALL ON FUNCTION cfeed._change_deleted() FROM PUBLIC;

CREATE TRIGGER change_deleted AFTER DELETE ON cfeed.change
	REFERENCING OLD TABLE AS cfeed_deleted_changes
	FOR EACH STATEMENT EXECUTE FUNCTION cfeed._change_deleted();
ALTER TABLE cfeed.change ENABLE ALWAYS TRIGGER change_deleted;

/*
 * cfeed._change_truncated: before TRUNCATE of cfeed.change, remember every
 * shard's head.  TRUNCATE has locked the table by then (no sweep runs), and
 * in READ COMMITTED this trigger's statement sees every stamp committed
 * before the lock; a transaction snapshot could be older, so TRUNCATE is
 * refused (25000) in REPEATABLE READ and SERIALIZABLE.
 */
CREATE FUNCTION cfeed._change_truncated() RETURNS trigger
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF current_setting('transaction_isolation') <> 'read committed' THEN
		RAISE EXCEPTION 'cfeed.change can only be truncated in a READ COMMITTED transaction'
			USING ERRCODE = '25000',
				  DETAIL = 'TRUNCATE records each shard''s head, so that no number is issued again; a transaction snapshot can miss the latest stamps.',
				  HINT = 'Run TRUNCATE in its own READ COMMITTED transaction.';
	END IF;
	UPDATE cfeed.shard_config s
	SET deleted_head = h.last_change_sequence_number
	FROM cfeed.shard h
	WHERE h.feed_id = s.feed_id AND h.shard = s.shard
	  AND h.last_change_sequence_number > GREATEST(s.start_sequence_number, s.deleted_head);
	RETURN NULL;
END
$fn$;
COMMENT ON FUNCTION cfeed._change_truncated() IS 'internal: remembers every shard''s head before TRUNCATE of cfeed.change, so that no number is issued again';
REVOKE ALL ON FUNCTION cfeed._change_truncated() FROM PUBLIC;

CREATE TRIGGER change_truncated BEFORE TRUNCATE ON cfeed.change
	FOR EACH STATEMENT EXECUTE FUNCTION cfeed._change_truncated();
ALTER TABLE cfeed.change ENABLE ALWAYS TRIGGER change_truncated;

/*
 * Moving a shard to another sweep group waits for the sweeps of both groups
 * and makes every sweeper look at all pending changes again (the guard
 * trigger, now also for UPDATE OF sweep_group: src/track_insert.c).  Up to
 * 1.3 the group the shard joined had already passed over its pending
 * changes, and left them unstamped.
 */
DROP TRIGGER shard_config_guard ON cfeed.shard_config;
CREATE TRIGGER shard_config_guard BEFORE INSERT OR DELETE OR UPDATE OF feed_id, shard, sweep_group
	ON cfeed.shard_config FOR EACH ROW EXECUTE FUNCTION cfeed._shard_config_guard();
ALTER TABLE cfeed.shard_config ENABLE ALWAYS TRIGGER shard_config_guard;

/*
 * Publications: a sweep updates its changes, and a publication that
 * replicates UPDATEs (FOR ALL TABLES, say) refuses updates of a table
 * without a replica identity, which stopped every sweep up to 1.3.  No
 * column set identifies a change (one change_id may be published several
 * times), so the identity is the whole row.  It costs nothing unless
 * wal_level is logical; then each stamp and each deleted change logs its
 * old row too.
 */
ALTER TABLE cfeed.change REPLICA IDENTITY FULL;

/*
 * ======================================================================
 * 1.4: per-feed read access
 * ======================================================================
 */
