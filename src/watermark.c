/*-------------------------------------------------------------------------
 *
 * watermark.c
 *	  The xid watermark of each sweep group: which writer_xids the next sweep
 *	  of the group must look at in change_pending_idx, remembered per
 *	  backend from one sweep to the next.
 *
 * Why
 * ---
 * A sweep stamps a change by updating its row: the old version leaves a
 * dead entry in change_pending_idx (writer_xid) WHERE change_sequence_number
 * IS NULL until VACUUM removes it.  While any transaction holds back the
 * xmin horizon, VACUUM cannot remove them and index scans cannot mark them
 * killed, so a sweep that walks "all pending entries" re-reads every change
 * stamped since the horizon was pinned and slows down without bound.  The
 * watermark, taken from the snapshot each sweep runs with, avoids that:
 *
 *	 after a sweep with snapshot S, every transaction with xid < S.xmax that
 *	 is not in S.xip had finished; its committed changes were visible to S
 *	 and are now stamped.  So the next sweep need only look at writer_xid in
 *	 S.xip (still running then) or >= S.xmax (not started then).
 *
 * A sweep therefore reads index entries of new changes plus at most one
 * probe per transaction that was running at the previous sweep: its cost
 * grows with the changes to stamp, not with the dead entries behind it, nor
 * with the number of shards.  A long-open writer does not pin the watermark
 * either; its xid is probed alone until it ends.  Changes a sweep leaves for
 * a later one (its batch cut) keep their xids in the watermark, and so does
 * the sweep's own transaction, which may publish more after it.  Beyond
 * WATERMARK_MAX_XIDS xids the probes fall back to a range from the lowest.
 * A group with range shards reads its watermark from its stored mark at
 * every sweep instead (ranges.c), and there it is the record of what is
 * stamped, not a hint.
 *
 * Lifetime
 * --------
 * The watermark lives in backend memory and is only a hint: one that is too
 * old costs time, never correctness, because visibility to the sweep's
 * snapshot decides what is stamped.  A sweep proposes the next watermark;
 * it becomes the group's when the sweep's transaction commits (a
 * transaction and subtransaction callback), since changes found by an
 * aborted sweep are still pending.  A backend's first sweep of a group, and
 * the first after a relcache invalidation of cfeed.shard_config (a shard
 * moved to another group, see shard_guard.c), reads the whole pending index.
 *
 * Locking: none of its own; the caller holds the group's sweep lock
 * (sweep.c) while it reads and proposes.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/skey.h"
#include "access/stratnum.h"
#include "access/transam.h"
#include "access/xact.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/snapshot.h"
#include "utils/xid8.h"

#include "cache.h"
#include "cfeed.h"

/* Beyond this many xids a watermark falls back to a plain range. */
#define WATERMARK_MAX_XIDS			4096

/*
 * An xid watermark: look at writer_xid in xip[] or >= xmax.  version and
 * version_by: the next_xid of the group's stored mark it descends from
 * (ranges.c), else invalid, and the xid that stored that version of the
 * mark's row.  Both, since a mark can be replaced under the same next_xid
 * (cfeed_mark_store: a sweep whose snapshot has the xmax of the mark before
 * it, when no xid above it completed since, as after cfeed.adopt_marks()
 * made in a transaction whose xid is below one that committed before).
 */
typedef struct Watermark
{
	FullTransactionId xmax;
	int			nxip;
	FullTransactionId *xip;		/* sorted */
	FullTransactionId version;
	TransactionId version_by;
} Watermark;

/* Per sweep group: the committed watermark and one awaiting commit. */
struct CfeedGroupWatermark
{
	int32		sweep_group;	/* hash key */
	bool		valid;
	Watermark	committed;
	bool		proposed_valid;
	SubTransactionId proposed_subid;
	Watermark	proposed;
};

static HTAB *watermarks = NULL;
static Oid	watermark_shard_config = InvalidOid;	/* its invalidations reset them */

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
	dst->version = src->version;
	dst->version_by = src->version_by;
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
 * settle_proposals
 *		The (sub)transaction in which the proposals from subtransaction from
 *		on were made ends (from 0: the top-level one).  Committed: a top-level
 *		commit makes them the committed watermarks, a subtransaction's hands
 *		them to its parent (parent).  Aborted (or prepared: its commit is not
 *		this backend's to see): they are forgotten.
 */
static void
settle_proposals(SubTransactionId from, bool committed, SubTransactionId parent)
{
	HASH_SEQ_STATUS status;
	CfeedGroupWatermark *gw;

	if (watermarks == NULL)
		return;
	hash_seq_init(&status, watermarks);
	while ((gw = hash_seq_search(&status)) != NULL)
	{
		if (!gw->proposed_valid || gw->proposed_subid < from)
			continue;
		if (committed && parent != InvalidSubTransactionId)
			gw->proposed_subid = parent;
		else
		{
			if (committed)
			{
				watermark_copy(&gw->committed, &gw->proposed);
				gw->valid = true;
			}
			gw->proposed_valid = false;
		}
	}
}

/*
 * watermark_xact_callback / watermark_subxact_callback
 *		Settle the proposed watermarks when the transaction, or the
 *		subtransaction that swept, ends.
 */
static void
watermark_xact_callback(XactEvent event, void *arg pg_attribute_unused())
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT)
		settle_proposals(InvalidSubTransactionId, true, InvalidSubTransactionId);
	else if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT ||
			 event == XACT_EVENT_PREPARE)
		settle_proposals(InvalidSubTransactionId, false, InvalidSubTransactionId);
}

static void
watermark_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						   SubTransactionId parentSubid, void *arg pg_attribute_unused())
{
	if (event == SUBXACT_EVENT_COMMIT_SUB)
		settle_proposals(mySubid, true, parentSubid);
	else if (event == SUBXACT_EVENT_ABORT_SUB)
		settle_proposals(mySubid, false, InvalidSubTransactionId);
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
	CfeedGroupWatermark *gw;

	if (watermarks == NULL || (OidIsValid(relid) && relid != watermark_shard_config))
		return;
	hash_seq_init(&status, watermarks);
	while ((gw = hash_seq_search(&status)) != NULL)
		gw->valid = false;
}

/*
 * cfeed_watermark_get
 *		The watermark of a sweep group, created (invalid) on first use.  The
 *		caller holds the group's sweep lock and has read the invalidations
 *		that came (a shard moved between groups resets every watermark).
 */
CfeedGroupWatermark *
cfeed_watermark_get(int32 sweep_group)
{
	CfeedGroupWatermark *gw;
	bool		found;

	watermark_shard_config = cfeed_relid("shard_config");
	if (watermarks == NULL)
	{
		watermarks = cfeed_cache_hash(CFEED_CACHE_WATERMARKS, watermarks_invalidate,
									  "cfeed sweep watermarks", sizeof(int32),
									  sizeof(CfeedGroupWatermark));
		RegisterXactCallback(watermark_xact_callback, NULL);
		RegisterSubXactCallback(watermark_subxact_callback, NULL);
	}
	Assert(cfeed_sweep_lock_held(sweep_group));
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
 * widen_xid
 *		The full xid of a 32-bit xid taken from a snapshot, given a next full
 *		xid read after that snapshot (so every snapshot xid precedes it).
 */
static FullTransactionId
widen_xid(TransactionId xid, FullTransactionId next)
{
	uint32		epoch = EpochFromFullTransactionId(next);
	FullTransactionId full;

	Assert(TransactionIdIsNormal(xid));
	if (xid > XidFromFullTransactionId(next))
		epoch--;
	full = FullTransactionIdFromEpochAndXid(epoch, xid);
	/* a snapshot's xids precede next (xmax may equal it) */
	Assert(FullTransactionIdPrecedesOrEquals(full, next));
	return full;
}

/* Order full xids (qsort). */
static int
compare_fxid(const void *a, const void *b)
{
	FullTransactionId x = *(const FullTransactionId *) a;
	FullTransactionId y = *(const FullTransactionId *) b;

	if (FullTransactionIdPrecedes(x, y))
		return -1;
	return FullTransactionIdFollows(x, y) ? 1 : 0;
}

/*
 * cfeed_sort_fxids
 *		Sort full xids[0..*n-1] and remove duplicates (*n becomes their
 *		number).
 */
void
cfeed_sort_fxids(FullTransactionId *xids, int *n)
{
	int			i;
	int			j = 0;

	if (*n <= 1)
		return;
	qsort(xids, *n, sizeof(FullTransactionId), compare_fxid);
	for (i = 1; i < *n; i++)
		if (!FullTransactionIdEquals(xids[i], xids[j]))
			xids[++j] = xids[i];
	*n = j + 1;
	/* sorted and unique: the probes go up the index, each xid once */
	for (i = 1; i < *n; i++)
		Assert(FullTransactionIdPrecedes(xids[i - 1], xids[i]));
}

/*
 * cfeed_watermark_adopt
 *		A sweep group with range shards: its stored mark (ranges.c), read
 *		by this sweep, becomes its committed watermark, exactly, unless the
 *		committed one descends from that same mark, the same version of its
 *		row (no sweep has stored a mark since this backend read it): then
 *		it is the newer of the two, and as exact, since the sweeps it came
 *		from stamped no range change.  By next_xid alone, a mark another
 *		backend stored in place of that one, with the same next_xid and the
 *		writers it stamped gone from running, was taken for it, and those
 *		writers' range changes were stamped again (isolation test ranges).
 */
void
cfeed_watermark_adopt(CfeedGroupWatermark *gw, const CfeedMark *mark)
{
	Watermark	w;

	Assert(cfeed_sweep_lock_held(gw->sweep_group));
	if (gw->valid && FullTransactionIdEquals(gw->committed.version, mark->xmax) &&
		TransactionIdEquals(gw->committed.version_by, mark->stored_by))
		return;
	w.xmax = mark->xmax;
	w.version = mark->xmax;
	w.version_by = mark->stored_by;
	w.nxip = mark->nxip;
	w.xip = mark->xip;
	watermark_copy(&gw->committed, &w);
	gw->valid = true;
}

/*
 * cfeed_watermark_covers
 *		Whether the committed watermark points at xid (it is in xip, or at or
 *		above xmax): for a group's mark, whether a range change of that
 *		writer is still to be stamped.
 */
bool
cfeed_watermark_covers(CfeedGroupWatermark *gw, FullTransactionId xid)
{
	Assert(gw->valid);
	if (FullTransactionIdFollowsOrEquals(xid, gw->committed.xmax))
		return true;
	return bsearch(&xid, gw->committed.xip, gw->committed.nxip,
				   sizeof(FullTransactionId), compare_fxid) != NULL;
}

/*
 * cfeed_watermark_proposal
 *		The watermark the sweep proposed (cfeed_watermark_propose), to be
 *		stored as its group's mark: xip points into the proposal, which from
 *		now on descends from that mark.
 */
void
cfeed_watermark_proposal(CfeedGroupWatermark *gw, CfeedMark *mark)
{
	Assert(gw->proposed_valid);
	mark->xmax = gw->proposed.xmax;
	mark->nxip = gw->proposed.nxip;
	mark->xip = gw->proposed.xip;
	gw->proposed.version = gw->proposed.xmax;
	/* the caller stores it next, in this (sub)transaction */
	gw->proposed.version_by = GetCurrentTransactionId();
}

/*
 * cfeed_watermark_probes
 *		Call probe(key, arg) for each scan of change_pending_idx the sweep
 *		must make: writer_xid >= xmax and = each xid of the watermark, or one
 *		scan of the whole index (key NULL) without a valid watermark.
 */
void
cfeed_watermark_probes(CfeedGroupWatermark *gw,
					   void (*probe) (ScanKey key, void *arg), void *arg)
{
	ScanKeyData key;
	int			i;

	Assert(cfeed_sweep_lock_held(gw->sweep_group));
	if (!gw->valid)
	{
		probe(NULL, arg);
		return;
	}
	if (gw->committed.nxip > WATERMARK_MAX_XIDS)
	{
		/* too many to probe one by one: scan from the lowest instead */
		ScanKeyInit(&key, 1, BTGreaterEqualStrategyNumber, F_XID8GE,
					FullTransactionIdGetDatum(gw->committed.xip[0]));
		probe(&key, arg);
		return;
	}
	ScanKeyInit(&key, 1, BTGreaterEqualStrategyNumber, F_XID8GE,
				FullTransactionIdGetDatum(gw->committed.xmax));
	probe(&key, arg);
	for (i = 0; i < gw->committed.nxip; i++)
	{
		ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_XID8EQ,
					FullTransactionIdGetDatum(gw->committed.xip[i]));
		probe(&key, arg);
	}
}

/*
 * cfeed_watermark_propose
 *		Compute the watermark that holds once this sweep commits: the
 *		snapshot's running xids and xmax, plus left[], the writer_xids of the
 *		changes the batch cut leaves for a later sweep, and the sweep's own.
 */
void
cfeed_watermark_propose(CfeedGroupWatermark *gw, Snapshot snapshot,
						const FullTransactionId *left, int nleft)
{
	FullTransactionId next = ReadNextFullTransactionId();
	int			nxip = 0;
	int			i;
	FullTransactionId *xip = palloc(sizeof(FullTransactionId) * (snapshot->xcnt + nleft + 1));
	FullTransactionId own;
	Watermark	w;

	Assert(cfeed_sweep_lock_held(gw->sweep_group));
	for (i = 0; i < (int) snapshot->xcnt; i++)
		xip[nxip++] = widen_xid(snapshot->xip[i], next);
	for (i = 0; i < nleft; i++)
		xip[nxip++] = left[i];

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
	cfeed_sort_fxids(xip, &nxip);

	w.nxip = nxip;
	w.xip = xip;
	w.version = gw->valid ? gw->committed.version : InvalidFullTransactionId;
	w.version_by = gw->valid ? gw->committed.version_by : InvalidTransactionId;
	watermark_copy(&gw->proposed, &w);
	gw->proposed_valid = true;
	gw->proposed_subid = GetCurrentSubTransactionId();
	pfree(xip);
}
