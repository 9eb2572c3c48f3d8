/*-------------------------------------------------------------------------
 *
 * sweep_sql.c
 *	  The SQL entry points of sweeping: cfeed.sweep(), one sweep in the
 *	  caller's transaction, and CALL cfeed.sweep_loop(), which sweeps and
 *	  commits repeatedly for a while.
 *
 * Locking protocol
 * ----------------
 * A sweep_loop call holds its group's leader lock (locks.c, session level)
 * for its whole duration, so two sweep_loops of one group never alternate
 * sweep by sweep.  Both it and cfeed.sweep() take the group's sweep lock for
 * each sweep (sweep.c): waiting for it, except the first sweep of a
 * sweep_loop, which polls for it until wait_ms has passed (a background
 * sweeper or a sweep() holding it) and gives up without sweeping.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/latch.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "cfeed.h"

PG_FUNCTION_INFO_V1(cfeed_sweep);
PG_FUNCTION_INFO_V1(cfeed_sweep_loop);

/*
 * check_sql_sweep
 *		A sweep called from SQL: in a READ COMMITTED transaction, not in
 *		recovery (cfeed_check_sweep_isolation), and not in a read-only
 *		transaction (25006), as any write.  The background sweeper writes in
 *		its own transactions, read-only or not (default_transaction_read_only
 *		does not stop it).
 */
static void
check_sql_sweep(const char *fn)
{
	cfeed_check_sweep_isolation();
	PreventCommandIfReadOnly(fn);
}

/*
 * cfeed_sweep
 *		SQL: cfeed.sweep(sweep_group int default 0) returns table(feed_id,
 *		shard, change_count, last_change_sequence_number, lag_ms).
 */
Datum
cfeed_sweep(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	CfeedSweepResult result;
	int			i;

	cfeed_require_arg(fcinfo, 0, "sweep_group");
	check_sql_sweep("cfeed.sweep()");
	InitMaterializedSRF(fcinfo, 0);
	cfeed_sweep_group(PG_GETARG_INT32(0), false, InvalidOid, &result);
	cfeed_sweep_report_exhausted(&result);

	for (i = 0; i < result.nshards; i++)
	{
		Datum		values[5];
		bool		nulls[5] = {false, false, false, false, false};

		values[0] = Int32GetDatum(result.shards[i].feed_id);
		values[1] = Int32GetDatum(result.shards[i].shard);
		values[2] = Int32GetDatum(result.shards[i].change_count);
		values[3] = Int64GetDatum(result.shards[i].last_number);
		values[4] = Int64GetDatum(result.shards[i].lag_ms);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * poll_until
 *		Call attempt(arg) every 10 ms until it returns true (then return
 *		true) or deadline passes (then false).  Interruptible.
 */
static bool
poll_until(bool (*attempt) (void *arg), void *arg, TimestampTz deadline)
{
	for (;;)
	{
		long		remaining;

		if (attempt(arg))
			return true;
		remaining = cfeed_ms_until(GetCurrentTimestamp(), deadline);
		if (remaining <= 0)
			return false;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Min(remaining, 10), cfeed_wait_event(CFEED_WAIT_SWEEP_TURN));
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/* poll_until attempt: take the group's sweep_loop lock if it is free. */
static bool
try_leader(void *arg)
{
	return cfeed_leader_lock(*(int32 *) arg);
}

/* One sweep of a group, as poll_until attempts it: only if the group is free. */
typedef struct SweepAttempt
{
	int32		sweep_group;
	CfeedSweepResult result;
} SweepAttempt;

static bool
try_sweep(void *arg)
{
	SweepAttempt *a = arg;

	return cfeed_sweep_group(a->sweep_group, true, InvalidOid, &a->result);
}

/* What a sweep_loop call reports. */
typedef struct SweepLoopTotals
{
	int64		change_count;
	int64		max_lag_ms;
	int32		iterations;
	bool		warned;			/* about a shard out of numbers */
} SweepLoopTotals;

/*
 * sweep_repeatedly
 *		The body of sweep_loop: sweep and commit until duration_ms has passed
 *		(exactly once for 0), sleeping sleep_ms (at least 1 ms) after a sweep
 *		that found nothing.  The first sweep waits at most until turn_deadline
 *		for a concurrent sweep of the group to end (sweep(), the background
 *		worker); if it cannot start by then, nothing is swept.  Later sweeps
 *		wait for their turn as long as it takes.  A shard out of numbers is
 *		warned about once per call.
 */
static void
sweep_repeatedly(int32 sweep_group, TimestampTz turn_deadline, int32 duration_ms,
				 int32 sleep_ms, SweepLoopTotals *totals)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), duration_ms);
	SweepAttempt attempt;

	memset(&attempt, 0, sizeof(attempt));
	attempt.sweep_group = sweep_group;
	if (SPI_connect_ext(SPI_OPT_NONATOMIC) != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect_ext failed");
	for (;;)
	{
		long		remaining;

		CHECK_FOR_INTERRUPTS();
		if (totals->iterations > 0)
			cfeed_sweep_group(sweep_group, false, InvalidOid, &attempt.result);
		else if (!poll_until(try_sweep, &attempt, turn_deadline))
			break;
		totals->iterations++;
		totals->change_count += attempt.result.change_count;
		totals->max_lag_ms = Max(totals->max_lag_ms, attempt.result.max_lag_ms);
		if (!totals->warned && attempt.result.nexhausted > 0)
		{
			cfeed_sweep_report_exhausted(&attempt.result);
			totals->warned = true;
		}
		pfree(attempt.result.shards);
		pfree(attempt.result.exhausted);
		cfeed_spi_commit();

		remaining = cfeed_ms_until(GetCurrentTimestamp(), deadline);
		if (remaining <= 0)
			break;
		if (attempt.result.change_count == 0)
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 Min(remaining, Max(sleep_ms, 1)), cfeed_wait_event(CFEED_WAIT_SWEEP_LOOP));
			ResetLatch(MyLatch);
		}
	}
	SPI_finish();
}

/*
 * cfeed_sweep_loop
 *		SQL: CALL cfeed.sweep_loop(sweep_group, wait_ms, duration_ms, sleep_ms,
 *		OUT change_count, OUT max_lag_ms, OUT iterations).  Commits after each
 *		sweep, so it must be called outside a transaction block.
 */
Datum
cfeed_sweep_loop(PG_FUNCTION_ARGS)
{
	int32		sweep_group;
	int32		wait_ms;
	int32		duration_ms;
	int32		sleep_ms;
	SweepLoopTotals totals = {0, 0, 0, false};
	TupleDesc	tupdesc;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};
	TimestampTz turn_deadline;

	cfeed_require_arg(fcinfo, 0, "sweep_group");
	cfeed_require_arg(fcinfo, 1, "wait_ms");
	cfeed_require_arg(fcinfo, 2, "duration_ms");
	cfeed_require_arg(fcinfo, 3, "sleep_ms");
	sweep_group = PG_GETARG_INT32(0);
	wait_ms = PG_GETARG_INT32(1);
	duration_ms = PG_GETARG_INT32(2);
	sleep_ms = PG_GETARG_INT32(3);
	if (wait_ms < 0 || duration_ms < 0 || sleep_ms < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("wait_ms, duration_ms and sleep_ms of cfeed.sweep_loop must not be negative"),
				 errhint("Pass 0 or more for each (0 for duration_ms: one sweep).")));
	if (fcinfo->context == NULL || !IsA(fcinfo->context, CallContext) ||
		((CallContext *) fcinfo->context)->atomic)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("cfeed.sweep_loop must be called with CALL outside a transaction block"),
				 errdetail("It commits after every sweep."),
				 errhint("Use SELECT * FROM cfeed.sweep() inside a transaction.")));
	check_sql_sweep("cfeed.sweep_loop()");
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "cfeed.sweep_loop: return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);

	turn_deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), wait_ms);
	if (poll_until(try_leader, &sweep_group, turn_deadline))
	{
		PG_TRY();
		{
			sweep_repeatedly(sweep_group, turn_deadline, duration_ms, sleep_ms, &totals);
		}
		PG_CATCH();
		{
			cfeed_leader_unlock(sweep_group);
			PG_RE_THROW();
		}
		PG_END_TRY();
		cfeed_leader_unlock(sweep_group);
	}

	values[0] = Int32GetDatum((int32) Min(totals.change_count, PG_INT32_MAX));
	values[1] = Int64GetDatum(totals.max_lag_ms);
	values[2] = Int32GetDatum(totals.iterations);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
