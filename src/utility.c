/*-------------------------------------------------------------------------
 *
 * utility.c
 *	  The ProcessUtility hook (installed under the preload): it keeps
 *	  sweepers out of the way of DROP DATABASE and friends, tells the
 *	  launcher about CREATE EXTENSION and wakes the sweepers after COMMIT
 *	  PREPARED, runs change_id.c's check (COPY draws change_ids without the
 *	  executor), lock_guard.c's check of LOCK TABLE and persistence_guard.c's
 *	  of ALTER TABLE.
 *
 *	  A database with paused > 0 gets no sweeper (launcher.c): DROP
 *	  DATABASE, CREATE DATABASE ... TEMPLATE, ALTER DATABASE ... RENAME / SET
 *	  TABLESPACE need it unconnected.  The hook pauses it (its sweepers see
 *	  the flag and leave between transactions, never interrupted), runs the
 *	  command and unpauses (or forgets the database once it is dropped).  It
 *	  pauses only a command that PostgreSQL's own checks would let go ahead
 *	  (the database exists, the caller owns it or may create databases from
 *	  it, it is not the caller's own: utility_may_pause), so no role stalls
 *	  the sweepers of a database it has no rights on; and the pause ends on
 *	  every way out of the command (PG_ENSURE_ERROR_CLEANUP: an ERROR, and a
 *	  FATAL such as pg_terminate_backend of a DROP DATABASE waiting for
 *	  other sessions; a crash resets shared memory).  cfeed.sweepers shows a
 *	  paused database.
 *
 *	  Locking: CfeedShared->lock (exclusive) around each change of a
 *	  database's entry.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_database.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/syscache.h"

#include "cfeed.h"
#include "shmem.h"

static ProcessUtility_hook_type prev_utility_hook = NULL;

/* CREATE EXTENSION cfeed ran in this transaction: tell the launcher at commit. */
static bool created_extension = false;

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
unpause_on_error(int code pg_attribute_unused(), Datum arg)
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
 * created_extension_callback
 *		After CREATE EXTENSION cfeed commits, have the launcher probe the
 *		database at once.
 */
static void
created_extension_callback(XactEvent event, void *arg pg_attribute_unused())
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
 * guarded_lock
 *		Run a LOCK statement as lock_guard.c lets it run.
 */
static void
guarded_lock(CFEED_UTILITY_ARGS)
{
	pstmt = cfeed_guard_lock_statement(pstmt, context == PROCESS_UTILITY_TOPLEVEL);
	CFEED_CALL_UTILITY(prev_utility_hook);
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
	if (IsA(parsetree, AlterTableStmt))
		cfeed_guard_alter_table((AlterTableStmt *) parsetree);
	if (IsA(parsetree, LockStmt))
	{
		ProcessUtility_hook_type lock_hook = guarded_lock;

		CFEED_CALL_UTILITY(lock_hook);
		return;
	}
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
			cfeed_wake_sweepers_for_commit(MyDatabaseId);
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
	RegisterXactCallback(created_extension_callback, NULL);
}
