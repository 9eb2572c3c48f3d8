/*-------------------------------------------------------------------------
 *
 * guard.c
 *	  The write path's guards: the default of cfeed.change.writer_xid, and
 *	  the trigger that keeps sequence numbers in the sweeper's hands.
 *
 *	  The trigger fires for every inserted row (no WHEN clause) and stands
 *	  in for a foreign key from cfeed.change to cfeed.shard_config
 *	  (cfeed.change has none): it checks that the row's shard exists the
 *	  way the direct path does (cfeed_shard_check, shards.c: the feed's
 *	  shards lock in share mode, the shard counts each backend keeps),
 *	  without a foreign key's row lock on the shard (a WAL record, and a
 *	  multixact per couple of changes under concurrent writers).  A missing
 *	  feed or shard fails at the INSERT with 23503.  In a database not yet
 *	  updated, whose cfeed.change still has its foreign key
 *	  change_shard_fkey and whose trigger still has a WHEN clause, the key
 *	  checks the shard and the trigger does not (cfeed_change_guard checks
 *	  only without a WHEN clause).  Two kinds of rows skip the check:
 *	  - in replica mode (logical replication's apply, pg_restore
 *		--disable-triggers), where a foreign key's check, an ORIGIN
 *		trigger, does not fire either;
 *	  - restored rows inserted by a user with the privileges of the
 *		extension's owner: pg_dump orders extension tables' data by their
 *		foreign keys only, so a restore may copy cfeed.change before
 *		cfeed.shard_config; the dumped rows had passed the check where they
 *		were written, and only the owner, who may drop the guards anyway,
 *		can skip it.
 *	  A restored row is one that carries another transaction's writer_xid,
 *	  or a written_at earlier than the inserting transaction's start, as a
 *	  dump's rows do: both, since the restoring transaction's xid can be the
 *	  one a dumped row carries (two fresh clusters count xids alike), while
 *	  a dumped row was written before the restore started.  A written_at of
 *	  the start or later (clock_timestamp(), a clock ahead) is no dumped
 *	  row's, and is checked as anyone's.  Only a row copied in (replica
 *	  mode, the owner's) keeps a written_at of its own: anyone else's gets
 *	  the transaction's start, as the default, and is not a restored row.
 *	  For the common row (sequence number and stamped_at left null,
 *	  writer_xid left to its default) that check is all (in a database not
 *	  yet updated the WHEN clause keeps the trigger from firing for it).
 *
 *	  The other rows are backfills into the migration range, pg_restore,
 *	  logical replication's apply (the trigger is enabled ALWAYS), and
 *	  mistakes.
 *	  The trigger sets their writer_xid to the inserting transaction's own
 *	  xid: the sweeper finds pending changes by xids it allocated (sweep.c's
 *	  watermark), never by a publisher's or a dumped cluster's.  A change
 *	  the apply copies in already stamped keeps the publisher's writer_xid,
 *	  so that the publisher's later UPDATEs, which name the whole old row
 *	  (REPLICA IDENTITY FULL), find it.  An unnumbered one applied by a
 *	  subscription that carries cfeed.stamp, which a publisher's stamp
 *	  numbers, gets the writer that stamp names, CFEED_UPSTREAM_WRITER
 *	  (upstream.c: its shard must be one stored in ranges here).
 *
 *	  Sequence numbers a writer may set itself:
 *	  - from 1 to the shard's start value (the migration range): anyone
 *		(below 1 only the extension owner's restored rows);
 *	  - above it: only the extension's owner, and only on a restored row
 *		of a shard stored in rows (0A000 in ranges, whose numbers are its
 *		stamps': a subscriber of stamped changes whose feed is stored in
 *		ranges would hold rows that no read or head sees); change_sequence_idx
 *		still refuses a number twice;
 *	  - anything else: refused (22023), since the sweeper issues those.
 *
 *	  Row images (tbl, op, row) come only from cfeed's tracking: a row that
 *	  carries one is refused (42501) unless a statement of cfeed's own writes
 *	  it (the image scope: append.c's SQL path for a tracked row, backfill.c;
 *	  the row's table and feed must be the scope's), or it is copied in by
 *	  logical replication's apply (replica mode) or by a role with the
 *	  privileges of the extension's owner (pg_restore).  The image scope is
 *	  backend-local C state that no SQL can set.  An UPDATE may clear an
 *	  image but set one only under the same rule (change_image_guard).
 *
 *	  An UPDATE that moves a change to another feed or shard is checked the
 *	  same way by change_shard_guard (in place of a foreign key's check of
 *	  an UPDATE): 23503 for a missing feed or shard, none in replica mode,
 *	  where it does not fire (an ORIGIN trigger, as a foreign key's is).
 *
 *	  A role without a write grant on the row's feed, whom the policy
 *	  change_write would refuse after the BEFORE triggers, is refused
 *	  first, with cfeed.publish's 42501 (cfeed_insert_needs_grant,
 *	  direct.c): whether the shard is open, closed or missing, the row
 *	  tells it nothing, and it takes no lock of the feed's.
 *
 *	  The extension owner's restored rows skip the shard check, the closed
 *	  shard's refusal included, on purpose: a restore copies a closed
 *	  shard's changes, written before it closed, into a cfeed.shard_config
 *	  that already says it is closed.
 *
 *	  Locking: a guard runs inside the writer's INSERT or UPDATE and reads
 *	  cfeed.shard_config with a fresh snapshot (the shard check: SnapshotSelf,
 *	  shards.c); the shard check holds the feed's shards lock in share mode
 *	  until the transaction ends.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "commands/trigger.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/datum.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
#include "utils/xid8.h"

#include "cfeed.h"
#include "shmem.h"

PG_FUNCTION_INFO_V1(cfeed_writer_xid);
PG_FUNCTION_INFO_V1(cfeed_change_guard);
PG_FUNCTION_INFO_V1(cfeed_change_stamp_guard);
PG_FUNCTION_INFO_V1(cfeed_change_shard_guard);
PG_FUNCTION_INFO_V1(cfeed_change_image_guard);

/* The images a statement of cfeed's own is writing (see the header). */
static CfeedImageScope image_scope = {InvalidOid, 0};

/*
 * cfeed_image_scope_enter
 *		Let the rows with images of table tbl for feed_id that cfeed's own
 *		statement is about to insert pass change_guard.  Returns the scope
 *		it replaces, which the caller restores with cfeed_image_scope_leave
 *		when the statement is done, on error too (PG_FINALLY).
 */
CfeedImageScope
cfeed_image_scope_enter(Oid tbl, int32 feed_id)
{
	CfeedImageScope previous = image_scope;

	image_scope.tbl = tbl;
	image_scope.feed_id = feed_id;
	return previous;
}

/*
 * cfeed_image_scope_leave
 *		Restore the scope cfeed_image_scope_enter replaced.
 */
void
cfeed_image_scope_leave(CfeedImageScope previous)
{
	image_scope = previous;
}

/*
 * row_copied_in
 *		Whether a change's row may keep what it was written with elsewhere
 *		(its row image, its written_at): logical replication's apply
 *		(replica mode) or a restore by a role with the privileges of the
 *		extension's owner.
 */
static bool
row_copied_in(void)
{
	return SessionReplicationRole == SESSION_REPLICATION_ROLE_REPLICA ||
		has_privs_of_role(GetUserId(), cfeed_extension_owner());
}

/*
 * check_image
 *		Refuse (42501) a row image (tbl, op or row not null) in a row of
 *		feed_id written by anything but cfeed's tracking (see the header).
 *		tbl is the row's table, InvalidOid when null.
 */
static void
check_image(HeapTuple tuple, TupleDesc desc, int32 feed_id)
{
	bool		tbl_null;
	bool		op_null;
	bool		row_null;
	Oid			tbl;

	if (desc->natts < Anum_change_row)
		return;					/* a schema that keeps images elsewhere */
	tbl = DatumGetObjectId(heap_getattr(tuple, Anum_change_tbl, desc, &tbl_null));
	(void) heap_getattr(tuple, Anum_change_op, desc, &op_null);
	(void) heap_getattr(tuple, Anum_change_row, desc, &row_null);
	if (tbl_null && op_null && row_null)
		return;
	if (!tbl_null && OidIsValid(image_scope.tbl) && tbl == image_scope.tbl &&
		feed_id == image_scope.feed_id)
		return;
	if (row_copied_in())
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied to write a row image to feed %d", feed_id),
			 errdetail("tbl, op and row of cfeed.change are written only by cfeed's tracking of a table (cfeed.track, cfeed.backfill) and by a restore."),
			 errhint("Leave tbl, op and row out of the INSERT; to publish a table's rows, track it with cfeed.track().")));
}

/*
 * keep_written_at
 *		newtup, or a copy with oldtup's written_at where an UPDATE by
 *		anyone but a row copied in (row_copied_in) changed it: a writer's
 *		written_at is its transaction's start (cfeed_change_guard), and
 *		stays so.
 */
static HeapTuple
keep_written_at(HeapTuple oldtup, HeapTuple newtup, TupleDesc desc)
{
	bool		oldnull;
	bool		newnull;
	Datum		oldval = heap_getattr(oldtup, Anum_change_written_at, desc, &oldnull);
	Datum		newval = heap_getattr(newtup, Anum_change_written_at, desc, &newnull);
	int			col = Anum_change_written_at;
	bool		keepnull = oldnull;

	if (newnull || (!oldnull && DatumGetTimestampTz(oldval) == DatumGetTimestampTz(newval)) ||
		row_copied_in())
		return newtup;
	return heap_modify_tuple_by_cols(newtup, desc, 1, &col, &oldval, &keepnull);
}

/*
 * cfeed_writer_xid
 *		Default of cfeed.change.writer_xid: the writing transaction's
 *		top-level xid, by which the sweeper finds the changes it has not yet
 *		looked at.
 */
Datum
cfeed_writer_xid(PG_FUNCTION_ARGS)
{
	cfeed_note_write();
	PG_RETURN_FULLTRANSACTIONID(GetTopFullTransactionId());
}

/*
 * cfeed_trigger_on
 *		Refuse a cfeed trigger function fired on a relation other than
 *		cfeed.<relname>, the one it was installed on: any role may create a
 *		trigger on a table of its own (a temporary one included) with it,
 *		and would have it check, lock and report on feeds it was not granted.
 */
void
cfeed_trigger_on(TriggerData *trigdata, const char *name, const char *relname)
{
	if (RelationGetRelid(trigdata->tg_relation) != cfeed_relid(relname))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("function %s must be fired on cfeed.%s", name, relname)));
}

/*
 * cfeed_trigger_get
 *		Check that a cfeed trigger function is called as the BEFORE ROW
 *		trigger of cfeed.<relname> it was installed as.
 */
TriggerData *
cfeed_trigger_get(FunctionCallInfo fcinfo, const char *name, const char *relname)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo) ||
		!TRIGGER_FIRED_BEFORE(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("function %s must be fired as a BEFORE ROW trigger", name)));
	cfeed_trigger_on(trigdata, name, relname);
	return trigdata;
}

/*
 * check_history_number
 *		Refuse (22023) a history number below 1, the bottom of every
 *		migration range (backfill's "no room" is the same bound): a number
 *		near -2^63 made "the number before the lowest", which a new group's
 *		acquire and cursor_at compute, overflow.  The extension owner's
 *		restored rows pass, as they do above the start (a dump of a
 *		database that has such rows still restores).
 */
static void
check_history_number(int32 feed_id, int32 shard, int64 number, bool restored_row)
{
	if (number >= 1)
		return;
	if (restored_row && has_privs_of_role(GetUserId(), cfeed_extension_owner()))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("change_sequence_number " INT64_FORMAT " is below the migration range of shard %d of feed %d",
					number, shard, feed_id),
			 errdetail("History is numbered from 1 up to the shard's start value."),
			 errhint("Number history rows from 1, or leave change_sequence_number null.")));
}

/*
 * check_writer_number
 *		Refuse (22023) a writer-set sequence number outside what the
 *		file header allows.  restored_row: the row carries another
 *		transaction's writer_xid or an earlier written_at.  A missing shard
 *		was reported before (by check_shard; for an UPDATE by
 *		change_shard_guard, which fires first), is reported after (by the
 *		foreign key of a database not yet updated, an AFTER trigger), or is
 *		not checked (replica mode, the owner's restored rows).
 */
static void
check_writer_number(int32 feed_id, int32 shard, int64 number, bool restored_row)
{
	CfeedShard	sh;

	if (!cfeed_shard_fetch(feed_id, shard, NULL, false, &sh))
		return;
	if (number <= sh.start_number)
	{
		check_history_number(feed_id, shard, number, restored_row);
		return;
	}
	if (restored_row && has_privs_of_role(GetUserId(), cfeed_extension_owner()))
	{
		if (sh.ranges)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("change_sequence_number " INT64_FORMAT " is above the start value of shard %d of feed %d, which is stored in ranges",
							number, shard, feed_id),
					 errdetail("The numbers of a range shard's changes are held by its stamps (cfeed.stamp), which its sweeps write."),
					 errhint("A cluster that receives stamped changes by logical replication (portable cursors) needs the feed stored as on the publisher: in rows, or in ranges with cfeed.stamp published too.")));
		return;
	}
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("change_sequence_number " INT64_FORMAT " is outside the migration range of shard %d of feed %d",
					number, shard, feed_id),
			 errdetail("Numbers above the shard's start value " INT64_FORMAT " are assigned by the sweeper.",
					   sh.start_number),
			 errhint("Leave change_sequence_number null, or backfill history at numbers at or below " INT64_FORMAT ".",
					 sh.start_number)));
}

/*
 * check_shard
 *		The foreign-key check of an inserted change (see the file header):
 *		none in replica mode, nor for the extension owner's restored rows;
 *		else cfeed_shard_check (23503 for a missing feed or shard).
 */
static void
check_shard(int32 feed_id, int32 shard, bool restored_row)
{
	if (SessionReplicationRole == SESSION_REPLICATION_ROLE_REPLICA)
		return;
	if (restored_row && has_privs_of_role(GetUserId(), cfeed_extension_owner()))
		return;
	cfeed_shard_check(feed_id, shard);
}

/*
 * writer_number
 *		A number that a writer gives a change, by an INSERT or by an UPDATE
 *		of an unnumbered change (number_given): checked (check_writer_number,
 *		restored_row as there), readers woken at commit (a stamped change
 *		copied in: replication, restore), and stamped_at, when the row
 *		leaves it null, appended to the columns (cols, values, *ncols) that
 *		the caller sets: the transaction's start, as a sweep's stamp.
 */
static void
writer_number(int32 feed_id, int32 shard, int64 number, bool restored_row,
			  bool stamped_null, int *cols, Datum *values, int *ncols)
{
	check_writer_number(feed_id, shard, number, restored_row);
	cfeed_broadcast_at_commit(feed_id, shard);
	if (stamped_null)
	{
		cols[*ncols] = Anum_change_stamped_at;
		values[(*ncols)++] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	}
}

/*
 * cfeed_change_guard
 *		BEFORE INSERT on cfeed.change, for every row, checking its shard;
 *		in a database not yet updated, whose trigger has a WHEN clause, only
 *		for rows that set change_sequence_number, stamped_at or writer_xid,
 *		and without the shard check (the foreign key checks it).  Returns
 *		the row to insert: the common row as it is, others with writer_xid
 *		forced to the current transaction's and stamped_at filled in for
 *		backfilled rows.
 */
Datum
cfeed_change_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = cfeed_trigger_get(fcinfo, "cfeed._change_guard()", "change");
	TupleDesc	desc = RelationGetDescr(trigdata->tg_relation);
	HeapTuple	tuple = trigdata->tg_trigtuple;
	bool		feed_null;
	bool		shard_null;
	bool		number_null;
	bool		stamped_null;
	bool		xid_null;
	bool		written_null;
	bool		restored_row;
	bool		upstream;
	int32		feed_id;
	int32		shard;
	Datum		number;
	Datum		xid;
	Datum		written;
	int			cols[3];
	Datum		values[3];
	bool		nulls[3] = {false, false, false};
	int			ncols = 0;

	if (!TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
		elog(ERROR, "cfeed._change_guard() fired for something other than INSERT");

	feed_id = DatumGetInt32(heap_getattr(tuple, Anum_change_feed_id, desc, &feed_null));
	shard = DatumGetInt32(heap_getattr(tuple, Anum_change_shard, desc, &shard_null));
	number = heap_getattr(tuple, Anum_change_sequence, desc, &number_null);
	(void) heap_getattr(tuple, Anum_change_stamped_at, desc, &stamped_null);
	xid = heap_getattr(tuple, Anum_change_writer_xid, desc, &xid_null);
	written = heap_getattr(tuple, Anum_change_written_at, desc, &written_null);
	restored_row = (!xid_null &&
					!FullTransactionIdEquals(DatumGetFullTransactionId(xid), GetTopFullTransactionId())) ||
		(!written_null && DatumGetTimestampTz(written) < GetCurrentTransactionStartTimestamp());

	/*
	 * Only a row copied in keeps a written_at of its own: anyone else's is
	 * the transaction's start, as the default gives, so that no writer can
	 * make a change look older or newer than it is (cfeed.stats' pending
	 * age, a sweep's lag; an infinite one failed the view for everyone).
	 */
	if (!written_null && DatumGetTimestampTz(written) != GetCurrentTransactionStartTimestamp() &&
		!row_copied_in())
	{
		cols[ncols] = Anum_change_written_at;
		values[ncols++] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
		restored_row = !xid_null &&
			!FullTransactionIdEquals(DatumGetFullTransactionId(xid), GetTopFullTransactionId());
	}

	/*
	 * A role the policies would refuse for want of a write grant on the feed
	 * is refused first, as cfeed.publish refuses it (42501): it learns
	 * nothing of the feed's shards (closed, missing, their numbering) and
	 * takes no lock of the feed.
	 */
	if (!feed_null && !cfeed_may_write_feed(feed_id) &&
		cfeed_insert_needs_grant(trigdata->tg_relation))
		cfeed_check_write(feed_id);
	/* a null feed_id or shard is NOT NULL's to refuse (23502), after this */
	if (trigdata->tg_trigger->tgqual == NULL && !feed_null && !shard_null)
		check_shard(feed_id, shard, restored_row);
	if (!feed_null)
		check_image(tuple, desc, feed_id);
	if (SessionReplicationRole != SESSION_REPLICATION_ROLE_REPLICA)
		cfeed_change_ids_guard();
	if (number_null && stamped_null && !restored_row &&
		SessionReplicationRole != SESSION_REPLICATION_ROLE_REPLICA)
		PG_RETURN_POINTER(ncols == 0 ? tuple :	/* the common row (a null writer_xid fails NOT NULL) */
						  heap_modify_tuple_by_cols(tuple, desc, ncols, cols, values, nulls));

	/*
	 * A change that logical replication copies in stamped keeps the
	 * publisher's writer_xid: no sweep looks at it, and the publisher's later
	 * UPDATEs (an image cleared) find it on the subscriber by its whole row,
	 * the replica identity.  One that a publisher's stamp will number
	 * (upstream.c) gets the writer its stamp will name, which no sweep here
	 * collects.
	 */
	upstream = number_null && SessionReplicationRole == SESSION_REPLICATION_ROLE_REPLICA &&
		!feed_null && !shard_null && cfeed_applying_stamps();
	if (number_null || SessionReplicationRole != SESSION_REPLICATION_ROLE_REPLICA)
	{
		cols[ncols] = Anum_change_writer_xid;
		values[ncols++] = FullTransactionIdGetDatum(upstream ? cfeed_upstream_writer(feed_id, shard)
													: GetTopFullTransactionId());
	}

	if (number_null && !stamped_null)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("stamped_at of a change for shard %d of feed %d must be null",
						shard, feed_id),
				 errdetail("The sweeper sets stamped_at when it stamps the change."),
				 errhint("Leave stamped_at out of the INSERT.")));
	if (number_null)
	{
		if (!upstream)
			cfeed_note_write(); /* a replicated change wakes the sweepers too */
	}
	else
		writer_number(feed_id, shard, DatumGetInt64(number), restored_row, stamped_null,
					  cols, values, &ncols);

	PG_RETURN_POINTER(heap_modify_tuple_by_cols(tuple, desc, ncols, cols, values, nulls));
}

/*
 * history_unnumbered
 *		A history change whose number is set back to null is written anew
 *		by the updating transaction, as by an INSERT: its shard is checked
 *		as an INSERT's (check_shard: 23503, and 55000 for a closed shard,
 *		whose readers and consumer groups have gone on to its children),
 *		its writer_xid becomes this transaction's and its stamped_at null.
 *		The sweeps of its group look only at the writers that had not
 *		finished at the last sweep (its watermark, or its mark in a group
 *		with range shards): with its old writer's xid no sweep would ever
 *		number it.  In replica mode too, as change_guard gives an unnumbered
 *		row the apply's xid.
 */
static HeapTuple
history_unnumbered(HeapTuple newtup, TupleDesc desc)
{
	int			cols[2] = {Anum_change_writer_xid, Anum_change_stamped_at};
	Datum		values[2] = {FullTransactionIdGetDatum(GetTopFullTransactionId()), (Datum) 0};
	bool		nulls[2] = {false, true};
	bool		feed_null;
	bool		shard_null;
	int32		feed_id = DatumGetInt32(heap_getattr(newtup, Anum_change_feed_id, desc, &feed_null));
	int32		shard = DatumGetInt32(heap_getattr(newtup, Anum_change_shard, desc, &shard_null));

	/* a null feed_id or shard is NOT NULL's to refuse (23502), after this */
	if (!feed_null && !shard_null)
		check_shard(feed_id, shard, false);
	cfeed_note_write();
	return heap_modify_tuple_by_cols(newtup, desc, 2, cols, values, nulls);
}

/*
 * number_given
 *		An UPDATE gives an unnumbered change a number: a sweep's own passes
 *		(stamp.c's SQL path, cfeed_stamping; the SQL edition's sweep is kept
 *		out by the trigger's WHEN).  Any other is checked as an INSERT's
 *		number: its shard (check_shard: 23503, and 55000 for a closed one,
 *		whose readers have gone on to its children), the number
 *		(check_writer_number: history only, 22023; in replica mode, as a
 *		stamped change copied in, any number from a role with the owner's
 *		privileges), and never in a shard stored in ranges (0A000: the
 *		change may be stamped already, its number held by a stamp).
 *		stamped_at is filled in as an INSERT's, and readers are woken at
 *		commit.
 */
static HeapTuple
number_given(HeapTuple oldtup, HeapTuple newtup, TupleDesc desc)
{
	HeapTuple	tups[2] = {oldtup, newtup};
	bool		isnull;
	bool		new_null;
	int32		feed_id;
	int32		shard;
	int64		number = DatumGetInt64(heap_getattr(newtup, Anum_change_sequence, desc, &new_null));
	int			col;
	Datum		stamped_at;
	bool		not_null = false;
	int			ncols = 0;
	CfeedShard	sh;

	if (new_null || cfeed_stamping())
		return newtup;
	for (int i = 0; i < (int) lengthof(tups); i++)
	{
		bool		feed_null;
		bool		shard_null;

		feed_id = DatumGetInt32(heap_getattr(tups[i], Anum_change_feed_id, desc, &feed_null));
		shard = DatumGetInt32(heap_getattr(tups[i], Anum_change_shard, desc, &shard_null));
		/* a null feed_id or shard is NOT NULL's to refuse (23502), after this */
		if (feed_null || shard_null)
			return newtup;
		if (cfeed_shard_fetch(feed_id, shard, NULL, false, &sh) && sh.ranges)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("a change of shard %d of feed %d, which is stored in ranges, cannot be given a number",
							shard, feed_id),
					 errdetail("The numbers of a range shard's changes are held by its stamps (cfeed.stamp), which its sweeps write; the change may be stamped already."),
					 errhint("Insert history rows with their numbers instead.")));
	}
	check_shard(feed_id, shard, false);
	(void) heap_getattr(newtup, Anum_change_stamped_at, desc, &isnull);
	writer_number(feed_id, shard, number, SessionReplicationRole == SESSION_REPLICATION_ROLE_REPLICA,
				  isnull, &col, &stamped_at, &ncols);
	if (ncols == 0)
		return newtup;
	return heap_modify_tuple_by_cols(newtup, desc, ncols, &col, &stamped_at, &not_null);
}

/*
 * cfeed_change_stamp_guard
 *		BEFORE UPDATE OF feed_id, shard, change_sequence_number, stamped_at
 *		on cfeed.change, for rows already numbered, and (since 1.9) for rows
 *		given a number (WHEN; not the SQL edition's sweeps: its setting
 *		cfeed_sqled.stamping).  A number the sweeper issued stays with its
 *		change where it was stamped: moving or renumbering it would let the
 *		sweeper issue the number again, or collide with one it issues later
 *		(refused, 22023).  Backfilled history, numbered at or below its
 *		shard's start value, may be edited within the migration range, or
 *		set back to null (history_unnumbered).  An unnumbered change may be
 *		given a history number only (number_given).
 */
Datum
cfeed_change_stamp_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = cfeed_trigger_get(fcinfo, "cfeed._change_stamp_guard()", "change");
	TupleDesc	desc = RelationGetDescr(trigdata->tg_relation);
	HeapTuple	oldtup = trigdata->tg_trigtuple;
	HeapTuple	newtup = trigdata->tg_newtuple;
	bool		isnull;
	bool		new_null;
	int32		feed_id;
	int32		shard;
	int64		number;
	CfeedShard	sh;
	int			attnums[] = {Anum_change_feed_id, Anum_change_shard,
	Anum_change_sequence, Anum_change_stamped_at};
	bool		changed = false;
	int			i;

	if (!TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
		elog(ERROR, "cfeed._change_stamp_guard() fired for something other than UPDATE");

	for (i = 0; i < (int) lengthof(attnums); i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, attnums[i] - 1);
		bool		oldnull;
		Datum		oldval = heap_getattr(oldtup, attnums[i], desc, &oldnull);
		Datum		newval = heap_getattr(newtup, attnums[i], desc, &new_null);

		if (oldnull != new_null ||
			(!oldnull && !datumIsEqual(oldval, newval, att->attbyval, att->attlen)))
			changed = true;
	}
	if (!changed)
		PG_RETURN_POINTER(newtup);

	number = DatumGetInt64(heap_getattr(oldtup, Anum_change_sequence, desc, &isnull));
	if (isnull)
		PG_RETURN_POINTER(number_given(oldtup, newtup, desc));
	feed_id = DatumGetInt32(heap_getattr(oldtup, Anum_change_feed_id, desc, &isnull));
	shard = DatumGetInt32(heap_getattr(oldtup, Anum_change_shard, desc, &isnull));
	if (cfeed_shard_fetch(feed_id, shard, NULL, false, &sh) && number > sh.start_number)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("change " INT64_FORMAT " of shard %d of feed %d cannot be renumbered or moved",
						number, shard, feed_id),
				 errdetail("Its number was issued by the sweeper; feed_id, shard, change_sequence_number and stamped_at of a stamped change are fixed."),
				 errhint("Delete the change instead: its number is never issued again.")));

	/* backfilled history: the new number must stay in the migration range */
	number = DatumGetInt64(heap_getattr(newtup, Anum_change_sequence, desc, &new_null));
	if (new_null)
		PG_RETURN_POINTER(history_unnumbered(newtup, desc));
	check_writer_number(DatumGetInt32(heap_getattr(newtup, Anum_change_feed_id, desc, &isnull)),
						DatumGetInt32(heap_getattr(newtup, Anum_change_shard, desc, &isnull)),
						number, false);
	PG_RETURN_POINTER(newtup);
}

/*
 * cfeed_change_shard_guard
 *		BEFORE UPDATE OF feed_id, shard on cfeed.change, for rows moved to
 *		another feed or shard (WHEN clause; in place of a foreign key's
 *		check of an UPDATE, and like it enabled in origin mode only):
 *		the new shard must exist (23503), checked as an INSERT's
 *		(cfeed_shard_check: the new feed's shards lock in share mode).  A
 *		pending change may move within its sweep group only
 *		(change_stamped_keys_guard, after this); a stamped one is refused by
 *		change_stamp_guard, which fires after this too.
 */
Datum
cfeed_change_shard_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = cfeed_trigger_get(fcinfo, "cfeed._change_shard_guard()", "change");
	TupleDesc	desc = RelationGetDescr(trigdata->tg_relation);
	HeapTuple	newtup = trigdata->tg_newtuple;
	bool		feed_null;
	bool		shard_null;
	int32		feed_id;
	int32		shard;

	if (!TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
		elog(ERROR, "cfeed._change_shard_guard() fired for something other than UPDATE");

	feed_id = DatumGetInt32(heap_getattr(newtup, Anum_change_feed_id, desc, &feed_null));
	shard = DatumGetInt32(heap_getattr(newtup, Anum_change_shard, desc, &shard_null));
	/* a null feed_id or shard is NOT NULL's to refuse (23502), after this */
	if (!feed_null && !shard_null)
		check_shard(feed_id, shard, false);
	PG_RETURN_POINTER(newtup);
}

/*
 * cfeed_change_image_guard
 *		BEFORE UPDATE on cfeed.change (enabled always): an UPDATE may clear a
 *		change's image (set tbl, op and row to null) or leave it, but writes
 *		a new one only as an INSERT may (check_image: replication's apply,
 *		the extension owner's privileges).  The sweep's direct UPDATE, which
 *		sets only the numbers, stands in for it (direct.c).
 */
Datum
cfeed_change_image_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = cfeed_trigger_get(fcinfo, "cfeed._change_image_guard()", "change");
	TupleDesc	desc = RelationGetDescr(trigdata->tg_relation);
	HeapTuple	oldtup = trigdata->tg_trigtuple;
	HeapTuple	newtup = trigdata->tg_newtuple;
	int			attnums[] = {Anum_change_tbl, Anum_change_op, Anum_change_row};
	bool		isnull;
	int			i;

	if (!TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
		elog(ERROR, "cfeed._change_image_guard() fired for something other than UPDATE");

	for (i = 0; i < (int) lengthof(attnums); i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, attnums[i] - 1);
		bool		oldnull;
		bool		newnull;
		Datum		oldval = heap_getattr(oldtup, attnums[i], desc, &oldnull);
		Datum		newval = heap_getattr(newtup, attnums[i], desc, &newnull);

		if (!newnull && (oldnull || !datumIsEqual(oldval, newval, att->attbyval, att->attlen)))
		{
			check_image(newtup, desc,
						DatumGetInt32(heap_getattr(newtup, Anum_change_feed_id, desc, &isnull)));
			break;
		}
	}
	PG_RETURN_POINTER(keep_written_at(oldtup, newtup, desc));
}
