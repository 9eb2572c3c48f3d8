/*-------------------------------------------------------------------------
 *
 * splits.c
 *	  cfeed._read_to_end: whether a cursor has read a closed shard to its
 *	  end, for cfeed._consumed (consumer groups across splits,
 *	  docs/consumer-groups.md "Splits"); cfeed._shard_ended: whether a
 *	  closed shard has ended, the view cfeed.shard's ended;
 *	  cfeed._lease_start: where a consumer group's new lease of a shard
 *	  starts (cfeed.acquire).
 *
 *	  The answers depend on every change of the shard, also those the
 *	  caller may not read (the read policy of cfeed.change hides the
 *	  changes of tables it may not SELECT): a member that does not see a
 *	  parent's last changes must not decide that its group consumed the
 *	  parent, and hand the children out before those changes are read;
 *	  one that does not see a shard's first changes must not start its
 *	  group's lease after them, where every member would skip them.  So
 *	  the shard is probed by direct index access, below the policy, for a
 *	  caller that may read the feed, and only a boolean or a position
 *	  comes out.
 *
 *	  The cheap tests come first: the shard is closed (shard_config), no
 *	  stamped change is after the cursor (one probe of change_sequence_idx,
 *	  or for a shard stored in ranges of its stamps after the cursor and
 *	  the changes they name; not "the cursor is at the head": the head may
 *	  be a number whose change was deleted, which no member can read and
 *	  checkpoint), and only then the scan of the unstamped changes
 *	  (change_pending_idx, not ordered by shard; where the shard's group
 *	  has a mark, those it points at), all in the statement's snapshot.
 *
 *	  ended is that last scan alone, for the view cfeed.shard: where the
 *	  shard's sweep group has a mark, a few probes where it points (the
 *	  mark records which of the group's changes are stamped, those of its
 *	  row shards too: catalog.c), found as a sweep finds it (the latest of
 *	  this cluster, backward in sweep_mark_pkey: not through the dead
 *	  versions a held xmin horizon keeps).  Another cluster's mark, which
 *	  the sweep and read() refuse (55000), makes a range shard's answer
 *	  false rather than an error for the view's readers: which of its
 *	  changes are stamped is unknown until cfeed.adopt_marks(), and a
 *	  reader must not go past it; a row shard's changes without a number
 *	  are then its unstamped ones.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/snapmgr.h"

#include "cfeed.h"

PG_FUNCTION_INFO_V1(cfeed_read_to_end);
PG_FUNCTION_INFO_V1(cfeed_shard_ended);
PG_FUNCTION_INFO_V1(cfeed_lease_start);

/*
 * shard_end
 *		The answer of cfeed._read_to_end (with_cursor: argument 2, after
 *		which nothing may be stamped either) and of cfeed._shard_ended
 *		(without: a range shard whose group has another cluster's mark
 *		answers false rather than 55000); arguments 0 and 1 are the feed
 *		and the shard.
 */
static Datum
shard_end(FunctionCallInfo fcinfo, bool with_cursor)
{
	int32		feed_id = PG_GETARG_INT32(0);
	int32		shard = PG_GETARG_INT32(1);
	Snapshot	snapshot = GetActiveSnapshot();
	CfeedShard	sh;

	if (!cfeed_may_read_feed(feed_id))
		PG_RETURN_NULL();
	if (!cfeed_shard_fetch(feed_id, shard, snapshot, false, &sh) || !sh.closed)
		PG_RETURN_BOOL(false);
	if (with_cursor)
	{
		int64		cursor = PG_GETARG_INT64(2);

		if (sh.ranges ? cfeed_ranges_has_after(feed_id, shard, cursor, snapshot, NULL) :
			cfeed_shard_has_after(feed_id, shard, cursor, snapshot, NULL))
			PG_RETURN_BOOL(false);
	}
	else if (sh.ranges && cfeed_mark_foreign(sh.sweep_group, snapshot))
		PG_RETURN_BOOL(false);
	PG_RETURN_BOOL(!cfeed_shard_has_pending(&sh, snapshot));
}

/*
 * cfeed_read_to_end
 *		SQL: cfeed._read_to_end(feed_id int, shard int, cursor bigint)
 *		returns bool (strict): whether the shard is closed, has no change
 *		after cursor and no unstamped change left (its head can never grow
 *		again); null when the caller may not read the feed, false for a
 *		shard that does not exist.
 */
Datum
cfeed_read_to_end(PG_FUNCTION_ARGS)
{
	return shard_end(fcinfo, true);
}

/*
 * cfeed_shard_ended
 *		SQL: cfeed._shard_ended(feed_id int, shard int) returns bool
 *		(strict): whether the shard is closed and has no unstamped change
 *		left as of the statement's snapshot (its head can never grow
 *		again); false for a shard that does not exist or is open, and for
 *		a range shard whose group has a mark of another cluster (not yet
 *		adopted); null when the caller may not read the feed.
 */
Datum
cfeed_shard_ended(PG_FUNCTION_ARGS)
{
	return shard_end(fcinfo, false);
}

/*
 * cfeed_lease_start
 *		SQL: cfeed._lease_start(feed_id int, shard int) returns bigint
 *		(strict): the position just before the shard's first stored change
 *		as of the statement's snapshot, whoever may read it: the first
 *		numbered row (backfilled history included), else for a range
 *		shard the first change its stamps number that is still stored, as
 *		read() gives them to a caller that sees every change.  Null when
 *		the shard stores none (the lease starts at its head), when the
 *		caller may not read the feed, or when the shard does not exist.  A
 *		range shard's group with another cluster's mark is refused (55000)
 *		as read() refuses it.
 */
Datum
cfeed_lease_start(PG_FUNCTION_ARGS)
{
	int32		feed_id = PG_GETARG_INT32(0);
	int32		shard = PG_GETARG_INT32(1);
	Snapshot	snapshot = GetActiveSnapshot();
	CfeedShard	sh;
	int64		first;

	if (!cfeed_may_read_feed(feed_id) || !cfeed_shard_fetch(feed_id, shard, snapshot, false, &sh))
		PG_RETURN_NULL();
	if (!cfeed_shard_has_after(feed_id, shard, PG_INT64_MIN, snapshot, &first))
	{
		CfeedMark	mark;

		if (!sh.ranges)
			PG_RETURN_NULL();
		(void) cfeed_mark_load(sh.sweep_group, snapshot, &mark);
		if (!cfeed_ranges_has_after(feed_id, shard, PG_INT64_MIN, snapshot, &first))
			PG_RETURN_NULL();
	}
	PG_RETURN_INT64(Max(first, PG_INT64_MIN + 1) - 1);
}
