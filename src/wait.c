/*-------------------------------------------------------------------------
 *
 * wait.c
 *	  Waiting for a shard's head to pass a cursor: cfeed.wait, and the wait
 *	  of cfeed.read and cfeed.read_rows with wait_ms > 0 (read.c).
 *
 *	  With the preload a wait sleeps on the shard's condition variable,
 *	  which every sweep broadcasts after commit (shmem.c), and on a hot
 *	  standby on the one the standby waker broadcasts when replay moved
 *	  (standby_waker.c), re-reading the head at cfeed.poll_interval there
 *	  at the latest; without the preload it re-reads the head every
 *	  cfeed.poll_interval.
 *	  It holds no lock while it sleeps, is cancellable, and shows
 *	  wait_event_type Extension.  A wait on a shard that has ended (closed
 *	  by cfeed.reshard, no unstamped change left on it) ends at once: its
 *	  head can never grow again, and a reader at its head goes on with its
 *	  children.
 *
 *	  Hot standby waits: a wait holds its statement's snapshot, which the
 *	  replay of the cleanup of stamped changes' old versions conflicts with
 *	  (the startup process then waits up to max_standby_streaming_delay and
 *	  cancels it).  So a wait on a standby ends early, as if timed out, when
 *	  the startup process begins to wait for a snapshot conflict while the
 *	  wait's snapshot is older than a new one (it may be the one replay
 *	  waits for), or when it waits for the same conflict for 30 ms (a lock,
 *	  or a snapshot conflict that began before); the caller polls again
 *	  with a new snapshot.  Brief conflicts with other queries leave a wait
 *	  be.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "access/xlogrecovery.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "cfeed.h"
#include "shmem.h"

/* Longest sleep on a condition variable before re-reading the head anyway. */
#define CFEED_CV_SAFETY_MS		1000

/*
 * How long a recovery conflict must last (the same one, seen by two polls
 * at least this far apart) before a wait on a hot standby ends for it.
 */
#define CFEED_CONFLICT_LASTS_MS	30

PG_FUNCTION_INFO_V1(cfeed_wait);

/*
 * recovery_conflict_lsn
 *		On a hot standby: when the startup process waits for a recovery
 *		conflict (a snapshot or a lock held by queries), the position replay
 *		is stuck at, which identifies the conflict; InvalidXLogRecPtr when it
 *		does not wait.  *snapshot tells a snapshot conflict from a lock one.
 *		The startup process is one of the auxiliary processes, whose PGPROCs
 *		follow the backends'; its wait event is read unlocked, as
 *		pg_stat_activity does.
 */
static XLogRecPtr
recovery_conflict_lsn(bool *snapshot)
{
	int			i;

	for (i = 0; i < NUM_AUXILIARY_PROCS; i++)
	{
		volatile PGPROC *proc = &ProcGlobal->allProcs[MaxBackends + i];
		uint32		w = proc->wait_event_info;

		if (proc->pid != 0 &&
			(w == WAIT_EVENT_RECOVERY_CONFLICT_SNAPSHOT || (w & 0xFF000000) == PG_WAIT_LOCK))
		{
			*snapshot = (w == WAIT_EVENT_RECOVERY_CONFLICT_SNAPSHOT);
			return GetXLogReplayRecPtr(NULL);
		}
	}
	return InvalidXLogRecPtr;
}

/*
 * snapshot_behind
 *		Whether this backend's oldest snapshot is older than a new one would
 *		be: only then can replay's cleanup conflict with it (cleanup removes
 *		versions that no running transaction, so no new snapshot, needs).
 */
static bool
snapshot_behind(void)
{
	TransactionId xmin = MyProc->xmin;

	return TransactionIdIsValid(xmin) && TransactionIdPrecedes(xmin, GetLatestSnapshot()->xmin);
}

/*
 * shard_ended
 *		Whether a closed shard has ended: no unstamped change is left on it
 *		(fresh snapshot), so its head can never grow again.  Reads its head
 *		into *sh again, after that snapshot: a sweep may have stamped its
 *		last changes since *sh was read.  *writer is the writer of a pending
 *		change the previous call found, probed first (one index probe per
 *		wake-up while it is still pending, instead of a scan of the backlog).
 */
static bool
shard_ended(CfeedShard *sh, FullTransactionId *writer)
{
	Snapshot	snapshot = cfeed_fresh_snapshot();
	bool		ended = !cfeed_shard_pending_writer(sh, snapshot, writer);

	UnregisterSnapshot(snapshot);
	if (ended && !cfeed_shard_fetch(sh->feed_id, sh->shard, NULL, true, sh))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("shard %d of feed %d was dropped while waiting", sh->shard, sh->feed_id)));
	return ended;
}

/*
 * cfeed_wait_for_head
 *		Sleep until the shard's head passes cursor or timeout_ms elapses, or
 *		the shard has ended (closed, nothing left to stamp: no change will
 *		come); returns the last head seen.  How it sleeps: the file header.
 *		On a hot standby it also returns early when replay waits for a
 *		recovery conflict that lasts (see the file header).
 *		Cancellable; shows wait_event_type Extension.
 */
int64
cfeed_wait_for_head(int32 feed_id, int32 shard, int64 cursor, int timeout_ms)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);
	bool		standby = RecoveryInProgress();
	bool		waker_asked = false;
	ConditionVariable *cv = standby ? NULL : cfeed_wait_bucket(feed_id, shard);
	XLogRecPtr	conflict = InvalidXLogRecPtr;
	TimestampTz conflict_seen = 0;
	TimestampTz conflict_checked = 0;
	FullTransactionId pending_writer = InvalidFullTransactionId;
	CfeedShard	sh;
	MemoryContext loopcxt;
	MemoryContext oldcxt;

	/*
	 * Each look at the head allocates a little; a wait on a hot standby may
	 * look a thousand times a second (the standby waker), so each look's
	 * memory goes at the next.
	 */
	loopcxt = AllocSetContextCreate(CurrentMemoryContext, "cfeed wait",
									ALLOCSET_SMALL_SIZES);
	oldcxt = MemoryContextSwitchTo(loopcxt);
	if (cv != NULL)
		ConditionVariablePrepareToSleep(cv);
	for (;;)
	{
		long		remaining;

		CHECK_FOR_INTERRUPTS();
		MemoryContextReset(loopcxt);
		if (!cfeed_shard_fetch(feed_id, shard, NULL, true, &sh))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("shard %d of feed %d was dropped while waiting", shard, feed_id)));
		if (sh.last_number > cursor)
			break;
		if (sh.closed && shard_ended(&sh, &pending_writer))
			break;
		remaining = cfeed_ms_until(GetCurrentTimestamp(), deadline);
		if (remaining <= 0)
			break;

		/*
		 * On a standby, have the waker watch replay only once the wait is to
		 * sleep (it watches until the latest deadline published, so a wait
		 * that returned at once would keep it looking for timeout_ms), then
		 * look at the head again, prepared to sleep: the waker wakes those
		 * prepared before it saw replay move.
		 */
		if (standby && !waker_asked)
		{
			waker_asked = true;
			cv = cfeed_standby_wait_begin(deadline);
			if (cv != NULL)
			{
				ConditionVariablePrepareToSleep(cv);
				continue;
			}
		}

		/*
		 * On a standby, replay may be waiting for this statement's snapshot
		 * (or locks): end the wait, as if timed out, when a snapshot
		 * conflict begins while this snapshot is older than a new one (it
		 * may be among those replay waits for), or when the same conflict
		 * lasts CFEED_CONFLICT_LASTS_MS (one involving this statement never
		 * clears while it waits).  Brief conflicts with other queries leave
		 * the wait be: it looks every cfeed.poll_interval, not at every
		 * wake-up of the standby waker (replay moving on is no sign of a
		 * conflict, and one that holds replay up stops those wake-ups).
		 */
		if (standby &&
			cfeed_ms_until(conflict_checked, GetCurrentTimestamp()) >= cfeed_poll_interval)
		{
			bool		snapshot_conflict = false;
			XLogRecPtr	now_conflict = recovery_conflict_lsn(&snapshot_conflict);

			conflict_checked = GetCurrentTimestamp();
			if (XLogRecPtrIsInvalid(now_conflict) || now_conflict != conflict)
			{
				conflict = now_conflict;
				conflict_seen = GetCurrentTimestamp();
				if (snapshot_conflict && snapshot_behind())
					break;
			}
			else if (cfeed_ms_until(conflict_seen, GetCurrentTimestamp()) >= CFEED_CONFLICT_LASTS_MS)
				break;
		}
		if (cv != NULL)
			(void) ConditionVariableTimedSleep(cv, Min(remaining, standby ? cfeed_poll_interval : CFEED_CV_SAFETY_MS),
											   cfeed_wait_event(CFEED_WAIT_READ));
		else
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 Min(remaining, cfeed_poll_interval), cfeed_wait_event(CFEED_WAIT_READ));
			ResetLatch(MyLatch);
		}
	}
	if (cv != NULL)
		ConditionVariableCancelSleep();
	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(loopcxt);
	return sh.last_number;
}

/*
 * cfeed_wait
 *		SQL: cfeed.wait(feed_id, shard, cursor, timeout_ms) returns bigint.
 *		Waiting needs READ COMMITTED, as read()'s: a transaction snapshot
 *		would not show the changes up to the head it returns.
 */
Datum
cfeed_wait(PG_FUNCTION_ARGS)
{
	CfeedShard	sh;
	int64		head;

	cfeed_require_arg(fcinfo, 0, "feed_id");
	cfeed_require_arg(fcinfo, 1, "shard");
	cfeed_require_arg(fcinfo, 2, "cursor");
	cfeed_require_arg(fcinfo, 3, "timeout_ms");
	cfeed_check_wait("cfeed.wait", PG_GETARG_INT32(3), "timeout_ms");
	cfeed_check_select("shard");
	cfeed_check_read(PG_GETARG_INT32(0));
	cfeed_shard_get(PG_GETARG_INT32(0), PG_GETARG_INT32(1), true, &sh);
	head = cfeed_wait_for_head(sh.feed_id, sh.shard, PG_GETARG_INT64(2), PG_GETARG_INT32(3));
	if (head > sh.last_number)
		cfeed_check_read(sh.feed_id);
	PG_RETURN_INT64(head);
}
