/*-------------------------------------------------------------------------
 *
 * shmem.c
 *	  cfeed's shared memory (present only with shared_preload_libraries):
 *	  the launcher's view of databases and sweepers, the sweepers' counters
 *	  for cfeed.sweepers, the latches a committing writer sets, and the
 *	  condition variables a waiting reader sleeps on.
 *
 * Locking protocol
 * ----------------
 * CfeedShared->lock (one LWLock) protects dbs[] and workers[] except:
 *	- a worker updates the counters of its own slot (sweeps, changes_stamped,
 *	  last_sweep_time, last_error) without the lock: one writer, and readers
 *	  of cfeed.sweepers accept a torn read of a counter;
 *	- a committing writer reads workers[].dboid/latch/pausing without the
 *	  lock to set latches: a stale slot only costs a spurious wake-up (or
 *	  none for a sweeper that sweeps when it starts), and a latch (PGPROC's
 *	  procLatch) stays valid memory for the life of the server.
 *
 * A sweeper that pauses after a sweep (sweeper.c, "Gathering") sets its
 * slot's pausing flag: it sweeps when the pause ends whatever commits
 * meanwhile, so a commit leaves its latch alone, sparing the sweeper a
 * wake-up (a signal, a context switch and a pass of its wait loop) per
 * commit under the very load that gathers.  It clears the flag with a
 * full barrier before the next sweep takes its snapshot, and a writer
 * reads it after its commit is visible, with a barrier between: either
 * the writer sees the flag clear and sets the latch, or that sweep's
 * snapshot sees the commit.
 *
 * Readers wait on one of CFEED_WAIT_BUCKETS condition variables, chosen by
 * hashing (database, feed, shard).  A sweep broadcasts a shard's bucket
 * after its transaction commits, so a woken reader always finds the new
 * head: the reader prepares to sleep before it checks the head, so no
 * broadcast between its check and its sleep is lost.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "replication/logicalworker.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "common/hashfn.h"

#include "cfeed.h"
#include "shmem.h"

CfeedSharedState *CfeedShared = NULL;

static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
#if PG_VERSION_NUM >= 150000
static shmem_request_hook_type prev_shmem_request_hook = NULL;
#endif

/* This transaction recorded changes: wake the sweepers at commit. */
static bool wrote_changes = false;

/* An apply worker's transaction that commits a prepared one (shmem_xact_callback). */
static bool finished_prepared = false;

/* Buckets to broadcast when this transaction commits (a bitmap). */
static uint64 pending_broadcast[CFEED_WAIT_BUCKETS / 64];
static bool have_pending_broadcast = false;

/*
 * shmem_size
 *		Bytes of shared memory cfeed needs.
 */
static Size
shmem_size(void)
{
	return add_size(offsetof(CfeedSharedState, workers),
					mul_size(sizeof(CfeedWorkerSlot), cfeed_max_workers));
}

#if PG_VERSION_NUM >= 150000
static void
cfeed_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(shmem_size());
	RequestNamedLWLockTranche("cfeed", 1);
}
#endif

/*
 * cfeed_shmem_startup
 *		Create or attach to the shared state.
 */
static void
cfeed_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	CfeedShared = ShmemInitStruct("cfeed", shmem_size(), &found);
	if (!found)
	{
		int			i;

		memset(CfeedShared, 0, shmem_size());
		CfeedShared->lock = &(GetNamedLWLockTranche("cfeed"))->lock;
		for (i = 0; i < CFEED_WAIT_BUCKETS; i++)
			ConditionVariableInit(&CfeedShared->buckets[i]);
		ConditionVariableInit(&CfeedShared->replayed);
		pg_atomic_init_u64(&CfeedShared->standby_wait_until, 0);
		CfeedShared->max_workers = cfeed_max_workers;
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * shmem_xact_callback
 *		At commit: wake this database's sweepers if the transaction recorded
 *		changes, and wake readers of the shards a sweep advanced.
 *
 *		A logical replication apply worker commits a prepared transaction (a
 *		two_phase subscription's COMMIT PREPARED) inside a transaction of its
 *		own that gets no xid, where no hook of cfeed's sees it (utility.c
 *		wakes the sweepers at a session's COMMIT PREPARED): it wakes them at
 *		each commit without an xid that wrote WAL (the prepared transaction's
 *		commit record, judged before the commit, which clears
 *		XactLastRecEnd), in case the prepared transaction recorded changes.
 *		The apply's other commits without an xid (streamed chunks, skipped
 *		transactions) rarely write any (a page pruned, a hint bit's full
 *		page image); a sweep that finds nothing is cheap.
 */
static void
shmem_xact_callback(XactEvent event, void *arg pg_attribute_unused())
{
	if (event == XACT_EVENT_PRE_COMMIT)
		finished_prepared = IsLogicalWorker() && XactLastRecEnd != InvalidXLogRecPtr &&
			!TransactionIdIsValid(GetTopTransactionIdIfAny());
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT)
	{
		if (wrote_changes || finished_prepared)
			cfeed_wake_sweepers_for_commit(MyDatabaseId);
		if (have_pending_broadcast)
		{
			int			i;

			for (i = 0; i < CFEED_WAIT_BUCKETS; i++)
				if (pending_broadcast[i / 64] & (UINT64CONST(1) << (i % 64)))
					ConditionVariableBroadcast(&CfeedShared->buckets[i]);
		}
	}
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT ||
		event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_PREPARE)
	{
		wrote_changes = false;
		finished_prepared = false;
		if (have_pending_broadcast)
			memset(pending_broadcast, 0, sizeof(pending_broadcast));
		have_pending_broadcast = false;
	}
}

/*
 * cfeed_shmem_init
 *		Called from _PG_init under shared_preload_libraries.
 */
void
cfeed_shmem_init(void)
{
#if PG_VERSION_NUM >= 150000
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = cfeed_shmem_request;
#else
	RequestAddinShmemSpace(shmem_size());
	RequestNamedLWLockTranche("cfeed", 1);
#endif
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = cfeed_shmem_startup;
	RegisterXactCallback(shmem_xact_callback, NULL);
}

/*
 * cfeed_note_write
 *		The current transaction recorded a change (no-op without the preload).
 */
void
cfeed_note_write(void)
{
	wrote_changes = (CfeedShared != NULL);
}

/*
 * wake_sweepers
 *		Set the latch of every sweeper of a database, but of one pausing
 *		after a sweep when for_commit.  Lock-free; see the header comment.
 */
static void
wake_sweepers(Oid dboid, bool for_commit)
{
	int			i;

	if (CfeedShared == NULL)
		return;
	if (for_commit)
		pg_memory_barrier();	/* the commit before the flags; see header */
	for (i = 0; i < CfeedShared->max_workers; i++)
	{
		CfeedWorkerSlot *slot = &CfeedShared->workers[i];
		Latch	   *latch = slot->latch;

		if (slot->in_use && slot->dboid == dboid && latch != NULL &&
			!(for_commit && pg_atomic_read_u32(&slot->pausing) != 0))
			SetLatch(latch);
	}
}

/*
 * cfeed_wake_sweepers
 *		Wake every sweeper of a database, a pausing one too (a utility
 *		command that wants the database unconnected).
 */
void
cfeed_wake_sweepers(Oid dboid)
{
	wake_sweepers(dboid, false);
}

/*
 * cfeed_wake_sweepers_for_commit
 *		Wake the sweepers of a database for a commit that recorded changes:
 *		one pausing after a sweep sweeps them when its pause ends.
 */
void
cfeed_wake_sweepers_for_commit(Oid dboid)
{
	wake_sweepers(dboid, true);
}

/*
 * cfeed_wait_bucket
 *		The condition variable readers of a shard sleep on, or NULL without
 *		the preload.
 */
ConditionVariable *
cfeed_wait_bucket(int32 feed_id, int32 shard)
{
	uint32		h;

	if (CfeedShared == NULL)
		return NULL;
	h = hash_combine(hash_bytes_uint32(MyDatabaseId),
					 hash_combine(hash_bytes_uint32((uint32) feed_id),
								  hash_bytes_uint32((uint32) shard)));
	return &CfeedShared->buckets[h % CFEED_WAIT_BUCKETS];
}

/*
 * cfeed_broadcast_at_commit
 *		Wake the readers of a shard once the current transaction commits.
 */
void
cfeed_broadcast_at_commit(int32 feed_id, int32 shard)
{
	ConditionVariable *cv = cfeed_wait_bucket(feed_id, shard);
	int			i;

	if (cv == NULL)
		return;
	i = cv - CfeedShared->buckets;
	pending_broadcast[i / 64] |= UINT64CONST(1) << (i % 64);
	have_pending_broadcast = true;
}
