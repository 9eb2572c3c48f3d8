/*-------------------------------------------------------------------------
 *
 * launcher.c
 *	  The launcher: a background worker connected to no database that keeps
 *	  one sweeper running per (database with cfeed, sweep group), and the
 *	  shared table of databases it keeps (CfeedShared->databases) that the
 *	  sweepers and the utility hook (utility.c) update.
 *
 * State machine of a database (CfeedDatabase.state, under CfeedShared->lock)
 * ------------------------------------------------------------------------
 *	 PROBE	 -- found in pg_database, or CREATE EXTENSION cfeed committed
 *				there.  The launcher starts its group-0 sweeper, which looks
 *				for the extension and moves the database to
 *	 ACTIVE  -- the group-0 sweeper publishes the database's sweep groups;
 *				the launcher keeps one sweeper per group running; or
 *	 ABSENT  -- no extension (also after DROP EXTENSION): no sweeper.
 *
 * A database with paused > 0 gets no sweeper (utility.c pauses it for
 * commands that need it unconnected).  Sweepers never restart themselves
 * (BGW_NEVER_RESTART); the launcher, notified of their exit, restarts them
 * within cfeed.launcher_interval.  Template databases are never swept.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "cfeed.h"
#include "shmem.h"

/* A sweeper the launcher started (launcher-local). */
typedef struct StartedWorker
{
	Oid			dboid;
	int32		sweep_group;
	BackgroundWorkerHandle *handle;
} StartedWorker;

/* The sweepers this launcher started (cfeed.max_workers at most). */
static StartedWorker *started = NULL;
static int	nstarted = 0;

PGDLLEXPORT void cfeed_launcher_main(Datum main_arg);

/*
 * cfeed_worker_init
 *		Fill in *worker for one of cfeed's background workers: its entry
 *		point function, its type (also its name, which the caller may
 *		change), when it starts and, when it fails, after how long it is
 *		started again.  It attaches to shared memory and may connect.
 */
void
cfeed_worker_init(BackgroundWorker *worker, const char *function, const char *type,
				  BgWorkerStartTime start_time, int restart_time)
{
	memset(worker, 0, sizeof(*worker));
	worker->bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker->bgw_start_time = start_time;
	worker->bgw_restart_time = restart_time;
	snprintf(worker->bgw_library_name, BGW_MAXLEN, "cfeed");
	snprintf(worker->bgw_function_name, BGW_MAXLEN, "%s", function);
	snprintf(worker->bgw_name, BGW_MAXLEN, "%s", type);
	snprintf(worker->bgw_type, BGW_MAXLEN, "%s", type);
}

/*
 * cfeed_launcher_register
 *		Register the launcher (from _PG_init under shared_preload_libraries).
 */
void
cfeed_launcher_register(void)
{
	BackgroundWorker worker;

	cfeed_worker_init(&worker, "cfeed_launcher_main", "cfeed launcher",
					  BgWorkerStart_RecoveryFinished, 1);
	RegisterBackgroundWorker(&worker);
}

/*
 * cfeed_find_db
 *		The entry of a database; with create, a new PROBE entry when missing
 *		(NULL when the table is full).  Caller holds CfeedShared->lock
 *		exclusively when create is true, at least shared otherwise.
 */
CfeedDatabase *
cfeed_find_db(Oid dboid, bool create)
{
	CfeedDatabase *free_entry = NULL;
	int			i;

	for (i = 0; i < CFEED_MAX_DATABASES; i++)
	{
		CfeedDatabase *db = &CfeedShared->dbs[i];

		if (db->state != CFEED_DB_FREE && db->dboid == dboid)
			return db;
		if (db->state == CFEED_DB_FREE && free_entry == NULL)
			free_entry = db;
	}
	if (!create || free_entry == NULL)
		return NULL;
	memset(free_entry, 0, sizeof(CfeedDatabase));
	free_entry->dboid = dboid;
	free_entry->state = CFEED_DB_PROBE;
	free_entry->ngroups = 1;
	free_entry->groups[0] = 0;
	return free_entry;
}

/*
 * cfeed_wake_launcher
 *		Set the launcher's latch (no-op without the preload).
 */
void
cfeed_wake_launcher(void)
{
	Latch	   *latch;

	if (CfeedShared == NULL)
		return;
	latch = CfeedShared->launcher_latch;
	if (latch != NULL)
		SetLatch(latch);
}

/*
 * scan_databases
 *		Add every connectable non-template database to the table (as PROBE
 *		when new) and drop entries of databases that no longer exist.
 */
static void
scan_databases(void)
{
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;
	Oid			seen[CFEED_MAX_DATABASES];
	int			nseen = 0;
	int			i;

	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	LWLockAcquire(CfeedShared->lock, LW_EXCLUSIVE);
	while (HeapTupleIsValid(tup = heap_getnext(scan, ForwardScanDirection)))
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);

		if (!db->datallowconn || db->datistemplate)
			continue;
		if (nseen < CFEED_MAX_DATABASES)
			seen[nseen++] = db->oid;
		if (cfeed_find_db(db->oid, true) == NULL)
			elog(WARNING, "cfeed: more than %d databases; database %u is not swept",
				 CFEED_MAX_DATABASES, db->oid);
	}
	for (i = 0; i < CFEED_MAX_DATABASES; i++)
	{
		CfeedDatabase *db = &CfeedShared->dbs[i];
		int			j;
		bool		found = false;

		for (j = 0; j < nseen && !found; j++)
			found = (seen[j] == db->dboid);
		if (db->state != CFEED_DB_FREE && !found && db->paused == 0)
			db->state = CFEED_DB_FREE;
	}
	LWLockRelease(CfeedShared->lock);
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/*
 * forget_stopped
 *		Drop the launcher's records of sweepers that have exited.
 */
static void
forget_stopped(void)
{
	int			i = 0;

	while (i < nstarted)
	{
		pid_t		pid;

		if (GetBackgroundWorkerPid(started[i].handle, &pid) == BGWH_STOPPED)
		{
			pfree(started[i].handle);
			started[i] = started[--nstarted];
		}
		else
			i++;
	}
}

/*
 * start_sweeper
 *		Start a sweeper for (dboid, sweep_group) unless one is running.
 *		Returns why none could be started (logged too), or NULL.
 */
static const char *
start_sweeper(Oid dboid, int32 sweep_group)
{
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;
	int			i;

	for (i = 0; i < nstarted; i++)
		if (started[i].dboid == dboid && started[i].sweep_group == sweep_group)
			return NULL;
	if (nstarted >= cfeed_max_workers)
	{
		ereport(LOG,
				(errmsg("cfeed: cannot start a sweeper for group %d of database %u: cfeed.max_workers (%d) reached",
						sweep_group, dboid, cfeed_max_workers)));
		return "cfeed.max_workers reached";
	}

	cfeed_worker_init(&worker, "cfeed_sweeper_main", "cfeed sweeper",
					  BgWorkerStart_RecoveryFinished, BGW_NEVER_RESTART);
	snprintf(worker.bgw_name, BGW_MAXLEN, "cfeed sweeper group %d db %u", sweep_group, dboid);
	worker.bgw_main_arg = ObjectIdGetDatum(dboid);
	memcpy(worker.bgw_extra, &sweep_group, sizeof(int32));
	worker.bgw_notify_pid = MyProcPid;

	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
	{
		ereport(LOG,
				(errmsg("cfeed: could not start a sweeper for group %d of database %u", sweep_group, dboid),
				 errhint("Raise max_worker_processes.")));
		return "no background worker slot free (max_worker_processes)";
	}
	started[nstarted].dboid = dboid;
	started[nstarted].sweep_group = sweep_group;
	started[nstarted].handle = handle;
	nstarted++;
	return NULL;
}

/*
 * record_unstarted
 *		Note in the database's entry the groups of this pass that got no
 *		sweeper, and why (the last reason), for cfeed.sweepers: otherwise
 *		only the server log told that a database went unswept.
 */
static void
record_unstarted(Oid dboid, const int32 *groups, int n, const char *why)
{
	CfeedDatabase *db;

	LWLockAcquire(CfeedShared->lock, LW_EXCLUSIVE);
	db = cfeed_find_db(dboid, false);
	if (db != NULL)
	{
		db->nunstarted = n;
		memcpy(db->unstarted, groups, sizeof(int32) * n);
		strlcpy(db->unstarted_why, why ? why : "", sizeof(db->unstarted_why));
	}
	LWLockRelease(CfeedShared->lock);
}

/*
 * ensure_sweepers
 *		Start what the database table asks for: a group-0 sweeper for PROBE
 *		databases, one per group for ACTIVE ones, none while paused.
 */
static void
ensure_sweepers(void)
{
	CfeedDatabase dbs[CFEED_MAX_DATABASES];
	int			i;

	LWLockAcquire(CfeedShared->lock, LW_SHARED);
	memcpy(dbs, CfeedShared->dbs, sizeof(dbs));
	LWLockRelease(CfeedShared->lock);

	forget_stopped();
	for (i = 0; i < CFEED_MAX_DATABASES; i++)
	{
		CfeedDatabase *db = &dbs[i];
		int32		unstarted[CFEED_MAX_GROUPS];
		int			n = 0;
		const char *why = NULL;
		int			g;

		if (db->paused > 0 || (db->state != CFEED_DB_PROBE && db->state != CFEED_DB_ACTIVE))
			continue;
		for (g = 0; g < (db->state == CFEED_DB_PROBE ? 1 : db->ngroups); g++)
		{
			int32		group = db->state == CFEED_DB_PROBE ? 0 : db->groups[g];
			const char *failed = start_sweeper(db->dboid, group);

			if (failed != NULL)
			{
				unstarted[n++] = group;
				why = failed;
			}
		}
		if (n > 0 || db->nunstarted > 0)
			record_unstarted(db->dboid, unstarted, n, why);
	}
}

/*
 * cfeed_launcher_main
 *		Entry point of the launcher.
 */
void
cfeed_launcher_main(Datum main_arg pg_attribute_unused())
{
	TimestampTz last_scan = 0;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("cfeed launcher");

	started = MemoryContextAlloc(TopMemoryContext, sizeof(StartedWorker) * cfeed_max_workers);
	LWLockAcquire(CfeedShared->lock, LW_EXCLUSIVE);
	CfeedShared->launcher_pid = MyProcPid;
	CfeedShared->launcher_latch = MyLatch;
	LWLockRelease(CfeedShared->lock);

	for (;;)
	{
		TimestampTz now = GetCurrentTimestamp();

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		if (cfeed_enable_sweeper)
		{
			if (TimestampDifferenceExceeds(last_scan, now, CFEED_DB_SCAN_MS))
			{
				scan_databases();
				last_scan = now;
			}
			ensure_sweepers();
		}

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 cfeed_launcher_interval, cfeed_wait_event(CFEED_WAIT_LAUNCHER_MAIN));
		ResetLatch(MyLatch);
	}
}
