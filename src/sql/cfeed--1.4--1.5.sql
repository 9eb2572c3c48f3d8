/* src/sql/cfeed--1.4--1.5.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION cfeed UPDATE TO '1.5'" to load this file. \quit

/*
 * ======================================================================
 * 1.5: replicas, failover and feeds across clusters (docs/replication.md)
 * ======================================================================
 */

/*
 * Logical replication's apply inserts rows with the publisher's writer_xid,
 * and fires only ALWAYS (and REPLICA) triggers.  The sweeper finds pending
 * changes by the xids of the transactions that inserted them (sweep.c's
 * watermark); a foreign writer_xid below it was never found, and the change
 * stayed pending.  The guard, which sets writer_xid to the inserting
 * transaction's for every row that comes with another one, now fires for
 * the apply too (and wakes the sweepers, or the readers of a shard whose
 * stamped rows arrive).
 */
ALTER TABLE cfeed.change ENABLE ALWAYS TRIGGER change_guard;

/*
 * Feed epochs: the first sweep that stamps on a new timeline (a promoted
 * standby, a point-in-time recovery), after a server start (a restart, or a
 * base backup or snapshot started without recovery.signal, which recovers on
 * the old timeline and may lack the last stamps), in another cluster or
 * database (a restored dump) records an epoch and every shard's head then.  Stamps above
 * such a head may have been lost with the old timeline and their numbers
 * issued again; cfeed.resume_cursor() tells a reader where to go on safely.
 * An epoch's number is at least the time it began in microseconds since
 * 1970 (and above every earlier one), so that the first epoch of a restored
 * dump, which does not carry these tables, is above the epochs of the
 * cluster it came from.
 */
CREATE TABLE cfeed.epoch (
	epoch bigint PRIMARY KEY,
	system_identifier bigint NOT NULL,
	timeline int NOT NULL,
	server_start timestamptz NOT NULL,
	database oid NOT NULL,
	started_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	CONSTRAINT epoch_timeline_key UNIQUE (system_identifier, timeline, server_start, database)
);
COMMENT ON TABLE cfeed.epoch IS 'one row per (cluster, timeline, server start, database) the feeds were stamped on: a new one after a promotion, a point-in-time recovery, a restart, a copy started from a backup or a restore';

CREATE TABLE cfeed.epoch_head (
	epoch bigint NOT NULL REFERENCES cfeed.epoch ON DELETE CASCADE,
	feed_id int NOT NULL,
	shard int NOT NULL,
	head bigint NOT NULL,
	PRIMARY KEY (epoch, feed_id, shard)
);
COMMENT ON TABLE cfeed.epoch_head IS 'each shard''s head when its epoch began: stamps above it may have been lost with the epoch before';


CREATE FUNCTION cfeed.epoch() RETURNS bigint
	LANGUAGE c STABLE AS 'MODULE_PATHNAME', 'cfeed_epoch';
COMMENT ON FUNCTION cfeed.epoch() IS 'the current feed epoch of this database; save it with a cursor kept outside it';

CREATE FUNCTION cfeed.resume_cursor(feed_id int, shard int, cursor bigint, epoch bigint) RETURNS bigint
	LANGUAGE c STABLE AS 'MODULE_PATHNAME', 'cfeed_resume_cursor';
COMMENT ON FUNCTION cfeed.resume_cursor(int, int, bigint, bigint) IS 'where a cursor saved under an epoch may go on reading: itself, or the head of a shard when a later epoch (any, for an epoch this database does not know) began below it (a failover lost stamps)';
