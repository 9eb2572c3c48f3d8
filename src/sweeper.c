/*-------------------------------------------------------------------------
 *
 * sweeper.c
 *	  The background sweeper: one worker per (database, sweep group),
 *	  started by the launcher, running cfeed_sweep_group() as the extension's
 *	  owner in one short transaction per pass.
 *
 * Loop
 * ----
 *	 wait on the latch (set by every commit that recorded changes in this
 *	 database) or cfeed.fallback_interval -> one transaction: check that the
 *	 extension still exists (exit 0 if not), the group-0 sweeper refreshes
 *	 the database's list of sweep groups for the launcher (and warns once
 *	 when triggers cfeed enables ALWAYS are not), sweep the group
 *	 without waiting for another sweeper of it -> commit -> loop again at
 *	 once if the sweep filled a batch, or after a pause if it stamped
 *	 anything and one is due (sweep_pause_ms) -> wait again.  The group-0
 *	 sweeper also applies feeds' retention every cfeed.retention_interval,
 *	 in its own transaction.
 *
 * Gathering: a sweep costs a fixed part (its transaction, the commit's WAL
 * flush, each shard's head; a range shard's stamp row, index entry and the
 * group's mark) besides its changes' own, so under sustained writes fewer,
 * larger sweeps cost less per change.  After a sweep that stamped the
 * changes of more than one transaction, when cfeed.sweep_gather_changes
 * would come within cfeed.sweep_gather at the rate the sweeps stamped them
 * lately (about the last GATHER_RATE_MS), the next sweep begins that long
 * after this one began.  A lighter load (one transaction per sweep, however
 * many changes it wrote, or a rate that fills no batch in time) is swept at
 * every wake-up, so the latency of a feed that is not under sustained
 * writes is untouched; under them a change waits at most
 * cfeed.sweep_gather more, and less the faster they come.
 * cfeed.sweep_delay is a fixed floor for the same pause.
 *
 * An idle pass starts no xid, so an idle sweeper writes no WAL.  An ERROR is
 * caught: the transaction is aborted, the message kept for cfeed.sweepers
 * (last_error, until a sweep succeeds again), and the loop goes on after a
 * second.  A shard out of numbers is no error: the sweep stamps the
 * group's other shards, and its message is kept for cfeed.sweepers the
 * same way (record_outcome).  A paused database (DROP DATABASE
 * and the like, utility.c) ends the worker between transactions, after
 * its latch is set; SIGTERM (shutdown) ends it at once.  The launcher
 * restarts it when appropriate.
 *
 * Locking: the worker's slot in shared memory is claimed and released under
 * CfeedShared->lock (shmem.c); its counters are written without it.  Each
 * sweep takes its group's sweep lock without waiting (sweep.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "commands/dbcommands.h"
#include "funcapi.h"
#include "catalog/pg_authid.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "cfeed.h"
#include "shmem.h"

#define GATHER_RATE_MS	100.0	/* the window of the rate that gathering uses */

PGDLLEXPORT void cfeed_sweeper_main(Datum main_arg);

/* This sweeper's slot in shared memory (shmem.h). */
static CfeedWorkerSlot *my_slot = NULL;

/* How often a sweeper re-reads its database's sweep groups and owner. */
#define CFEED_REFRESH_MS		1000

/* When the sweep groups and owner_oid were last read; when retention ran. */
static TimestampTz last_refresh = 0;
static TimestampTz last_retention = 0;
static Oid	owner_oid = InvalidOid;

/*
 * release_slot
 *		before_shmem_exit callback: give the worker slot back.
 */
static void
release_slot(int code pg_attribute_unused(), Datum arg pg_attribute_unused())
{
	if (my_slot == NULL)
		return;
	LWLockAcquire(CfeedShared->lock, LW_EXCLUSIVE);
	my_slot->in_use = false;
	my_slot->latch = NULL;
	LWLockRelease(CfeedShared->lock);
	my_slot = NULL;
}

/*
 * claim_slot
 *		Take a free worker slot for (dboid, group).  Exits quietly when the
 *		database is paused or another sweeper already serves the group.
 */
static void
claim_slot(Oid dboid, int32 sweep_group)
{
	CfeedWorkerSlot *free_slot = NULL;
	CfeedDatabase *db;
	int			i;

	LWLockAcquire(CfeedShared->lock, LW_EXCLUSIVE);
	db = cfeed_find_db(dboid, false);
	for (i = 0; i < CfeedShared->max_workers; i++)
	{
		CfeedWorkerSlot *slot = &CfeedShared->workers[i];

		if (slot->in_use && slot->dboid == dboid && slot->sweep_group == sweep_group)
		{
			free_slot = NULL;
			break;
		}
		if (!slot->in_use && free_slot == NULL)
			free_slot = slot;
	}
	if (free_slot == NULL || db == NULL || db->paused > 0)
	{
		LWLockRelease(CfeedShared->lock);
		proc_exit(0);
	}
	memset(free_slot, 0, sizeof(CfeedWorkerSlot));
	free_slot->in_use = true;
	free_slot->dboid = dboid;
	free_slot->sweep_group = sweep_group;
	free_slot->pid = MyProcPid;
	free_slot->latch = MyLatch;
	pg_atomic_init_u32(&free_slot->pausing, 0);
	my_slot = free_slot;
	LWLockRelease(CfeedShared->lock);
	before_shmem_exit(release_slot, (Datum) 0);
}

/*
 * database_paused
 *		Whether a utility command wants the database unconnected (utility.c):
 *		the sweeper then leaves, between transactions.
 */
static bool
database_paused(Oid dboid)
{
	CfeedDatabase *db;
	bool		paused;

	LWLockAcquire(CfeedShared->lock, LW_SHARED);
	db = cfeed_find_db(dboid, false);
	paused = db != NULL && db->paused > 0;
	LWLockRelease(CfeedShared->lock);
	return paused;
}

/*
 * set_db_state
 *		Record what the group-0 sweeper learned about its database; wakes the
 *		launcher when the groups changed.
 */
static void
set_db_state(Oid dboid, CfeedDbState state, int ngroups, const int32 *groups)
{
	bool		changed = false;

	LWLockAcquire(CfeedShared->lock, LW_EXCLUSIVE);
	{
		CfeedDatabase *db = cfeed_find_db(dboid, true);

		if (db != NULL)
		{
			changed = db->state != state || db->ngroups != ngroups ||
				memcmp(db->groups, groups, sizeof(int32) * ngroups) != 0;
			db->state = state;
			db->ngroups = ngroups;
			memcpy(db->groups, groups, sizeof(int32) * ngroups);
		}
	}
	LWLockRelease(CfeedShared->lock);
	if (changed)
		cfeed_wake_launcher();
}

/*
 * report_absent
 *		Group-0 sweeper: its database has no cfeed any more (DROP EXTENSION,
 *		a move to the SQL edition).  A CREATE EXTENSION cfeed that commits
 *		meanwhile (a move back) has the launcher probe the database from its
 *		commit callback, unless the state is ACTIVE (utility.c): so ABSENT is
 *		recorded first, then the extension is looked up again with a new
 *		catalog snapshot, and the database probed when it is there.  Either
 *		the commit came before that look, which sees it, or after ABSENT was
 *		recorded, which its callback sees.  The look reads pg_extension
 *		(cfeed_find_extension_owner), not the syscache of PostgreSQL 18's
 *		get_extension_oid(): the callback runs before the commit's
 *		invalidations are sent, and until then that cache can still say "not
 *		installed" (then the database kept no sweeper: 115_sqled_move on 18,
 *		once in CI).
 */
static void
report_absent(Oid dboid)
{
	set_db_state(dboid, CFEED_DB_ABSENT, 0, NULL);
	InvalidateCatalogSnapshot();
	if (OidIsValid(cfeed_find_extension_owner()))
		set_db_state(dboid, CFEED_DB_PROBE, 0, NULL);
}

/*
 * refresh_groups
 *		Group-0 sweeper: publish the database's sweep groups (0 first).  Run
 *		every second: the groups are found by a walk of
 *		shard_config_sweep_group_idx (1.9), one probe per group (the next
 *		group above the last), not by a scan of every shard.  One more than
 *		fits is fetched, to warn of it.  A schema not yet updated to 1.9 has
 *		no such index, and its walk would scan the table once per group: it
 *		is listed by one scan, as before.
 */
static void
refresh_groups(Oid dboid)
{
	/* kept: the refresh runs every second */
	static SPIPlanPtr walk = NULL;
	static SPIPlanPtr scan = NULL;
	int			spi_level;
	int32		groups[CFEED_MAX_GROUPS];
	int			n = 1;
	uint64		i;
	SPIPlanPtr	plan;

	groups[0] = 0;
	spi_level = cfeed_spi_connect();
	if (OidIsValid(get_relname_relid("shard_config_sweep_group_idx", cfeed_schema_oid(false))))
		plan = cfeed_spi_plan(&walk,
							  "WITH RECURSIVE g(sweep_group) AS ("
							  " (SELECT s.sweep_group FROM cfeed.shard_config s"
							  "  WHERE s.sweep_group <> 0 ORDER BY 1 LIMIT 1)"
							  " UNION ALL"
							  " SELECT (SELECT s.sweep_group FROM cfeed.shard_config s"
							  "  WHERE s.sweep_group <> 0 AND s.sweep_group > g.sweep_group"
							  "  ORDER BY 1 LIMIT 1)"
							  " FROM g WHERE g.sweep_group IS NOT NULL)"
							  " SELECT sweep_group FROM g WHERE sweep_group IS NOT NULL"
							  " LIMIT " CppAsString2(CFEED_MAX_GROUPS), 0, NULL);
	else
		plan = cfeed_spi_plan(&scan,
							  "SELECT DISTINCT sweep_group FROM cfeed.shard_config "
							  "WHERE sweep_group <> 0 ORDER BY 1 LIMIT " CppAsString2(CFEED_MAX_GROUPS), 0, NULL);
	if (SPI_execute_plan(plan, NULL, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "cfeed sweeper: listing sweep groups failed");
	for (i = 0; i < SPI_processed; i++)
	{
		bool		isnull;

		if (n == CFEED_MAX_GROUPS)
		{
			ereport(WARNING,
					(errmsg("cfeed: more than %d sweep groups in database %u; the rest have no background sweeper",
							CFEED_MAX_GROUPS, dboid),
					 errhint("Sweep them with cfeed.sweep_loop().")));
			break;
		}
		groups[n++] = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
	}
	cfeed_spi_finish(spi_level);
	set_db_state(dboid, CFEED_DB_ACTIVE, n, groups);
}

/* The triggers cfeed creates enabled ALWAYS, on tables of its schema. */
#define CFEED_ALWAYS_TRIGGERS \
	"'change_guard', 'change_deleted', 'change_truncated', 'change_stamp_guard', " \
	"'change_image_guard', 'shard_config_guard', 'shard_config_truncate', " \
	"'shard_config_storage', 'read_grant_changed', 'write_grant_changed', " \
	"'tracked_table_resolve', 'stamp_deleted', 'stamp_truncated', 'stamp_replicated', " \
	"'sweep_mark_restored'"

/*
 * check_always_triggers
 *		Group-0 sweeper: warn, once until it is repaired or another one
 *		joins it, when a trigger
 *		cfeed enables ALWAYS (it must fire for logical replication's apply
 *		too: each is created so, in the version that brought it) is not:
 *		pg_restore --data-only --disable-triggers ends with ENABLE TRIGGER
 *		ALL, which makes them fire on origin only.
 *		A schema without feed epochs (not yet updated) has change_guard
 *		enabled on origin only, which is not reported (schema.c).
 */
static void
check_always_triggers(void)
{
	static char *warned = NULL; /* the commands of the last warning */
	static SPIPlanPtr plan = NULL;	/* kept: the refresh runs every second */
	int			spi_level;
	bool		isnull;
	Datum		fix;
	Oid			argtypes[2] = {BOOLOID, OIDOID};
	Datum		args[2];

	/* cfeed's schema by OID (one plan for every refresh) */
	args[0] = BoolGetDatum(cfeed_schema_has(CFEED_SCHEMA_EPOCHS));
	args[1] = ObjectIdGetDatum(cfeed_schema_oid(false));
	spi_level = cfeed_spi_connect();
	if (SPI_execute_plan(cfeed_spi_plan(&plan,
										"SELECT pg_catalog.string_agg(pg_catalog.format('ALTER TABLE %s ENABLE ALWAYS TRIGGER %I;', "
										"t.tgrelid::pg_catalog.regclass, t.tgname), ' ' "
										"ORDER BY t.tgrelid::pg_catalog.regclass::pg_catalog.text, t.tgname) "
										"FROM pg_catalog.pg_trigger t JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid "
										"WHERE c.relnamespace = $2 "
										"AND t.tgname IN (" CFEED_ALWAYS_TRIGGERS ") "
										"AND t.tgenabled <> 'A' AND (t.tgname <> 'change_guard' OR $1)",
										2, argtypes),
						 args, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "cfeed sweeper: checking cfeed's triggers failed");
	fix = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull && warned != NULL)
	{
		pfree(warned);
		warned = NULL;
	}
	else if (!isnull && (warned == NULL || strcmp(warned, TextDatumGetCString(fix)) != 0))
	{
		ereport(WARNING,
				(errmsg("cfeed: some of cfeed's triggers are not enabled ALWAYS"),
				 errdetail("Logical replication's apply and sessions with session_replication_role = replica skip them."),
				 errhint("A data-only restore with --disable-triggers does this; run: %s",
						 TextDatumGetCString(fix))));
		if (warned != NULL)
			pfree(warned);
		warned = MemoryContextStrdup(TopMemoryContext, TextDatumGetCString(fix));
	}
	cfeed_spi_finish(spi_level);
}

/*
 * group_listed
 *		Whether the database's published groups still include sweep_group.
 */
static bool
group_listed(Oid dboid, int32 sweep_group)
{
	bool		listed = false;
	CfeedDatabase *db;
	int			i;

	LWLockAcquire(CfeedShared->lock, LW_SHARED);
	db = cfeed_find_db(dboid, false);
	if (db != NULL && db->state == CFEED_DB_ACTIVE)
		for (i = 0; i < db->ngroups && !listed; i++)
			listed = (db->groups[i] == sweep_group);
	LWLockRelease(CfeedShared->lock);
	return listed;
}

/*
 * record_outcome
 *		A sweep succeeded: the slot's last_error is cleared (the error of an
 *		earlier pass is over), unless a shard of the sweep group has run out
 *		of numbers (sweep.c): the sweep went on without it; its message
 *		becomes last_error, and a WARNING goes to the log at most once a
 *		minute (every pass finds its changes still pending).
 */
static void
record_outcome(CfeedSweepResult *result)
{
	static TimestampTz last_warning = 0;
	char	   *msg = cfeed_sweep_exhausted_message(result);

	if (msg == NULL)
	{
		my_slot->last_error[0] = '\0';
		return;
	}
	strlcpy(my_slot->last_error, msg, CFEED_ERROR_LEN);
	if (TimestampDifferenceExceeds(last_warning, GetCurrentTimestamp(), 60000))
	{
		cfeed_sweep_report_exhausted(result);
		last_warning = GetCurrentTimestamp();
	}
}

/*
 * sweep_pass
 *		One transaction: check the extension, refresh groups (group 0), sweep.
 *		Returns the number of changes stamped, and in *several_writers whether
 *		they are of more than one transaction; exits when there is nothing
 *		left to do for this worker.
 */
static int64
sweep_pass(Oid dboid, int32 sweep_group, bool *several_writers)
{
	CfeedSweepResult result;
	Oid			save_userid;
	int			save_sec_context;
	int64		stamped = 0;

	*several_writers = false;
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());

	if (!OidIsValid(cfeed_schema_oid(true)) ||
		(TimestampDifferenceExceeds(last_refresh, GetCurrentTimestamp(), CFEED_REFRESH_MS) &&
		 !OidIsValid(get_extension_oid("cfeed", true))))
	{
		if (sweep_group == 0)
			report_absent(dboid);
		PopActiveSnapshot();
		CommitTransactionCommand();
		proc_exit(0);
	}
	if (sweep_group != 0 && !group_listed(dboid, sweep_group))
	{
		PopActiveSnapshot();
		CommitTransactionCommand();
		proc_exit(0);
	}

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	if (TimestampDifferenceExceeds(last_refresh, GetCurrentTimestamp(), CFEED_REFRESH_MS))
	{
		owner_oid = cfeed_extension_owner();
		SetUserIdAndSecContext(owner_oid, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
		if (sweep_group == 0)
		{
			refresh_groups(dboid);
			check_always_triggers();
		}
		last_refresh = GetCurrentTimestamp();
	}
	else
		SetUserIdAndSecContext(owner_oid, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	pgstat_report_activity(STATE_RUNNING, "sweeping");
	if (cfeed_sweep_group(sweep_group, true, owner_oid, &result))
	{
		stamped = result.change_count;
		*several_writers = result.several_writers;
		record_outcome(&result);
	}
	SetUserIdAndSecContext(save_userid, save_sec_context);

	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);

	my_slot->sweeps++;
	my_slot->changes_stamped += stamped;
	if (stamped > 0)
		my_slot->last_sweep_time = GetCurrentTimestamp();
	cfeed_notify_send_owed();
	return stamped;
}

/*
 * retention_pass
 *		Group-0 sweeper, every cfeed.retention_interval: one bounded
 *		retention pass (cfeed._apply_retention) in its own transaction, as the
 *		extension's owner, so deletes never hold up a stamp.
 */
static void
retention_pass(void)
{
	int			spi_level;
	CfeedSavedUser saved_user;

	if (!TimestampDifferenceExceeds(last_retention, GetCurrentTimestamp(),
									cfeed_retention_interval))
		return;
	last_retention = GetCurrentTimestamp();

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	saved_user = cfeed_become_owner();
	pgstat_report_activity(STATE_RUNNING, "applying retention");
	spi_level = cfeed_spi_connect();
	if (SPI_execute("SELECT cfeed._apply_retention()", false, 0) != SPI_OK_SELECT)
		elog(ERROR, "cfeed sweeper: retention pass failed");
	cfeed_spi_finish(spi_level);
	cfeed_restore_user(saved_user);
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
	cfeed_notify_send_owed();
}

/*
 * sweep_pause_ms
 *		How long after a sweep that began at began and stamped stamped
 *		changes (of more than one transaction: several_writers) the next one
 *		begins (see the file header, "Gathering").
 */
static long
sweep_pause_ms(int64 stamped, bool several_writers, TimestampTz began)
{
	static TimestampTz before = 0;	/* when the sweep before began */
	static double rate = 0;		/* changes stamped a millisecond, lately */
	long		pause = cfeed_sweep_delay;
	double		interval_ms = (double) (began - before) / 1000.0;

	if (before != 0 && interval_ms > 0)
	{
		/* an average over about the last GATHER_RATE_MS */
		double		weight = Min(1.0, interval_ms / GATHER_RATE_MS);

		rate += weight * (stamped / interval_ms - rate);
	}
	before = began;
	if (several_writers && cfeed_sweep_gather > 0 && rate > 0)
	{
		double		fill_ms = cfeed_sweep_gather_changes / rate;

		if (fill_ms <= cfeed_sweep_gather)
			pause = Max(pause, Min((long) fill_ms + 1, cfeed_sweep_gather));
	}
	return stamped > 0 ? pause : 0;
}

/*
 * sweep_pause
 *		After a sweep that stamped changes, let commits gather until
 *		pause_ms have passed since the sweep began.  Returns at once on a
 *		configuration reload or a pause, for the loop to act on it, and when
 *		the clock was set back since the sweep began (more than pause_ms
 *		left): waiting for it to come back would stop stamping that long.
 *		Commits meanwhile do not wake it (the slot's pausing flag).
 */
static void
sweep_pause(Oid dboid, TimestampTz began, long pause_ms)
{
	TimestampTz until = TimestampTzPlusMilliseconds(began, pause_ms);

	/* commits leave the latch alone meanwhile (shmem.c) */
	pg_atomic_write_u32(&my_slot->pausing, 1);
	for (;;)
	{
		long		remaining = cfeed_ms_until(GetCurrentTimestamp(), until);

		if (remaining <= 0 || remaining > pause_ms ||
			ConfigReloadPending || database_paused(dboid))
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 remaining, cfeed_wait_event(CFEED_WAIT_SWEEPER_DELAY));
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	/* before the next sweep's snapshot: a full barrier (shmem.c) */
	(void) pg_atomic_exchange_u32(&my_slot->pausing, 0);
}

/*
 * cfeed_sweeper_main
 *		Entry point of a sweeper; main_arg is the database OID, bgw_extra the
 *		sweep group.
 */
void
cfeed_sweeper_main(Datum main_arg)
{
	Oid			dboid = DatumGetObjectId(main_arg);
	int32		sweep_group;
	MemoryContext loopcxt;
	char		appname[NAMEDATALEN];

	memcpy(&sweep_group, MyBgworkerEntry->bgw_extra, sizeof(int32));
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);

	/*
	 * Its own transactions are READ COMMITTED and read-write, whatever the
	 * server's, the database's or the owner's defaults say: a sweep needs a
	 * new snapshot per sweep, and writes.  (A database set to
	 * default_transaction_isolation = 'repeatable read' refused every sweep,
	 * until the worker restarted even after the setting was reset.)
	 */
	SetConfigOption("default_transaction_isolation", "read committed", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("default_transaction_read_only", "off", PGC_SUSET, PGC_S_OVERRIDE);
	claim_slot(dboid, sweep_group);
	cfeed_notify_defer_sync();
	snprintf(appname, sizeof(appname), "cfeed sweeper group %d", sweep_group);
	pgstat_report_appname(appname);

	loopcxt = AllocSetContextCreate(TopMemoryContext, "cfeed sweeper loop",
									ALLOCSET_DEFAULT_SIZES);

	/*
	 * Read the configuration files once before the first pass: a sweeper
	 * forked just before a reload that turned cfeed.enable_sweeper off may
	 * have lost its SIGHUP (the postmaster signals a worker that cannot
	 * catch it yet), and one forked just after it starts with the setting
	 * already off and no signal to come.  Either would sweep on for good
	 * (104_serve_sse_rounds, once in CI: a group's sweeper started by the
	 * launcher as the test turned the sweepers off never stopped).
	 */
	ConfigReloadPending = true;
	for (;;)
	{
		/* set in PG_TRY or PG_CATCH and read after them: volatile */
		volatile int64 stamped = 0;
		volatile bool several_writers = false;
		volatile long sleep_ms = cfeed_fallback_interval;
		volatile bool failed = false;
		long		stats_ms;
		long		pause_ms;
		TimestampTz began = GetCurrentTimestamp();

		CHECK_FOR_INTERRUPTS();
		if (database_paused(dboid))
			proc_exit(0);
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		if (!cfeed_enable_sweeper)
			proc_exit(0);

		MemoryContextSwitchTo(loopcxt);
		PG_TRY();
		{
			bool		several;

			stamped = sweep_pass(dboid, sweep_group, &several);
			several_writers = several;
			if (sweep_group == 0 && stamped < cfeed_sweep_batch_size)
				retention_pass();
		}
		PG_CATCH();
		{
			ErrorData  *edata;

			MemoryContextSwitchTo(loopcxt);
			edata = CopyErrorData();
			strlcpy(my_slot->last_error, edata->message, CFEED_ERROR_LEN);
			EmitErrorReport();
			FlushErrorState();
			AbortCurrentTransaction();
			pgstat_report_activity(STATE_IDLE, NULL);
			failed = true;
		}
		PG_END_TRY();
		MemoryContextSwitchTo(TopMemoryContext);
		MemoryContextReset(loopcxt);

		/*
		 * Report the statistics of what the pass wrote, as a backend does
		 * when it goes idle: autovacuum learns of the dead versions stamping
		 * leaves behind only from them.  Reports are rate-limited; when one
		 * had to wait, come back for it before sleeping long.
		 */
		stats_ms = pgstat_report_stat(false);
		if (stats_ms > 0)
			sleep_ms = Min(sleep_ms, stats_ms);

		if (failed)
		{
			/*
			 * A second before the next try, whatever commits meanwhile: each
			 * one's wake-up would try again at once, and log the error again.
			 */
			sweep_pause(dboid, GetCurrentTimestamp(), 1000);
			continue;
		}
		pause_ms = sweep_pause_ms(stamped, several_writers, began);
		if (stamped >= cfeed_sweep_batch_size)
			continue;			/* a full batch: more is probably pending */
		if (pause_ms > 0)
		{
			sweep_pause(dboid, began, pause_ms);
			continue;			/* what committed meanwhile, its wake-ups reset */
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 sleep_ms, cfeed_wait_event(CFEED_WAIT_SWEEPER_MAIN));
		ResetLatch(MyLatch);
	}
}

PG_FUNCTION_INFO_V1(cfeed_sweepers);

/*
 * put_paused_databases
 *		A row of cfeed._sweepers() for each paused database (utility.c): it
 *		has no sweeper while the command that paused it runs; pid and
 *		sweep_group null, last_error says who paused it.
 */
static void
put_paused_databases(ReturnSetInfo *rsinfo)
{
	CfeedDatabase *paused = palloc(sizeof(CfeedDatabase) * CFEED_MAX_DATABASES);
	int			npaused = 0;
	int			i;

	LWLockAcquire(CfeedShared->lock, LW_SHARED);
	for (i = 0; i < CFEED_MAX_DATABASES; i++)
		if (CfeedShared->dbs[i].state != CFEED_DB_FREE && CfeedShared->dbs[i].paused > 0)
			paused[npaused++] = CfeedShared->dbs[i];
	LWLockRelease(CfeedShared->lock);

	for (i = 0; i < npaused; i++)
	{
		Datum		values[7] = {0};
		bool		nulls[7] = {true, false, true, false, false, true, false};
		char	   *datname = get_database_name(paused[i].dboid);
		NameData	dbname;

		if (datname == NULL)
			continue;
		namestrcpy(&dbname, datname);
		values[1] = NameGetDatum(&dbname);
		values[3] = Int64GetDatum(0);
		values[4] = Int64GetDatum(0);
		paused[i].paused_by[sizeof(paused[i].paused_by) - 1] = '\0';
		values[6] = CStringGetTextDatum(psprintf("paused by %s in process %d: no sweeper until it ends",
												 paused[i].paused_by, paused[i].paused_pid));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
}

/*
 * put_unstarted_groups
 *		A row of cfeed._sweepers() for each sweep group the launcher could
 *		not start a sweeper for (launcher.c: cfeed.max_workers reached, or no
 *		background worker slot): its changes are not stamped until one
 *		starts.  pid null, last_error says why (no feed is named).
 */
static void
put_unstarted_groups(ReturnSetInfo *rsinfo)
{
	CfeedDatabase *dbs = palloc(sizeof(CfeedDatabase) * CFEED_MAX_DATABASES);
	int			ndbs = 0;

	LWLockAcquire(CfeedShared->lock, LW_SHARED);
	for (int i = 0; i < CFEED_MAX_DATABASES; i++)
		if ((CfeedShared->dbs[i].state == CFEED_DB_PROBE || CfeedShared->dbs[i].state == CFEED_DB_ACTIVE) &&
			CfeedShared->dbs[i].paused == 0 && CfeedShared->dbs[i].nunstarted > 0)
			dbs[ndbs++] = CfeedShared->dbs[i];
	LWLockRelease(CfeedShared->lock);

	for (int i = 0; i < ndbs; i++)
	{
		char	   *datname = get_database_name(dbs[i].dboid);
		NameData	dbname;

		if (datname == NULL)
			continue;
		namestrcpy(&dbname, datname);
		dbs[i].unstarted_why[sizeof(dbs[i].unstarted_why) - 1] = '\0';
		for (int g = 0; g < dbs[i].nunstarted; g++)
		{
			Datum		values[7] = {0};
			bool		nulls[7] = {true, false, false, false, false, true, false};

			values[1] = NameGetDatum(&dbname);
			values[2] = Int32GetDatum(dbs[i].unstarted[g]);
			values[3] = Int64GetDatum(0);
			values[4] = Int64GetDatum(0);
			values[6] = CStringGetTextDatum(psprintf("no sweeper could be started: %s; its changes are not stamped until one starts",
													 dbs[i].unstarted_why));
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
}

/*
 * cfeed_sweepers
 *		SQL: cfeed._sweepers(), behind the cfeed.sweepers view.  Empty
 *		without the preload.  A sweep's error names feeds and shards, so
 *		last_error is shown, as pg_stat_activity shows another role's query,
 *		only to whom may learn them: a role that may read every feed of this
 *		database, for its sweepers, and one with the privileges of
 *		pg_read_all_stats; to others as "<insufficient privilege>".
 */
Datum
cfeed_sweepers(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	CfeedWorkerSlot *slots;
	int			nslots = 0;
	int			i;
	bool		all_stats;
	bool		every_feed;

	InitMaterializedSRF(fcinfo, 0);
	if (CfeedShared == NULL)
		return (Datum) 0;
	all_stats = has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS);
	every_feed = all_stats || cfeed_may_read_every_feed();

	slots = palloc(sizeof(CfeedWorkerSlot) * CfeedShared->max_workers);
	LWLockAcquire(CfeedShared->lock, LW_SHARED);
	for (i = 0; i < CfeedShared->max_workers; i++)
		if (CfeedShared->workers[i].in_use)
			slots[nslots++] = CfeedShared->workers[i];
	LWLockRelease(CfeedShared->lock);

	for (i = 0; i < nslots; i++)
	{
		Datum		values[7];
		bool		nulls[7] = {false, false, false, false, false, false, false};
		char	   *datname = get_database_name(slots[i].dboid);
		NameData	dbname;
		bool		shown;

		values[0] = Int32GetDatum(slots[i].pid);
		if (datname)
		{
			namestrcpy(&dbname, datname);
			values[1] = NameGetDatum(&dbname);
		}
		else
			nulls[1] = true;
		values[2] = Int32GetDatum(slots[i].sweep_group);
		values[3] = Int64GetDatum((int64) slots[i].sweeps);
		values[4] = Int64GetDatum((int64) slots[i].changes_stamped);
		values[5] = TimestampTzGetDatum(slots[i].last_sweep_time);
		nulls[5] = (slots[i].last_sweep_time == 0);
		slots[i].last_error[CFEED_ERROR_LEN - 1] = '\0';
		shown = slots[i].dboid == MyDatabaseId ? every_feed : all_stats;
		values[6] = CStringGetTextDatum(shown ? slots[i].last_error : "<insufficient privilege>");
		nulls[6] = (slots[i].last_error[0] == '\0');
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	put_paused_databases(rsinfo);
	put_unstarted_groups(rsinfo);
	return (Datum) 0;
}
