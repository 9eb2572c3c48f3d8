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
 *	  One walk of change_pending_idx serves both: from the lowest xmax of
 *	  the range groups' marks on (the writers no sweep has seen yet), or
 *	  all of it when a shard is stored in rows or a range group has no
 *	  mark (every range change stays in the index); then one probe per xid
 *	  of each group's xip.  With every shard in ranges a read costs the
 *	  changes written since the oldest mark: nothing more once every group
 *	  is swept, but all the changes written since a group last stamped one
 *	  while it is idle (its mark is stored by the sweeps that stamp range
 *	  changes only), as a sweep of that group reads them.
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

/* A sweep group of range shards, and its mark (docs/design.md). */
typedef struct PendingGroup
{
	int32		sweep_group;
	bool		has_mark;		/* without one, none of its changes is stamped */
	CfeedMark	mark;
} PendingGroup;

typedef struct PendingShard
{
	PendingKey	key;
	PendingGroup *group;		/* NULL for a row shard */
	int64		count;
	TimestampTz oldest;
} PendingShard;

/*
 * load_shards
 *		Every shard of shard_config as of the snapshot into *shards, and the
 *		sweep group of each range shard into *groups (with its mark), both
 *		new hash tables; in *any_rows whether a shard is stored in rows.
 */
static void
load_shards(Snapshot snapshot, HTAB **shards, HTAB **groups, bool *any_rows)
{
	HASHCTL		ctl;
	Relation	rel = cfeed_table_open("shard_config", AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	SysScanDesc scan = systable_beginscan(rel, InvalidOid, false, snapshot, 0, NULL);
	HeapTuple	tup;

	ctl.keysize = sizeof(PendingKey);
	ctl.entrysize = sizeof(PendingShard);
	ctl.hcxt = CurrentMemoryContext;
	*shards = hash_create("cfeed pending shards", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	ctl.keysize = sizeof(int32);
	ctl.entrysize = sizeof(PendingGroup);
	*groups = hash_create("cfeed pending groups", 16, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	*any_rows = false;
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		PendingKey	key;
		PendingShard *entry;
		bool		isnull;
		Datum		d;

		CHECK_FOR_INTERRUPTS();
		key.feed_id = DatumGetInt32(heap_getattr(tup, Anum_shard_feed_id, desc, &isnull));
		key.shard = DatumGetInt32(heap_getattr(tup, Anum_shard_shard, desc, &isnull));
		entry = hash_search(*shards, &key, HASH_ENTER, NULL);
		entry->group = NULL;
		entry->count = 0;
		entry->oldest = DT_NOEND;
		if (cfeed_shard_column(desc, tup, Anum_shard_storage, "storage", &d) &&
			strcmp(TextDatumGetCString(d), "ranges") == 0)
		{
			int32		sweep_group = DatumGetInt32(heap_getattr(tup, Anum_shard_sweep_group,
																 desc, &isnull));
			bool		found;

			entry->group = hash_search(*groups, &sweep_group, HASH_ENTER, &found);
			if (!found)
				entry->group->has_mark = cfeed_mark_load_any(sweep_group, snapshot,
															 &entry->group->mark);
		}
		else
			*any_rows = true;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
}

/*
 * unstamped
 *		Whether a change of the shard written by writer (as found by
 *		change_pending_idx, its row without a number) is not stamped: a row
 *		shard's is not; a range shard's is not when its group has no mark,
 *		or was written from the mark's xmax on (those of its xip are probed
 *		apart, count_running).
 */
static bool
unstamped(const PendingShard *entry, FullTransactionId writer)
{
	if (entry->group == NULL || !entry->group->has_mark)
		return true;
	return !FullTransactionIdPrecedes(writer, entry->group->mark.xmax);
}

/*
 * count_scan
 *		Count, per shard, the changes without a number that
 *		change_pending_idx finds with the key (none: all of it) and that
 *		match: those of a range shard of sweep group running_of written by
 *		one of its xip (running_of not NULL), else those unstamped says are.
 */
static void
count_scan(Relation rel, Oid pending, Snapshot snapshot, HTAB *shards, int nkeys, ScanKey key,
		   const PendingGroup *running_of)
{
	SysScanDesc scan = systable_beginscan(rel, pending, true, snapshot, nkeys, key);
	TupleDesc	desc = RelationGetDescr(rel);
	HeapTuple	tup;

	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		PendingKey	k;
		PendingShard *entry;
		bool		isnull;
		TimestampTz written;

		CHECK_FOR_INTERRUPTS();
		(void) heap_getattr(tup, Anum_change_sequence, desc, &isnull);
		if (!isnull)
			continue;
		k.feed_id = DatumGetInt32(heap_getattr(tup, Anum_change_feed_id, desc, &isnull));
		k.shard = DatumGetInt32(heap_getattr(tup, Anum_change_shard, desc, &isnull));
		entry = hash_search(shards, &k, HASH_FIND, NULL);
		if (entry == NULL)
			continue;
		if (running_of != NULL ? entry->group != running_of :
			!unstamped(entry, DatumGetFullTransactionId(heap_getattr(tup, Anum_change_writer_xid,
																	 desc, &isnull))))
			continue;
		written = DatumGetTimestampTz(heap_getattr(tup, Anum_change_written_at, desc, &isnull));
		entry->count++;
		if (written < entry->oldest)
			entry->oldest = written;
	}
	systable_endscan(scan);
}

/*
 * count_pending
 *		Count every shard's unstamped changes: one walk of
 *		change_pending_idx, all of it when a shard is stored in rows or a
 *		range group has no mark, else from the lowest xmax of the groups'
 *		marks on (the writers no sweep has seen); then one probe per xid of
 *		each group's xip.
 */
static void
count_pending(Snapshot snapshot, HTAB *shards, HTAB *groups, bool any_rows)
{
	Relation	rel = cfeed_table_open("change", AccessShareLock);
	Oid			pending = cfeed_relid_locked("change_pending_idx", AccessShareLock);
	HASH_SEQ_STATUS status;
	PendingGroup *g;
	bool		all = any_rows;
	bool		tail = false;
	FullTransactionId from = InvalidFullTransactionId;
	ScanKeyData key;

	hash_seq_init(&status, groups);
	while ((g = hash_seq_search(&status)) != NULL)
	{
		all = all || !g->has_mark;
		if (g->has_mark && (!tail || FullTransactionIdPrecedes(g->mark.xmax, from)))
			from = g->mark.xmax;
		tail = tail || g->has_mark;
	}
	ScanKeyInit(&key, Anum_change_writer_xid, BTGreaterEqualStrategyNumber, F_XID8GE,
				FullTransactionIdGetDatum(from));
	if (all || tail)
		count_scan(rel, pending, snapshot, shards, all ? 0 : 1, &key, NULL);

	hash_seq_init(&status, groups);
	while ((g = hash_seq_search(&status)) != NULL)
		for (int i = 0; g->has_mark && i < g->mark.nxip; i++)
		{
			ScanKeyInit(&key, Anum_change_writer_xid, BTEqualStrategyNumber, F_XID8EQ,
						FullTransactionIdGetDatum(g->mark.xip[i]));
			count_scan(rel, pending, snapshot, shards, 1, &key, g);
		}
	UnlockRelationOid(pending, AccessShareLock);
	table_close(rel, AccessShareLock);
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
	HTAB	   *shards;
	HTAB	   *groups;
	HASH_SEQ_STATUS status;
	PendingShard *entry;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	load_shards(snapshot, &shards, &groups, &any_rows);
	count_pending(snapshot, shards, groups, any_rows);

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
	hash_destroy(groups);
	return (Datum) 0;
}
