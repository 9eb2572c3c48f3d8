/*-------------------------------------------------------------------------
 *
 * sweep_report.c
 *	  What the callers of a sweep (cfeed.sweep(), cfeed.sweep_loop() and the
 *	  background sweeper) say of shards that have run out of numbers: a
 *	  sweep leaves their changes pending and lists them in its result
 *	  (sweep.c, "Running out of numbers"); the message names the first, and
 *	  the WARNING (SQLSTATE 22003) says how many changes wait and what to
 *	  do.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "cfeed.h"

/*
 * compare_swept_shard
 *		Order shards by feed_id, shard (qsort).
 */
static int
compare_swept_shard(const void *a, const void *b)
{
	const CfeedSweptShard *x = a;
	const CfeedSweptShard *y = b;

	if (x->feed_id != y->feed_id)
		return x->feed_id < y->feed_id ? -1 : 1;
	if (x->shard != y->shard)
		return x->shard < y->shard ? -1 : 1;
	return 0;
}

/*
 * cfeed_sweep_exhausted_message
 *		The message that names the first shard of a sweep's result that ran
 *		out of numbers (palloc'd; NULL when none did): what cfeed.sweepers
 *		shows as last_error and the warning says.
 */
char *
cfeed_sweep_exhausted_message(CfeedSweepResult *result)
{
	if (result->nexhausted == 0)
		return NULL;
	qsort(result->exhausted, result->nexhausted, sizeof(CfeedSweptShard), compare_swept_shard);
	return psprintf("shard %d of feed %d has run out of sequence numbers",
					result->exhausted[0].shard, result->exhausted[0].feed_id);
}

/*
 * cfeed_sweep_report_exhausted
 *		A WARNING (SQLSTATE 22003) for the shards of a sweep's result that ran
 *		out of numbers, if any: the first is named, with its head and the
 *		changes left pending; the count of the others follows.
 */
void
cfeed_sweep_report_exhausted(CfeedSweepResult *result)
{
	char	   *msg = cfeed_sweep_exhausted_message(result);
	const CfeedSweptShard *x;

	if (msg == NULL)
		return;
	x = &result->exhausted[0];
	ereport(WARNING,
			(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
			 errmsg_internal("%s", msg),
			 errdetail("Its head is " INT64_FORMAT ", and its next number would pass the largest bigint; %d committed change(s) of it stay pending, the other shards of the sweep group are stamped.%s",
					   x->last_number, x->change_count,
					   result->nexhausted > 1
					   ? psprintf("  %d other shard(s) of the group have run out too.", result->nexhausted - 1)
					   : ""),
			 errhint("Write to a new shard or feed from now on, and move or delete the pending changes (DELETE FROM cfeed.change WHERE feed_id = %d AND shard = %d AND change_sequence_number IS NULL).",
					 x->feed_id, x->shard)));
}
