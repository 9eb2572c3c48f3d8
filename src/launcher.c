/*-------------------------------------------------------------------------
 *
 * launcher.c
 *	  The launcher: a background worker connected to no database that keeps
 *	  one sweeper running per (database with cfeed, sweep group), and the
 *	  utility hook that keeps sweepers out of the way of DROP DATABASE and
 *	  friends, tells the launcher about CREATE EXTENSION and wakes the
 *	  sweepers after COMMIT PREPARED (and runs change_id.c's check, as the
 *	  ExecutorStart hook does).
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
 * A database with paused > 0 gets no sweeper: DROP DATABASE, CREATE
 * DATABASE ... TEMPLATE, ALTER DATABASE ... RENAME / SET TABLESPACE need it
 * unconnected.  The hook pauses it (its sweepers see the flag and leave
 * between transactions, never interrupted), runs the command and unpauses
 * (or forgets the database once it is dropped).  It pauses only a command
 * that PostgreSQL's own checks would let go ahead (the database exists, the
 * caller owns it or may create databases from it, it is not the caller's
 * own: utility_may_pause), so no role stalls the sweepers of a database it
 * has no rights on; and the pause ends on every way out of the command
 * (PG_ENSURE_ERROR_CLEANUP: an ERROR, and a FATAL such as
 * pg_terminate_backend of a DROP DATABASE waiting for other sessions; a
 * crash resets shared memory).  cfeed.sweepers shows a paused database.  Sweepers never restart
 * themselves (BGW_NEVER_RESTART); the launcher, notified of their exit,
 * restarts them within cfeed.launcher_interval.  Template databases are
 * never swept.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_database.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
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

static StartedWorker *started = NULL;
static int	nstarted = 0;

static ProcessUtility_hook_type prev_utility_hook = NULL;

/* CREATE EXTENSION cfeed ran in this transaction: tell the launcher at commit. */
static bool created_extension = false;

PGDLLEXPORT void cfeed_launcher_main(Datum main_arg);

/*
 * cfeed_launcher_register
 *		Register the launcher (from _PG_init under shared_preload_libraries).
 */
void
cfeed_launcher_register(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 1;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "cfeed");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "cfeed_launcher_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "cfeed launcher");
	snprintf(worker.bgw_type, BGW_MAXLEN, "cfeed launcher");
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
 */
static void
start_sweeper(Oid dboid, int32 sweep_group)
{
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;
	int			i;

	for (i = 0; i < nstarted; i++)
		if (started[i].dboid == dboid && started[i].sweep_group == sweep_group)
			return;
	if (nstarted >= cfeed_max_workers)
	{
		ereport(LOG,
				(errmsg("cfeed: cannot start a sweeper for group %d of database %u: cfeed.max_workers (%d) reached",
						sweep_group, dboid, cfeed_max_workers)));
		return;
	}

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "cfeed");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "cfeed_sweeper_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "cfeed sweeper group %d db %u", sweep_group, dboid);
	snprintf(worker.bgw_type, BGW_MAXLEN, "cfeed sweeper");
	worker.bgw_main_arg = ObjectIdGetDatum(dboid);
	memcpy(worker.bgw_extra, &sweep_group, sizeof(int32));
	worker.bgw_notify_pid = MyProcPid;

	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
	{
		ereport(LOG,
				(errmsg("cfeed: could not start a sweeper for group %d of database %u", sweep_group, dboid),
				 errhint("Raise max_worker_processes.")));
		return;
	}
	started[nstarted].dboid = dboid;
	started[nstarted].sweep_group = sweep_group;
	started[nstarted].handle = handle;
	nstarted++;
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
		int			g;

		if (db->paused > 0)
			continue;
		if (db->state == CFEED_DB_PROBE)
			start_sweeper(db->dboid, 0);
		else if (db->state == CFEED_DB_ACTIVE)
			for (g = 0; g < db->ngroups; g++)
				start_sweeper(db->dboid, db->groups[g]);
	}
}

/*
 * cfeed_launcher_main
 *		Entry point of the launcher.
 */
void
cfeed_launcher_main(Datum main_arg)
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

/*
 * pause_database / unpause_database
 *		Keep sweepers away from a database for the length of a utility
 *		command.  Pausing sets the database's flag and the latches of its
 *		sweepers, which leave between transactions; the command itself
 *		waits for them (PostgreSQL's CountOtherDBBackends waits up to 5 s
 *		for other sessions to leave) and fails as usual if one stays, e.g. a
 *		sweep whose commit waits for a synchronous standby.  No signal: a
 *		SIGTERM would end that wait and make its stamps visible without the
 *		standby having them.
 */
static void
pause_database(Oid dboid, const char *what)
{
	LWLockAcquire(CfeedShared->lock, LW_EXCLUSIVE);
	{
		CfeedDatabase *db = cfeed_find_db(dboid, true);

		if (db != NULL)
		{
			db->paused++;
			db->paused_pid = MyProcPid;
			strlcpy(db->paused_by, what, sizeof(db->paused_by));
		}
	}
	LWLockRelease(CfeedShared->lock);
	ereport(LOG,
			(errmsg("cfeed: sweepers of database %u paused for %s", dboid, what)));
	cfeed_wake_sweepers(dboid);
}

static void
unpause_database(Oid dboid, bool dropped)
{
	LWLockAcquire(CfeedShared->lock, LW_EXCLUSIVE);
	{
		CfeedDatabase *db = cfeed_find_db(dboid, false);

		if (db != NULL)
		{
			if (db->paused > 0)
				db->paused--;
			if (dropped && db->paused == 0)
				db->state = CFEED_DB_FREE;
		}
	}
	LWLockRelease(CfeedShared->lock);
	if (!dropped)
		ereport(LOG,
				(errmsg("cfeed: sweepers of database %u resume", dboid)));
	cfeed_wake_launcher();
}

/*
 * unpause_on_error
 *		PG_ENSURE_ERROR_CLEANUP callback of cfeed_utility: the command failed
 *		(ERROR) or its backend is exiting (FATAL): the pause ends.
 */
static void
unpause_on_error(int code, Datum arg)
{
	unpause_database(DatumGetObjectId(arg), false);
}

/*
 * database_is_template
 *		Whether the database is marked datistemplate (false if it is gone).
 */
static bool
database_is_template(Oid dboid)
{
	HeapTuple	tup = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(dboid));
	bool		is = false;

	if (HeapTupleIsValid(tup))
	{
		is = ((Form_pg_database) GETSTRUCT(tup))->datistemplate;
		ReleaseSysCache(tup);
	}
	return is;
}

/*
 * may_create_databases
 *		Whether the current user may create databases (superuser or
 *		CREATEDB), as CREATE DATABASE and ALTER DATABASE ... RENAME check it
 *		(have_createdb_privilege is not exported by every 15.x server).
 */
static bool
may_create_databases(void)
{
	HeapTuple	tup;
	bool		may = superuser();

	if (!may && HeapTupleIsValid(tup = SearchSysCache1(AUTHOID, ObjectIdGetDatum(GetUserId()))))
	{
		may = ((Form_pg_authid) GETSTRUCT(tup))->rolcreatedb;
		ReleaseSysCache(tup);
	}
	return may;
}

/*
 * utility_may_pause
 *		Whether PostgreSQL's own checks would let the command that needs
 *		database target unconnected go ahead, as far as they can be known
 *		before it runs: the caller owns the database (DROP, RENAME, SET
 *		TABLESPACE; RENAME also needs CREATEDB), or may create databases
 *		and copy this one (CREATE DATABASE ... TEMPLATE: CREATEDB, and the
 *		template is marked as one or the caller owns it); and it is not the
 *		caller's own database.  Superusers pass every check.  A command
 *		refused later for another reason (a name taken, a session that
 *		stays) pauses the sweepers only while it waits.
 */
static bool
utility_may_pause(Node *parsetree, Oid target)
{
	Oid			user = GetUserId();
	bool		owner = cfeed_db_ownercheck(target, user);

	if (target == MyDatabaseId)
		return false;
	switch (nodeTag(parsetree))
	{
		case T_CreatedbStmt:
			return may_create_databases() && (owner || database_is_template(target));
		case T_RenameStmt:
			return owner && may_create_databases();
		default:
			return owner;		/* DROP DATABASE, ALTER DATABASE SET TABLESPACE */
	}
}

/*
 * utility_target_db
 *		The database a utility command needs free of other connections, or
 *		InvalidOid.
 */
static Oid
utility_target_db(Node *parsetree)
{
	ListCell   *lc;

	switch (nodeTag(parsetree))
	{
		case T_DropdbStmt:
			return get_database_oid(((DropdbStmt *) parsetree)->dbname, true);
		case T_CreatedbStmt:
			foreach(lc, ((CreatedbStmt *) parsetree)->options)
			{
				DefElem    *opt = lfirst_node(DefElem, lc);

				if (strcmp(opt->defname, "template") == 0 && opt->arg != NULL)
					return get_database_oid(defGetString(opt), true);
			}
			return InvalidOid;
		case T_AlterDatabaseStmt:
			/* SET TABLESPACE alone needs it unconnected */
			foreach(lc, ((AlterDatabaseStmt *) parsetree)->options)
			{
				if (strcmp(lfirst_node(DefElem, lc)->defname, "tablespace") == 0)
					return get_database_oid(((AlterDatabaseStmt *) parsetree)->dbname, true);
			}
			return InvalidOid;
		case T_RenameStmt:
			if (((RenameStmt *) parsetree)->renameType == OBJECT_DATABASE)
				return get_database_oid(((RenameStmt *) parsetree)->subname, true);
			return InvalidOid;
		default:
			return InvalidOid;
	}
}

/*
 * launcher_xact_callback
 *		After CREATE EXTENSION cfeed commits, have the launcher probe the
 *		database at once.
 */
static void
launcher_xact_callback(XactEvent event, void *arg)
{
	if (!created_extension)
		return;
	if (event == XACT_EVENT_COMMIT)
	{
		LWLockAcquire(CfeedShared->lock, LW_EXCLUSIVE);
		{
			CfeedDatabase *db = cfeed_find_db(MyDatabaseId, true);

			if (db != NULL && db->state != CFEED_DB_ACTIVE)
				db->state = CFEED_DB_PROBE;
		}
		LWLockRelease(CfeedShared->lock);
		cfeed_wake_launcher();
	}
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PREPARE)
		created_extension = false;
}

/*
 * cfeed_utility
 *		ProcessUtility hook: see the file header.
 */
static void
cfeed_utility(CFEED_UTILITY_ARGS)
{
	Node	   *parsetree = pstmt->utilityStmt;
	Oid			target = utility_target_db(parsetree);

	(void) cfeed_change_ids_check();	/* COPY draws without the executor */
	if (IsA(parsetree, CreateExtensionStmt) &&
		strcmp(((CreateExtensionStmt *) parsetree)->extname, "cfeed") == 0)
		created_extension = true;

	if (!OidIsValid(target))
	{
		CFEED_CALL_UTILITY(prev_utility_hook);

		/*
		 * A prepared transaction's commit is not this session's: no commit
		 * callback knows whether it recorded changes.  Wake the sweepers
		 * anyway (a sweep that finds nothing is cheap; 2PC is rare).
		 */
		if (IsA(parsetree, TransactionStmt) &&
			((TransactionStmt *) parsetree)->kind == TRANS_STMT_COMMIT_PREPARED)
			cfeed_wake_sweepers(MyDatabaseId);
		return;
	}

	if (!utility_may_pause(parsetree, target))
	{
		/* PostgreSQL refuses it (or it fails waiting): no pause */
		CFEED_CALL_UTILITY(prev_utility_hook);
		return;
	}
	pause_database(target, GetCommandTagName(CreateCommandTag(parsetree)));
	PG_ENSURE_ERROR_CLEANUP(unpause_on_error, ObjectIdGetDatum(target));
	{
		CFEED_CALL_UTILITY(prev_utility_hook);
	}
	PG_END_ENSURE_ERROR_CLEANUP(unpause_on_error, ObjectIdGetDatum(target));
	unpause_database(target, IsA(parsetree, DropdbStmt));
}

/*
 * cfeed_utility_hook_init
 *		Install the hook and callback (from _PG_init under the preload).
 */
void
cfeed_utility_hook_init(void)
{
	prev_utility_hook = ProcessUtility_hook;
	ProcessUtility_hook = cfeed_utility;
	RegisterXactCallback(launcher_xact_callback, NULL);
}
