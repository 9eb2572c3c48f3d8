/*-------------------------------------------------------------------------
 *
 * epoch.c
 *	  Feed epochs: how a consumer recognises a failover (or a restore) that
 *	  lost stamps, and where it may go on reading (docs/replication.md).
 *
 *	  The first sweep that stamps on a new server timeline (after a
 *	  promotion or a point-in-time recovery), after a server start (a
 *	  restart, or a copy that recovered on the old timeline) or in another
 *	  cluster or database (a restored dump) records, before its stamps, a
 *	  new row in cfeed.epoch and every shard's head in cfeed.epoch_head
 *	  (idle sweeps write nothing).  Epoch numbers grow with time, across
 *	  clusters too (the tables are not dumped).  Those heads are the prefix
 *	  the new timeline shares with the old one: a stamp above one of them
 *	  may have been lost, and its number issued again.
 *	  cfeed.resume_cursor() turns a cursor saved under an older epoch into a
 *	  safe one: unchanged when it is at or below every later epoch's head
 *	  (always so after a synchronous failover), else that head.
 *
 *	  State: the epoch this backend has seen (epoch_seen_*) and two kept
 *	  plans, listed in cache.h.
 *
 *	  Locking: the unique key of cfeed.epoch serializes the sweeps of
 *	  several groups that begin an epoch at once.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"

#include "cfeed.h"

/*
 * The (cluster, timeline, server start, epoch table) whose epoch this backend
 * has seen.
 */
static uint64 epoch_seen_system = 0;
static TimeLineID epoch_seen_timeline = 0;
static TimestampTz epoch_seen_start = 0;
static Oid	epoch_seen_relid = InvalidOid;

/* Saved plans (cache.h): the epoch lookup, and the new epoch's insert. */
static SPIPlanPtr epoch_find_plan = NULL;
static SPIPlanPtr epoch_begin_plan = NULL;

PG_FUNCTION_INFO_V1(cfeed_epoch);
PG_FUNCTION_INFO_V1(cfeed_resume_cursor);

/*
 * cfeed_epoch_begin
 *		Before a sweep stamps: when this (cluster, timeline, server start,
 *		database) has no epoch yet, record one with every shard's head.  The
 *		server start makes a copy that recovered on the same timeline (a
 *		base backup or a snapshot started without recovery.signal, which
 *		may lack the last stamps) begin an epoch; a restart that lost
 *		nothing records heads at or above every stamp, which moves no
 *		cursor.  Concurrent sweeps of
 *		other groups wait for the first one's row (the unique key) and then
 *		find it.  A database whose cfeed schema has no cfeed.epoch (not yet
 *		updated) records none.
 *		Runs as the extension's owner (the sweep's user).
 */
void
cfeed_epoch_begin(void)
{
	uint64		system = GetSystemIdentifier();
	TimeLineID	timeline = GetWALInsertionTimeLine();
	Oid			relid = cfeed_schema_relid(CFEED_SCHEMA_EPOCHS);
	Oid			types[4] = {INT8OID, INT4OID, TIMESTAMPTZOID, OIDOID};
	Datum		values[4];
	int			spi_level;

	if (!OidIsValid(relid) ||
		(system == epoch_seen_system && timeline == epoch_seen_timeline &&
		 PgStartTime == epoch_seen_start && relid == epoch_seen_relid))
		return;

	values[0] = Int64GetDatum((int64) system);
	values[1] = Int32GetDatum((int32) timeline);
	values[2] = TimestampTzGetDatum(PgStartTime);
	values[3] = ObjectIdGetDatum(MyDatabaseId);
	spi_level = cfeed_spi_connect();
	(void) cfeed_spi_plan(&epoch_find_plan,
						  "SELECT 1 FROM cfeed.epoch WHERE system_identifier = $1 "
						  "AND timeline = $2 AND server_start = $3 AND database = $4", 4, types);
	(void) cfeed_spi_run(&epoch_find_plan, values, SPI_OK_SELECT, "the epoch lookup");
	if (SPI_processed > 0)
	{
		/* committed before this sweep began: remember it */
		epoch_seen_system = system;
		epoch_seen_timeline = timeline;
		epoch_seen_start = PgStartTime;
		epoch_seen_relid = relid;
	}
	else
	{
		(void) cfeed_spi_plan(&epoch_begin_plan,
							  "WITH e AS (INSERT INTO cfeed.epoch (epoch, system_identifier, timeline, server_start, database) "
							  "SELECT GREATEST(pg_catalog.max(epoch) + 1, "
							  "(pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) * 1000000)::bigint), "
							  "$1, $2, $3, $4 FROM cfeed.epoch "
							  "ON CONFLICT DO NOTHING RETURNING epoch) "
							  "INSERT INTO cfeed.epoch_head (epoch, feed_id, shard, head) "
							  "SELECT e.epoch, s.feed_id, s.shard, s.last_change_sequence_number "
							  "FROM e, cfeed.shard s", 4, types);
		(void) cfeed_spi_run(&epoch_begin_plan, values, SPI_OK_INSERT, "recording a new epoch");
	}
	cfeed_spi_finish(spi_level);
}

/*
 * epoch_query
 *		Run one query about epochs as the extension's owner (the epoch tables
 *		are the owner's; the callers have checked the caller's read access)
 *		and return its single bigint result, or null_value when NULL.
 */
static int64
epoch_query(const char *sql, int nargs, Oid *types, Datum *values, int64 null_value)
{
	CfeedSavedUser saved_user;
	int			spi_level;
	bool		isnull;
	int64		result = null_value;

	saved_user = cfeed_become_owner();
	spi_level = cfeed_spi_connect();
	if (SPI_execute_with_args(sql, nargs, types, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "cfeed: epoch query failed");
	if (SPI_processed > 0)
	{
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		if (!isnull)
			result = DatumGetInt64(d);
	}
	cfeed_spi_finish(spi_level);
	cfeed_restore_user(saved_user);
	return result;
}

/*
 * cfeed_epoch
 *		SQL: cfeed.epoch() returns bigint: the latest feed epoch of
 *		this database (0 before its first sweep).  Save it with a cursor.
 */
Datum
cfeed_epoch(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(epoch_query("SELECT pg_catalog.max(epoch) FROM cfeed.epoch", 0, NULL, NULL, 0));
}

/*
 * cfeed_resume_cursor
 *		SQL: cfeed.resume_cursor(feed_id, shard, cursor, epoch) returns
 *		bigint: where a reader whose cursor was saved under epoch may go on
 *		reading: the cursor, or, when a later epoch began below it (a
 *		failover that lost stamps at or below the cursor), the lowest such
 *		epoch's head.  An epoch this database does not know (0, a lost
 *		epoch row, a sibling cluster's or a copy's epoch) orders nowhere
 *		(epoch numbers from other clusters come from other clocks): every
 *		epoch counts as later.  A NULL cursor (from the beginning) stays
 *		NULL.
 */
Datum
cfeed_resume_cursor(PG_FUNCTION_ARGS)
{
	CfeedShard	sh;
	Oid			types[3] = {INT4OID, INT4OID, INT8OID};
	Datum		values[3];
	int64		fork;

	cfeed_require_arg(fcinfo, 0, "feed_id");
	cfeed_require_arg(fcinfo, 1, "shard");
	cfeed_require_arg(fcinfo, 3, "epoch");
	cfeed_check_select("shard");
	cfeed_check_read(PG_GETARG_INT32(0));
	cfeed_shard_get(PG_GETARG_INT32(0), PG_GETARG_INT32(1), false, &sh);
	if (PG_ARGISNULL(2))
		PG_RETURN_NULL();

	values[0] = Int32GetDatum(sh.feed_id);
	values[1] = Int32GetDatum(sh.shard);
	values[2] = PG_GETARG_DATUM(3);
	fork = epoch_query("SELECT pg_catalog.min(head) FROM cfeed.epoch_head "
					   "WHERE feed_id = $1 AND shard = $2 AND (epoch > $3 OR NOT EXISTS "
					   "(SELECT FROM cfeed.epoch e WHERE e.epoch = $3))",
					   3, types, values, PG_INT64_MAX);
	PG_RETURN_INT64(Min(PG_GETARG_INT64(2), fork));
}
