/*-------------------------------------------------------------------------
 *
 * cfeed.c
 *	  Module entry point: _PG_init, the cfeed.* settings, and the relcache
 *	  invalidation callback of cfeed's backend-local caches.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/syscache.h"

#include "cfeed.h"
#include "shmem.h"

PG_MODULE_MAGIC;

int			cfeed_sweep_batch_size = 100000;
int			cfeed_max_workers = 8;
bool		cfeed_enable_sweeper = true;
int			cfeed_launcher_interval = 1000;
int			cfeed_fallback_interval = 1000;
int			cfeed_poll_interval = 10;
int			cfeed_sweep_delay = 0;
int			cfeed_retention_interval = 10000;

void		_PG_init(void);

/*
 * relcache_invalidate
 *		Relcache invalidation callback (one for all of cfeed's caches, which
 *		PostgreSQL allows only ten of per backend): the relation, or every
 *		relation for InvalidOid, has changed.
 */
static void
relcache_invalidate(Datum arg, Oid relid)
{
	cfeed_relid_invalidate(relid);
	cfeed_track_invalidate(relid);
	cfeed_row_image_invalidate(relid);
	cfeed_shard_counts_invalidate(relid);
	cfeed_watermarks_invalidate(relid);
	cfeed_read_access_invalidate(relid);
}

/*
 * _PG_init
 *		Define the settings.  Loaded either by shared_preload_libraries or on
 *		first use of a cfeed function.
 */
void
_PG_init(void)
{
	DefineCustomIntVariable("cfeed.sweep_batch_size",
							"Sets the most changes one sweep stamps in one transaction.",
							"A larger backlog is stamped over several consecutive sweeps.",
							&cfeed_sweep_batch_size,
							100000, 1, 10000000,
							PGC_SUSET, 0,
							NULL, NULL, NULL);
	DefineCustomBoolVariable("cfeed.enable_sweeper",
							 "Starts background sweepers for every database that has cfeed.",
							 "When off, no new sweepers are started; sweep with cfeed.sweep() or cfeed.sweep_loop().",
							 &cfeed_enable_sweeper,
							 true,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("cfeed.launcher_interval",
							"Sets how often the launcher checks that every sweeper runs.",
							NULL,
							&cfeed_launcher_interval,
							1000, 10, 60000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("cfeed.fallback_interval",
							"Sets how often an idle sweeper sweeps without being woken.",
							"Commits that record changes wake the sweeper at once; this covers writes that bypass that (e.g. logical replication apply).",
							&cfeed_fallback_interval,
							1000, 10, 3600000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("cfeed.sweep_delay",
							"Sets how long the background sweeper lets commits gather after a sweep that stamped changes.",
							"The next sweep begins no sooner than this after that one began: under sustained writes each sweep stamps more changes, at less CPU per change, and a change may wait this much longer to be stamped.  0 sweeps as soon as a commit wakes the sweeper.",
							&cfeed_sweep_delay,
							0, 0, 10000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("cfeed.retention_interval",
							"Sets how often the background sweeper deletes changes older than their feed's retention.",
							"Each pass deletes at most 10000 changes, never a shard's head nor changes a consumer group has not read.",
							&cfeed_retention_interval,
							10000, 100, 86400000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("cfeed.poll_interval",
							"Sets how often a waiting reader re-reads a shard's head when no sweeper can wake it.",
							"Used without shared_preload_libraries and on hot standbys.",
							&cfeed_poll_interval,
							10, 1, 10000,
							PGC_USERSET, GUC_UNIT_MS,
							NULL, NULL, NULL);

	/*
	 * PGC_POSTMASTER settings can only be defined while the postmaster loads
	 * the library; without the preload there is no sweeper to size.
	 */
	if (process_shared_preload_libraries_in_progress)
	{
		DefineCustomIntVariable("cfeed.max_workers",
								"Sets the most background sweepers, all databases and sweep groups together.",
								"Each (database, sweep group) gets one; each takes a slot of max_worker_processes.",
								&cfeed_max_workers,
								8, 1, 1024,
								PGC_POSTMASTER, 0,
								NULL, NULL, NULL);
		cfeed_shmem_init();
		cfeed_launcher_register();
		cfeed_utility_hook_init();
	}

	CacheRegisterRelcacheCallback(relcache_invalidate, (Datum) 0);
	CacheRegisterSyscacheCallback(NAMESPACEOID, cfeed_relid_reset, (Datum) 0);

	MarkGUCPrefixReserved("cfeed");
}

/*
 * cfeed_require_arg
 *		Raise 22004 when a required argument of a non-STRICT function is NULL.
 */
void
cfeed_require_arg(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument \"%s\" must not be null", argname)));
}

/*
 * cfeed_spi_connect
 *		SPI_connect, with search_path pinned to pg_catalog for the SQL cfeed
 *		sends: its own objects are schema-qualified, and a hostile path (one
 *		shadowing "=" or now(), say) must not change what that SQL does, the
 *		more so as some of it runs as the extension's owner.  Returns the GUC
 *		nest level for cfeed_spi_finish.
 */
int
cfeed_spi_connect(void)
{
	int			nestlevel;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	return nestlevel;
}

/*
 * cfeed_spi_plan
 *		The kept plan of one of cfeed's statements: prepared into *plan on
 *		first use in this backend (inside cfeed_spi_connect), then reused.
 */
SPIPlanPtr
cfeed_spi_plan(SPIPlanPtr *plan, const char *sql, int nargs, Oid *types)
{
	if (*plan == NULL)
	{
		SPIPlanPtr	p = SPI_prepare(sql, nargs, types);

		if (p == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		SPI_keepplan(p);
		*plan = p;
	}
	return *plan;
}

/*
 * cfeed_spi_run
 *		Run the kept plan *plan (cfeed_spi_plan) with values, no nulls.
 *		Returns true when it ran as the statement it is (result code
 *		expected), false when a rule replaced it (SPI_OK_REWRITTEN: DO
 *		INSTEAD NOTHING, say), as the same statement sent by a client would
 *		be.  Such a plan is forgotten: one rewritten into nothing depends on
 *		no relation, and the plan cache would keep it after the rule is
 *		dropped.  what names the statement in the error for anything else.
 */
bool
cfeed_spi_run(SPIPlanPtr *plan, Datum *values, int expected, const char *what)
{
	int			rc = SPI_execute_plan(*plan, values, NULL, false, 0);

	if (rc == expected)
		return true;
	if (rc != SPI_OK_REWRITTEN)
		elog(ERROR, "cfeed: %s failed: %s", what, SPI_result_code_string(rc));
	SPI_freeplan(*plan);
	*plan = NULL;
	return false;
}

/*
 * cfeed_spi_finish
 *		Restore search_path and SPI_finish.
 */
void
cfeed_spi_finish(int nestlevel)
{
	AtEOXact_GUC(true, nestlevel);
	SPI_finish();
}
