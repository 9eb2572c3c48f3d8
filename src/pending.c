/*-------------------------------------------------------------------------
 *
 * pending.c
 *	  cfeed._pending(): the changes of each shard that are committed and not
 *	  stamped yet, and the oldest one's written_at, for the view
 *	  cfeed.stats.
 *
 *	  A row shard's are the entries of change_pending_idx whose row has no
 *	  number.  A range shard's changes all stay in that index (their rows
 *	  are never updated), and its unstamped ones are those its group's mark
 *	  points at: written by an xid from the mark's xmax on, or by one of
 *	  its xip (docs/design.md, "Storage in ranges").  Both are found by
 *	  direct index access, so that the work does not hang on a plan: as a
 *	  query, the probe of xip (writer_xid = ANY (running)) was planned as a
 *	  sequential scan of cfeed.change for every range shard once the
 *	  table's statistics saw few writers (a backfill, a bulk insert): 0.4 s
 *	  a read of the view over 600,000 changes and 4 shards, where cfeed
 *	  serve reads it at every round of its all-shards streams.
 *
 *	  The range part costs the probes of each group's unstamped tail
 *	  (nothing once swept); the row part is a walk of all of
 *	  change_pending_idx, which also holds every range change, and runs
 *	  only when some shard is stored in rows.
 *
 *	  Counts come from every change of the shard, also those whose row
 *	  image the caller may not read (as cfeed._shard_ended), and only for
 *	  the feeds the caller may read: any role may call it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "fmgr.h"
#include "funcapi.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/xid8.h"

#include "cfeed.h"
#include "compat.h"

PG_FUNCTION_INFO_V1(cfeed_pending);

typedef struct PendingKey
{
	int32		feed_id;
	int32		shard;
} PendingKey;

typedef struct PendingShard
{
	PendingKey	key;
	int32		sweep_group;
	bool		ranges;
	int64		count;
	TimestampTz oldest;
} PendingShard;

/*
 * load_shards
 *		Every shard of shard_config as of the snapshot into a new hash table;
 *		in *any_rows whether one is stored in rows, and the sweep groups of
 *		the range shards in *groups (a List of ints, each once).
 */
static HTAB *
load_shards(Snapshot snapshot, bool *any_rows, List **groups)
{
	HASHCTL		ctl;
	HTAB	   *shards;
	Relation	rel = cfeed_table_open("shard_config", AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	SysScanDesc scan = systable_beginscan(rel, InvalidOid, false, snapshot, 0, NULL);
	HeapTuple	tup;

	ctl.keysize = sizeof(PendingKey);
	ctl.entrysize = sizeof(PendingShard);
	ctl.hcxt = CurrentMemoryContext;
	shards = hash_create("cfeed pending shards", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	*any_rows = false;
	*groups = NIL;
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		PendingKey	key;
		PendingShard *entry;
		bool		isnull;
		Datum		d;

		CHECK_FOR_INTERRUPTS();
		key.feed_id = DatumGetInt32(heap_getattr(tup, Anum_shard_feed_id, desc, &isnull));
		key.shard = DatumGetInt32(heap_getattr(tup, Anum_shard_shard, desc, &isnull));
		entry = hash_search(shards, &key, HASH_ENTER, NULL);
		entry->sweep_group = DatumGetInt32(heap_getattr(tup, Anum_shard_sweep_group, desc, &isnull));
		entry->ranges = cfeed_shard_column(desc, tup, Anum_shard_storage, "storage", &d) &&
			strcmp(TextDatumGetCString(d), "ranges") == 0;
		entry->count = 0;
		entry->oldest = DT_NOEND;
		if (entry->ranges)
			*groups = list_append_unique_int(*groups, entry->sweep_group);
		else
			*any_rows = true;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return shards;
}

/*
 * count_scan
 *		Count the changes without a number that change_pending_idx finds with
 *		the keys (none: all of it) and that belong to a range shard of the
 *		sweep group (ranges) or to a row shard (!ranges).
 */
static void
count_scan(Relation rel, Oid pending, Snapshot snapshot, HTAB *shards, bool ranges,
		   int32 sweep_group, int nkeys, ScanKey keys)
{
	SysScanDesc scan = systable_beginscan(rel, pending, true, snapshot, nkeys, keys);
	TupleDesc	desc = RelationGetDescr(rel);
	HeapTuple	tup;

	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		PendingKey	key;
		PendingShard *entry;
		bool		isnull;
		TimestampTz written;

		CHECK_FOR_INTERRUPTS();
		(void) heap_getattr(tup, Anum_change_sequence, desc, &isnull);
		if (!isnull)
			continue;
		key.feed_id = DatumGetInt32(heap_getattr(tup, Anum_change_feed_id, desc, &isnull));
		key.shard = DatumGetInt32(heap_getattr(tup, Anum_change_shard, desc, &isnull));
		entry = hash_search(shards, &key, HASH_FIND, NULL);
		if (entry == NULL || entry->ranges != ranges ||
			(ranges && entry->sweep_group != sweep_group))
			continue;
		written = DatumGetTimestampTz(heap_getattr(tup, Anum_change_written_at, desc, &isnull));
		entry->count++;
		if (written < entry->oldest)
			entry->oldest = written;
	}
	systable_endscan(scan);
}

/*
 * count_group
 *		Count the unstamped changes of the sweep group's range shards: those
 *		its mark points at, one scan of the writers from its xmax on and one
 *		probe per xid of its xip.  Without a mark (a row of cfeed.sweep_mark
 *		deleted by hand, which the group's sweeps refuse) none is stamped.
 */
static void
count_group(Relation rel, Oid pending, Snapshot snapshot, HTAB *shards, int32 sweep_group)
{
	CfeedMark	mark;
	ScanKeyData key;
	int			i;

	if (!cfeed_mark_load_any(sweep_group, snapshot, &mark))
	{
		count_scan(rel, pending, snapshot, shards, true, sweep_group, 0, NULL);
		return;
	}
	ScanKeyInit(&key, Anum_change_writer_xid, BTGreaterEqualStrategyNumber, F_XID8GE,
				FullTransactionIdGetDatum(mark.xmax));
	count_scan(rel, pending, snapshot, shards, true, sweep_group, 1, &key);
	for (i = 0; i < mark.nxip; i++)
	{
		ScanKeyInit(&key, Anum_change_writer_xid, BTEqualStrategyNumber, F_XID8EQ,
					FullTransactionIdGetDatum(mark.xip[i]));
		count_scan(rel, pending, snapshot, shards, true, sweep_group, 1, &key);
	}
	pfree(mark.xip);
}

/*
 * cfeed_pending
 *		SQL: cfeed._pending() returns table (feed_id int, shard int, pending
 *		bigint, oldest_written_at timestamptz): each shard with unstamped
 *		changes as of the statement's snapshot, of the feeds the caller may
 *		read.
 */
Datum
cfeed_pending(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Snapshot	snapshot = GetActiveSnapshot();
	bool		any_rows;
	List	   *groups;
	HTAB	   *shards;
	Relation	rel;
	Oid			pending;
	ListCell   *lc;
	HASH_SEQ_STATUS status;
	PendingShard *entry;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	shards = load_shards(snapshot, &any_rows, &groups);
	rel = cfeed_table_open("change", AccessShareLock);
	pending = cfeed_relid_locked("change_pending_idx", AccessShareLock);
	foreach(lc, groups)
		count_group(rel, pending, snapshot, shards, lfirst_int(lc));
	if (any_rows)
		count_scan(rel, pending, snapshot, shards, false, 0, 0, NULL);
	UnlockRelationOid(pending, AccessShareLock);
	table_close(rel, AccessShareLock);

	hash_seq_init(&status, shards);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		Datum		values[4];
		bool		nulls[4] = {false, false, false, false};

		if (entry->count == 0 || !cfeed_may_read_feed(entry->key.feed_id))
			continue;
		values[0] = Int32GetDatum(entry->key.feed_id);
		values[1] = Int32GetDatum(entry->key.shard);
		values[2] = Int64GetDatum(entry->count);
		values[3] = TimestampTzGetDatum(entry->oldest);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	hash_destroy(shards);
	return (Datum) 0;
}
