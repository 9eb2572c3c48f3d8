/*-------------------------------------------------------------------------
 *
 * reshard.c
 *	  cfeed.reshard: a feed's open shards are closed and their children
 *	  created, in one transaction, once every writer that placed changes
 *	  by the layout before has committed.
 *
 *	  A feed's layout is its shards 0..n-1, the highest m of them open
 *	  (f .. n-1, f = n - m); keys go to f + hash mod m (shards.c).
 *	  Resharding into k children (k a multiple of m, at least 2m) closes
 *	  f .. n-1 and creates n .. n+k-1, child n+i continuing parent
 *	  f + (i mod m): every key of a child came from its parent, since
 *	  hash mod k = i implies hash mod m = i mod m.
 *
 *	  cfeed.set_storage is a reshard into one child each (k = m) whose
 *	  children are created in the given storage: how a feed moves between
 *	  storages, since a shard's storage is fixed when it is created.
 *
 *	  Per-key order (docs/design.md, "Resharding"): every writer of a
 *	  change holds the feed's shards lock in share mode from the moment it
 *	  placed the change until it commits (shards.c); reshard takes it in
 *	  exclusive mode, so the changes placed by the old layout are committed
 *	  before the shards close, and the changes placed after the close
 *	  commit after it.  It is taken without joining the lock's queue
 *	  (cfeed_shards_lock_exclusive waits for the transactions that hold
 *	  it, then tries again), so that writers never queue behind a reshard
 *	  waiting for a long transaction; 55P03 after wait_ms, or after the
 *	  session's lock_timeout when it is positive and smaller.  The guard
 *	  trigger of shard_config (shard_guard.c) sends the invalidation that
 *	  makes every backend route by the new layout after the commit; its
 *	  trigger shard_config_child_leases gives the consumer groups that read
 *	  a parent their leases on its children (docs/consumer-groups.md,
 *	  "Splits").
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "cfeed.h"

PG_FUNCTION_INFO_V1(cfeed_reshard);
PG_FUNCTION_INFO_V1(cfeed_set_storage);

/* What a reshard does: cfeed.reshard's or cfeed.set_storage's */
typedef struct Reshard
{
	const char *fn;				/* the SQL function, for messages */
	int32		feed_id;
	bool		one_each;		/* one child for each open shard */
	int32		shards;			/* otherwise this many children */
	int32		wait_ms;
	const char *storage;		/* the children's; NULL: each its parent's */
} Reshard;

/*
 * check_may_reshard
 *		Raise 42501 unless the current user is a superuser or has the
 *		privileges of the extension's owner; 25000 in REPEATABLE READ or
 *		SERIALIZABLE (the layout read after the lock must be the latest
 *		committed one); 25006 in a read-only transaction or on a standby.
 */
static void
check_may_reshard(const Reshard *rs)
{
	if (!superuser() && !has_privs_of_role(GetUserId(), cfeed_extension_owner()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 rs->one_each ?
				 errmsg("permission denied to set the storage of feed %d", rs->feed_id) :
				 errmsg("permission denied to reshard feed %d", rs->feed_id),
				 errdetail("Only superusers and roles with the privileges of the extension's owner change a feed's shards.")));
	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("%s cannot run in a REPEATABLE READ or SERIALIZABLE transaction", rs->fn),
				 errdetail("It waits for the feed's writers and then reads the feed's shards as they committed."),
				 errhint("Run it in a READ COMMITTED transaction.")));
	PreventCommandIfReadOnly(rs->fn);
	PreventCommandIfParallelMode(rs->fn);
}

/*
 * lock_context
 *		Error context of the wait for the feed's writers.
 */
static void
lock_context(void *arg)
{
	const Reshard *rs = (const Reshard *) arg;

	errcontext("%s waiting for the writers of feed %d", rs->fn, rs->feed_id);
}

/*
 * lock_shards
 *		Take the feed's shards lock in exclusive mode until the transaction
 *		ends, waiting up to wait_ms for the transactions that hold it in
 *		share mode (cfeed_shards_lock_exclusive), or up to the session's
 *		lock_timeout when it is positive and smaller (the waits for one
 *		lock, however many, take no longer than a lock_timeout); 55P03 when
 *		they did not let go in time, whether the time ran out between two
 *		waits or during one.
 */
static void
lock_shards(const Reshard *rs)
{
	int32		feed_id = rs->feed_id;
	int32		wait_ms = rs->wait_ms;
	int32		limit_ms = (LockTimeout > 0 && LockTimeout < wait_ms) ? LockTimeout : wait_ms;
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), limit_ms);
	ErrorContextCallback context;
	volatile bool locked = false;
	MemoryContext cxt = CurrentMemoryContext;

	context.callback = lock_context;
	context.arg = (void *) rs;
	context.previous = error_context_stack;
	error_context_stack = &context;
	PG_TRY();
	{
		locked = cfeed_shards_lock_exclusive(feed_id, deadline);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		/*
		 * The time ran out during a wait (lock_timeout): the same error as
		 * when it ran out between two, raised at once, so that the
		 * transaction's abort cleans up after the interrupted wait.
		 */
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		if (edata->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE)
			PG_RE_THROW();
		FlushErrorState();
		FreeErrorData(edata);
		locked = false;
	}
	PG_END_TRY();
	error_context_stack = context.previous;
	if (!locked)
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("could not lock the shards of feed %d within %d ms", feed_id, limit_ms),
				 errdetail("Transactions that wrote to the feed held its shards lock all that time: resharding waits until the writers that placed changes by the current shards have ended."),
				 limit_ms < wait_ms ?
				 errhint("The session's lock_timeout (%d ms) is below wait_ms (%d ms) and bounds the wait: raise it, or end the long transactions that wrote to the feed.",
						 limit_ms, wait_ms) :
				 errhint("Try again, with a larger wait_ms, or end the long transactions that wrote to the feed.")));
}

/*
 * check_children
 *		The number of children of a reshard must be a multiple of the open
 *		shards' m, at least 2m (a set_storage's is m), and leave every shard
 *		number below CFEED_MAX_SHARDS (22023).
 */
static void
check_children(const Reshard *rs, const CfeedLayout *layout, int32 shards)
{
	int32		m = layout->count - layout->first_open;

	if (!rs->one_each && (shards < 2 * m || shards % m != 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot reshard feed %d into %d shards", rs->feed_id, shards),
				 errdetail("The feed has %d open shards (%d to %d); each gets the same number of children, at least two.",
						   m, layout->first_open, layout->max_shard),
				 errhint("Give a multiple of %d, at least %d.", m, 2 * m)));
	if (shards > CFEED_MAX_SHARDS - layout->count)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 rs->one_each ?
				 errmsg("cannot move feed %d to storage %s: its %d open shards need new shard numbers",
						rs->feed_id, rs->storage, shards) :
				 errmsg("cannot reshard feed %d into %d shards", rs->feed_id, shards),
				 errdetail("Its shards would be numbered up to %d; a feed has at most %d shard numbers.",
						   layout->count - 1 + shards, CFEED_MAX_SHARDS)));
}

/*
 * open_shards_elsewhere
 *		How many of the feed's open shards (from first_open on) are not
 *		stored in storage (inside SPI).
 */
static int64
open_shards_elsewhere(int32 feed_id, int32 first_open, const char *storage)
{
	Oid			types[3] = {INT4OID, INT4OID, TEXTOID};
	Datum		values[3];
	bool		isnull;

	values[0] = Int32GetDatum(feed_id);
	values[1] = Int32GetDatum(first_open);
	values[2] = CStringGetTextDatum(storage);
	cfeed_spi_exec("SELECT pg_catalog.count(*) FROM cfeed.shard_config"
				   " WHERE feed_id OPERATOR(pg_catalog.=) $1"
				   " AND shard OPERATOR(pg_catalog.>=) $2"
				   " AND storage OPERATOR(pg_catalog.<>) $3",
				   3, types, values, NULL, SPI_OK_SELECT);
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/*
 * publication_passing
 *		The first of the publications that the listing query gives (rows:
 *		name, row filter or null for none) whose filter may pass a row of
 *		the feed: for the row of `type' that the JSON object `row' (of $1,
 *		the feed_id) makes, the filter is not false (an unknown counts:
 *		what the row leaves null is not known).  NULL when none does
 *		(inside SPI).
 */
static char *
publication_passing(const char *listing, const char *type, const char *row, int32 feed_id)
{
	Oid			types[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(feed_id)};
	uint64		npubs;
	SPITupleTable *pubs;

	cfeed_spi_exec(listing, 0, NULL, NULL, NULL, SPI_OK_SELECT);
	npubs = SPI_processed;
	pubs = SPI_tuptable;
	for (uint64 i = 0; i < npubs; i++)
	{
		char	   *pubname = SPI_getvalue(pubs->vals[i], pubs->tupdesc, 1);
		char	   *filter = SPI_getvalue(pubs->vals[i], pubs->tupdesc, 2);

		if (filter != NULL)
			cfeed_spi_exec(psprintf("SELECT FROM pg_catalog.json_populate_record(NULL::%s, %s)"
									" WHERE (%s) IS NOT FALSE", type, row, filter),
						   1, types, values, NULL, SPI_OK_SELECT);
		if (filter == NULL || SPI_processed > 0)
			return pubname;
	}
	return NULL;
}

/*
 * check_no_portable_publication
 *		Refuse a move into ranges (55000) while a publication sends the
 *		feed's stamped changes by a row filter on change_sequence_number:
 *		the portable cursors of topology A (docs/replication.md) carry
 *		stamped change rows only, and a range change's row is never
 *		stamped, so its subscribers would get nothing of the feed from the
 *		move on.  A filter counts when it may pass a stamped change row of
 *		the feed (its feed_id and the number after a shard's start, the
 *		rest null: publication_passing) (inside SPI).
 */
static void
check_no_portable_publication(const Reshard *rs)
{
	char	   *pubname = publication_passing("SELECT p.pubname, pg_catalog.pg_get_expr(r.prqual, r.prrelid)"
											  " FROM pg_catalog.pg_publication_rel r"
											  " JOIN pg_catalog.pg_publication p ON p.oid OPERATOR(pg_catalog.=) r.prpubid"
											  " WHERE r.prrelid OPERATOR(pg_catalog.=) 'cfeed.change'::pg_catalog.regclass"
											  " AND pg_catalog.strpos(pg_catalog.pg_get_expr(r.prqual, r.prrelid),"
											  "  'change_sequence_number') OPERATOR(pg_catalog.>) 0"
											  " ORDER BY 1",
											  "cfeed.change",
											  "pg_catalog.json_build_object('feed_id', $1, 'change_sequence_number',"
											  " (SELECT pg_catalog.max(s.start_sequence_number) OPERATOR(pg_catalog.+) 1"
											  "  FROM cfeed.shard_config s WHERE s.feed_id OPERATOR(pg_catalog.=) $1))",
											  rs->feed_id);

	if (pubname != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot move feed %d to storage ranges while publication \"%s\" sends its stamped changes",
						rs->feed_id, pubname),
				 errdetail("The publication filters cfeed.change on change_sequence_number (portable cursors), which carries stamped change rows only, and a change stored in ranges is never stamped in its row: its subscribers would receive none of the feed's changes from the move on."),
				 errhint("Keep a feed whose cursors must be portable between clusters in rows, or leave the feed out of the publication's row filter first (a feed stored in ranges is carried by publishing the inserts of cfeed.change and cfeed.stamp).")));
}

/*
 * check_no_stamp_publication
 *		Refuse a move into rows (55000) while a publication sends the
 *		inserts of the feed's stamps: topology A for feeds stored in ranges
 *		(docs/replication.md), whose subscribers number their copy of the
 *		feed by those stamps only.  A shard stored in rows makes none, so
 *		their copy would hold the feed's changes from the move on unnumbered
 *		for good.  A publication counts when it names cfeed.stamp or cfeed's
 *		schema (FOR ALL TABLES does not: cfeed is to be left out of its
 *		subscribers, docs/replication.md) and it has no row filter, or one
 *		that may pass a stamp of the feed (its feed_id, the rest null:
 *		publication_passing) (inside SPI).
 */
static void
check_no_stamp_publication(const Reshard *rs)
{
	char	   *pubname = publication_passing("SELECT t.pubname, t.rowfilter FROM pg_catalog.pg_publication_tables t"
											  " JOIN pg_catalog.pg_publication p ON p.pubname OPERATOR(pg_catalog.=) t.pubname"
											  " WHERE t.schemaname OPERATOR(pg_catalog.=) 'cfeed'"
											  " AND t.tablename OPERATOR(pg_catalog.=) 'stamp' AND p.pubinsert"
											  " AND NOT p.puballtables"
											  " ORDER BY 1",
											  "cfeed.stamp",
											  "pg_catalog.json_build_object('feed_id', $1)",
											  rs->feed_id);

	if (pubname != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot move feed %d to storage rows while publication \"%s\" sends its stamps",
						rs->feed_id, pubname),
				 errdetail("Its subscribers number their copy of a feed stored in ranges by the publisher's stamps (cfeed.stamp), and a shard stored in rows makes none: they would hold the feed's changes from the move on unnumbered."),
				 errhint("Keep a feed whose stamps are published in ranges, or leave the feed out of the publication's row filter on cfeed.stamp first.")));
}

/*
 * layout_moves
 *		Read the feed's layout as committed into *layout and the number of
 *		children into *shards, and check them; return whether the reshard
 *		has anything to do: a split always, a set_storage when an open shard
 *		is stored elsewhere, which no publication may forbid (of stamped
 *		changes for a move into ranges, of stamps for a move into rows).
 */
static bool
layout_moves(const Reshard *rs, CfeedLayout *layout, int32 *shards)
{
	int			spi_level;
	bool		moves = true;

	cfeed_feed_layout(rs->feed_id, layout);
	cfeed_check_layout(rs->feed_id, layout);
	*shards = rs->one_each ? layout->count - layout->first_open : rs->shards;
	check_children(rs, layout, *shards);
	if (!rs->one_each)
		return true;
	spi_level = cfeed_spi_connect();
	if (open_shards_elsewhere(rs->feed_id, layout->first_open, rs->storage) == 0)
		moves = false;
	else if (strcmp(rs->storage, "ranges") == 0)
		check_no_portable_publication(rs);
	else
		check_no_stamp_publication(rs);
	cfeed_spi_finish(spi_level);
	return moves;
}

/*
 * write_layout
 *		Close the open shards f .. n-1 and create the children n .. n+k-1,
 *		each with its parent's sweep group and longpoll, and its parent's
 *		storage unless rs gives one (inside SPI, as the caller: the guard
 *		triggers fire for every row).
 */
static void
write_layout(const Reshard *rs, const CfeedLayout *layout, int32 shards)
{
	Oid			types[5] = {INT4OID, INT4OID, INT4OID, INT4OID, TEXTOID};
	Datum		values[5];

	values[0] = Int32GetDatum(rs->feed_id);
	values[1] = Int32GetDatum(layout->first_open);
	cfeed_spi_exec("UPDATE cfeed.shard_config SET closed = true"
				   " WHERE feed_id OPERATOR(pg_catalog.=) $1"
				   " AND shard OPERATOR(pg_catalog.>=) $2",
				   2, types, values, NULL, SPI_OK_UPDATE);
	values[2] = Int32GetDatum(layout->count);
	values[3] = Int32GetDatum(shards);
	values[4] = rs->storage ? CStringGetTextDatum(rs->storage) : (Datum) 0;
	cfeed_spi_exec("INSERT INTO cfeed.shard_config (feed_id, shard, sweep_group, longpoll, parent, storage)"
				   " SELECT p.feed_id, ($3 OPERATOR(pg_catalog.+) c.i), p.sweep_group, p.longpoll, p.shard,"
				   "  COALESCE($5, p.storage)"
				   " FROM pg_catalog.generate_series(0, ($4 OPERATOR(pg_catalog.-) 1)) c(i)"
				   " JOIN cfeed.shard_config p ON p.feed_id OPERATOR(pg_catalog.=) $1"
				   "  AND p.shard OPERATOR(pg_catalog.=)"
				   "   ($2 OPERATOR(pg_catalog.+) (c.i OPERATOR(pg_catalog.%) ($3 OPERATOR(pg_catalog.-) $2)))"
				   " ORDER BY c.i",
				   5, types, values, rs->storage ? NULL : "    n", SPI_OK_INSERT);
	if (SPI_processed != (uint64) shards)
		elog(ERROR, "%s created " UINT64_FORMAT " shards of feed %d, not %d",
			 rs->fn, SPI_processed, rs->feed_id, shards);
}

/*
 * reshard
 *		Close the feed's open shards and create their children (see the
 *		file header), returning them into fcinfo's materialized result; a
 *		set_storage whose feed's open shards are all in its storage
 *		already does nothing and returns no row.
 */
static void
reshard(FunctionCallInfo fcinfo, const Reshard *rs)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	CfeedLayout layout;
	int			spi_level;
	int32		m;
	int32		shards;

	cfeed_check_nonnegative(rs->wait_ms, "wait_ms");
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);

	check_may_reshard(rs);
	if (!cfeed_feed_exists(rs->feed_id))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("feed %d does not exist", rs->feed_id),
				 errhint("Create it with cfeed.create_feed().")));

	/*
	 * Bad input fails before the wait, and again after it if it became so; a
	 * set_storage with nothing to move waits for nobody.
	 */
	if (!layout_moves(rs, &layout, &shards))
		return;
	lock_shards(rs);
	/* the layout as committed: every writer by the old one is done */
	if (!layout_moves(rs, &layout, &shards))
		return;

	spi_level = cfeed_spi_connect();
	write_layout(rs, &layout, shards);
	cfeed_spi_finish(spi_level);

	m = layout.count - layout.first_open;
	for (int32 i = 0; i < shards; i++)
	{
		Datum		values[2];
		bool		nulls[2] = {false, false};

		values[0] = Int32GetDatum(layout.count + i);
		values[1] = Int32GetDatum(layout.first_open + i % m);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
}

/*
 * cfeed_reshard
 *		SQL: cfeed.reshard(feed_id int, shards int, wait_ms int default
 *		10000) returns table(shard int, parent int): closes the feed's open
 *		shards and creates shards children after the highest shard, each in
 *		its parent's storage (see the file header); returns the children.
 *		Errors: 22004 for a null argument, 22023 for a bad count or wait,
 *		42501, 25000, 25006 (check_may_reshard), 42704 for an unknown feed,
 *		55000 for a layout shard_for cannot route by, 55P03 when the
 *		writers never let go.
 */
Datum
cfeed_reshard(PG_FUNCTION_ARGS)
{
	Reshard		rs = {.fn = "cfeed.reshard()"};

	cfeed_require_arg(fcinfo, 0, "feed_id");
	cfeed_require_arg(fcinfo, 1, "shards");
	cfeed_require_arg(fcinfo, 2, "wait_ms");
	rs.feed_id = PG_GETARG_INT32(0);
	rs.shards = PG_GETARG_INT32(1);
	rs.wait_ms = PG_GETARG_INT32(2);
	reshard(fcinfo, &rs);
	return (Datum) 0;
}

/*
 * cfeed_set_storage
 *		SQL: cfeed.set_storage(feed_id int, storage text, wait_ms int
 *		default 10000) returns table(shard int, parent int): unless every
 *		open shard of the feed is stored in storage already (then it returns
 *		nothing), closes them and creates one child each, stored in storage;
 *		returns the children.  Errors as cfeed_reshard's, and 22023 for a
 *		storage that is neither rows nor ranges.
 */
Datum
cfeed_set_storage(PG_FUNCTION_ARGS)
{
	Reshard		rs = {.fn = "cfeed.set_storage()", .one_each = true};

	cfeed_require_arg(fcinfo, 0, "feed_id");
	cfeed_require_arg(fcinfo, 1, "storage");
	cfeed_require_arg(fcinfo, 2, "wait_ms");
	rs.feed_id = PG_GETARG_INT32(0);
	rs.storage = text_to_cstring(PG_GETARG_TEXT_PP(1));
	rs.wait_ms = PG_GETARG_INT32(2);
	if (strcmp(rs.storage, "rows") != 0 && strcmp(rs.storage, "ranges") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid storage \"%s\"", rs.storage),
				 errhint("A shard is stored in \"rows\" or \"ranges\".")));
	reshard(fcinfo, &rs);
	return (Datum) 0;
}
