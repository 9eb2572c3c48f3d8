/*-------------------------------------------------------------------------
 *
 * ranges.c
 *	  Storage in ranges: the shards whose storage is 'ranges' are numbered
 *	  by appending cfeed.stamp rows, and a change's row is written once, by
 *	  its writer, and never updated (docs/design.md, "Storage in ranges").
 *
 *	  cfeed.stamp (feed_id, shard, first_number, last_number, stamped_at,
 *	  change_ids, writer_xids): change_ids[i] is number first_number + i - 1.
 *	  Its primary key (feed_id, shard, last_number) serves a shard's head (the
 *	  last row) and a read from cursor N (the rows whose last_number > N); a
 *	  change's row is then found in change_pending_idx (writer_xid,
 *	  change_id), where a range change stays.
 *
 *	  Which range changes are stamped cannot be read off their rows, so each
 *	  sweep group with range shards keeps a mark, cfeed.sweep_mark: the
 *	  proposed watermark of its last stamping sweep (watermark.c), stored in
 *	  the same transaction as its stamps.  A range change is stamped exactly
 *	  when its writer_xid is below the mark's xmax and not in its xip; a
 *	  sweep stamps the committed ones of the others, and stores its own
 *	  proposal (the xids of the changes it left, and its own, in xip).  The
 *	  mark carries the system identifier: its xids mean nothing in another
 *	  cluster.
 *
 *	  Locking: the caller of the mark's and the stamps' functions holds the
 *	  group's sweep lock (sweep.c); the head is read with the caller's
 *	  snapshot, under ACCESS SHARE.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
#include "utils/xid8.h"

#include "cfeed.h"

/* Columns of cfeed.stamp and cfeed.sweep_mark. */
#define Anum_stamp_feed_id			1
#define Anum_stamp_shard			2
#define Anum_stamp_stamped_at		5
#define Anum_mark_sweep_group		1
#define Anum_mark_xmax				2
#define Anum_mark_xip				3
#define Anum_mark_system_identifier	4

/* At most this many changes in one cfeed.stamp row. */
#define STAMP_ROW_MAX				4096

/* The sweep's statements, kept for the backend's life (cache.h) */
static SPIPlanPtr stamp_insert_plan = NULL;
static SPIPlanPtr mark_store_plan = NULL;

/*
 * foreign_mark
 *		A mark made in another cluster (a dump restored here, a pg_upgrade'd
 *		cluster): its xids are not this cluster's.  Refused until
 *		cfeed.adopt_marks() makes the group's stamps and mark this
 *		cluster's.
 */
static void
foreign_mark(int32 sweep_group)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("a sweep mark of sweep group %d was made in another database cluster", sweep_group),
			 errdetail("Its transaction ids are another cluster's: the group's shards stored in ranges were restored from a dump, or the cluster was upgraded with pg_upgrade."),
			 errhint("As cfeed's owner, run SELECT * FROM cfeed.adopt_marks() once (docs/operations.md, \"Storage in ranges\").")));
}

/*
 * foreign_mark_probe
 *		Whether the snapshot sees a mark of sweep_group whose system
 *		identifier is strictly below (strategy BTLessStrategyNumber) or
 *		above (BTGreaterStrategyNumber) this cluster's: a range of the key
 *		that only other clusters' marks ever enter.
 */
static bool
foreign_mark_probe(Relation rel, Relation index, Snapshot snapshot, int32 sweep_group,
				   StrategyNumber strategy)
{
	SysScanDesc scan;
	ScanKeyData keys[2];
	bool		found;

	ScanKeyInit(&keys[0], Anum_mark_sweep_group, BTEqualStrategyNumber,
				F_INT4EQ, Int32GetDatum(sweep_group));
	ScanKeyInit(&keys[1], Anum_mark_system_identifier, strategy,
				strategy == BTLessStrategyNumber ? F_INT8LT : F_INT8GT,
				Int64GetDatum((int64) GetSystemIdentifier()));
	scan = systable_beginscan_ordered(rel, index, snapshot, 2, keys);
	found = HeapTupleIsValid(systable_getnext_ordered(scan, ForwardScanDirection));
	systable_endscan_ordered(scan);
	return found;
}

/*
 * foreign_mark_visible
 *		Whether the snapshot sees a mark of sweep_group made in another
 *		cluster: the key's ranges of the other system identifiers, one probe
 *		each (they are empty unless a restore brought marks).
 */
static bool
foreign_mark_visible(Relation rel, Relation index, Snapshot snapshot, int32 sweep_group)
{
	return foreign_mark_probe(rel, index, snapshot, sweep_group, BTLessStrategyNumber) ||
		foreign_mark_probe(rel, index, snapshot, sweep_group, BTGreaterStrategyNumber);
}

/*
 * cfeed_mark_foreign
 *		Whether the snapshot sees a mark of sweep_group made in another
 *		cluster, which cfeed_mark_load refuses (foreign_mark): for a caller
 *		that must answer without raising until cfeed.adopt_marks() runs.
 */
bool
cfeed_mark_foreign(int32 sweep_group, Snapshot snapshot)
{
	Relation	rel = cfeed_table_open("sweep_mark", AccessShareLock);
	Relation	index = cfeed_index_open("sweep_mark_pkey", AccessShareLock);
	bool		found = foreign_mark_visible(rel, index, snapshot, sweep_group);

	index_close(index, AccessShareLock);
	table_close(rel, AccessShareLock);
	return found;
}

/*
 * cfeed_mark_load
 *		The latest mark of a sweep group as of the snapshot, into *mark
 *		(xip palloc'd, sorted, below xmax); false when the group has none
 *		(no range shard).  No mark of the group may be another cluster's
 *		(foreign_mark).  With mark NULL, only that check: read() of a range
 *		shard makes it, since until cfeed.adopt_marks() the group's stamps
 *		name another cluster's writers.
 *
 *		Every sweep that stamps range changes stores a mark and deletes the
 *		one before it, so under a held xmin horizon the group's key holds
 *		one dead version per sweep.  Neither look walks them: another
 *		cluster's marks are looked for in the key's ranges of other system
 *		identifiers (empty unless a restore brought some), and this
 *		cluster's latest is the first visible in backward next_xid order
 *		(marks' next_xids grow with the sweeps that store them).
 */
bool
cfeed_mark_load(int32 sweep_group, Snapshot snapshot, CfeedMark *mark)
{
	Relation	rel = cfeed_table_open("sweep_mark", AccessShareLock);
	Relation	index = cfeed_index_open("sweep_mark_pkey", AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	SysScanDesc scan;
	ScanKeyData keys[2];
	HeapTuple	tup;
	bool		found;

	if (foreign_mark_visible(rel, index, snapshot, sweep_group))
		foreign_mark(sweep_group);
	ScanKeyInit(&keys[0], Anum_mark_sweep_group, BTEqualStrategyNumber,
				F_INT4EQ, Int32GetDatum(sweep_group));
	ScanKeyInit(&keys[1], Anum_mark_system_identifier, BTEqualStrategyNumber,
				F_INT8EQ, Int64GetDatum((int64) GetSystemIdentifier()));
	scan = systable_beginscan_ordered(rel, index, snapshot, 2, keys);
	tup = systable_getnext_ordered(scan, BackwardScanDirection);
	found = HeapTupleIsValid(tup);
	if (found && mark != NULL)
	{
		bool		isnull;
		Datum	   *elems;
		int			nelems;
		int			i;

		mark->xmax = DatumGetFullTransactionId(heap_getattr(tup, Anum_mark_xmax, desc, &isnull));
		deconstruct_array(DatumGetArrayTypeP(heap_getattr(tup, Anum_mark_xip, desc, &isnull)),
						  XID8OID, sizeof(FullTransactionId), FLOAT8PASSBYVAL,
						  TYPALIGN_DOUBLE, &elems, NULL, &nelems);
		mark->xip = palloc(sizeof(FullTransactionId) * Max(nelems, 1));
		mark->nxip = 0;
		/* xip holds xids below xmax only: each xid is probed once */
		for (i = 0; i < nelems; i++)
			if (FullTransactionIdPrecedes(DatumGetFullTransactionId(elems[i]), mark->xmax))
				mark->xip[mark->nxip++] = DatumGetFullTransactionId(elems[i]);
		cfeed_sort_fxids(mark->xip, &mark->nxip);
	}
	systable_endscan_ordered(scan);
	index_close(index, AccessShareLock);
	table_close(rel, AccessShareLock);
	return found;
}

/*
 * xid_array
 *		An xid8[] of n full xids.
 */
static Datum
xid_array(const FullTransactionId *xids, int n)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(n, 1));
	int			i;

	for (i = 0; i < n; i++)
		elems[i] = FullTransactionIdGetDatum(xids[i]);
	return PointerGetDatum(construct_array(elems, n, XID8OID, sizeof(FullTransactionId),
										   FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

/*
 * cfeed_mark_store
 *		Make *mark the group's latest mark, in the sweep's transaction: the
 *		mark before it, the one the sweep loaded (next_xid prev: the
 *		latest, normally the only one alive), is deleted by its key, which
 *		no dead version of an older mark shares, and one with the same next_xid (a sweep right
 *		after cfeed.adopt_marks(), no xid assigned between) is replaced.
 *		The caller is connected to SPI (cfeed_spi_connect).
 */
void
cfeed_mark_store(int32 sweep_group, const CfeedMark *mark, FullTransactionId prev)
{
	Oid			types[5] = {INT4OID, XID8OID, XID8ARRAYOID, INT8OID, XID8OID};
	Datum		values[5];

	values[0] = Int32GetDatum(sweep_group);
	values[1] = FullTransactionIdGetDatum(mark->xmax);
	values[2] = xid_array(mark->xip, mark->nxip);
	values[3] = Int64GetDatum((int64) GetSystemIdentifier());
	values[4] = FullTransactionIdGetDatum(prev);
	(void) cfeed_spi_plan(&mark_store_plan,
						  "WITH gone AS (DELETE FROM cfeed.sweep_mark "
						  "WHERE sweep_group = $1 AND system_identifier = $4 AND next_xid = $5 "
						  "AND next_xid <> $2) "
						  "INSERT INTO cfeed.sweep_mark (sweep_group, next_xid, running, system_identifier) "
						  "VALUES ($1, $2, $3, $4) "
						  "ON CONFLICT (sweep_group, system_identifier, next_xid) "
						  "DO UPDATE SET running = EXCLUDED.running, made_at = EXCLUDED.made_at", 5, types);
	(void) cfeed_spi_run(&mark_store_plan, values, SPI_OK_INSERT, "storing the sweep mark");
}

/*
 * insert_stamp
 *		One cfeed.stamp row: changes[0..n-1], of one shard, numbered
 *		consecutively.
 */
static void
insert_stamp(const CfeedPendingChange *changes, int n, TimestampTz now)
{
	Oid			types[7] = {INT4OID, INT4OID, INT8OID, INT8OID, TIMESTAMPTZOID,
	INT8ARRAYOID, XID8ARRAYOID};
	Datum		values[7];
	Datum	   *ids = palloc(sizeof(Datum) * n);
	FullTransactionId *xids = palloc(sizeof(FullTransactionId) * n);
	int			i;

	for (i = 0; i < n; i++)
	{
		Assert(changes[i].number == changes[0].number + i);
		ids[i] = Int64GetDatum(changes[i].change_id);
		xids[i] = changes[i].writer_xid;
	}
	values[0] = Int32GetDatum(changes[0].feed_id);
	values[1] = Int32GetDatum(changes[0].shard);
	values[2] = Int64GetDatum(changes[0].number);
	values[3] = Int64GetDatum(changes[n - 1].number);
	values[4] = TimestampTzGetDatum(now);
	values[5] = PointerGetDatum(construct_array(ids, n, INT8OID, sizeof(int64),
												FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	values[6] = xid_array(xids, n);
	(void) cfeed_spi_plan(&stamp_insert_plan,
						  "INSERT INTO cfeed.stamp (feed_id, shard, first_number, last_number, "
						  "stamped_at, change_ids, writer_xids) VALUES ($1, $2, $3, $4, $5, $6, $7)",
						  7, types);
	(void) cfeed_spi_run(&stamp_insert_plan, values, SPI_OK_INSERT, "inserting a stamp");
	pfree(ids);
	pfree(xids);
}

/*
 * cfeed_ranges_stamp
 *		The write step for range shards: changes[0..n-1], ordered by shard
 *		and number, become cfeed.stamp rows of at most STAMP_ROW_MAX changes
 *		of one shard each.  Runs as the extension's owner (the sweep),
 *		connected to SPI (cfeed_spi_connect).
 */
void
cfeed_ranges_stamp(const CfeedPendingChange *changes, int n, TimestampTz now)
{
	int			start = 0;

	while (start < n)
	{
		int			end = start + 1;

		CHECK_FOR_INTERRUPTS();
		while (end < n && end - start < STAMP_ROW_MAX &&
			   changes[end].feed_id == changes[start].feed_id &&
			   changes[end].shard == changes[start].shard)
			end++;
		insert_stamp(&changes[start], end - start, now);
		start = end;
	}
}

/*
 * cfeed_ranges_cursor_at
 *		cursor_at for a range shard: the last number of its last stamp made
 *		before `at` as of the snapshot, or PG_INT64_MIN when none was.  The
 *		stamps' stamped_at never decrease with their numbers, so the scan
 *		goes back from the head and stops at the first such stamp.
 */
int64
cfeed_ranges_cursor_at(int32 feed_id, int32 shard, TimestampTz at, Snapshot snapshot)
{
	Relation	rel = cfeed_table_open("stamp", AccessShareLock);
	Relation	index = cfeed_index_open("stamp_pkey", AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	SysScanDesc scan;
	ScanKeyData keys[2];
	HeapTuple	tup;
	int64		cursor = PG_INT64_MIN;

	ScanKeyInit(&keys[0], Anum_stamp_feed_id, BTEqualStrategyNumber,
				F_INT4EQ, Int32GetDatum(feed_id));
	ScanKeyInit(&keys[1], Anum_stamp_shard, BTEqualStrategyNumber,
				F_INT4EQ, Int32GetDatum(shard));
	scan = systable_beginscan_ordered(rel, index, snapshot, 2, keys);
	while (HeapTupleIsValid(tup = systable_getnext_ordered(scan, BackwardScanDirection)))
	{
		bool		isnull;

		CHECK_FOR_INTERRUPTS();
		if (DatumGetTimestampTz(heap_getattr(tup, Anum_stamp_stamped_at, desc, &isnull)) < at)
		{
			cursor = DatumGetInt64(heap_getattr(tup, Anum_stamp_last_number, desc, &isnull));
			break;
		}
	}
	systable_endscan_ordered(scan);
	index_close(index, AccessShareLock);
	table_close(rel, AccessShareLock);
	return cursor;
}
