/*-------------------------------------------------------------------------
 *
 * cfeed.c
 *	  Module entry point: _PG_init.  It defines the cfeed.* settings
 *	  (settings.c) and, under shared_preload_libraries, sets up the shared
 *	  memory, the launcher, the standby waker and the utility hook
 *	  (shmem.c, launcher.c, standby_waker.c, utility.c).
 *	  On every load it installs the ExecutorStart hook that keeps change
 *	  ids unique across failovers (change_id.c).
 *	  Nothing calls into this file.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"

#include "cfeed.h"
#include "shmem.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/*
 * _PG_init
 *		Loaded either by shared_preload_libraries or on first use of a cfeed
 *		function.
 */
void
_PG_init(void)
{
	cfeed_define_settings(process_shared_preload_libraries_in_progress);
	cfeed_change_ids_init();
	if (process_shared_preload_libraries_in_progress)
	{
		cfeed_shmem_init();
		cfeed_launcher_register();
		cfeed_standby_waker_register();
		cfeed_utility_hook_init();
	}
}
