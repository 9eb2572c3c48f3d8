/*-------------------------------------------------------------------------
 *
 * pending.c
 *	  cfeed._pending(): the changes of each shard that are committed and not
 *	  stamped yet, and the oldest one's written_at, for the view
 *	  cfeed.stats.
 *
 *	  Once a sweep group has a mark (its first range shard made it), the
 *	  mark records which of the group's changes are stamped, those of its
 *	  row shards too: its sweeps look for changes only where the mark
 *	  points (sweep.c), written by an xid from its xmax on or by one of its
 *	  xip, and a row shard with unstamped changes may not join the group
 *	  (cfeed._shard_config_storage).  So the unstamped changes of a shard
 *	  of a marked group are the entries of change_pending_idx the mark
 *	  points at whose row has no number (a range change's row never gets
 *	  one); those of a shard of another group, every entry of its shard
 *	  whose row has no number.  A database whose feeds moved to ranges
 *	  (cfeed.set_storage) keeps their old row shards in the same groups,
 *	  and pays no more for them.
 *
 *	  Both are found by direct index access, so that the work does not
 *	  hang on a plan: as a query, the probe of xip (writer_xid = ANY
 *	  (running)) was planned as a sequential scan of cfeed.change for
 *	  every range shard once the table's statistics saw few writers (a
 *	  backfill, a bulk insert): 0.4 s a read of the view over 600,000
 *	  changes and 4 shards, where cfeed serve reads it at every round of
 *	  its all-shards streams.  One walk of change_pending_idx serves every
 *	  group: from the lowest xmax of the marks on, or all of it when a
 *	  shard's group has no mark (every range change stays in the index);
 *	  then one probe per xid of each mark's xip.  With every group marked,
 *	  a read costs the changes written since the oldest mark: nothing more
 *	  once every group is swept, but all those written since a group last
 *	  stamped a range change while it is idle (a mark is stored by the
 *	  sweeps that stamp one), as a sweep of that group reads them.
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

/* A sweep group, and its mark (docs/design.md, "Storage in ranges"). */
typedef struct PendingGroup
{
	int32		sweep_group;
	bool		has_mark;
	bool		foreign;		/* one of its marks is another cluster's */
	CfeedMark	mark;
} PendingGroup;

typedef struct PendingShard
{
	PendingKey	key;
	PendingGroup *group;
	bool		by_mark;		/* its unstamped changes are those the group's
								 * mark points at */
	int64		count;
	TimestampTz oldest;
} PendingShard;

/*
 * load_shards
 *		Every shard of shard_config as of the snapshot into *shards, and the
 *		sweep group of each into *groups (with its mark), both new hash
 *		tables; in *any_unmarked whether a shard's unstamped changes are
 *		not known from a mark.
 *
 *		A group's mark, once it has one (its first range shard made it), is
 *		the record of which of its changes are stamped, the changes of its
 *		row shards too: its sweeps look for changes nowhere else (sweep.c),
 *		and a row shard with unstamped changes may not join it (the guard of
 *		cfeed.shard_config).  A range shard goes by its group's highest mark
 *		of any cluster (cfeed_mark_load_any); a row shard by the mark only
 *		while no other cluster's is there (the group's sweeps refuse then,
 *		and its unstamped changes are those without a number); a shard of a
 *		group without a mark by its changes without a number (a range
 *		shard's: none is stamped).
 */
static void
load_shards(Snapshot snapshot, HTAB **shards, HTAB **groups, bool *any_unmarked)
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
	*any_unmarked = false;
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		PendingKey	key;
		PendingShard *entry;
		PendingGroup *group;
		int32		sweep_group;
		bool		isnull;
		bool		found;
		bool		ranges;
		Datum		d;

		CHECK_FOR_INTERRUPTS();
		key.feed_id = DatumGetInt32(heap_getattr(tup, Anum_shard_feed_id, desc, &isnull));
		key.shard = DatumGetInt32(heap_getattr(tup, Anum_shard_shard, desc, &isnull));
		sweep_group = DatumGetInt32(heap_getattr(tup, Anum_shard_sweep_group, desc, &isnull));
		ranges = cfeed_shard_column(desc, tup, Anum_shard_storage, "storage", &d) &&
			strcmp(TextDatumGetCString(d), "ranges") == 0;
		group = hash_search(*groups, &sweep_group, HASH_ENTER, &found);
		if (!found)
			group->has_mark = cfeed_mark_load_any(sweep_group, snapshot, &group->mark,
												  &group->foreign);
		entry = hash_search(*shards, &key, HASH_ENTER, NULL);
		entry->group = group;
		entry->by_mark = group->has_mark && (ranges || !group->foreign);
		entry->count = 0;
		entry->oldest = DT_NOEND;
		*any_unmarked = *any_unmarked || !entry->by_mark;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
}

/*
 * unstamped
 *		Whether a change of the shard written by writer (found in
 *		change_pending_idx, its row without a number) is not stamped: one
 *		of a shard not known by a mark is not; else one written from the
 *		mark's xmax on is not (those of its xip are probed apart).
 */
static bool
unstamped(const PendingShard *entry, FullTransactionId writer)
{
	return !entry->by_mark || !FullTransactionIdPrecedes(writer, entry->group->mark.xmax);
}

/*
 * count_scan
 *		Count, per shard, the changes without a number that
 *		change_pending_idx finds with the key (none: all of it) and that
 *		match: those of a shard that goes by the mark of sweep group
 *		running_of, written by one of its xip (running_of not NULL), else
 *		those unstamped says are.
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
		if (running_of != NULL ? entry->group != running_of || !entry->by_mark :
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
 *		change_pending_idx, all of it when a shard is not known by a mark,
 *		else from the lowest xmax of the groups' marks on (the writers no
 *		sweep has seen); then one probe per xid of each group's xip.
 */
static void
count_pending(Snapshot snapshot, HTAB *shards, HTAB *groups, bool any_unmarked)
{
	Relation	rel = cfeed_table_open("change", AccessShareLock);
	Oid			pending = cfeed_relid_locked("change_pending_idx", AccessShareLock);
	HASH_SEQ_STATUS status;
	PendingGroup *g;
	bool		tail = false;
	FullTransactionId from = InvalidFullTransactionId;
	ScanKeyData key;

	hash_seq_init(&status, groups);
	while ((g = hash_seq_search(&status)) != NULL)
	{
		if (g->has_mark && (!tail || FullTransactionIdPrecedes(g->mark.xmax, from)))
			from = g->mark.xmax;
		tail = tail || g->has_mark;
	}
	ScanKeyInit(&key, Anum_change_writer_xid, BTGreaterEqualStrategyNumber, F_XID8GE,
				FullTransactionIdGetDatum(from));
	if (any_unmarked || tail)
		count_scan(rel, pending, snapshot, shards, any_unmarked ? 0 : 1, &key, NULL);

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
	bool		any_unmarked;
	HTAB	   *shards;
	HTAB	   *groups;
	HASH_SEQ_STATUS status;
	PendingShard *entry;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	load_shards(snapshot, &shards, &groups, &any_unmarked);
	count_pending(snapshot, shards, groups, any_unmarked);

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
