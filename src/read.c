/*-------------------------------------------------------------------------
 *
 * read.c
 *	  The read side: cfeed.read, cfeed.read_rows, cfeed.head and
 *	  cfeed.cursor_at.
 *
 *	  read() of a shard stored in rows scans change_sequence_idx itself and
 *	  applies the read policy's rule to each change (run_read_direct) where
 *	  the policy is cfeed's own, else runs one saved plan, a range scan of
 *	  change_sequence_idx, with the caller's privileges, streaming its rows
 *	  into the function's result tuplestore; read_rows() runs such a plan
 *	  with the row image columns of the change (a change recorded before its
 *	  table had that column, in a database upgraded from an old version, has
 *	  its image in cfeed.row_image, looked up for a change without one).  A
 *	  shard stored in ranges is read from its stamps (run_read_ranges).
 *	  When the range is empty and wait_ms > 0, it waits for the shard's
 *	  head to pass what it saw (wait.c), then reads again with a new
 *	  snapshot, so waiting needs READ COMMITTED.
 *
 *	  Read access (read_access.c): every function here raises 42501 for a
 *	  feed the caller may not read, before looking the feed up (after the
 *	  table privilege checks), and again after a wait, so that a revoke
 *	  committed meanwhile holds.  The plans run with the caller's
 *	  privileges, so cfeed.change's row-level security also leaves out the
 *	  changes whose row image the caller may not see; read() without a plan
 *	  leaves them out itself, by the same rule (imageless_shown says when it
 *	  may: no read policy of the operator's on cfeed.change).
 *
 *	  Locking: the reads take ACCESS SHARE on cfeed.change (cfeed.stamp for
 *	  a range shard) and the index they scan, and keep it until the
 *	  transaction ends, as a query of them would: TRUNCATE, which is not
 *	  MVCC-safe, waits for a reader's transaction rather than empty its
 *	  next page (spec read_truncate).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "rewrite/rowsecurity.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "utils/xid8.h"

#include "cfeed.h"

/* The range both plans read, $1 feed, $2 shard, $3 cursor, $4 max_count. */
#define READ_RANGE \
	"WHERE c.feed_id = $1 AND c.shard = $2 AND c.change_sequence_number > $3 " \
	"ORDER BY c.change_sequence_number LIMIT $4"

/*
 * A range shard's read looks up a page of stamped changes, $1 numbers, $2
 * change_ids, $3 writer_xids, $4 stamped_at, of feed $5 and shard $6.  One
 * row per number (READ_PAGE_NUMBER): a transaction that wrote one change_id
 * twice to the shard has two numbers whose lookups each find both rows.
 * Each change is looked up by its own probe of change_pending_idx
 * (writer_xid, change_id): a lateral subquery kept apart (OFFSET 0), so
 * that the plan does not hang on the table's statistics.  Joined, before
 * cfeed.change was first analyzed, a page of 1,000 compared every entry
 * with every pending change of the table (3.5 million comparisons, 0.44 s,
 * for a shard of 3,500 changes written by big transactions; 4 ms after
 * ANALYZE), and a generic plan made then stayed for the session.
 * READ_PAGE_FROM's columns are those of the change the statement reads (no
 * more: a column named needs the caller's SELECT on it).
 */
#define READ_PAGE_NUMBER "DISTINCT ON (u.n) u.n"
#define READ_PAGE_FROM(columns) \
	"ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3), " \
	"pg_catalog.unnest($4)) AS u(n, id, x, t) CROSS JOIN LATERAL (" \
	"SELECT " columns ", c.ctid AS row_ctid FROM cfeed.change c " \
	"WHERE c.writer_xid = u.x AND c.change_id = u.id AND c.change_sequence_number IS NULL " \
	"AND c.feed_id = $5 AND c.shard = $6 OFFSET 0) c"
#define READ_PAGE_WHERE "ORDER BY u.n, c.row_ctid"

/* Stamped changes looked up by one plan of a range read, at most. */
#define RANGE_PAGE_MAX				1000

/*
 * One function's plans: for shards stored in rows and in ranges; and
 * whether its rows are what a stamp holds (number, change_id, stamped_at),
 * so that a range shard's stamps may answer it alone (stamps_answer).
 */
typedef struct ReadPlans
{
	SPIPlanPtr	rows;
	SPIPlanPtr	ranges;
	bool		from_stamps;
} ReadPlans;

/* read()'s and read_rows()'s plans, kept for the backend's life (cache.h) */
static ReadPlans read_plans = {NULL, NULL, true};
static ReadPlans read_rows_plans = {NULL, NULL, false};
static ReadPlans read_rows_plans_regclass = {NULL, NULL, false};	/* tbl still a regclass */

static Snapshot read_snapshot(void);

PG_FUNCTION_INFO_V1(cfeed_read);
PG_FUNCTION_INFO_V1(cfeed_read_rows);
PG_FUNCTION_INFO_V1(cfeed_head);
PG_FUNCTION_INFO_V1(cfeed_cursor_at);

/*
 * run_plan
 *		Execute a read plan (prepared from sql on first use) with its
 *		parameters into the tuplestore; returns the row count.
 *
 *		The plan is planned (on first use, and again after an invalidation)
 *		with sequential scans off: it is generic and kept for the session
 *		(cfeed_spi_plan), and planned while cfeed.change was analyzed small
 *		(autovacuum analyzes it after its first changes) it read the whole
 *		table where an index range or probe serves, and kept doing so as the
 *		table grew, until the next ANALYZE: a range page's lookups were a
 *		sequential scan per change (1.27 s for a page of 1,000 among 20,000
 *		changes, not 3 ms), a row shard's read a scan and sort of the table
 *		(096_read_plans).  Every read plan has an index for each table it
 *		reads.
 */
static uint64
run_plan(SPIPlanPtr *plan, const char *sql, Tuplestorestate *store,
		 int nparams, Oid *types, Datum *values)
{
	static const char *const seqscan_off[] = {"enable_seqscan"};
	ParamListInfo params = makeParamList(nparams);
	int			nestlevel;
	int			rc;
	int			i;

	for (i = 0; i < nparams; i++)
	{
		params->params[i].value = values[i];
		params->params[i].isnull = false;
		params->params[i].pflags = PARAM_FLAG_CONST;
		params->params[i].ptype = types[i];
	}

	nestlevel = cfeed_plan_settings_off(seqscan_off, lengthof(seqscan_off));
	(void) cfeed_spi_plan(plan, sql, nparams, types);
	rc = cfeed_spi_execute_into(*plan, params, store);
	AtEOXact_GUC(true, nestlevel);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "cfeed.read: select failed: %s", SPI_result_code_string(rc));
	return SPI_processed;
}

/*
 * run_read
 *		A shard stored in rows: the range after the cursor, one plan
 *		(read_rows(), and read() where run_read_direct may not).
 */
static uint64
run_read(SPIPlanPtr *plan, const char *sql, Tuplestorestate *store,
		 int32 feed_id, int32 shard, int64 cursor, int64 max_count)
{
	Oid			types[4] = {INT4OID, INT4OID, INT8OID, INT8OID};
	Datum		values[4];

	values[0] = Int32GetDatum(feed_id);
	values[1] = Int32GetDatum(shard);
	values[2] = Int64GetDatum(cursor);
	values[3] = Int64GetDatum(max_count);
	return run_plan(plan, sql, store, 4, types, values);
}

/* The stamped changes of a range shard one read plan looks up at once. */
typedef struct RangePage
{
	int			n;
	int			size;
	Datum	   *numbers;
	Datum	   *ids;
	Datum	   *xids;
	Datum	   *times;
} RangePage;

/*
 * run_range_page
 *		Look the page's changes up in cfeed.change with the read plan of a
 *		range shard (its rows the caller may see, in number order) into the
 *		tuplestore; returns the row count and empties the page.
 */
static uint64
run_range_page(SPIPlanPtr *plan, const char *sql, Tuplestorestate *store,
			   int32 feed_id, int32 shard, RangePage *page)
{
	Oid			types[6] = {INT8ARRAYOID, INT8ARRAYOID, XID8ARRAYOID, TIMESTAMPTZARRAYOID,
	INT4OID, INT4OID};
	Datum		values[6];
	uint64		n;

	if (page->n == 0)
		return 0;
	values[0] = PointerGetDatum(construct_array(page->numbers, page->n, INT8OID, sizeof(int64),
												FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	values[1] = PointerGetDatum(construct_array(page->ids, page->n, INT8OID, sizeof(int64),
												FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	values[2] = PointerGetDatum(construct_array(page->xids, page->n, XID8OID, sizeof(int64),
												FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	values[3] = PointerGetDatum(construct_array(page->times, page->n, TIMESTAMPTZOID, sizeof(int64),
												FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	values[4] = Int32GetDatum(feed_id);
	values[5] = Int32GetDatum(shard);
	n = run_plan(plan, sql, store, 6, types, values);
	page->n = 0;
	return n;
}

/*
 * images_shown
 *		Whether cfeed.change's row-level security shows the caller every
 *		change of a feed it may read, images or not: it does not apply to
 *		the caller (the table's owner, a superuser, BYPASSRLS, or the
 *		table's row-level security disabled).  Raises, as a query of the
 *		table would, when it applies and row_security is off.
 */
static bool
images_shown(Relation changerel)
{
	return check_enable_rls(RelationGetRelid(changerel), InvalidOid, false) != RLS_ENABLED;
}

/*
 * own_read_policy
 *		Whether a policy of cfeed.change is cfeed's change_read as cfeed
 *		made it: for every role (PUBLIC), USING (cfeed._may_read_image(
 *		feed_id, tbl)).  One the operator altered (ALTER POLICY ... TO, or
 *		USING) decides as the operator wrote it, which only a lookup follows.
 */
static bool
own_read_policy(Relation changerel, RowSecurityPolicy *policy)
{
	FuncExpr   *f = (FuncExpr *) policy->qual;
	Var		   *feed;
	Var		   *tbl;
	char	   *name;

	if (strcmp(policy->policy_name, "change_read") != 0 || policy->roles == NULL ||
		ARR_NDIM(policy->roles) != 1 || ARR_DIMS(policy->roles)[0] != 1 ||
		((Oid *) ARR_DATA_PTR(policy->roles))[0] != ACL_ID_PUBLIC)
		return false;
	if (f == NULL || !IsA(f, FuncExpr) || list_length(f->args) != 2 ||
		!IsA(linitial(f->args), Var) || !IsA(lsecond(f->args), Var))
		return false;
	feed = (Var *) linitial(f->args);
	tbl = (Var *) lsecond(f->args);
	if (feed->varattno != Anum_change_feed_id || tbl->varattno != Anum_change_tbl ||
		get_func_namespace(f->funcid) != RelationGetNamespace(changerel))
		return false;
	name = get_func_name(f->funcid);
	return name != NULL && strcmp(name, "_may_read_image") == 0;
}

/*
 * imageless_shown
 *		Whether cfeed.change's row-level security is cfeed's own rule: its
 *		one read policy is change_read, permissive and unaltered
 *		(own_read_policy), which shows a change without a row image to whom
 *		may read its feed (cfeed_check_read) and one with an image to whom
 *		may also read its table (cfeed._may_read_image).  A policy of an
 *		operator's beside it (restrictive, or permissive: it may show more)
 *		leaves the reads to the plans, which apply them all.
 */
static bool
imageless_shown(Relation changerel)
{
	ListCell   *lc;
	bool		own = false;

	if (changerel->rd_rsdesc == NULL)
		return true;
	foreach(lc, changerel->rd_rsdesc->policies)
	{
		RowSecurityPolicy *policy = (RowSecurityPolicy *) lfirst(lc);

		if (policy->polcmd != '*' && policy->polcmd != ACL_SELECT_CHR)
			continue;
		if (!policy->permissive || !own_read_policy(changerel, policy))
			return false;
		own = true;
	}
	return own;
}

/*
 * policy_shows
 *		Whether cfeed.change's row-level security shows the caller every
 *		change of a feed it may read (images_shown), and in *imageless
 *		whether it shows every such change without a row image (then
 *		images_shown, or imageless_shown).
 */
static bool
policy_shows(bool *imageless)
{
	Relation	changerel = cfeed_table_open("change", AccessShareLock);
	bool		all = images_shown(changerel);

	*imageless = all || imageless_shown(changerel);
	table_close(changerel, AccessShareLock);
	return all;
}

/*
 * stamps_answer
 *		Whether read() may take a range shard's changes from its stamps,
 *		without looking them up in cfeed.change, as of the snapshot: no
 *		stamp of the shard names a deleted change (shard_config's
 *		changes_deleted is false: _change_deleted and _change_truncated set
 *		it, retention takes back what its own delete, with the stamps, set),
 *		and row-level security shows the caller every change (images_shown),
 *		or every change without a row image (*imageless: a stamp's
 *		image_tables says which tables its changes' images are of,
 *		images_readable whether the caller may see those).  A change a stamp names
 *		committed before the stamp, so the snapshot that sees the stamp sees
 *		it.
 */
static bool
stamps_answer(int32 feed_id, int32 shard, Snapshot snapshot, bool *imageless)
{
	CfeedShard	sh;

	*imageless = false;
	return cfeed_shard_fetch(feed_id, shard, snapshot, false, &sh) && sh.stamps_whole &&
		policy_shows(imageless);
}

/*
 * image_readable
 *		Whether the read policy shows the caller (one that may read the feed)
 *		a change whose row image is of table number tbl: cfeed's rule
 *		(cfeed._may_read_image), the number's table, if any, and
 *		cfeed_may_read_table of it.
 */
static bool
image_readable(FmgrInfo *flinfo, int32 tbl)
{
	Oid			relid = cfeed_table_of_number(flinfo, tbl);

	return OidIsValid(relid) && cfeed_may_read_table(relid);
}

/*
 * images_readable
 *		Whether the read policy shows the caller every change a stamp names:
 *		the caller may see the row images of each table of its image_tables
 *		(image_readable); not for a stamp that does not say (null).
 */
static bool
images_readable(FmgrInfo *flinfo, HeapTuple tup, TupleDesc desc)
{
	bool		isnull;
	Datum		d = heap_getattr(tup, Anum_stamp_image_tables, desc, &isnull);
	ArrayType  *a;
	bool		readable;
	int			n;
	int			i;

	if (isnull)
		return false;
	a = DatumGetArrayTypeP(d);
	readable = ARR_NDIM(a) <= 1 && !ARR_HASNULL(a) && ARR_ELEMTYPE(a) == INT4OID;
	n = readable ? ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a)) : 0;
	for (i = 0; i < n && readable; i++)
		readable = image_readable(flinfo, ((int32 *) ARR_DATA_PTR(a))[i]);
	if ((Pointer) a != DatumGetPointer(d))
		pfree(a);
	return readable;
}

/*
 * put_stamped
 *		A stamped change straight into read()'s result, in number order
 *		(stamped_at null where the row has none: history may be edited).
 */
static void
put_stamped(ReturnSetInfo *rsinfo, int64 number, int64 change_id, Datum at, bool at_null)
{
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	values[0] = Int64GetDatum(number);
	values[1] = Int64GetDatum(change_id);
	values[2] = at;
	nulls[2] = at_null;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * run_read_direct
 *		read() of a shard stored in rows (or of a range shard's history): the
 *		range after the cursor, from change_sequence_idx, straight into the
 *		result, with the read policy's rule applied here (the plan's
 *		executor, its tuplestore receiver and the policy's call per row were
 *		most of a page's cost: row 2a of make bench).  Only where the policy
 *		is cfeed's own (policy_shows' *imageless): a change without a row
 *		image is shown to whom may read its feed (checked before), one with
 *		an image to whom may also read its table (cfeed._may_read_image's
 *		rule: its number's table, and cfeed_may_read_table), every change to
 *		a caller the policy does not apply to (all).  With the snapshot head
 *		reads with.
 */
static uint64
run_read_direct(FunctionCallInfo fcinfo, int32 feed_id, int32 shard, int64 cursor,
				int64 max_count, bool all)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Relation	heap = cfeed_table_open("change", AccessShareLock);
	Relation	index = cfeed_index_open("change_sequence_idx", AccessShareLock);
	TupleDesc	desc = RelationGetDescr(heap);
	Snapshot	snapshot = read_snapshot();
	SysScanDesc scan;
	ScanKeyData keys[3];
	HeapTuple	tup;
	uint64		got = 0;

	ScanKeyInit(&keys[0], Anum_change_feed_id, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(feed_id));
	ScanKeyInit(&keys[1], Anum_change_shard, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(shard));
	ScanKeyInit(&keys[2], Anum_change_sequence, BTGreaterStrategyNumber, F_INT8GT, Int64GetDatum(cursor));
	scan = systable_beginscan_ordered(heap, index, snapshot, 3, keys);
	while (got < (uint64) max_count &&
		   HeapTupleIsValid(tup = systable_getnext_ordered(scan, ForwardScanDirection)))
	{
		bool		isnull;
		bool		at_null;
		Datum		tbl;
		Datum		at;

		CHECK_FOR_INTERRUPTS();
		tbl = heap_getattr(tup, Anum_change_tbl, desc, &isnull);
		if (!all && !isnull && !image_readable(fcinfo->flinfo, DatumGetInt32(tbl)))
			continue;
		at = heap_getattr(tup, Anum_change_stamped_at, desc, &at_null);
		put_stamped(rsinfo,
					DatumGetInt64(heap_getattr(tup, Anum_change_sequence, desc, &isnull)),
					DatumGetInt64(heap_getattr(tup, Anum_change_change_id, desc, &isnull)),
					at, at_null);
		got++;
	}
	systable_endscan_ordered(scan);
	UnregisterSnapshot(snapshot);
	/* the locks stay until the transaction ends, as a query's (a TRUNCATE waits) */
	index_close(index, NoLock);
	table_close(heap, NoLock);
	return got;
}

/*
 * run_read_ranges
 *		A shard stored in ranges: its cfeed.stamp rows after the cursor, in
 *		number order, give pages of (number, change_id, writer_xid,
 *		stamped_at) that the plan looks up in cfeed.change with the caller's
 *		privileges, until max_count rows came back or the stamps end (a
 *		change deleted, or hidden by row-level security, leaves a page
 *		short, and the next page makes up for it).  For read() (from_stamps),
 *		a stamp whose changes are all there and shown to the caller
 *		(stamps_answer) gives them itself: a probe of change_pending_idx
 *		per change was most of a range read's time.  The stamps are read
 *		with the snapshot head and cursor_at read with; a change they
 *		number committed before its stamp, so the plan's later snapshot
 *		sees it.
 */
static uint64
run_read_ranges(SPIPlanPtr *plan, const char *sql, bool from_stamps, FunctionCallInfo fcinfo,
				int32 feed_id, int32 shard, int64 cursor, int64 max_count)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Relation	rel = cfeed_table_open("stamp", AccessShareLock);
	Relation	index = cfeed_index_open("stamp_pkey", AccessShareLock);
	Snapshot	snapshot = read_snapshot();
	TupleDesc	desc = RelationGetDescr(rel);
	SysScanDesc scan;
	ScanKeyData keys[3];
	HeapTuple	tup;
	RangePage	page;
	uint64		got = 0;
	bool		imageless = false;
	bool		all = from_stamps && stamps_answer(feed_id, shard, snapshot, &imageless);

	page.n = 0;
	page.size = (int) Min(max_count, RANGE_PAGE_MAX);
	page.numbers = palloc(sizeof(Datum) * page.size);
	page.ids = palloc(sizeof(Datum) * page.size);
	page.xids = palloc(sizeof(Datum) * page.size);
	page.times = palloc(sizeof(Datum) * page.size);
	ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(feed_id));
	ScanKeyInit(&keys[1], 2, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(shard));
	ScanKeyInit(&keys[2], Anum_stamp_last_number, BTGreaterStrategyNumber, F_INT8GT, Int64GetDatum(cursor));
	scan = systable_beginscan_ordered(rel, index, snapshot, 3, keys);
	while (got < (uint64) max_count &&
		   HeapTupleIsValid(tup = systable_getnext_ordered(scan, ForwardScanDirection)))
	{
		bool		isnull;
		int64		first = DatumGetInt64(heap_getattr(tup, Anum_stamp_first_number, desc, &isnull));
		Datum		at = heap_getattr(tup, Anum_stamp_stamped_at, desc, &isnull);
		bool		answers = all || (imageless && images_readable(fcinfo->flinfo, tup, desc));
		int64	   *ids;
		FullTransactionId *xids;
		int			count;
		int			i;

		CHECK_FOR_INTERRUPTS();
		count = cfeed_stamp_entries(tup, desc, &ids, &xids);
		/* the changes looked up so far come first */
		if (answers)
			got += run_range_page(plan, sql, rsinfo->setResult, feed_id, shard, &page);
		for (i = 0; i < count && got < (uint64) max_count; i++)
		{
			int64		number = first + i;

			if (number <= cursor)
				continue;
			if (answers)
			{
				put_stamped(rsinfo, number, ids[i], at, false);
				got++;
				continue;
			}
			page.numbers[page.n] = Int64GetDatum(number);
			page.ids[page.n] = Int64GetDatum(ids[i]);
			page.xids[page.n] = FullTransactionIdGetDatum(xids[i]);
			page.times[page.n] = at;
			/* a full page: as many as are still wanted, or RANGE_PAGE_MAX */
			if (++page.n == (int) Min(max_count - got, page.size))
				got += run_range_page(plan, sql, rsinfo->setResult, feed_id, shard, &page);
		}
		pfree(ids);
		pfree(xids);
	}
	if (got < (uint64) max_count)
		got += run_range_page(plan, sql, rsinfo->setResult, feed_id, shard, &page);
	systable_endscan_ordered(scan);
	UnregisterSnapshot(snapshot);
	index_close(index, NoLock);
	table_close(rel, NoLock);
	return got;
}

/*
 * read_shard
 *		Read a shard after the cursor with the plans of its storage.
 */
static uint64
read_shard(ReadPlans *plans, const char *rows_sql, const char *ranges_sql, CfeedShard *sh,
		   FunctionCallInfo fcinfo, int64 cursor, int64 max_count)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	uint64		got = 0;

	/*
	 * What the calling statement wrote before (a change a data-modifying
	 * WITH deleted) is seen, as a plan sees it (SPI advances the command
	 * counter before each query): the snapshots taken below are as of the
	 * next command.  Never in parallel mode, where no command starts (read()
	 * is PARALLEL UNSAFE; a wrapper mislabeled safe then reads as of its
	 * query).
	 */
	if (!IsInParallelMode())
		CommandCounterIncrement();

	/*
	 * A range shard's history (numbers at or below its start value, in its
	 * migration range) is numbered in its rows: it comes first.  read()
	 * reads them itself where the read policy is cfeed's own, in a schema
	 * whose cfeed.change.tbl is a table's number.
	 */
	if (!sh->ranges || cursor < sh->start_number)
	{
		bool		imageless = false;
		bool		all = plans->from_stamps && cfeed_schema_has(CFEED_SCHEMA_TABLE_NUMBERS) &&
			policy_shows(&imageless);

		if (imageless)
			got = run_read_direct(fcinfo, sh->feed_id, sh->shard, cursor, max_count, all);
		else
			got = run_read(&plans->rows, rows_sql, rsinfo->setResult, sh->feed_id, sh->shard,
						   cursor, max_count);
	}
	if (sh->ranges && got < (uint64) max_count)
	{
		/* stamps restored from another cluster are refused (ranges.c) */
		Snapshot	snapshot = read_snapshot();

		(void) cfeed_mark_load(sh->sweep_group, snapshot, NULL);
		UnregisterSnapshot(snapshot);
		got += run_read_ranges(&plans->ranges, ranges_sql, plans->from_stamps, fcinfo,
							   sh->feed_id, sh->shard, cursor, max_count - got);
	}
	return got;
}

/*
 * read_common
 *		cfeed.read and cfeed.read_rows: check the arguments, read the range
 *		with the plan of sql and, when it is empty and wait_ms > 0, wait and
 *		read again.
 */
static Datum
read_common(FunctionCallInfo fcinfo, ReadPlans *plans, const char *rows_sql,
			const char *ranges_sql)
{
	int			spi_level;
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int32		feed_id;
	int32		shard;
	int64		cursor;
	int32		max_count;
	int32		wait_ms;
	CfeedShard	sh;
	MemoryContext oldcxt;

	cfeed_require_arg(fcinfo, 0, "feed_id");
	cfeed_require_arg(fcinfo, 1, "shard");
	cfeed_require_arg(fcinfo, 3, "max_count");
	cfeed_require_arg(fcinfo, 4, "wait_ms");
	feed_id = PG_GETARG_INT32(0);
	shard = PG_GETARG_INT32(1);
	cursor = PG_ARGISNULL(2) ? PG_INT64_MIN : PG_GETARG_INT64(2);
	max_count = PG_GETARG_INT32(3);
	wait_ms = PG_GETARG_INT32(4);
	cfeed_check_nonnegative(max_count, "max_count");
	cfeed_check_wait("cfeed.read", wait_ms, "wait_ms");

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	cfeed_check_select("change");
	cfeed_check_read(feed_id);
	cfeed_shard_get(feed_id, shard, false, &sh);
	if (max_count == 0)
		return (Datum) 0;

	spi_level = cfeed_spi_connect();
	oldcxt = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	if (read_shard(plans, rows_sql, ranges_sql, &sh, fcinfo, cursor, max_count) == 0 &&
		wait_ms > 0)
	{
		/*
		 * Nothing after the cursor as of the head read before the query: wait
		 * for a head beyond both, then read with a new snapshot.
		 */
		int64		seen = Max(cursor, sh.last_number);

		if (cfeed_wait_for_head(feed_id, shard, seen, wait_ms) > seen)
		{
			cfeed_check_read(feed_id);
			(void) read_shard(plans, rows_sql, ranges_sql, &sh, fcinfo, cursor, max_count);
		}
	}
	MemoryContextSwitchTo(oldcxt);
	cfeed_spi_finish(spi_level);
	return (Datum) 0;
}

/*
 * cfeed_read
 *		SQL: cfeed.read(feed_id, shard, cursor, max_count, wait_ms) returns
 *		table(change_sequence_number, change_id, stamped_at).
 */
Datum
cfeed_read(PG_FUNCTION_ARGS)
{
	return read_common(fcinfo, &read_plans,
					   "SELECT c.change_sequence_number, c.change_id, c.stamped_at "
					   "FROM cfeed.change c " READ_RANGE,
					   "SELECT " READ_PAGE_NUMBER ", c.change_id, u.t FROM "
					   READ_PAGE_FROM("c.change_id") " " READ_PAGE_WHERE);
}

/*
 * cfeed_read_rows
 *		SQL: cfeed.read_rows(feed_id, shard, cursor, max_count, wait_ms)
 *		returns table(change_sequence_number, change_id, stamped_at, tbl, op,
 *		row).  tbl is the table of the change's number, null where it has
 *		none (a subscriber without it).  A change written before cfeed.change
 *		had image columns (in a database upgraded from an old version) has
 *		its image in cfeed.row_image: the lateral subquery looks it up only
 *		for a change without one of its own (OFFSET 0 keeps it a subquery,
 *		whose outer-only condition becomes a one-time filter).
 */
#define READ_ROWS(number, at, from, tbl, where) \
	"SELECT " number ", c.change_id, " at ", " \
	"COALESCE(" tbl ", i.tbl), COALESCE(c.op, i.op), COALESCE(c.\"row\", i.\"row\") " \
	"FROM " from " LEFT JOIN LATERAL (" \
	"SELECT i.tbl, i.op, i.\"row\" FROM cfeed.row_image i " \
	"WHERE c.op IS NULL AND i.change_id = c.change_id AND i.feed_id = c.feed_id " \
	"OFFSET 0) i ON true " where
#define READ_ROWS_PLANS(tbl) \
	READ_ROWS("c.change_sequence_number", "c.stamped_at", "cfeed.change c", tbl, READ_RANGE), \
	READ_ROWS(READ_PAGE_NUMBER, "u.t", \
			  READ_PAGE_FROM("c.feed_id, c.change_id, c.tbl, c.op, c.\"row\""), tbl, READ_PAGE_WHERE)

Datum
cfeed_read_rows(PG_FUNCTION_ARGS)
{
	/* tbl is a table's number (table_numbers.c), or not yet updated a regclass */
	if (cfeed_schema_has(CFEED_SCHEMA_TABLE_NUMBERS))
		return read_common(fcinfo, &read_rows_plans, READ_ROWS_PLANS("cfeed._tracked_table(c.tbl)"));
	return read_common(fcinfo, &read_rows_plans_regclass, READ_ROWS_PLANS("c.tbl"));
}

/*
 * read_snapshot
 *		The snapshot head and cursor_at read: the transaction's in REPEATABLE
 *		READ and SERIALIZABLE, so that they agree with what the transaction
 *		reads; else the latest (in READ COMMITTED every statement sees a
 *		newer one anyway), as fresh as may be (cfeed_fresh_snapshot).
 *		Registered: unregister it.
 */
static Snapshot
read_snapshot(void)
{
	return IsolationUsesXactSnapshot() ? RegisterSnapshot(GetTransactionSnapshot())
		: cfeed_fresh_snapshot();
}

/*
 * shard_as_of_transaction
 *		Re-read a shard (found with a fresh snapshot) as of the transaction's
 *		snapshot: 42704 if the transaction cannot see it yet.
 */
static void
shard_as_of_transaction(CfeedShard *sh)
{
	Snapshot	snapshot = read_snapshot();

	if (!cfeed_shard_fetch(sh->feed_id, sh->shard, snapshot, true, sh))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("shard %d of feed %d does not exist", sh->shard, sh->feed_id),
				 errdetail("It was created after this transaction's snapshot was taken.")));
	UnregisterSnapshot(snapshot);
}

/*
 * cfeed_head
 *		SQL: cfeed.head(feed_id, shard) returns bigint, as of the transaction
 *		in REPEATABLE READ and SERIALIZABLE, else as of now.
 */
Datum
cfeed_head(PG_FUNCTION_ARGS)
{
	CfeedShard	sh;

	cfeed_require_arg(fcinfo, 0, "feed_id");
	cfeed_require_arg(fcinfo, 1, "shard");
	cfeed_check_select("shard");
	cfeed_check_read(PG_GETARG_INT32(0));
	cfeed_shard_get(PG_GETARG_INT32(0), PG_GETARG_INT32(1), true, &sh);
	if (IsolationUsesXactSnapshot())
		shard_as_of_transaction(&sh);
	PG_RETURN_INT64(sh.last_number);
}

/*
 * stamped_before
 *		Whether change `number` of a shard was stamped before `at`, as of the
 *		snapshot.  A number with no row (removed by retention) counts as
 *		before: retention removes the oldest changes.
 */
static bool
stamped_before(Relation heap, Relation index, Snapshot snapshot,
			   int32 feed_id, int32 shard, int64 number, TimestampTz at)
{
	SysScanDesc scan;
	ScanKeyData keys[3];
	HeapTuple	tup;
	bool		before = true;

	ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(feed_id));
	ScanKeyInit(&keys[1], 2, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(shard));
	ScanKeyInit(&keys[2], Anum_change_sequence, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(number));
	scan = systable_beginscan(heap, RelationGetRelid(index), true, snapshot, 3, keys);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
	{
		bool		isnull;
		Datum		d = heap_getattr(tup, Anum_change_stamped_at, RelationGetDescr(heap), &isnull);

		before = !isnull && DatumGetTimestampTz(d) < at;
	}
	systable_endscan(scan);
	return before;
}

/*
 * history_cursor_at
 *		cursor_at within backfilled history (numbers at or below the start
 *		value, whose stamped_at need not increase): the highest number stamped
 *		before `at`, else just below the lowest; the start value when all of it
 *		was stamped before `at` (or there is none).  "Just below" saturates
 *		at -2^63 (a database upgraded from an old version may hold a history
 *		row numbered -2^63).
 *		Scans the shard's history.
 */
static int64
history_cursor_at(CfeedShard *sh, TimestampTz at)
{
	int			spi_level;
	Oid			types[4] = {INT4OID, INT4OID, INT8OID, TIMESTAMPTZOID};
	Datum		values[4];
	int64		cursor = sh->start_number;
	bool		isnull;

	values[0] = Int32GetDatum(sh->feed_id);
	values[1] = Int32GetDatum(sh->shard);
	values[2] = Int64GetDatum(sh->start_number);
	values[3] = TimestampTzGetDatum(at);
	spi_level = cfeed_spi_connect();
	if (SPI_execute_with_args(
			"SELECT CASE WHEN COALESCE(pg_catalog.bool_and(stamped_at < $4), true) THEN $3 "
			"ELSE COALESCE(pg_catalog.max(change_sequence_number) FILTER (WHERE stamped_at < $4), "
			"GREATEST(pg_catalog.min(change_sequence_number), -9223372036854775807) - 1) END "
			"FROM cfeed.change "
			"WHERE feed_id = $1 AND shard = $2 AND change_sequence_number <= $3",
			4, types, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "cfeed.cursor_at: history query failed");
	{
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		if (!isnull)
			cursor = DatumGetInt64(d);
	}
	cfeed_spi_finish(spi_level);
	return cursor;
}

/*
 * cfeed_cursor_at
 *		SQL: cfeed.cursor_at(feed_id, shard, at) returns bigint: the highest
 *		number stamped before `at` (binary search over the stamped range,
 *		whose stamped_at never decreases; for a range shard, its stamps
 *		back from the head), or the start value when none was.
 */
Datum
cfeed_cursor_at(PG_FUNCTION_ARGS)
{
	CfeedShard	sh;
	TimestampTz at;
	int64		lo;
	int64		hi;
	Relation	heap;
	Relation	index;
	Snapshot	snapshot;

	cfeed_require_arg(fcinfo, 0, "feed_id");
	cfeed_require_arg(fcinfo, 1, "shard");
	cfeed_require_arg(fcinfo, 2, "at");
	at = PG_GETARG_TIMESTAMPTZ(2);
	cfeed_check_select("shard");
	cfeed_check_read(PG_GETARG_INT32(0));
	cfeed_shard_get(PG_GETARG_INT32(0), PG_GETARG_INT32(1), true, &sh);
	cfeed_check_select("change");

	snapshot = read_snapshot();
	if (!cfeed_shard_fetch(sh.feed_id, sh.shard, snapshot, true, &sh))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("shard %d of feed %d does not exist", sh.shard, sh.feed_id),
				 errdetail("It was deleted while cfeed.cursor_at ran.")));
	if (sh.ranges)
	{
		lo = cfeed_ranges_cursor_at(sh.feed_id, sh.shard, at, snapshot);
		UnregisterSnapshot(snapshot);
		PG_RETURN_INT64(lo > sh.start_number ? lo : history_cursor_at(&sh, at));
	}
	heap = cfeed_table_open("change", AccessShareLock);
	index = cfeed_index_open("change_sequence_idx", AccessShareLock);

	/* Invariant: lo was stamped before `at` (or is the start), hi+1 was not. */
	lo = sh.start_number;
	hi = sh.last_number;
	while (lo < hi)
	{
		/* the upper middle, in unsigned arithmetic: hi - lo may pass 2^63 */
		uint64		span = (uint64) hi - (uint64) lo;
		int64		mid = (int64) ((uint64) lo + span / 2 + (span & 1));

		CHECK_FOR_INTERRUPTS();
		if (stamped_before(heap, index, snapshot, sh.feed_id, sh.shard, mid, at))
			lo = mid;
		else
			hi = mid - 1;
	}

	index_close(index, AccessShareLock);
	table_close(heap, AccessShareLock);
	UnregisterSnapshot(snapshot);

	if (lo == sh.start_number)
		lo = history_cursor_at(&sh, at);
	PG_RETURN_INT64(lo);
}
