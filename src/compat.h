/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  Every PG_VERSION_NUM shim of cfeed, in one place.
 *
 *	  Built and tested on PostgreSQL 15, 17 and 18 (test/run-tests.sh --all).
 *	  The shims for 13 and 14 below have never been compiled: no headers of
 *	  those majors (nor of 16) are available where cfeed is built.  Call
 *	  sites use the cfeed_* names (shmem.c's choice of shmem_request_hook,
 *	  15+, is the one PG_VERSION_NUM test outside this file).
 *
 *-------------------------------------------------------------------------
 */
#ifndef CFEED_COMPAT_H
#define CFEED_COMPAT_H

#include "access/genam.h"
#include "access/tableam.h"
#include "executor/spi.h"
#include "executor/tstoreReceiver.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/relcache.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "utils/wait_event.h"
#if PG_VERSION_NUM >= 170000
#include "commands/async.h"		/* max_notify_queue_pages */
#else
#include "access/slru.h"		/* SLRU_PAGES_PER_SEGMENT */
#endif

/* PostgreSQL 15 starts the next transaction inside SPI_commit(). */
#if PG_VERSION_NUM >= 150000
#define cfeed_spi_commit() SPI_commit()
#else
#define cfeed_spi_commit() \
	do { SPI_commit(); SPI_start_transaction(); } while (0)
#endif

/* MarkGUCPrefixReserved replaced EmitWarningsOnPlaceholders in 15. */
#if PG_VERSION_NUM < 150000
#define MarkGUCPrefixReserved(prefix) EmitWarningsOnPlaceholders(prefix)
#endif

/* ProcessUtility_hook gained readOnlyTree in 14. */
#if PG_VERSION_NUM >= 140000
#define CFEED_UTILITY_ARGS \
	PlannedStmt *pstmt, const char *queryString, bool readOnlyTree, \
	ProcessUtilityContext context, ParamListInfo params, \
	QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc
#define CFEED_CALL_UTILITY(prev) \
	((prev) ? (prev) : standard_ProcessUtility)(pstmt, queryString, readOnlyTree, \
												context, params, queryEnv, dest, qc)
#else
#define CFEED_UTILITY_ARGS \
	PlannedStmt *pstmt, const char *queryString, \
	ProcessUtilityContext context, ParamListInfo params, \
	QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc
#define CFEED_CALL_UTILITY(prev) \
	((prev) ? (prev) : standard_ProcessUtility)(pstmt, queryString, \
												context, params, queryEnv, dest, qc)
#endif

/*
 * PostgreSQL's notification queue (async.c), for notify.c: the pages that
 * pg_notification_queue_usage() measures its usage against, and how many
 * pages short of them PreCommit_Notify may find it full already.  From 17
 * the size is the setting max_notify_queue_pages, and the queue is full
 * with that many pages in use; before, it is half the SLRU's page numbers
 * (8 GB with 8 kB pages), and full counts from the tail rounded back to
 * the start of its SLRU segment: up to a segment sooner.
 */
#if PG_VERSION_NUM >= 170000
#define CFEED_NOTIFY_QUEUE_PAGES	((double) max_notify_queue_pages)
#define CFEED_NOTIFY_QUEUE_SLACK	0
#else
#define CFEED_NOTIFY_QUEUE_PAGES	((double) (SLRU_PAGES_PER_SEGMENT * 0x10000 / 2))
#define CFEED_NOTIFY_QUEUE_SLACK	SLRU_PAGES_PER_SEGMENT
#endif

/* LockHeldByMe gained orstronger in 17 (false: exactly the mode). */
#if PG_VERSION_NUM >= 170000
#define cfeed_lock_held_by_me(tag, mode) LockHeldByMe((tag), (mode), false)
#else
#define cfeed_lock_held_by_me(tag, mode) LockHeldByMe((tag), (mode))
#endif

/* Ownership checks became object_ownercheck() in 16. */
#if PG_VERSION_NUM >= 160000
#define cfeed_rel_ownercheck(relid, roleid) \
	object_ownercheck(RelationRelationId, (relid), (roleid))
#else
#define cfeed_rel_ownercheck(relid, roleid) pg_class_ownercheck((relid), (roleid))
#endif
#if PG_VERSION_NUM >= 160000
#define cfeed_db_ownercheck(dboid, roleid) \
	object_ownercheck(DatabaseRelationId, (dboid), (roleid))
#else
#define cfeed_db_ownercheck(dboid, roleid) pg_database_ownercheck((dboid), (roleid))
#endif

/* index_insert gained indexUnchanged in 14. */
#if PG_VERSION_NUM >= 140000
#define cfeed_index_insert(idx, values, isnull, tid, heap, unique, info) \
	index_insert((idx), (values), (isnull), (tid), (heap), (unique), false, (info))
#else
#define cfeed_index_insert(idx, values, isnull, tid, heap, unique, info) \
	index_insert((idx), (values), (isnull), (tid), (heap), (unique), (info))
#endif

/* table_tuple_update reports the indexes to update as an enum since 16. */
#if PG_VERSION_NUM >= 160000
typedef TU_UpdateIndexes cfeed_update_indexes;
#define cfeed_indexes_to_update(u) ((u) == TU_All)
#else
typedef bool cfeed_update_indexes;
#define cfeed_indexes_to_update(u) (u)
#endif

/* The privileges that let LOCK take a mode above ROW EXCLUSIVE: MAINTAIN too since 17. */
#if PG_VERSION_NUM >= 170000
#define CFEED_ACL_LOCK_ANY (ACL_MAINTAIN | ACL_UPDATE | ACL_DELETE | ACL_TRUNCATE)
#else
#define CFEED_ACL_LOCK_ANY (ACL_UPDATE | ACL_DELETE | ACL_TRUNCATE)
#endif

/* PGPROC's lxid moved into vxid in 17. */
#if PG_VERSION_NUM >= 170000
#define CFEED_MY_LXID (MyProc->vxid.lxid)
#else
#define CFEED_MY_LXID (MyProc->lxid)
#endif

/*
 * TimestampDifferenceMilliseconds (14; only later minor releases of 13 have
 * it): milliseconds from start to stop, rounded up, 0 when stop is not later.
 */
#if PG_VERSION_NUM >= 140000
#define cfeed_ms_until(start, stop) TimestampDifferenceMilliseconds((start), (stop))
#else
static inline long
cfeed_ms_until(TimestampTz start, TimestampTz stop)
{
	TimestampTz diff = stop - start;

	return diff <= 0 ? 0 : (long) ((diff + 999) / 1000);
}
#endif

/*
 * InitMaterializedSRF is 15.1's name for 15.0's SetSingleFuncCall; before 15
 * a set-returning function set up its tuplestore itself, as here.
 */
#if PG_VERSION_NUM >= 150000 && PG_VERSION_NUM < 150001
#define InitMaterializedSRF(fcinfo, flags) SetSingleFuncCall((fcinfo), (flags))
#define MAT_SRF_USE_EXPECTED_DESC SRF_SINGLE_USE_EXPECTED
#elif PG_VERSION_NUM < 150000
#define MAT_SRF_USE_EXPECTED_DESC 0x01
static inline void
InitMaterializedSRF(FunctionCallInfo fcinfo, bits32 flags)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bool		expected = (flags & MAT_SRF_USE_EXPECTED_DESC) != 0;
	MemoryContext oldcontext;
	TupleDesc	tupdesc;

	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) ||
		(rsinfo->allowedModes & SFRM_Materialize) == 0 ||
		(expected && rsinfo->expectedDesc == NULL))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("set-valued function called in context that cannot accept a set")));
	oldcontext = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	if (expected)
		tupdesc = CreateTupleDescCopy(rsinfo->expectedDesc);
	else if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setResult =
		tuplestore_begin_heap((rsinfo->allowedModes & SFRM_Materialize_Random) != 0,
							  false, work_mem);
	rsinfo->setDesc = tupdesc;
	MemoryContextSwitchTo(oldcontext);
}
#endif

/*
 * Running a prepared plan into a tuplestore, with a new snapshot: through a
 * DestReceiver since 14 (SPI_execute_plan_extended), before by copying
 * SPI_tuptable.  Returns SPI's result code.
 */
#if PG_VERSION_NUM >= 140000
static inline int
cfeed_spi_execute_into(SPIPlanPtr plan, ParamListInfo params,
					   Tuplestorestate *store)
{
	DestReceiver *dest = CreateDestReceiver(DestTuplestore);
	SPIExecuteOptions options;
	int			rc;

	SetTuplestoreDestReceiverParams(dest, store, CurrentMemoryContext, false,
									NULL, NULL);
	memset(&options, 0, sizeof(options));
	options.params = params;
	options.read_only = false;
	options.dest = dest;
	rc = SPI_execute_plan_extended(plan, &options);
	dest->rDestroy(dest);
	return rc;
}
#else
static inline int
cfeed_spi_execute_into(SPIPlanPtr plan, ParamListInfo params,
					   Tuplestorestate *store)
{
	int			rc = SPI_execute_plan_with_paramlist(plan, params, false, 0);
	uint64		i;

	if (rc == SPI_OK_SELECT)
		for (i = 0; i < SPI_processed; i++)
			tuplestore_puttuple(store, SPI_tuptable->vals[i]);
	return rc;
}
#endif

/* index_beginscan gained an instrumentation argument in 18. */
#if PG_VERSION_NUM >= 180000
#define cfeed_index_beginscan(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan((heap), (index), (snapshot), NULL, (nkeys), (norderbys))
#else
#define cfeed_index_beginscan(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan((heap), (index), (snapshot), (nkeys), (norderbys))
#endif

/*
 * RelationGetPrimaryKeyIndex asks in 18 whether a deferrable primary key
 * will do; before 18 a deferrable one was never returned, and still is not.
 */
#if PG_VERSION_NUM >= 180000
#define cfeed_primary_key_index(rel) RelationGetPrimaryKeyIndex((rel), false)
#else
#define cfeed_primary_key_index(rel) RelationGetPrimaryKeyIndex(rel)
#endif

/*
 * Wait events.  From 17 each of cfeed's waits has a name of its own in
 * pg_stat_activity.wait_event (wait_event_type 'Extension'), so an idle
 * sweeper, a reader waiting for changes and a sweep_loop between sweeps are
 * told apart; before 17 all show wait_event 'Extension'.  Each process
 * registers a name on its first wait (WaitEventExtensionNew takes a lock
 * and returns the same id in every process) and keeps the id.  Not in a
 * critical section or under a spinlock.
 */
typedef enum CfeedWaitEvent
{
	CFEED_WAIT_SWEEPER_MAIN,	/* sweeper: idle between sweeps */
	CFEED_WAIT_SWEEPER_DELAY,	/* sweeper: cfeed.sweep_delay pause */
	CFEED_WAIT_LAUNCHER_MAIN,	/* launcher: idle between passes */
	CFEED_WAIT_READ,			/* cfeed.read() waiting for a change */
	CFEED_WAIT_SWEEP_LOOP,		/* sweep_loop(): idle between sweeps */
	CFEED_WAIT_SWEEP_TURN,		/* sweep_loop(): waiting for its group's turn */
	CFEED_WAIT_STANDBY_WAKER,	/* the standby waker between looks at replay */
	CFEED_WAIT_EVENT_COUNT
} CfeedWaitEvent;

static inline uint32
cfeed_wait_event(CfeedWaitEvent event)
{
#if PG_VERSION_NUM >= 170000
	static const char *const names[CFEED_WAIT_EVENT_COUNT] = {
		"CfeedSweeperMain",
		"CfeedSweeperDelay",
		"CfeedLauncherMain",
		"CfeedRead",
		"CfeedSweepLoop",
		"CfeedSweepTurn",
		"CfeedStandbyWaker",
	};
	static uint32 ids[CFEED_WAIT_EVENT_COUNT];

	if (ids[event] == 0)
		ids[event] = WaitEventExtensionNew(names[event]);
	return ids[event];
#else
	(void) event;
	return PG_WAIT_EXTENSION;
#endif
}

#endif							/* CFEED_COMPAT_H */
