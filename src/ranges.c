/*-------------------------------------------------------------------------
 *
 * ranges.c
 *	  Storage in ranges: the shards whose storage is 'ranges' are numbered
 *	  by appending cfeed.stamp rows, and a change's row is written once, by
 *	  its writer, and never updated (docs/design.md, "Storage in ranges").
 *
 *	  cfeed.stamp (feed_id, shard, first_number, last_number, stamped_at,
 *	  first_change_id, change_id_deltas, first_writer_xid, writer_xid_deltas):
 *	  number first_number + i - 1 is the change first_change_id +
 *	  change_id_deltas[i] of writer first_writer_xid + writer_xid_deltas[i]
 *	  (4 bytes a change each, not 8: the arrays are most of a stamp's WAL;
 *	  cfeed_stamp_entries reads them back).  Its primary key (feed_id, shard, last_number) serves a shard's head (the
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
#include "common/int.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
#include "utils/xid8.h"

#include "cfeed.h"

/* Columns of cfeed.sweep_mark (cfeed.h has cfeed.stamp's). */
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
			 errmsg("a sweep mark of sweep group %d was made in another database cluster or restored from a dump", sweep_group),
			 errdetail("Its transaction ids are another database's: the group's shards stored in ranges were restored from a dump (of this cluster or another), or the cluster was upgraded with pg_upgrade."),
			 errhint("As cfeed's owner, run SELECT * FROM cfeed.adopt_marks() once (docs/operations.md, \"Storage in ranges\").")));
}

/*
 * cluster_marks_scan
 *		An ordered scan of sweep_group's marks whose system identifier
 *		compares with this cluster's by strategy (BTEqualStrategyNumber: this
 *		cluster's; less, greater: others'), in next_xid order within each.
 */
static SysScanDesc
cluster_marks_scan(Relation rel, Relation index, Snapshot snapshot, int32 sweep_group,
				   StrategyNumber strategy)
{
	ScanKeyData keys[2];

	ScanKeyInit(&keys[0], Anum_mark_sweep_group, BTEqualStrategyNumber,
				F_INT4EQ, Int32GetDatum(sweep_group));
	ScanKeyInit(&keys[1], Anum_mark_system_identifier, strategy,
				strategy == BTLessStrategyNumber ? F_INT8LT :
				strategy == BTGreaterStrategyNumber ? F_INT8GT : F_INT8EQ,
				Int64GetDatum((int64) GetSystemIdentifier()));
	return systable_beginscan_ordered(rel, index, snapshot, 2, keys);
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
	SysScanDesc scan = cluster_marks_scan(rel, index, snapshot, sweep_group, strategy);
	bool		found;

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
 * mark_from_tuple
 *		A sweep_mark row into *mark (xip palloc'd, sorted, below xmax), with
 *		the xid that stored this version of it: a mark can be replaced under
 *		the same next_xid (cfeed_mark_store), and a watermark tells the
 *		version it descends from by both (watermark.c).
 */
static void
mark_from_tuple(HeapTuple tup, TupleDesc desc, CfeedMark *mark)
{
	bool		isnull;
	Datum	   *elems;
	bool	   *nulls;
	int			nelems;
	int			i;

	mark->xmax = DatumGetFullTransactionId(heap_getattr(tup, Anum_mark_xmax, desc, &isnull));
	mark->stored_by = HeapTupleHeaderGetRawXmin(tup->t_data);
	deconstruct_array(DatumGetArrayTypeP(heap_getattr(tup, Anum_mark_xip, desc, &isnull)),
					  XID8OID, sizeof(FullTransactionId), FLOAT8PASSBYVAL,
					  TYPALIGN_DOUBLE, &elems, &nulls, &nelems);
	mark->xip = palloc(sizeof(FullTransactionId) * Max(nelems, 1));
	mark->nxip = 0;
	/*
	 * xip holds xids below xmax only: each xid is probed once (a null, which
	 * only an edit by hand puts there, names no writer)
	 */
	for (i = 0; i < nelems; i++)
		if (!nulls[i] && FullTransactionIdPrecedes(DatumGetFullTransactionId(elems[i]), mark->xmax))
			mark->xip[mark->nxip++] = DatumGetFullTransactionId(elems[i]);
	cfeed_sort_fxids(mark->xip, &mark->nxip);
}

/*
 * mark_load
 *		The latest mark of a sweep group as of the snapshot, into *mark
 *		(xip palloc'd, sorted, below xmax); false when the group has none
 *		(no range shard), or has another cluster's: refused with
 *		refuse_foreign (foreign_mark).  With mark NULL, only that check:
 *		read() of a range shard makes it, since until cfeed.adopt_marks()
 *		the group's stamps name another cluster's writers.
 *
 *		Every sweep that stamps range changes stores a mark and deletes the
 *		one before it, so under a held xmin horizon the group's key holds
 *		one dead version per sweep.  Neither look walks them: another
 *		cluster's marks are looked for in the key's ranges of other system
 *		identifiers (empty unless a restore brought some), and this
 *		cluster's latest is the first visible in backward next_xid order
 *		(marks' next_xids grow with the sweeps that store them).
 */
static bool
mark_load(int32 sweep_group, Snapshot snapshot, CfeedMark *mark, bool refuse_foreign)
{
	Relation	rel = cfeed_table_open("sweep_mark", AccessShareLock);
	Relation	index = cfeed_index_open("sweep_mark_pkey", AccessShareLock);
	bool		found = false;

	if (!foreign_mark_visible(rel, index, snapshot, sweep_group))
	{
		SysScanDesc scan = cluster_marks_scan(rel, index, snapshot, sweep_group,
											  BTEqualStrategyNumber);
		HeapTuple	tup = systable_getnext_ordered(scan, BackwardScanDirection);

		found = HeapTupleIsValid(tup);
		if (found && mark != NULL)
			mark_from_tuple(tup, RelationGetDescr(rel), mark);
		systable_endscan_ordered(scan);
	}
	else if (refuse_foreign)
		foreign_mark(sweep_group);
	index_close(index, AccessShareLock);
	table_close(rel, AccessShareLock);
	return found;
}

/*
 * cfeed_mark_load
 *		The latest mark of a sweep group as of the snapshot (mark_load), and
 *		another cluster's refused.
 */
bool
cfeed_mark_load(int32 sweep_group, Snapshot snapshot, CfeedMark *mark)
{
	return mark_load(sweep_group, snapshot, mark, true);
}

/*
 * cfeed_mark_load_local
 *		The latest mark of a sweep group as of the snapshot (mark_load),
 *		false while the group has another cluster's mark: for a caller that
 *		must answer without raising until cfeed.adopt_marks() runs.
 */
bool
cfeed_mark_load_local(int32 sweep_group, Snapshot snapshot, CfeedMark *mark)
{
	return mark_load(sweep_group, snapshot, mark, false);
}

/*
 * cfeed_mark_load_any
 *		Like cfeed_mark_load, without refusing another cluster's marks: of
 *		each cluster's latest mark of the group, the one of the highest
 *		xmax (after pg_upgrade, until cfeed.adopt_marks(), the old
 *		cluster's, whose xids the new one continues); *foreign says whether
 *		one of them is another cluster's.  For cfeed.stats, which every
 *		reader reads and which must not raise.  Each cluster's latest is
 *		found as cfeed_mark_load finds this one's, from the end of the key
 *		below the system identifier of the one before.
 */
bool
cfeed_mark_load_any(int32 sweep_group, Snapshot snapshot, CfeedMark *mark, bool *foreign)
{
	Relation	rel = cfeed_table_open("sweep_mark", AccessShareLock);
	Relation	index = cfeed_index_open("sweep_mark_pkey", AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	bool		found = false;
	bool		first = true;
	bool		more = true;
	int64		below = 0;

	*foreign = false;
	while (more)
	{
		SysScanDesc scan;
		ScanKeyData keys[2];
		HeapTuple	tup;

		CHECK_FOR_INTERRUPTS();
		ScanKeyInit(&keys[0], Anum_mark_sweep_group, BTEqualStrategyNumber,
					F_INT4EQ, Int32GetDatum(sweep_group));
		ScanKeyInit(&keys[1], Anum_mark_system_identifier, BTLessStrategyNumber,
					F_INT8LT, Int64GetDatum(below));
		scan = systable_beginscan_ordered(rel, index, snapshot, first ? 1 : 2, keys);
		tup = systable_getnext_ordered(scan, BackwardScanDirection);
		more = HeapTupleIsValid(tup);
		if (more)
		{
			bool		isnull;
			FullTransactionId xmax = DatumGetFullTransactionId(heap_getattr(tup, Anum_mark_xmax,
																			desc, &isnull));

			below = DatumGetInt64(heap_getattr(tup, Anum_mark_system_identifier, desc, &isnull));
			*foreign = *foreign || below != (int64) GetSystemIdentifier();
			first = false;
			if (!found || FullTransactionIdFollows(xmax, mark->xmax))
			{
				if (found)
					pfree(mark->xip);
				mark_from_tuple(tup, desc, mark);
				found = true;
			}
		}
		systable_endscan_ordered(scan);
	}
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
 *		The caller is connected to SPI (cfeed_spi_connect), whose GUC
 *		level keeps cfeed_mark.maker.
 */
void
cfeed_mark_store(int32 sweep_group, const CfeedMark *mark, FullTransactionId prev)
{
	Oid			types[5] = {INT4OID, XID8OID, XID8ARRAYOID, INT8OID, XID8OID};
	Datum		values[5];
	char		maker[32];

	/*
	 * A mark of this cluster is one cfeed made (cfeed._sweep_mark_restored
	 * takes one that a restore brings for another cluster's); until
	 * cfeed_spi_finish pops the caller's level.
	 */
	snprintf(maker, sizeof(maker), UINT64_FORMAT, U64FromFullTransactionId(GetTopFullTransactionId()));
	(void) set_config_option("cfeed_mark.maker", maker, PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
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
 * delta_of
 *		value - base as an int, stored in *delta; false when it does not fit.
 */
static bool
delta_of(int64 value, int64 base, int32 *delta)
{
	int64		d;

	if (pg_sub_s64_overflow(value, base, &d) || d < PG_INT32_MIN || d > PG_INT32_MAX)
		return false;
	*delta = (int32) d;
	return true;
}

/*
 * entry_deltas
 *		Change c as an entry of a stamp row whose first change is first: its
 *		change_id and writer_xid less the first's, or false when one does
 *		not fit in an int (the row cannot take c).  Writers of one sweep
 *		almost always fit (only a change left unstamped for 2^31 xids would
 *		not); change_ids given by hand may not.
 */
static bool
entry_deltas(const CfeedPendingChange *first, const CfeedPendingChange *c,
			 int32 *id_delta, int32 *xid_delta)
{
	return delta_of(c->change_id, first->change_id, id_delta) &&
		delta_of((int64) U64FromFullTransactionId(c->writer_xid),
				 (int64) U64FromFullTransactionId(first->writer_xid), xid_delta);
}

/* qsort comparator of int32 */
static int
compare_int32(const void *a, const void *b)
{
	int32		x = *(const int32 *) a;
	int32		y = *(const int32 *) b;

	return x < y ? -1 : x > y;
}

/*
 * image_tables
 *		The tables of the row images of changes[0..n-1], their numbers
 *		(cfeed.change.tbl), each once, in order: an int[] datum, empty when
 *		none has an image.  A stamp's image_tables: a reader who may read
 *		them all sees every change the stamp names (read.c).
 */
static Datum
image_tables(const CfeedPendingChange *changes, int n)
{
	Datum	   *tables = palloc(sizeof(Datum) * Max(n, 1));
	int32	   *numbers = palloc(sizeof(int32) * Max(n, 1));
	int			count = 0;
	int			distinct = 0;
	int			i;
	ArrayType  *a;

	for (i = 0; i < n; i++)
		if (changes[i].image)
			numbers[count++] = changes[i].image_table;
	qsort(numbers, count, sizeof(int32), compare_int32);
	for (i = 0; i < count; i++)
		if (i == 0 || numbers[i] != numbers[i - 1])
			tables[distinct++] = Int32GetDatum(numbers[i]);
	a = construct_array(tables, distinct, INT4OID, sizeof(int32), true, TYPALIGN_INT);
	pfree(tables);
	pfree(numbers);
	return PointerGetDatum(a);
}

/*
 * insert_stamp
 *		One cfeed.stamp row: changes[0..n-1], of one shard, numbered
 *		consecutively, whose change_ids and writers are the first's plus
 *		id_deltas[i] and xid_deltas[i] (int4 datums, from entry_deltas),
 *		and the tables of their row images (image_tables).
 */
static void
insert_stamp(const CfeedPendingChange *changes, int n, Datum *id_deltas,
			 Datum *xid_deltas)
{
	Oid			types[10] = {INT4OID, INT4OID, INT8OID, INT8OID, TIMESTAMPTZOID,
	INT8OID, INT4ARRAYOID, XID8OID, INT4ARRAYOID, INT4ARRAYOID};
	Datum		values[10];

	Assert(changes[n - 1].number == changes[0].number + n - 1);
	values[0] = Int32GetDatum(changes[0].feed_id);
	values[1] = Int32GetDatum(changes[0].shard);
	values[2] = Int64GetDatum(changes[0].number);
	values[3] = Int64GetDatum(changes[n - 1].number);
	values[4] = TimestampTzGetDatum(changes[0].stamped_at);	/* its shard's */
	values[5] = Int64GetDatum(changes[0].change_id);
	values[6] = PointerGetDatum(construct_array(id_deltas, n, INT4OID, sizeof(int32),
												true, TYPALIGN_INT));
	values[7] = FullTransactionIdGetDatum(changes[0].writer_xid);
	values[8] = PointerGetDatum(construct_array(xid_deltas, n, INT4OID, sizeof(int32),
												true, TYPALIGN_INT));
	values[9] = image_tables(changes, n);
	(void) cfeed_spi_plan(&stamp_insert_plan,
						  "INSERT INTO cfeed.stamp (feed_id, shard, first_number, last_number, "
						  "stamped_at, first_change_id, change_id_deltas, first_writer_xid, "
						  "writer_xid_deltas, image_tables) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
						  10, types);
	(void) cfeed_spi_run(&stamp_insert_plan, values, SPI_OK_INSERT, "inserting a stamp");
	pfree(DatumGetPointer(values[6]));
	pfree(DatumGetPointer(values[8]));
	pfree(DatumGetPointer(values[9]));
}

/*
 * cfeed_ranges_stamp
 *		The write step for range shards: changes[0..n-1], ordered by shard
 *		and number, become cfeed.stamp rows of at most STAMP_ROW_MAX changes
 *		of one shard each (a change that entry_deltas refuses begins a new
 *		row).  Runs as the extension's owner (the sweep), connected to SPI
 *		(cfeed_spi_connect).
 */
void
cfeed_ranges_stamp(const CfeedPendingChange *changes, int n)
{
	Datum	   *id_deltas = palloc(sizeof(Datum) * Min(Max(n, 1), STAMP_ROW_MAX));
	Datum	   *xid_deltas = palloc(sizeof(Datum) * Min(Max(n, 1), STAMP_ROW_MAX));
	int			start = 0;

	while (start < n)
	{
		const CfeedPendingChange *first = &changes[start];
		int			count = 0;
		int32		id_delta;
		int32		xid_delta;

		CHECK_FOR_INTERRUPTS();
		/* the first entry always fits: its deltas are 0 */
		while (start + count < n && count < STAMP_ROW_MAX &&
			   changes[start + count].feed_id == first->feed_id &&
			   changes[start + count].shard == first->shard &&
			   entry_deltas(first, &changes[start + count], &id_delta, &xid_delta))
		{
			id_deltas[count] = Int32GetDatum(id_delta);
			xid_deltas[count] = Int32GetDatum(xid_delta);
			count++;
		}
		insert_stamp(first, count, id_deltas, xid_deltas);
		start += count;
	}
	pfree(id_deltas);
	pfree(xid_deltas);
}

/*
 * stamp_deltas
 *		The int[] of a stamp row's column attnum, detoasted (*copy: it is a
 *		copy, not the tuple's datum, which the caller frees), or ERROR for
 *		an array no sweep writes (a stamp edited by hand).
 */
static ArrayType *
stamp_deltas(HeapTuple tup, TupleDesc desc, AttrNumber attnum, bool *copy)
{
	bool		isnull;
	Datum		d = heap_getattr(tup, attnum, desc, &isnull);
	ArrayType  *a = isnull ? NULL : DatumGetArrayTypeP(d);

	*copy = a != NULL && (Pointer) a != DatumGetPointer(d);

	if (a == NULL || ARR_NDIM(a) > 1 || ARR_HASNULL(a) || ARR_ELEMTYPE(a) != INT4OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("a stamp of shard %d of feed %d was not written by a sweep",
						DatumGetInt32(heap_getattr(tup, Anum_stamp_shard, desc, &isnull)),
						DatumGetInt32(heap_getattr(tup, Anum_stamp_feed_id, desc, &isnull))),
				 errdetail("Its column %s is not a one-dimensional int[] without nulls.",
						   NameStr(TupleDescAttr(desc, attnum - 1)->attname))));
	return a;
}

/* The elements of a stamp_deltas array. */
#define DELTAS_COUNT(a)		ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a))
#define DELTAS(a)			((int32 *) ARR_DATA_PTR(a))

/*
 * cfeed_stamp_entries
 *		The changes a cfeed.stamp row numbers, in number order (the i-th,
 *		from 0, has number first_number + i): their change_ids and writers,
 *		palloc'd; returns their count.  A row whose arrays differ in length
 *		(edited by hand) gives as many as both have.
 */
int
cfeed_stamp_entries(HeapTuple tup, TupleDesc desc, int64 **ids, FullTransactionId **xids)
{
	bool		isnull;
	int64		first_id = DatumGetInt64(heap_getattr(tup, Anum_stamp_first_change_id, desc, &isnull));
	uint64		first_xid = U64FromFullTransactionId(
		DatumGetFullTransactionId(heap_getattr(tup, Anum_stamp_first_writer_xid, desc, &isnull)));
	bool		id_copy;
	bool		xid_copy;
	ArrayType  *id_deltas = stamp_deltas(tup, desc, Anum_stamp_change_id_deltas, &id_copy);
	ArrayType  *xid_deltas = stamp_deltas(tup, desc, Anum_stamp_writer_xid_deltas, &xid_copy);
	int			n = Min(DELTAS_COUNT(id_deltas), DELTAS_COUNT(xid_deltas));
	int			i;

	*ids = palloc(sizeof(int64) * Max(n, 1));
	*xids = palloc(sizeof(FullTransactionId) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		/* unsigned: a stamp edited by hand wraps around, never overflows */
		(*ids)[i] = (int64) ((uint64) first_id + (uint64) (int64) DELTAS(id_deltas)[i]);
		(*xids)[i] = FullTransactionIdFromU64(first_xid + (uint64) (int64) DELTAS(xid_deltas)[i]);
	}
	if (id_copy)
		pfree(id_deltas);
	if (xid_copy)
		pfree(xid_deltas);
	return n;
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
