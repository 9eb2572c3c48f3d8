/*-------------------------------------------------------------------------
 *
 * settings.c
 *	  The cfeed.* settings: their variables, read by the other files, and
 *	  their definitions, made by _PG_init (cfeed.c).
 *
 *	  cfeed.max_workers sizes shared memory, so it is PGC_POSTMASTER and
 *	  defined only while the postmaster loads the library; without the
 *	  preload there is no sweeper to size.
 *
 *	  Locking: none; PostgreSQL's GUC machinery sets the variables, and
 *	  each backend reads its own copy.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/guc.h"

#include "cfeed.h"

int			cfeed_sweep_batch_size = 100000;
int			cfeed_max_workers = 8;
bool		cfeed_enable_sweeper = true;
int			cfeed_launcher_interval = 1000;
int			cfeed_fallback_interval = 1000;
int			cfeed_poll_interval = 10;
int			cfeed_sweep_delay = 0;
int			cfeed_sweep_gather = 20;
int			cfeed_sweep_gather_changes = 64;
int			cfeed_retention_interval = 10000;
int			cfeed_sweep_synchronous_commit = CFEED_SYNC_ON;
int			cfeed_default_storage = CFEED_STORAGE_ROWS;

/* synchronous_commit levels a stamping transaction may use (never off). */
const struct config_enum_entry cfeed_sync_commit_options[] = {
	{"local", CFEED_SYNC_LOCAL, false},
	{"remote_write", CFEED_SYNC_REMOTE_WRITE, false},
	{"on", CFEED_SYNC_ON, false},
	{"remote_apply", CFEED_SYNC_REMOTE_APPLY, false},
	{NULL, 0, false}
};

/* How a new shard's changes are numbered (shard_config.storage's default). */
static const struct config_enum_entry cfeed_storage_options[] = {
	{"rows", CFEED_STORAGE_ROWS, false},
	{"ranges", CFEED_STORAGE_RANGES, false},
	{NULL, 0, false}
};

/*
 * cfeed_define_settings
 *		Define the settings (cfeed.max_workers only with preload), then
 *		reserve the prefix "cfeed".
 */
void
cfeed_define_settings(bool preload)
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
	DefineCustomIntVariable("cfeed.sweep_gather",
							"Sets the longest the background sweeper lets a batch of changes gather under sustained writes.",
							"After a sweep that stamped the changes of more than one transaction, the next one begins once the changes committed meanwhile, at the rate of the last 100 ms, reach cfeed.sweep_gather_changes, when that takes no longer than this; a lighter load is swept as soon as a commit wakes the sweeper.  0 never gathers.",
							&cfeed_sweep_gather,
							20, 0, 10000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("cfeed.sweep_gather_changes",
							"Sets how many changes the background sweeper lets gather under sustained writes.",
							"See cfeed.sweep_gather.",
							&cfeed_sweep_gather_changes,
							64, 2, 10000000,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("cfeed.retention_interval",
							"Sets how often the background sweeper deletes changes older than their feed's retention.",
							"Each pass deletes at most 10000 changes, never a shard's head nor changes a consumer group has not read.",
							&cfeed_retention_interval,
							10000, 100, 86400000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomEnumVariable("cfeed.sweep_synchronous_commit",
							 "Sets the synchronous_commit level of the transactions that stamp changes.",
							 "Applies to the stamping transaction only, whatever synchronous_commit says; off is not allowed (a stamp is durable before it is visible).",
							 &cfeed_sweep_synchronous_commit,
							 CFEED_SYNC_ON, cfeed_sync_commit_options,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);
	DefineCustomEnumVariable("cfeed.default_storage",
							 "Sets how the changes of new shards are numbered.",
							 "rows: a sweep updates each change's row with its number; ranges: a sweep appends one cfeed.stamp row per shard, and a change's row is never updated.",
							 &cfeed_default_storage,
							 CFEED_STORAGE_ROWS, cfeed_storage_options,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("cfeed.poll_interval",
							"Sets how often a waiting reader re-reads a shard's head when no sweeper can wake it.",
							"Used without shared_preload_libraries and on hot standbys.",
							&cfeed_poll_interval,
							10, 1, 10000,
							PGC_USERSET, GUC_UNIT_MS,
							NULL, NULL, NULL);

	if (preload)
		DefineCustomIntVariable("cfeed.max_workers",
								"Sets the most background sweepers, all databases and sweep groups together.",
								"Each (database, sweep group) gets one; each takes a slot of max_worker_processes.",
								&cfeed_max_workers,
								8, 1, 1024,
								PGC_POSTMASTER, 0,
								NULL, NULL, NULL);
	MarkGUCPrefixReserved("cfeed");
}
