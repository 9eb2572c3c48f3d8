/*-------------------------------------------------------------------------
 *
 * cfeed.c
 *	  Module entry point: _PG_init and the cfeed.* settings.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/guc.h"

#include "cfeed.h"

PG_MODULE_MAGIC;

int			cfeed_sweep_batch_size = 100000;

void		_PG_init(void);

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
