/*-------------------------------------------------------------------------
 *
 * shard_guard.c
 *	  The triggers of cfeed.shard_config that make the feed's shards lock
 *	  stand in for a foreign key of cfeed.change (see shards.c's header):
 *	  a shard row that goes away (DELETE, or UPDATE of its key) takes the
 *	  feed's shards lock in exclusive mode and is refused (23503) while the
 *	  shard has changes outside replica mode; a shard closed (or opened
 *	  again), and a shard added open, take it in exclusive mode too (each
 *	  changes where the feed's keys go); a shard moved to another sweep
 *	  group takes both groups' sweep locks; a new shard's start value is
 *	  checked; TRUNCATE is refused unless cfeed.change is empty.  Every
 *	  change to the set of shards sends an invalidation of shard_config,
 *	  which resets the shard counts (shards.c) and the sweep watermarks
 *	  (watermark.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "commands/trigger.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/inval.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "cfeed.h"
#include "shmem.h"

PG_FUNCTION_INFO_V1(cfeed_shard_config_guard);
PG_FUNCTION_INFO_V1(cfeed_shard_config_truncate);

/*
 * shard_column
 *		An int4 column of the old row (or with use_new, the new row) of the
 *		shard_config row a guard trigger fired for.
 */
static int32
shard_column(TriggerData *trigdata, int attnum, bool use_new)
{
	bool		isnull;

	return DatumGetInt32(heap_getattr(use_new ? trigdata->tg_newtuple : trigdata->tg_trigtuple,
									  attnum, RelationGetDescr(trigdata->tg_relation),
									  &isnull));
}

/*
 * shard_closed
 *		The closed column of the old (or with use_new, the new) row the
 *		guard trigger fired for; false in a schema without it.
 */
static bool
shard_closed(TriggerData *trigdata, bool use_new)
{
	Datum		d;

	return cfeed_shard_column(RelationGetDescr(trigdata->tg_relation),
							  use_new ? trigdata->tg_newtuple : trigdata->tg_trigtuple,
							  Anum_shard_closed, "closed", &d) && DatumGetBool(d);
}

/*
 * check_new_start
 *		A new shard's start value must leave room for numbers and keep
 *		cursors at 0 or above: 0 .. 2^63 - 2 (22023).  Not checked in
 *		replica mode (logical replication's apply of its publisher's
 *		shards, a restore with session_replication_role = replica).
 */
static void
check_new_start(TriggerData *trigdata)
{
	bool		isnull;
	int64		start;

	if (SessionReplicationRole == SESSION_REPLICATION_ROLE_REPLICA)
		return;
	start = DatumGetInt64(heap_getattr(trigdata->tg_trigtuple, Anum_shard_start,
									   RelationGetDescr(trigdata->tg_relation), &isnull));
	if (isnull || (start >= 0 && start < PG_INT64_MAX))
		return;					/* a null is NOT NULL's to refuse */
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("start value " INT64_FORMAT " of new shard %d of feed %d is out of range",
					start, shard_column(trigdata, Anum_shard_shard, false),
					shard_column(trigdata, Anum_shard_feed_id, false)),
			 errdetail("A shard starts at 0 to " INT64_FORMAT ": its numbers are issued above the start, and history is numbered from 1 up to it.",
					   PG_INT64_MAX - 1),
			 errhint("Leave last_change_sequence_number to its default, 2000000000000000.")));
}

/*
 * cfeed_shard_config_guard
 *		BEFORE INSERT OR DELETE OR UPDATE OF feed_id, shard, sweep_group,
 *		closed FOR EACH ROW on cfeed.shard_config (enabled always): a new
 *		shard's start value must be in range (check_new_start); a shard
 *		closed or opened again, or added open, waits for the writers of its
 *		feed; a shard that goes away waits for the direct writers of
 *		changes to its feed (the lock of cfeed_shard_locked, in exclusive
 *		mode) and, outside replica mode, is refused (23503) while changes
 *		of it exist; a shard that moves to
 *		another sweep group waits for the sweeps of both groups and keeps
 *		them waiting until this transaction ends (the sweep locks); and every
 *		backend forgets its shard counts and sweep watermarks when this
 *		transaction commits (the invalidation, sent before the locks are
 *		released).
 */
Datum
cfeed_shard_config_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	TriggerEvent ev;
	bool		key_changed;
	bool		group_changed;
	bool		closed_changed;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_BEFORE(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("function cfeed._shard_config_guard() must be fired as a BEFORE ROW trigger")));
	cfeed_trigger_on(trigdata, "cfeed._shard_config_guard()", "shard_config");
	ev = trigdata->tg_event;
	key_changed = TRIGGER_FIRED_BY_UPDATE(ev) &&
		(shard_column(trigdata, Anum_shard_feed_id, false) !=
		 shard_column(trigdata, Anum_shard_feed_id, true) ||
		 shard_column(trigdata, Anum_shard_shard, false) !=
		 shard_column(trigdata, Anum_shard_shard, true));
	group_changed = TRIGGER_FIRED_BY_UPDATE(ev) &&
		shard_column(trigdata, Anum_shard_sweep_group, false) !=
		shard_column(trigdata, Anum_shard_sweep_group, true);

	closed_changed = TRIGGER_FIRED_BY_UPDATE(ev) &&
		shard_closed(trigdata, false) != shard_closed(trigdata, true);

	if (TRIGGER_FIRED_BY_INSERT(ev))
		check_new_start(trigdata);

	/* an UPDATE that changes none (cfeed.shard sets sweep_group always) */
	if (TRIGGER_FIRED_BY_UPDATE(ev) && !key_changed && !group_changed && !closed_changed)
		return PointerGetDatum(trigdata->tg_newtuple);

	/*
	 * A shard closed (or opened again), or added open, changes where the
	 * feed's keys go: it waits for the writers that placed changes by the
	 * layout before (shards.c), as a shard that goes away does.  One added
	 * by hand to a resharded feed moves keys among its children.  (A new
	 * feed's shards, and cfeed.reshard's children, find the lock free or
	 * held by their own transaction.)
	 */
	if (closed_changed || (TRIGGER_FIRED_BY_INSERT(ev) && !shard_closed(trigdata, false)))
		(void) cfeed_shards_lock(shard_column(trigdata, Anum_shard_feed_id, false),
								 AccessExclusiveLock);

	if (TRIGGER_FIRED_BY_DELETE(ev) || key_changed)
	{
		int32		feed_id = shard_column(trigdata, Anum_shard_feed_id, false);
		int32		shard = shard_column(trigdata, Anum_shard_shard, false);

		/*
		 * No checking writer of the feed is in progress once the lock is
		 * held: SnapshotSelf sees every change that was committed or written
		 * by this transaction, its current command included (an MVCC
		 * snapshot would miss a change the same statement wrote, as by a
		 * data-modifying WITH, which a foreign key's NO ACTION check would
		 * see at the statement's end).  In replica mode (logical
		 * replication's apply of its publisher's DELETE) the lock is taken
		 * but the check is skipped, as a foreign key's would be.
		 */
		(void) cfeed_shards_lock(feed_id, AccessExclusiveLock);
		if (SessionReplicationRole != SESSION_REPLICATION_ROLE_REPLICA &&
			cfeed_shard_has_changes(feed_id, shard, SnapshotSelf))
			ereport(ERROR,
					(errcode(ERRCODE_FOREIGN_KEY_VIOLATION),
					 errmsg("shard %d of feed %d still has changes", shard, feed_id),
					 errdetail("Every change of cfeed.change belongs to a shard of cfeed.shard_config."),
					 errhint("Delete the shard's changes first (DELETE FROM cfeed.change WHERE feed_id = %d AND shard = %d).",
							 feed_id, shard)));
	}
	if (group_changed)
	{
		int32		from = shard_column(trigdata, Anum_shard_sweep_group, false);
		int32		to = shard_column(trigdata, Anum_shard_sweep_group, true);

		/*
		 * Lowest group first: two moves of one shard each cannot deadlock.
		 * (Statements moving several shards take their groups row by row,
		 * and can; PostgreSQL detects it and cancels one.)  The sweepers
		 * are woken at commit: theirs may have given up on the lock.
		 */
		(void) cfeed_sweep_lock(Min(from, to), false);
		(void) cfeed_sweep_lock(Max(from, to), false);
		cfeed_note_write();
	}
	CacheInvalidateRelcacheByRelid(RelationGetRelid(trigdata->tg_relation));
	return PointerGetDatum(TRIGGER_FIRED_BY_UPDATE(ev) ? trigdata->tg_newtuple
						   : trigdata->tg_trigtuple);
}

/*
 * cfeed_shard_config_truncate
 *		AFTER TRUNCATE FOR EACH STATEMENT on cfeed.shard_config (enabled
 *		always): refuses (23503) unless cfeed.change is empty once the
 *		statement's tables are truncated, as a foreign key would refuse to
 *		truncate shard_config without cfeed.change.  TRUNCATE holds
 *		shard_config in ACCESS EXCLUSIVE mode, which waits for every writer
 *		of a change (cfeed_shard_check and the direct path lock it first).
 */
Datum
cfeed_shard_config_truncate(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Relation	rel;
	TableScanDesc scan;
	TupleTableSlot *slot;
	Snapshot	snapshot;
	bool		empty;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_AFTER(trigdata->tg_event) ||
		!TRIGGER_FIRED_BY_TRUNCATE(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("function cfeed._shard_config_truncate() must be fired as an AFTER TRUNCATE trigger")));
	cfeed_trigger_on(trigdata, "cfeed._shard_config_truncate()", "shard_config");
	snapshot = cfeed_fresh_snapshot();
	rel = cfeed_table_open("change", AccessShareLock);
	slot = table_slot_create(rel, NULL);
	scan = table_beginscan(rel, snapshot, 0, NULL);
	empty = !table_scan_getnextslot(scan, ForwardScanDirection, slot);
	table_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	table_close(rel, AccessShareLock);
	UnregisterSnapshot(snapshot);
	if (!empty)
		ereport(ERROR,
				(errcode(ERRCODE_FOREIGN_KEY_VIOLATION),
				 errmsg("cannot truncate cfeed.shard_config while cfeed.change has changes"),
				 errdetail("Every change of cfeed.change belongs to a shard of cfeed.shard_config."),
				 errhint("Truncate both in one statement: TRUNCATE cfeed.shard_config, cfeed.change CASCADE.")));
	return PointerGetDatum(NULL);
}
