/*-------------------------------------------------------------------------
 *
 * change_id.c
 *	  Change ids across failovers: a change_id is never issued twice.
 *
 *	  Writers draw change ids with nextval('cfeed.change_id') in their own
 *	  statements.  After an asynchronous failover the new primary's sequence
 *	  stands where the standby last replayed it, below what the lost
 *	  primary may have issued since: without more, it would hand the lost
 *	  changes' ids out again, and a consumer that deduplicates by change_id
 *	  (docs/replication.md: a change whose stamp was lost comes back under a
 *	  new number with its id) would drop the new changes as seen.
 *
 *	  So the sequence moves on with the server's timeline.  The sequence
 *	  cfeed.change_id_timeline holds the timeline on which cfeed.change_id
 *	  was last secured (set when the extension is created).  Before any
 *	  statement runs on another timeline (a promoted standby, a
 *	  point-in-time recovery), cfeed moves cfeed.change_id up by
 *	  CFEED_CHANGE_ID_GAP (2^40) and records the timeline: every id drawn
 *	  on the new timeline lies above anything the old one can have issued
 *	  after the standby's last replayed value, unless the lost primary drew
 *	  more than 2^40 ids that the standby never saw.  Both are sequence
 *	  writes, which no rollback undoes; the marker's lock makes concurrent
 *	  first statements wait for one another, so no draw on the new timeline
 *	  precedes the move.  That lock is SHARE UPDATE EXCLUSIVE: it conflicts
 *	  with itself (and DDL), not with the ROW EXCLUSIVE lock that every
 *	  read of the marker (and setval) holds until its transaction ends; an
 *	  EXCLUSIVE lock (up to 1.8) deadlocked two first statements that had
 *	  both read the marker, failing one of them (40P01) right after a
 *	  promotion.
 *
 *	  The check runs at ExecutorStart and ProcessUtility of every statement
 *	  in a backend that has loaded cfeed (all of them under
 *	  shared_preload_libraries); once this backend has seen the marker at
 *	  the current timeline it costs two comparisons.  A backend that loads
 *	  cfeed in the middle of a statement (no preload) may have drawn before
 *	  that statement's check: the write guards check again, and refuse with
 *	  40001 (retry) a change whose transaction found the timeline not yet
 *	  secured.  Without the preload a backend that had not loaded cfeed can
 *	  still draw an id before another backend secures the timeline
 *	  (docs/replication.md).
 *
 *	  Not secured: read-only transactions and parallel workers (they cannot
 *	  draw), a server in recovery, a database whose cfeed schema has no
 *	  cfeed.change_id_timeline yet (not yet updated).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_sequence.h"
#include "commands/extension.h"
#include "executor/executor.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/fmgrprotos.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "cfeed.h"

/* How far cfeed.change_id moves on a new timeline. */
#define CFEED_CHANGE_ID_GAP (INT64CONST(1) << 40)

/* The timeline on which this backend found cfeed.change_id secured. */
static TimeLineID secured_timeline = 0;

static ExecutorStart_hook_type prev_executor_start = NULL;

/*
 * sequence_value
 *		last_value of a sequence, or -1 before its first nextval or setval.
 *		Called as the extension's owner.
 */
static int64
sequence_value(Oid seqid)
{
	LOCAL_FCINFO(fcinfo, 1);
	Datum		result;

	InitFunctionCallInfoData(*fcinfo, NULL, 1, InvalidOid, NULL, NULL);
	fcinfo->args[0].value = ObjectIdGetDatum(seqid);
	fcinfo->args[0].isnull = false;
	result = pg_sequence_last_value(fcinfo);
	return fcinfo->isnull ? -1 : DatumGetInt64(result);
}

/*
 * sequence_start
 *		The start value of a sequence (its last_value before the first
 *		nextval: the lost primary may have drawn from it).
 */
static int64
sequence_start(Oid seqid)
{
	HeapTuple	tuple = SearchSysCache1(SEQRELID, ObjectIdGetDatum(seqid));
	int64		start;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for sequence %u", seqid);
	start = ((Form_pg_sequence) GETSTRUCT(tuple))->seqstart;
	ReleaseSysCache(tuple);
	return start;
}

/*
 * secure_timeline
 *		Move cfeed.change_id past the previous timeline's ids unless the
 *		marker already holds this timeline (a marker never set, as after
 *		CREATE EXTENSION failed to, is set without a move).  Returns whether
 *		it moved the sequence.
 */
static bool
secure_timeline(Oid marker, Oid change_id, TimeLineID timeline)
{
	CfeedSavedUser saved_user;
	int64		seen;
	bool		moved = false;

	saved_user = cfeed_become_owner();
	seen = sequence_value(marker);
	if (seen != (int64) timeline)
	{
		LockRelationOid(marker, ShareUpdateExclusiveLock);
		seen = sequence_value(marker);
		if (seen != (int64) timeline)
		{
			int64		last = sequence_value(change_id);

			if (seen >= 0)
			{
				int64		from = (last >= 0 ? last : sequence_start(change_id)) +
					CFEED_CHANGE_ID_GAP;

				DirectFunctionCall2(setval_oid, ObjectIdGetDatum(change_id),
									Int64GetDatum(from));
				ereport(LOG,
						(errmsg("cfeed: timeline %u: change ids continue above %lld",
								timeline, (long long) from),
						 errdetail("The previous timeline (%lld) may have issued ids up to %lld that this server never received.",
								   (long long) seen, (long long) from)));
				moved = true;
			}
			DirectFunctionCall2(setval_oid, ObjectIdGetDatum(marker),
								Int64GetDatum((int64) timeline));
		}
		UnlockRelationOid(marker, ShareUpdateExclusiveLock);
	}
	cfeed_restore_user(saved_user);
	return moved;
}

/*
 * cfeed_change_ids_check
 *		Secure cfeed.change_id on this server's timeline before the
 *		statement draws from it (see the header).  Returns whether this call
 *		moved the sequence.
 */
bool
cfeed_change_ids_check(void)
{
	TimeLineID	timeline;
	Oid			schema;
	Oid			marker;
	Oid			change_id;
	bool		moved;

	if (RecoveryInProgress())
		return false;
	timeline = GetWALInsertionTimeLine();
	if (timeline == secured_timeline)
		return false;
	if (!IsTransactionState() || XactReadOnly || IsInParallelMode())
		return false;
	schema = get_namespace_oid("cfeed", true);
	if (!OidIsValid(schema) || !OidIsValid(get_extension_oid("cfeed", true)))
		return false;
	marker = cfeed_schema_relid(CFEED_SCHEMA_CHANGE_ID_TIMELINE);
	change_id = get_relname_relid("change_id", schema);
	if (!OidIsValid(marker) || !OidIsValid(change_id))
		return false;			/* not yet updated: no timeline marker */
	moved = secure_timeline(marker, change_id, timeline);
	secured_timeline = timeline;
	return moved;
}

/*
 * cfeed_change_ids_guard
 *		For the write guards: refuse (40001) a change whose statement may
 *		have drawn its id before this backend secured the timeline (cfeed
 *		loaded in the middle of the statement, without the preload).
 */
void
cfeed_change_ids_guard(void)
{
	if (cfeed_change_ids_check())
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not write a change: its change_id may have been drawn before cfeed secured the ids of this timeline"),
				 errdetail("This server began timeline %u; the change ids it issues from now on lie above any the previous primary issued.",
						   GetWALInsertionTimeLine()),
				 errhint("Retry the transaction.")));
}

/*
 * change_ids_executor_start
 *		ExecutorStart hook: the check, then the executor.
 */
static void
change_ids_executor_start(QueryDesc *queryDesc, int eflags)
{
	(void) cfeed_change_ids_check();
	if (prev_executor_start)
		prev_executor_start(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
}

/*
 * cfeed_change_ids_init
 *		Install the ExecutorStart hook (from _PG_init, on every load).
 */
void
cfeed_change_ids_init(void)
{
	prev_executor_start = ExecutorStart_hook;
	ExecutorStart_hook = change_ids_executor_start;
}
