/*-------------------------------------------------------------------------
 *
 * standby_waker.c
 *	  The standby waker: on a hot standby, wakes the waits of cfeed.wait,
 *	  cfeed.read(wait_ms) and cfeed.read_rows(wait_ms) when replay has
 *	  moved, so that a waiter sees a replayed stamp within about a
 *	  millisecond instead of at its next cfeed.poll_interval.
 *
 * No sweep runs on a standby, so nothing broadcasts the shards' condition
 * variables there (shmem.c); replay offers no hook to an extension.  So one
 * process watches the replay position, which is in shared memory and
 * cheap to read: while a wait on the standby may be under way (waiters
 * publish the end of their wait in CfeedShared->standby_wait_until), it
 * reads the position every STANDBY_POLL_MS (less often on a quiet standby,
 * below) and broadcasts CfeedShared->replayed when it moved.  A standby
 * waiter sleeps on that condition variable and reads its shard's head when
 * woken (wait.c), or at cfeed.poll_interval at the latest, which also
 * covers a standby where the waker cannot run.  Past the latest end of the
 * waits that went to sleep (one woken or cancelled before its end does not
 * shorten it) it sleeps on its latch, which a new waiter sets, so an idle
 * standby costs nothing.  The position is that of the end of the last
 * record replayed, so a commit it passed is visible to a new snapshot.
 *
 * Started with the server (shared_preload_libraries) once the standby is
 * consistent; on a primary, and on a standby at its promotion, it exits 0
 * (never restarted: on a primary sweeps broadcast the shards' condition
 * variables).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "access/xlogrecovery.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/timestamp.h"

#include "cfeed.h"
#include "shmem.h"

/*
 * How often the waker reads the replay position while waits are under way:
 * every STANDBY_POLL_MS while replay moved within the last STANDBY_BUSY_MS,
 * else every STANDBY_QUIET_POLL_MS (cfeed.poll_interval's default), so that
 * a quiet standby with long-polling readers costs next to nothing.
 */
#define STANDBY_POLL_MS			1
#define STANDBY_BUSY_MS			100
#define STANDBY_QUIET_POLL_MS	10

/* How often an idle waker looks whether the standby was promoted. */
#define STANDBY_IDLE_MS		1000

PGDLLEXPORT void cfeed_standby_waker_main(Datum main_arg);

/*
 * cfeed_standby_waker_register
 *		Register the waker (from _PG_init under shared_preload_libraries).
 */
void
cfeed_standby_waker_register(void)
{
	BackgroundWorker worker;

	/* connected to no database, only to be seen in pg_stat_activity */
	cfeed_worker_init(&worker, "cfeed_standby_waker_main", "cfeed standby waker",
					  BgWorkerStart_ConsistentState, 1);
	RegisterBackgroundWorker(&worker);
}

/*
 * cfeed_standby_wait_begin
 *		A wait on a standby that lasts until deadline begins: have the waker
 *		watch replay until then, and return the condition variable to sleep
 *		on (the caller prepares to sleep on it before it reads the head).
 *		NULL without the preload.
 */
ConditionVariable *
cfeed_standby_wait_begin(TimestampTz deadline)
{
	uint64		until;
	Latch	   *latch;

	if (CfeedShared == NULL)
		return NULL;
	until = pg_atomic_read_u64(&CfeedShared->standby_wait_until);
	while (until < (uint64) deadline &&
		   !pg_atomic_compare_exchange_u64(&CfeedShared->standby_wait_until, &until, (uint64) deadline))
		;
	latch = CfeedShared->waker_latch;
	if (latch != NULL)
		SetLatch(latch);
	return &CfeedShared->replayed;
}

/*
 * cfeed_standby_waker_main
 *		Entry point of the waker.
 */
void
cfeed_standby_waker_main(Datum main_arg pg_attribute_unused())
{
	XLogRecPtr	seen = InvalidXLogRecPtr;
	TimestampTz moved_at = 0;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	if (!RecoveryInProgress())
		proc_exit(0);
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	CfeedShared->waker_latch = MyLatch;
	for (;;)
	{
		long		timeout = STANDBY_IDLE_MS;
		TimestampTz now = GetCurrentTimestamp();

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		if (!RecoveryInProgress())
		{
			CfeedShared->waker_latch = NULL;
			proc_exit(0);
		}
		if (pg_atomic_read_u64(&CfeedShared->standby_wait_until) > (uint64) now)
		{
			XLogRecPtr	replayed = GetXLogReplayRecPtr(NULL);

			if (replayed != seen)
			{
				seen = replayed;
				moved_at = now;
				ConditionVariableBroadcast(&CfeedShared->replayed);
			}
			timeout = cfeed_ms_until(moved_at, now) < STANDBY_BUSY_MS ?
				STANDBY_POLL_MS : STANDBY_QUIET_POLL_MS;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 timeout, cfeed_wait_event(CFEED_WAIT_STANDBY_WAKER));
		ResetLatch(MyLatch);
	}
}
