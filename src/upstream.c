/*-------------------------------------------------------------------------
 *
 * upstream.c
 *	  Shards stored in ranges whose numbers come from a publisher: topology
 *	  A of docs/replication.md (portable cursors) for feeds stored in
 *	  ranges.
 *
 *	  The publisher publishes the inserts of cfeed.change and of cfeed.stamp.
 *	  A range change's row is written once, unnumbered, by its writer, and
 *	  each sweep appends a stamp row per shard that names its changes (by
 *	  change_id and writer_xid) with their numbers; the apply brings both
 *	  in commit order, so a change arrives before the stamp that numbers
 *	  it.  On the subscriber, a change that arrives this way into a shard
 *	  stored in ranges, by an apply (or initial copy) of a subscription that
 *	  also carries cfeed.stamp, must not be numbered again by the
 *	  subscriber's sweeper: the guard (guard.c) gives it the writer
 *	  CFEED_UPSTREAM_WRITER in place of the apply's xid.  That xid, the
 *	  frozen one, is below the next_xid of every sweep mark and in no mark's
 *	  running list, so every sweep and count of the subscriber takes the
 *	  change for stamped (as cfeed.adopt_marks' adopted writer) and never
 *	  collects it.  The stamp's BEFORE INSERT trigger (enabled ALWAYS, as
 *	  cfeed's other triggers that the apply must fire; it acts in a logical
 *	  replication worker only) names the same writer for each of its
 *	  changes, so that read_rows and retention, which find a stamp's
 *	  changes by (writer_xid, change_id) in change_pending_idx, find the
 *	  replicated rows; and it wakes the shard's waiters (cfeed.wait,
 *	  read(wait_ms)) and notifies its channel (a longpoll shard's, with the
 *	  stamp's last number) at the apply's commit (notify.c: later if
 *	  PostgreSQL's notification queue is full then, never failing the
 *	  commit).  The subscriber's head, reads and cursors are then the
 *	  publisher's.
 *
 *	  What is refused, stopping the subscription with an error (it retries)
 *	  rather than hold changes no read would see or number twice: a change
 *	  or a stamp for a shard the subscriber does not have (23503: create
 *	  it, and the apply goes on) or stores in rows (0A000); and, past the
 *	  initial copy, a stamp that starts at or below the shard's head (55000:
 *	  the copy was numbered by another source too).  A
 *	  subscription without cfeed.stamp is topology B: its changes take the
 *	  apply's xid and the subscriber numbers them itself.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type_d.h"
#include "commands/trigger.h"
#include "fmgr.h"
#include "replication/logicalworker.h"
#include "replication/worker_internal.h"
#include "utils/array.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/xid8.h"

#include "cfeed.h"
#include "shmem.h"

PG_FUNCTION_INFO_V1(cfeed_stamp_replicated);

/*
 * cfeed_applying_stamps
 *		Whether this backend applies (or copies in) a subscription that
 *		carries cfeed.stamp.
 */
bool
cfeed_applying_stamps(void)
{
	if (!IsLogicalWorker() || MySubscription == NULL || !cfeed_schema_has(CFEED_SCHEMA_RANGES))
		return false;
	return SearchSysCacheExists2(SUBSCRIPTIONRELMAP,
								 ObjectIdGetDatum(cfeed_relid("stamp")),
								 ObjectIdGetDatum(MySubscription->oid));
}

/*
 * upstream_shard
 *		The shard of a row (what: "change", "stamp") that a subscription
 *		carrying cfeed.stamp applies, into *sh (with_head: its head too).
 *		A shard this cluster does not have (23503) or stores in rows (0A000)
 *		stops the apply: a change of it taken with the apply's xid would be
 *		numbered here, and the publisher's stamp would number it again; no
 *		read of a row shard looks at stamps.
 */
static void
upstream_shard(const char *what, int32 feed_id, int32 shard, bool with_head, CfeedShard *sh)
{
	if (!cfeed_shard_fetch(feed_id, shard, NULL, with_head, sh))
		ereport(ERROR,
				(errcode(ERRCODE_FOREIGN_KEY_VIOLATION),
				 errmsg("a replicated %s names shard %d of feed %d, which this cluster does not have",
						what, shard, feed_id),
				 errdetail("The subscription carries cfeed.stamp: the publisher's stamps number the changes here."),
				 errhint("Create the publisher's feeds and shards on the subscriber, stored in ranges; the subscription applies the %s once the shard is there.",
						 what)));
	if (!sh->ranges)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a replicated %s names shard %d of feed %d, which this cluster stores in rows",
						what, shard, feed_id),
				 errdetail("The subscription carries cfeed.stamp: the publisher's stamps number the changes, and reads of a shard stored in rows never look at stamps."),
				 errhint("Create the feed on the subscriber with cfeed.default_storage = ranges, as on the publisher; a feed the subscriber numbers itself needs a subscription without cfeed.stamp.")));
}

/*
 * cfeed_upstream_writer
 *		The writer to give an unnumbered change that a subscription carrying
 *		cfeed.stamp applies into the shard: CFEED_UPSTREAM_WRITER, whose
 *		changes only a publisher's stamp numbers (the shard checked by
 *		upstream_shard).
 */
FullTransactionId
cfeed_upstream_writer(int32 feed_id, int32 shard)
{
	CfeedShard	sh;

	upstream_shard("change", feed_id, shard, false, &sh);
	return CFEED_UPSTREAM_WRITER;
}

/*
 * cfeed_stamp_replicated
 *		BEFORE INSERT on cfeed.stamp for each row, enabled ALWAYS: in a
 *		logical replication worker, a publisher's stamp.  Checks that the
 *		shard is stored in ranges here (upstream_shard) and that the stamp
 *		starts above its head, names CFEED_UPSTREAM_WRITER as the
 *		writer of each of its changes, and wakes the shard's waiters at
 *		commit (and its LISTENers, for a longpoll shard, as a sweep
 *		notifies them).  Any other insert (a sweep's, a restore's) passes as
 *		it is.
 */
Datum
cfeed_stamp_replicated(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = cfeed_trigger_get(fcinfo, "cfeed._stamp_replicated()", "stamp");
	TupleDesc	desc = RelationGetDescr(trigdata->tg_relation);
	HeapTuple	tuple = trigdata->tg_trigtuple;
	bool		feed_null;
	bool		shard_null;
	bool		ids_null;
	bool		first_null;
	bool		last_null;
	int32		feed_id;
	int32		shard;
	Datum		ids;
	Datum		first;
	Datum		last;
	ArrayType  *deltas;
	int			n;
	Datum	   *zeros;
	int			cols[2] = {Anum_stamp_first_writer_xid, Anum_stamp_writer_xid_deltas};
	Datum		values[2];
	bool		nulls[2] = {false, false};
	CfeedShard	sh;

	if (!TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
		elog(ERROR, "cfeed._stamp_replicated() fired for something other than INSERT");
	if (!IsLogicalWorker())
		PG_RETURN_POINTER(tuple);

	feed_id = DatumGetInt32(heap_getattr(tuple, Anum_stamp_feed_id, desc, &feed_null));
	shard = DatumGetInt32(heap_getattr(tuple, Anum_stamp_shard, desc, &shard_null));
	ids = heap_getattr(tuple, Anum_stamp_change_id_deltas, desc, &ids_null);
	first = heap_getattr(tuple, Anum_stamp_first_number, desc, &first_null);
	last = heap_getattr(tuple, Anum_stamp_last_number, desc, &last_null);
	/* a null is NOT NULL's to refuse (23502), after this */
	if (feed_null || shard_null || ids_null)
		PG_RETURN_POINTER(tuple);

	upstream_shard("stamp", feed_id, shard, true, &sh);

	/*
	 * Past the initial copy (whose stamps come in the publisher's heap
	 * order, from where its retention left them) the stamps arrive in
	 * commit order, each above the shard's head here.  One at or below it
	 * meets numbers this cluster issued (changes that arrived before the
	 * subscription carried cfeed.stamp) or another publisher's.  A gap is
	 * no such sign: the publisher's floor rises past a head stamp deleted
	 * by hand or a TRUNCATE (deleted_head, not replicated), and a
	 * subscription made without the initial copy starts at the
	 * publisher's head.
	 */
	if (!am_tablesync_worker() && (first_null || DatumGetInt64(first) <= sh.last_number))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("a replicated stamp of shard %d of feed %d starts at number %s, at or below the shard's head " INT64_FORMAT " here",
						shard, feed_id, first_null ? "null" : psprintf(INT64_FORMAT, DatumGetInt64(first)),
						sh.last_number),
				 errdetail("The subscriber's copy of the shard was numbered by another source too: its own sweeps, or another publisher."),
				 errhint("Rebuild the subscriber's copy: drop the subscription, drop and create the extension and the feeds there, and subscribe again with cfeed.stamp in the publication from the start.")));

	deltas = DatumGetArrayTypeP(ids);
	n = ArrayGetNItems(ARR_NDIM(deltas), ARR_DIMS(deltas));
	zeros = palloc0(sizeof(Datum) * Max(n, 1));
	values[0] = FullTransactionIdGetDatum(CFEED_UPSTREAM_WRITER);
	values[1] = PointerGetDatum(construct_array(zeros, n, INT4OID, sizeof(int32), true, TYPALIGN_INT));
	cfeed_broadcast_at_commit(feed_id, shard);
	if (sh.longpoll && !last_null)
		cfeed_notify_head(&sh, DatumGetInt64(last));
	PG_RETURN_POINTER(heap_modify_tuple_by_cols(tuple, desc, 2, cols, values, nulls));
}
