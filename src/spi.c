/*-------------------------------------------------------------------------
 *
 * spi.c
 *	  What cfeed's SQL-callable functions share: the check of a required
 *	  argument (22004), and SPI with search_path pinned to pg_catalog (and
 *	  generic plans, no JIT), for statements run once or through a plan kept
 *	  for the backend.
 *
 *	  Nothing here takes a lock of its own; the statements take theirs.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/guc.h"

#include "cfeed.h"

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
 * cfeed_check_nonnegative
 *		22023 for a negative count or duration argument.
 */
void
cfeed_check_nonnegative(int32 value, const char *argname)
{
	if (value < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\" must not be negative, got %d", argname, value),
				 errhint("Pass %s => 0 or more.", argname)));
}

/*
 * cfeed_check_wait
 *		The wait argument ms of function fn (cfeed.read's wait_ms,
 *		cfeed.wait's timeout_ms): 22023 when negative, 25000 when it would
 *		wait in a REPEATABLE READ or SERIALIZABLE transaction, whose snapshot
 *		would never show what it waits for.
 */
void
cfeed_check_wait(const char *fn, int32 ms, const char *argname)
{
	cfeed_check_nonnegative(ms, argname);
	if (ms > 0 && IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("%s cannot wait in a REPEATABLE READ or SERIALIZABLE transaction", fn),
				 errdetail("The transaction's snapshot would never show the changes it waits for."),
				 errhint("Pass %s => 0, or wait in a READ COMMITTED transaction.", argname)));
}

/*
 * The settings cfeed's SQL runs with, whatever the session's:
 *
 *	search_path: pg_catalog first, for the SQL cfeed sends: its own objects
 *	  are schema-qualified, and a hostile path (one shadowing "=" or now(),
 *	  say) must not change what that SQL does, the more so as some of it runs
 *	  as the extension's owner.
 *	plan_cache_mode: generic plans for the kept plans (cfeed_spi_plan), also
 *	  when the session forces custom ones.
 *	jit: off.  A generic plan of a read costs a tenth of the range (its LIMIT
 *	  is a parameter), which on a large shard passes jit_above_cost: every
 *	  call compiled its expressions (60-100 ms for a 1 ms read of a 10M-change
 *	  shard).  No statement of cfeed's runs long enough to gain from JIT.
 */
static const char *const pinned_settings[][2] = {
	{"search_path", "pg_catalog, pg_temp"},
	{"plan_cache_mode", "force_generic_plan"},
	{"jit", "off"},
};

/*
 * cfeed_spi_connect
 *		SPI_connect, with the settings above pinned until cfeed_spi_finish.
 *		Returns the GUC nest level for cfeed_spi_finish.
 */
int
cfeed_spi_connect(void)
{
	int			nestlevel;
	int			i;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	nestlevel = NewGUCNestLevel();
	for (i = 0; i < (int) lengthof(pinned_settings); i++)
		(void) set_config_option(pinned_settings[i][0], pinned_settings[i][1], PGC_USERSET,
								 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	return nestlevel;
}

/*
 * cfeed_spi_plan
 *		The kept plan of one of cfeed's statements: prepared into *plan on
 *		first use in this backend (inside cfeed_spi_connect), then reused.
 *		The plan is generic: each statement has one right shape whatever its
 *		arguments, and a custom plan per call would cost a planning each time
 *		(cfeed.read near a shard's head, where the range is estimated small,
 *		was planned anew at every call, as a bitmap scan and a sort).  Its
 *		cost does not matter: cfeed_spi_connect turns JIT off.
 */
SPIPlanPtr
cfeed_spi_plan(SPIPlanPtr *plan, const char *sql, int nargs, Oid *types)
{
	if (*plan == NULL)
	{
		SPIPlanPtr	p = SPI_prepare_cursor(sql, nargs, types, CURSOR_OPT_GENERIC_PLAN);

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
 * cfeed_plan_settings_off
 *		Turn the planner settings named off until AtEOXact_GUC(true, the
 *		returned nest level): the generic plans cfeed keeps for a backend's
 *		life (cfeed_spi_connect) are planned with the shape they must have,
 *		whatever the statistics of the moment say.
 */
int
cfeed_plan_settings_off(const char *const *settings, int n)
{
	int			nestlevel = NewGUCNestLevel();
	int			i;

	for (i = 0; i < n; i++)
		(void) set_config_option(settings[i], "off", PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
	return nestlevel;
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

/*
 * cfeed_become_user
 *		Act as role userid (SECURITY_LOCAL_USERID_CHANGE) until
 *		cfeed_restore_user(saved); an error's abort restores the caller.
 */
CfeedSavedUser
cfeed_become_user(Oid userid)
{
	CfeedSavedUser saved;

	GetUserIdAndSecContext(&saved.userid, &saved.sec_context);
	SetUserIdAndSecContext(userid, saved.sec_context | SECURITY_LOCAL_USERID_CHANGE);
	return saved;
}

/*
 * cfeed_become_owner
 *		Act as the extension's owner until cfeed_restore_user(saved).
 */
CfeedSavedUser
cfeed_become_owner(void)
{
	return cfeed_become_user(cfeed_extension_owner());
}

/*
 * cfeed_restore_user
 *		Undo cfeed_become_owner.
 */
void
cfeed_restore_user(CfeedSavedUser saved)
{
	SetUserIdAndSecContext(saved.userid, saved.sec_context);
}

/*
 * cfeed_spi_exec
 *		Run a statement once through SPI (inside cfeed_spi_connect), with
 *		nargs arguments; errors out unless SPI returns the expected code.
 */
void
cfeed_spi_exec(const char *sql, int nargs, Oid *types, Datum *values,
			   const char *nulls, int expected)
{
	int			rc = SPI_execute_with_args(sql, nargs, types, values, nulls, false, 0);

	if (rc != expected)
		elog(ERROR, "cfeed: \"%s\" failed: %s", sql, SPI_result_code_string(rc));
}
