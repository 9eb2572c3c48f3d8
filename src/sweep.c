/*-------------------------------------------------------------------------
 *
 * sweep.c
 *	  Stamping: the one routine that turns committed changes into gapless
 *	  per-shard sequence numbers, shared by cfeed.sweep(), cfeed.sweep_loop()
 *	  and the background sweeper.
 *
 * Storage design
 * --------------
 * cfeed.change is one heap with two partial indexes:
 *
 *	 change_sequence_idx (feed_id, shard, change_sequence_number)
 *		 WHERE change_sequence_number IS NOT NULL  -- readers' range scans
 *	 change_pending_idx (writer_xid) WHERE change_sequence_number IS NULL
 *
 * A writer inserts one row (number null) and pays for one index entry, in
 * the pending index, plus the foreign-key check.  Its writer_xid defaults to
 * the writer's top-level xid.  A sweep stamps by updating rows in place:
 * the new version enters only the readers' index; the old version leaves a
 * dead entry in the pending index until VACUUM removes it.
 *
 * The trap of that design is the dead entries: while any transaction holds
 * back the xmin horizon, VACUUM cannot remove them and index scans cannot
 * mark them killed, so a sweep that walks "all pending entries" re-reads
 * every change stamped since the horizon was pinned and slows down without
 * bound.  cfeed avoids it with an xid watermark per sweep group, taken from
 * the snapshot each sweep runs with:
 *
 *	 after a sweep with snapshot S, every transaction with xid < S.xmax that
 *	 is not in S.xip had finished; its committed changes were visible to S
 *	 and are now stamped.  So the next sweep need only look at writer_xid in
 *	 S.xip (still running then) or >= S.xmax (not started then).
 *
 * A sweep therefore reads index entries of new changes plus at most one
 * probe per transaction that was running at the previous sweep: its cost
 * grows with the changes to stamp, not with the dead entries behind it, nor
 * with the number of shards (shards are looked up only when a change names
 * them).  A long-open writer does not pin the watermark either; its xid is
 * probed alone until it ends.
 *
 * The watermark lives in backend memory and is only a hint: one that is too
 * old costs time, never correctness, because visibility to the sweep's
 * snapshot decides what is stamped.  It is advanced only when the sweep's
 * transaction commits (a transaction and subtransaction callback), since
 * changes found by an aborted sweep are still pending.  A backend's first
 * sweep of a group reads the whole pending index.
 *
 * Concurrency
 * -----------
 * Sweeps of one group are serialized by a transaction-level advisory lock
 * taken before the snapshot, so a sweep sees every stamp of the sweeps
 * before it, and numbers each shard on from its head as of that snapshot.
 * Next, still before the snapshot, the sweep locks cfeed.change (ROW
 * EXCLUSIVE) until its transaction ends: a rewrite (VACUUM FULL, CLUSTER,
 * a rewriting ALTER TABLE) or TRUNCATE waits for the sweep, so the tuple
 * addresses it collected stay valid until it has stamped them, and one
 * that committed before is in the sweep's snapshot (isolation test
 * sweep_rewrite).  (cfeed.shard_config is locked first, in the order of
 * DROP EXTENSION, which would otherwise deadlock with a sweep.)  A shard
 * moved to another group takes both groups' locks
 * until its move commits, and its invalidation of cfeed.shard_config makes
 * every backend's watermarks invalid (watermarks_invalidate).
 * A shard's head is not stored anywhere: it is the highest stamped number,
 * read from change_sequence_idx (see cfeed.shard; a sweep first checks the
 * head its backend's last sweep left with a cheaper forward probe, see
 * cfeed_shard_head), so no sweep updates a row that writers lock for their
 * foreign-key checks, and nothing grows a version chain while the xmin
 * horizon is held.  A number whose row is deleted is never issued again:
 * the shard's floor (cfeed.shard_config.deleted_head, kept by the
 * statement triggers of DELETE and TRUNCATE) is where numbering goes on
 * when it is above the highest stamped row.  That gives guarantees 1-5; for safety beyond it (a
 * shard moved to another group while both groups sweep) the unique
 * change_sequence_idx refuses a number issued twice, and the update must
 * touch every change it read as unstamped, or the sweep fails (23505 or
 * 40001) and changes nothing (isolation test sweep_moved_shard).
 *
 * Writing the stamps
 * ------------------
 * The update is made without the executor (stamp_direct, with direct.c):
 * per change, the version the sweep's snapshot saw is updated in the heap
 * and the new version's index entries are made, as an UPDATE would do; a
 * version updated or deleted meanwhile fails the sweep.  An SPI UPDATE,
 * whose executor start-up and shutdown cost more than stamping a typical
 * batch of a few changes, runs instead when what a DBA has added to
 * cfeed.change needs the executor (see direct.c: triggers, row-level
 * security, CHECKs, indexes that are not plain btrees).
 *
 * Within a sweep, changes are numbered per shard in change_id order.  When
 * more than cfeed.sweep_batch_size changes are pending, the sweep takes the
 * lowest change_ids, so a transaction that committed before another began
 * (and drew lower change_ids from cfeed.change_id) is never numbered after it.
 *
 * The stamping transaction commits synchronously (ForceSyncCommit), so a
 * stamp is on disk before any reader can see it, and NOTIFYs each longpoll
 * shard's new head on channel cfeed_<feed_id>_<shard>.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/async.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "pgstat.h"
#include "rewrite/prs2lock.h"
#include "rewrite/rewriteDefine.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "utils/xid8.h"

#include "cache.h"
#include "cfeed.h"
#include "shmem.h"

/* Beyond this many xids a watermark falls back to a plain range. */
#define WATERMARK_MAX_XIDS			4096

/* An xid watermark: look at writer_xid in xip[] or >= xmax. */
typedef struct Watermark
{
	FullTransactionId xmax;
	int			nxip;
	FullTransactionId *xip;		/* sorted */
} Watermark;

/* Per sweep group: the committed watermark and one awaiting commit. */
typedef struct GroupWatermark
{
	int32		sweep_group;	/* hash key */
	bool		valid;
	Watermark	committed;
	bool		proposed_valid;
	SubTransactionId proposed_subid;
	Watermark	proposed;
} GroupWatermark;

/* One pending change found by a sweep. */
typedef struct PendingChange
{
	int32		feed_id;
	int32		shard;
	int64		change_id;
	ItemPointerData tid;
	TimestampTz written_at;
	FullTransactionId writer_xid;
	int64		number;			/* assigned sequence number */
} PendingChange;

/* The head a sweep of this backend last left a shard at: a hint only. */
typedef struct HeadHint
{
	int32		key[2];			/* feed_id, shard: hash key */
	int64		head;
} HeadHint;

/* A shard touched by a sweep. */
typedef struct ShardEntry
{
	int32		key[2];			/* feed_id, shard: hash key */
	bool		in_group;
	CfeedShard	shard;
	int32		count;
	int64		new_last;
	int64		lag_ms;
	HeadHint   *hint;
} ShardEntry;

static HTAB *watermarks = NULL;
static Oid	watermark_shard_config = InvalidOid;	/* its invalidations reset them */
static HTAB *head_hints = NULL;
static SPIPlanPtr update_changes_plan = NULL;
static CfeedIndexCache stamp_indexes;

PG_FUNCTION_INFO_V1(cfeed_sweep);
PG_FUNCTION_INFO_V1(cfeed_sweep_loop);

/*
 * watermark_copy
 *		Copy a watermark into TopMemoryContext, freeing what dst held.
 */
static void
watermark_copy(Watermark *dst, const Watermark *src)
{
	if (dst->xip)
		pfree(dst->xip);
	dst->xmax = src->xmax;
	dst->nxip = src->nxip;
	dst->xip = NULL;
	if (src->nxip > 0)
	{
		dst->xip = MemoryContextAlloc(TopMemoryContext,
									  sizeof(FullTransactionId) * src->nxip);
		memcpy(dst->xip, src->xip, sizeof(FullTransactionId) * src->nxip);
	}
}

/*
 * watermark_xact_callback / watermark_subxact_callback
 *		Make a proposed watermark the committed one when its transaction
 *		commits; forget it when the transaction or the subtransaction that
 *		swept aborts.
 */
static void
watermark_xact_callback(XactEvent event, void *arg)
{
	HASH_SEQ_STATUS status;
	GroupWatermark *gw;

	if (watermarks == NULL)
		return;
	hash_seq_init(&status, watermarks);
	while ((gw = hash_seq_search(&status)) != NULL)
	{
		if (!gw->proposed_valid)
			continue;
		if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT)
		{
			watermark_copy(&gw->committed, &gw->proposed);
			gw->valid = true;
		}
		if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT ||
			event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT ||
			event == XACT_EVENT_PREPARE)
			gw->proposed_valid = false;
	}
}

static void
watermark_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						   SubTransactionId parentSubid, void *arg)
{
	HASH_SEQ_STATUS status;
	GroupWatermark *gw;

	if (watermarks == NULL)
		return;
	hash_seq_init(&status, watermarks);
	while ((gw = hash_seq_search(&status)) != NULL)
	{
		if (!gw->proposed_valid || gw->proposed_subid < mySubid)
			continue;
		if (event == SUBXACT_EVENT_ABORT_SUB)
			gw->proposed_valid = false;
		else if (event == SUBXACT_EVENT_COMMIT_SUB)
			gw->proposed_subid = parentSubid;
	}
}

/*
 * watermarks_invalidate
 *		The cache's invalidation callback (cache.c): cfeed.shard_config (or
 *		every relation) has changed.  A shard may have joined a sweep group whose
 *		watermark passed over its pending changes while they were another
 *		group's: every group's next sweep reads the whole pending index.  The
 *		guard trigger of shard_config sends the invalidation before the
 *		transaction that moves a shard releases the sweep locks of both
 *		groups, so the next sweep of either group reads it (cfeed_sweep_group
 *		reads invalidations after taking its lock).
 */
static void
watermarks_invalidate(Oid relid)
{
	HASH_SEQ_STATUS status;
	GroupWatermark *gw;

	if (watermarks == NULL || (OidIsValid(relid) && relid != watermark_shard_config))
		return;
	hash_seq_init(&status, watermarks);
	while ((gw = hash_seq_search(&status)) != NULL)
		gw->valid = false;
}

/*
 * group_watermark
 *		The watermark entry of a sweep group, created (invalid) on first use.
 */
static GroupWatermark *
group_watermark(int32 sweep_group)
{
	GroupWatermark *gw;
	bool		found;

	if (watermarks == NULL)
	{
		cfeed_cache_register(CFEED_CACHE_WATERMARKS, watermarks_invalidate);
		watermarks = cfeed_cache_hash("cfeed sweep watermarks", sizeof(int32),
									  sizeof(GroupWatermark));
		RegisterXactCallback(watermark_xact_callback, NULL);
		RegisterSubXactCallback(watermark_subxact_callback, NULL);
	}
	gw = hash_search(watermarks, &sweep_group, HASH_ENTER, &found);
	if (!found)
	{
		gw->valid = false;
		gw->proposed_valid = false;
		memset(&gw->committed, 0, sizeof(Watermark));
		memset(&gw->proposed, 0, sizeof(Watermark));
	}
	return gw;
}

/*
 * head_hint
 *		The hint entry of a shard (head 0 when new), for cfeed_shard_head.
 */
static HeadHint *
head_hint(int32 feed_id, int32 shard)
{
	int32		key[2] = {feed_id, shard};
	HeadHint   *h;
	bool		found;

	if (head_hints == NULL)
		head_hints = cfeed_cache_hash("cfeed head hints", sizeof(key), sizeof(HeadHint));
	h = hash_search(head_hints, key, HASH_ENTER, &found);
	if (!found)
		h->head = 0;
	return h;
}

/*
 * widen_xid
 *		The full xid of a 32-bit xid taken from a snapshot, given a next full
 *		xid read after that snapshot (so every snapshot xid precedes it).
 */
static FullTransactionId
widen_xid(TransactionId xid, FullTransactionId next)
{
	uint32		epoch = EpochFromFullTransactionId(next);

	if (xid > XidFromFullTransactionId(next))
		epoch--;
	return FullTransactionIdFromEpochAndXid(epoch, xid);
}

static int
compare_fxid(const void *a, const void *b)
{
	FullTransactionId x = *(const FullTransactionId *) a;
	FullTransactionId y = *(const FullTransactionId *) b;

	if (FullTransactionIdPrecedes(x, y))
		return -1;
	return FullTransactionIdFollows(x, y) ? 1 : 0;
}

/* Order pending changes by change_id (the batch cut). */
static int
compare_change_id(const void *a, const void *b)
{
	const PendingChange *x = a;
	const PendingChange *y = b;

	if (x->change_id != y->change_id)
		return x->change_id < y->change_id ? -1 : 1;
	return ItemPointerCompare((ItemPointer) &x->tid, (ItemPointer) &y->tid);
}

/* Order pending changes by shard, then change_id (the numbering). */
static int
compare_shard_change(const void *a, const void *b)
{
	const PendingChange *x = a;
	const PendingChange *y = b;

	if (x->feed_id != y->feed_id)
		return x->feed_id < y->feed_id ? -1 : 1;
	if (x->shard != y->shard)
		return x->shard < y->shard ? -1 : 1;
	return compare_change_id(a, b);
}

/*
 * scan_pending_key
 *		Append to *changes the pending changes that the pending index yields
 *		for one scan key (or all of them when key is NULL), as visible to
 *		snapshot.
 */
static void
scan_pending_key(Relation heap, Relation index, Snapshot snapshot,
				 ScanKey key, PendingChange **changes, int *n, int *cap)
{
	IndexScanDesc scan;
	TupleTableSlot *slot = table_slot_create(heap, NULL);

	scan = cfeed_index_beginscan(heap, index, snapshot, key ? 1 : 0, 0);
	index_rescan(scan, key, key ? 1 : 0, NULL, 0);
	while (index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		PendingChange *c;
		bool		isnull;

		CHECK_FOR_INTERRUPTS();
		(void) slot_getattr(slot, Anum_change_sequence, &isnull);
		if (!isnull)
			continue;			/* defensive: the index is partial */
		if (*n >= *cap)
		{
			*cap *= 2;
			*changes = repalloc_huge(*changes, sizeof(PendingChange) * *cap);
		}
		c = &(*changes)[(*n)++];
		c->feed_id = DatumGetInt32(slot_getattr(slot, Anum_change_feed_id, &isnull));
		c->shard = DatumGetInt32(slot_getattr(slot, Anum_change_shard, &isnull));
		c->change_id = DatumGetInt64(slot_getattr(slot, Anum_change_change_id, &isnull));
		c->written_at = DatumGetTimestampTz(slot_getattr(slot, Anum_change_written_at, &isnull));
		c->writer_xid = DatumGetFullTransactionId(slot_getattr(slot, Anum_change_writer_xid, &isnull));
		c->tid = slot->tts_tid;
		c->number = 0;
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
}

/*
 * scan_pending
 *		Collect the pending changes a sweep must look at: writer_xid >= xmax or
 *		in xip of the group's watermark (all of them without a watermark).
 *		heap is cfeed.change, locked by the caller until its transaction ends.
 */
static PendingChange *
scan_pending(Relation heap, GroupWatermark *gw, Snapshot snapshot, int *nchanges)
{
	Relation	index = cfeed_index_open("change_pending_idx", AccessShareLock);
	int			cap = 1024;
	int			n = 0;
	PendingChange *changes = palloc(sizeof(PendingChange) * cap);
	ScanKeyData key;

	if (!gw->valid)
		scan_pending_key(heap, index, snapshot, NULL, &changes, &n, &cap);
	else
	{
		int			i;

		ScanKeyInit(&key, 1, BTGreaterEqualStrategyNumber, F_XID8GE,
					FullTransactionIdGetDatum(gw->committed.xmax));
		scan_pending_key(heap, index, snapshot, &key, &changes, &n, &cap);
		for (i = 0; i < gw->committed.nxip; i++)
		{
			ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_XID8EQ,
						FullTransactionIdGetDatum(gw->committed.xip[i]));
			scan_pending_key(heap, index, snapshot, &key, &changes, &n, &cap);
		}
	}

	index_close(index, NoLock);
	*nchanges = n;
	return changes;
}

/*
 * propose_watermark
 *		Compute the watermark that holds once this sweep commits: the
 *		snapshot's running xids and xmax, plus the xids of changes left for a
 *		later sweep by the batch cut, and the sweep's own.
 */
static void
propose_watermark(GroupWatermark *gw, Snapshot snapshot,
				  PendingChange *left, int nleft)
{
	FullTransactionId next = ReadNextFullTransactionId();
	int			nxip = 0;
	int			i;
	FullTransactionId *xip = palloc(sizeof(FullTransactionId) * (snapshot->xcnt + nleft + 1));
	FullTransactionId own;
	Watermark	w;

	for (i = 0; i < (int) snapshot->xcnt; i++)
		xip[nxip++] = widen_xid(snapshot->xip[i], next);
	for (i = 0; i < nleft; i++)
		xip[nxip++] = left[i].writer_xid;

	/*
	 * The sweep's own transaction is not in its snapshot's xip, yet it has
	 * not finished: changes it publishes after this sweep carry its xid.
	 * (An xid it gets later is at or above xmax, where the next sweep
	 * looks anyway: xip holds only xids below xmax, each probed once.)
	 */
	w.xmax = widen_xid(snapshot->xmax, next);
	own = GetTopFullTransactionIdIfAny();
	if (FullTransactionIdIsValid(own) && FullTransactionIdPrecedes(own, w.xmax))
		xip[nxip++] = own;
	qsort(xip, nxip, sizeof(FullTransactionId), compare_fxid);
	/* deduplicate */
	if (nxip > 1)
	{
		int			j = 0;

		for (i = 1; i < nxip; i++)
			if (!FullTransactionIdEquals(xip[i], xip[j]))
				xip[++j] = xip[i];
		nxip = j + 1;
	}

	w.nxip = nxip;
	w.xip = xip;
	if (nxip > WATERMARK_MAX_XIDS)
	{
		/* too many to probe one by one: scan from the lowest instead */
		if (FullTransactionIdPrecedes(xip[0], w.xmax))
			w.xmax = xip[0];
		w.nxip = 0;
	}

	watermark_copy(&gw->proposed, &w);
	gw->proposed_valid = true;
	gw->proposed_subid = GetCurrentSubTransactionId();
	pfree(xip);
}

/*
 * build_array
 *		A one-dimensional array of n pass-by-value datums.
 */
static Datum
build_array(Datum *values, int n, Oid elemtype)
{
	int16		typlen;
	bool		typbyval;
	char		typalign;

	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	return PointerGetDatum(construct_array(values, n, elemtype, typlen, typbyval, typalign));
}

/*
 * concurrent_sweep_error
 *		A stamping update touched fewer of the batch's changes than it read
 *		as pending: a concurrent sweep got there first.
 */
static void
concurrent_sweep_error(uint64 expected, uint64 updated)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("a concurrent sweep changed the changes while this sweep ran"),
			 errdetail("Expected to update " UINT64_FORMAT " rows, updated " UINT64_FORMAT ".",
					   expected, updated),
			 errhint("Nothing was stamped by this sweep; run it again.  A shard was probably moved to another sweep group.")));
}

/*
 * pin_plan_shapes
 *		Make the sweep's update plan as a nested loop of TID scans over the
 *		batch.  A hash or merge join would read the whole table (or the
 *		pending index with its dead entries) on every sweep, which is exactly
 *		the cost this design avoids.  The plan is generic, made once per
 *		backend.  The settings last until AtEOXact_GUC with the returned nest
 *		level.
 */
static int
pin_plan_shapes(void)
{
	static const char *const off[] = {"enable_hashjoin", "enable_mergejoin",
	"enable_seqscan", "enable_bitmapscan", "enable_material"};
	int			nestlevel = NewGUCNestLevel();
	int			i;

	for (i = 0; i < (int) lengthof(off); i++)
		(void) set_config_option(off[i], "off", PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
	/* the shape is fixed: plan once, not per sweep */
	(void) set_config_option("plan_cache_mode", "force_generic_plan", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	return nestlevel;
}

/*
 * stamp_with_sql
 *		Write the numbers with one update of all the batch's changes, which
 *		must touch each of them (a concurrent sweep would have made some
 *		invisible).
 */
static void
stamp_with_sql(Relation rel, PendingChange *changes, int n, TimestampTz now)
{
	Datum	   *tids = palloc(sizeof(Datum) * n);
	Datum	   *numbers = palloc(sizeof(Datum) * n);
	Datum		args[3];
	Oid			types[3] = {TIDARRAYOID, INT8ARRAYOID, TIMESTAMPTZOID};
	int			i;
	int			nestlevel;
	int			spi_level = cfeed_spi_connect();
	int			rc;

	for (i = 0; rel->rd_rules != NULL && i < rel->rd_rules->numLocks; i++)
	{
		RewriteRule *rule = rel->rd_rules->rules[i];

		if (rule->event == CMD_UPDATE && rule->isInstead && rule->enabled != RULE_DISABLED)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cfeed cannot stamp changes: a DO INSTEAD rule replaces updates of cfeed.change"),
					 errdetail("Stamps are written by an update of cfeed.change, which the rule would replace."),
					 errhint("Drop the rule, or make it DO ALSO.")));
	}
	for (i = 0; i < n; i++)
	{
		tids[i] = PointerGetDatum(&changes[i].tid);
		numbers[i] = Int64GetDatum(changes[i].number);
	}

	nestlevel = pin_plan_shapes();
	args[0] = PointerGetDatum(construct_array(tids, n, TIDOID, sizeof(ItemPointerData), false, TYPALIGN_SHORT));
	args[1] = build_array(numbers, n, INT8OID);
	args[2] = TimestampTzGetDatum(now);
	rc = SPI_execute_plan(cfeed_spi_plan(&update_changes_plan,
										 "UPDATE cfeed.change c SET change_sequence_number = u.number, stamped_at = $3 "
										 "FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) AS u(tid, number) "
										 "WHERE c.ctid = u.tid",
										 3, types),
						  args, NULL, false, 0);
	if (rc != SPI_OK_UPDATE)
		elog(ERROR, "cfeed sweep: updating the changes failed: %s", SPI_result_code_string(rc));
	if (SPI_processed != (uint64) n)
		concurrent_sweep_error(n, SPI_processed);
	AtEOXact_GUC(true, nestlevel);
	cfeed_spi_finish(spi_level);
}

/*
 * stamp_direct
 *		Write the numbers without the executor (direct.c), as the update of
 *		stamp_with_sql would: per change, the version visible to the sweep's
 *		snapshot is updated to a new one with its number and stamped_at, and
 *		the new version's index entries are made.  Each update must succeed
 *		(else a concurrent sweep got there first).  Returns false, having
 *		written nothing, when the update must run as SQL (see direct.c).
 *		rel is cfeed.change, locked by the caller until its transaction ends.
 */
static bool
stamp_direct(Relation rel, PendingChange *changes, int n, TimestampTz now, Snapshot snapshot)
{
	CfeedIndexCache *indexes;
	TupleTableSlot *oldslot;
	TupleTableSlot *newslot;
	CommandId	cid;
	int			i;

	if (ExecutorCheckPerms_hook != NULL ||
		!cfeed_direct_ok(rel, CMD_UPDATE, cfeed_change_types, cfeed_change_notnull, CHANGE_NATTS,
						 cfeed_relid("shard_config"), &stamp_indexes, &indexes))
		return false;
	CheckCmdReplicaIdentity(rel, CMD_UPDATE);

	oldslot = table_slot_create(rel, NULL);
	newslot = MakeSingleTupleTableSlot(RelationGetDescr(rel), &TTSOpsVirtual);
	cid = GetCurrentCommandId(true);
	for (i = 0; i < n; i++)
	{
		TM_Result	result;
		TM_FailureData tmfd;
		LockTupleMode lockmode;
		cfeed_update_indexes update_indexes;

		CHECK_FOR_INTERRUPTS();
		if (!table_tuple_fetch_row_version(rel, &changes[i].tid, snapshot, oldslot))
			concurrent_sweep_error(n, i);
		slot_getallattrs(oldslot);
		ExecClearTuple(newslot);
		memcpy(newslot->tts_values, oldslot->tts_values, sizeof(Datum) * CHANGE_NATTS);
		memcpy(newslot->tts_isnull, oldslot->tts_isnull, sizeof(bool) * CHANGE_NATTS);
		newslot->tts_values[Anum_change_sequence - 1] = Int64GetDatum(changes[i].number);
		newslot->tts_isnull[Anum_change_sequence - 1] = false;
		newslot->tts_values[Anum_change_stamped_at - 1] = TimestampTzGetDatum(now);
		newslot->tts_isnull[Anum_change_stamped_at - 1] = false;
		ExecStoreVirtualTuple(newslot);

		result = table_tuple_update(rel, &changes[i].tid, newslot, cid, snapshot,
									InvalidSnapshot, true, &tmfd, &lockmode, &update_indexes);
		if (result == TM_Updated || result == TM_Deleted)
			concurrent_sweep_error(n, i);
		if (result != TM_Ok)
			elog(ERROR, "cfeed sweep: unexpected result %d updating a change", (int) result);
		if (cfeed_indexes_to_update(update_indexes))
			cfeed_direct_index_insert(rel, indexes, newslot);
	}
	ExecDropSingleTupleTableSlot(newslot);
	ExecDropSingleTupleTableSlot(oldslot);
	CommandCounterIncrement();
	return true;
}

/*
 * cfeed_check_sweep_isolation
 *		Sweeping needs a fresh snapshot per sweep: refuse REPEATABLE READ and
 *		SERIALIZABLE (25000), and recovery.
 */
void
cfeed_check_sweep_isolation(void)
{
	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("cfeed cannot sweep in a REPEATABLE READ or SERIALIZABLE transaction"),
				 errdetail("A sweep must see every change committed before it starts, which a transaction snapshot does not."),
				 errhint("Sweep in a READ COMMITTED transaction.")));
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cfeed cannot sweep during recovery"),
				 errhint("Changes are stamped on the primary; a standby replays them.")));
}

/*
 * cfeed_sweep_group
 *		Stamp the committed changes of one sweep group, in the caller's
 *		transaction, which must be READ COMMITTED.  Waits for a concurrent
 *		sweep of the group to finish unless nowait, in which case it returns
 *		false without sweeping.  Runs as the extension's owner: owner, or
 *		looked up when InvalidOid (the background sweeper passes the one it
 *		refreshes periodically).  Fills *result (shards[] palloc'd in the
 *		caller's memory context).  The caller commits; the commit is forced
 *		synchronous.
 */
bool
cfeed_sweep_group(int32 sweep_group, bool nowait, Oid owner, CfeedSweepResult *result)
{
	GroupWatermark *gw;
	Snapshot	snapshot;
	Relation	changerel;
	PendingChange *changes;
	int			nfound;
	int			n;
	int			i;
	HTAB	   *shards;
	HASHCTL		ctl;
	TimestampTz now;
	int			nshards = 0;
	MemoryContext sweepcxt;
	MemoryContext oldcxt;
	Oid			save_userid;
	int			save_sec_context;

	memset(result, 0, sizeof(CfeedSweepResult));
	cfeed_check_sweep_isolation();
	(void) cfeed_schema_oid(false);

	if (!cfeed_sweep_lock(sweep_group, nowait))
		return false;

	/*
	 * Stamping is the extension owner's, whoever was granted EXECUTE on
	 * sweep(): switch for the rest of the sweep (an error's abort restores
	 * the caller).
	 */
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(OidIsValid(owner) ? owner : cfeed_extension_owner(),
						   save_sec_context | SECURITY_LOCAL_USERID_CHANGE);

	sweepcxt = AllocSetContextCreate(CurrentMemoryContext, "cfeed sweep",
									 ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(sweepcxt);

	/*
	 * cfeed.change stays locked until the sweep's transaction ends, and is
	 * locked before the snapshot is taken: the addresses of the changes the
	 * sweep finds must still be theirs when it stamps them, so a rewrite
	 * (VACUUM FULL, CLUSTER, a rewriting ALTER TABLE) or a TRUNCATE waits
	 * for the sweep, and one that committed before is in its snapshot.
	 * Then the invalidations that came are read (a shard moved to another
	 * group resets the watermarks), and the watermark is looked at.
	 */
	(void) cfeed_relid_locked("shard_config", AccessShareLock);
	changerel = cfeed_table_open("change", RowExclusiveLock);
	AcceptInvalidationMessages();
	watermark_shard_config = cfeed_relid("shard_config");
	gw = group_watermark(sweep_group);
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	changes = scan_pending(changerel, gw, snapshot, &nfound);

	/* Keep the changes of this group's shards. */
	ctl.keysize = sizeof(int32) * 2;
	ctl.entrysize = sizeof(ShardEntry);
	ctl.hcxt = sweepcxt;
	shards = hash_create("cfeed sweep shards", 64, &ctl,
						 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	n = 0;
	for (i = 0; i < nfound; i++)
	{
		int32		key[2] = {changes[i].feed_id, changes[i].shard};
		bool		found;
		ShardEntry *e = hash_search(shards, key, HASH_ENTER, &found);

		if (!found)
		{
			e->in_group = cfeed_shard_fetch(key[0], key[1], snapshot, false, &e->shard) &&
				e->shard.sweep_group == sweep_group;
			if (e->in_group)
			{
				e->hint = head_hint(key[0], key[1]);
				e->shard.last_number = cfeed_shard_head(key[0], key[1], e->shard.floor_number,
														e->hint->head, snapshot);
				e->hint->head = e->shard.last_number;
			}
			e->count = 0;
			e->lag_ms = 0;
		}
		if (e->in_group)
			changes[n++] = changes[i];
	}

	/* The batch cut: lowest change_ids first. */
	if (n > cfeed_sweep_batch_size)
	{
		qsort(changes, n, sizeof(PendingChange), compare_change_id);
		propose_watermark(gw, snapshot, changes + cfeed_sweep_batch_size,
						  n - cfeed_sweep_batch_size);
		n = cfeed_sweep_batch_size;
	}
	else
		propose_watermark(gw, snapshot, NULL, 0);
	if (n > 0)
	{
		qsort(changes, n, sizeof(PendingChange), compare_shard_change);
		now = GetCurrentTimestamp();
		for (i = 0; i < n; i++)
		{
			int32		key[2] = {changes[i].feed_id, changes[i].shard};
			ShardEntry *e = hash_search(shards, key, HASH_FIND, NULL);
			int64		lag = (now - changes[i].written_at) / 1000;

			if (e->count++ == 0)
			{
				e->new_last = e->shard.last_number;
				nshards++;
			}
			changes[i].number = ++e->new_last;
			e->lag_ms = Max(e->lag_ms, lag);
		}

		if (!stamp_direct(changerel, changes, n, now, snapshot))
			stamp_with_sql(changerel, changes, n, now);
		ForceSyncCommit();
	}
	UnregisterSnapshot(snapshot);
	table_close(changerel, NoLock);

	/* Report, and announce the new heads at commit. */
	MemoryContextSwitchTo(oldcxt);
	result->change_count = n;
	result->nshards = nshards;
	result->shards = palloc(sizeof(CfeedSweptShard) * Max(nshards, 1));
	if (nshards > 0)
	{
		HASH_SEQ_STATUS status;
		ShardEntry *e;
		int			k = 0;

		hash_seq_init(&status, shards);
		while ((e = hash_seq_search(&status)) != NULL)
		{
			CfeedSweptShard *r;

			if (e->count == 0)
				continue;
			r = &result->shards[k++];
			r->feed_id = e->shard.feed_id;
			r->shard = e->shard.shard;
			r->change_count = e->count;
			r->last_number = e->new_last;
			e->hint->head = e->new_last;
			r->lag_ms = e->lag_ms;
			result->max_lag_ms = Max(result->max_lag_ms, e->lag_ms);
			cfeed_broadcast_at_commit(e->shard.feed_id, e->shard.shard);
			if (e->shard.longpoll)
			{
				char		channel[NAMEDATALEN];
				char		payload[32];

				snprintf(channel, sizeof(channel), CFEED_CHANNEL_PREFIX "%d_%d",
						 e->shard.feed_id, e->shard.shard);
				snprintf(payload, sizeof(payload), INT64_FORMAT, e->new_last);
				Async_Notify(channel, payload);
			}
		}
	}
	MemoryContextDelete(sweepcxt);
	SetUserIdAndSecContext(save_userid, save_sec_context);
	return true;
}

/*
 * cfeed_sweep
 *		SQL: cfeed.sweep(sweep_group int default 0) returns table(feed_id,
 *		shard, change_count, last_change_sequence_number, lag_ms).
 */
Datum
cfeed_sweep(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	CfeedSweepResult result;
	int			i;

	cfeed_require_arg(fcinfo, 0, "sweep_group");
	InitMaterializedSRF(fcinfo, 0);
	cfeed_sweep_group(PG_GETARG_INT32(0), false, InvalidOid, &result);

	for (i = 0; i < result.nshards; i++)
	{
		Datum		values[5];
		bool		nulls[5] = {false, false, false, false, false};

		values[0] = Int32GetDatum(result.shards[i].feed_id);
		values[1] = Int32GetDatum(result.shards[i].shard);
		values[2] = Int32GetDatum(result.shards[i].change_count);
		values[3] = Int64GetDatum(result.shards[i].last_number);
		values[4] = Int64GetDatum(result.shards[i].lag_ms);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * poll_until
 *		Call attempt(arg) every 10 ms until it returns true (then return
 *		true) or deadline passes (then false).  Interruptible.
 */
static bool
poll_until(bool (*attempt) (void *arg), void *arg, TimestampTz deadline)
{
	for (;;)
	{
		long		remaining;

		if (attempt(arg))
			return true;
		remaining = cfeed_ms_until(GetCurrentTimestamp(), deadline);
		if (remaining <= 0)
			return false;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Min(remaining, 10), cfeed_wait_event(CFEED_WAIT_SWEEP_TURN));
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/* poll_until attempt: take the group's sweep_loop lock if it is free. */
static bool
try_leader(void *arg)
{
	return cfeed_leader_lock(*(int32 *) arg);
}

/* One sweep of a group, as poll_until attempts it: only if the group is free. */
typedef struct SweepAttempt
{
	int32		sweep_group;
	CfeedSweepResult result;
} SweepAttempt;

static bool
try_sweep(void *arg)
{
	SweepAttempt *a = arg;

	return cfeed_sweep_group(a->sweep_group, true, InvalidOid, &a->result);
}

/* What a sweep_loop call reports. */
typedef struct SweepLoopTotals
{
	int64		change_count;
	int64		max_lag_ms;
	int32		iterations;
} SweepLoopTotals;

/*
 * sweep_repeatedly
 *		The body of sweep_loop: sweep and commit until duration_ms has passed
 *		(exactly once for 0), sleeping sleep_ms (at least 1 ms) after a sweep
 *		that found nothing.  The first sweep waits at most until turn_deadline
 *		for a concurrent sweep of the group to end (sweep(), the background
 *		worker); if it cannot start by then, nothing is swept.  Later sweeps
 *		wait for their turn as long as it takes.
 */
static void
sweep_repeatedly(int32 sweep_group, TimestampTz turn_deadline, int32 duration_ms,
				 int32 sleep_ms, SweepLoopTotals *totals)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), duration_ms);
	SweepAttempt attempt;

	memset(&attempt, 0, sizeof(attempt));
	attempt.sweep_group = sweep_group;
	if (SPI_connect_ext(SPI_OPT_NONATOMIC) != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect_ext failed");
	for (;;)
	{
		long		remaining;

		CHECK_FOR_INTERRUPTS();
		if (totals->iterations > 0)
			cfeed_sweep_group(sweep_group, false, InvalidOid, &attempt.result);
		else if (!poll_until(try_sweep, &attempt, turn_deadline))
			break;
		totals->iterations++;
		totals->change_count += attempt.result.change_count;
		totals->max_lag_ms = Max(totals->max_lag_ms, attempt.result.max_lag_ms);
		pfree(attempt.result.shards);
		cfeed_spi_commit();

		remaining = cfeed_ms_until(GetCurrentTimestamp(), deadline);
		if (remaining <= 0)
			break;
		if (attempt.result.change_count == 0)
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 Min(remaining, Max(sleep_ms, 1)), cfeed_wait_event(CFEED_WAIT_SWEEP_LOOP));
			ResetLatch(MyLatch);
		}
	}
	SPI_finish();
}

/*
 * cfeed_sweep_loop
 *		SQL: CALL cfeed.sweep_loop(sweep_group, wait_ms, duration_ms, sleep_ms,
 *		OUT change_count, OUT max_lag_ms, OUT iterations).  Commits after each
 *		sweep, so it must be called outside a transaction block.
 */
Datum
cfeed_sweep_loop(PG_FUNCTION_ARGS)
{
	int32		sweep_group;
	int32		wait_ms;
	int32		duration_ms;
	int32		sleep_ms;
	SweepLoopTotals totals = {0, 0, 0};
	TupleDesc	tupdesc;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};
	TimestampTz turn_deadline;

	cfeed_require_arg(fcinfo, 0, "sweep_group");
	cfeed_require_arg(fcinfo, 1, "wait_ms");
	cfeed_require_arg(fcinfo, 2, "duration_ms");
	cfeed_require_arg(fcinfo, 3, "sleep_ms");
	sweep_group = PG_GETARG_INT32(0);
	wait_ms = PG_GETARG_INT32(1);
	duration_ms = PG_GETARG_INT32(2);
	sleep_ms = PG_GETARG_INT32(3);
	if (wait_ms < 0 || duration_ms < 0 || sleep_ms < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("wait_ms, duration_ms and sleep_ms of cfeed.sweep_loop must not be negative")));
	if (fcinfo->context == NULL || !IsA(fcinfo->context, CallContext) ||
		((CallContext *) fcinfo->context)->atomic)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("cfeed.sweep_loop must be called with CALL outside a transaction block"),
				 errdetail("It commits after every sweep."),
				 errhint("Use SELECT * FROM cfeed.sweep() inside a transaction.")));
	cfeed_check_sweep_isolation();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "cfeed.sweep_loop: return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);

	turn_deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), wait_ms);
	if (poll_until(try_leader, &sweep_group, turn_deadline))
	{
		PG_TRY();
		{
			sweep_repeatedly(sweep_group, turn_deadline, duration_ms, sleep_ms, &totals);
		}
		PG_CATCH();
		{
			cfeed_leader_unlock(sweep_group);
			PG_RE_THROW();
		}
		PG_END_TRY();
		cfeed_leader_unlock(sweep_group);
	}

	values[0] = Int32GetDatum((int32) Min(totals.change_count, PG_INT32_MAX));
	values[1] = Int64GetDatum(totals.max_lag_ms);
	values[2] = Int32GetDatum(totals.iterations);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
