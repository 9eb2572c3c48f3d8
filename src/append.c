/*-------------------------------------------------------------------------
 *
 * append.c
 *	  Appending one unstamped change to cfeed.change: the one routine that
 *	  writes a change, for cfeed.publish (feed.c: the shard its caller
 *	  names, no image) and for a tracked table's AFTER ROW trigger
 *	  (track_trigger.c: the shard of the row's key, with the row's image).
 *
 * Why not SQL
 * -----------
 * The obvious way, one kept SPI plan that inserts the row, costs several
 * times the tracked row's own INSERT (for cfeed.publish, 2.2x the server
 * CPU of an application's one-row INSERT, against 1.4x written directly),
 * and almost none of it is the writing:
 * per row, executor start-up and shutdown of the plan; change_guard's call
 * (in a database not yet updated, whose cfeed.change still has its foreign
 * key, that key's check, another SPI query with its own executor start-up,
 * and change_guard's WHEN clause, parsed again (stringToNode) at every
 * executor start); and search_path pinned and restored around the SPI call.
 * So the row is inserted directly, heap and indexes (direct.c),
 * doing what the INSERT would do:
 *
 *	 privileges		INSERT on cfeed.change for the current user, as the
 *					INSERT checks them (table level; else the SQL path)
 *	 defaults		written_at = now() (the transaction's start),
 *					writer_xid = cfeed._writer_xid() (top-level xid, and the
 *					note that wakes the sweeper at commit)
 *	 change_guard	fires for every row, and for these only checks the
 *					shard (below); in a database not yet updated its WHEN
 *					clause is false for these rows (no sequence number, no
 *					stamped_at, writer_xid the current one), so it does
 *					not fire
 *	 shard check	change_guard's (in a database not yet updated, the
 *					foreign key change_shard_fkey's): the shard is one of
 *					the feed's, and cannot go away before this transaction
 *					ends (the feed's shards lock, shards.c)
 *	 indexes		every index, partial ones by their predicate, unique
 *					ones checked by the index AM
 *
 * When anything would make that list incomplete (row-level security, other
 * triggers, constraints, indexes or layout: see direct.c), or an executor
 * permission hook (sepgsql) is loaded, the SQL path runs instead, with the
 * exact semantics of the INSERT (test: sql/track_write.sql).  So does a
 * cfeed.publish to a shard this backend does not know as one of the feed's
 * shards 0..n-1 (the SQL reports a missing one, or writes to one added
 * since), and every change in a database whose cfeed.shard_config has no
 * guard trigger yet (not yet updated).
 *
 * Locking: the direct path holds the feed's shards lock in share mode until
 * the transaction ends (shards.c), and locks cfeed.shard_config before
 * cfeed.change, in the order of DROP EXTENSION.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
#include "utils/xid8.h"

#include "cfeed.h"
#include "shmem.h"

/* Saved plans (cache.h): publish's INSERT, and a tracked row's. */
static SPIPlanPtr publish_plan = NULL;
static SPIPlanPtr insert_plan = NULL;
static SPIPlanPtr insert_plan_no_images = NULL;	/* cfeed.change without image columns */

/*
 * append_with_sql
 *		The SQL path: one kept plan inserting the change, run with the
 *		caller's privileges, search_path pinned.  cfeed.publish's names its
 *		shard, which must exist (42704 otherwise); a tracked change goes to
 *		its key's shard with its image, into cfeed.row_image in a database
 *		whose cfeed.change has no image columns yet (not yet updated).
 */
static void
append_with_sql(const CfeedChange *change)
{
	int			spi_level;
	Oid			types[6] = {INT4OID, INT4OID, INT8OID, OIDOID, TEXTOID, JSONBOID};
	Datum		values[6];
	SPIPlanPtr *plan;
	CfeedImageScope previous;

	values[0] = Int32GetDatum(change->feed_id);
	values[2] = Int64GetDatum(change->change_id);
	if (change->rel == NULL)
	{
		CfeedShard	sh;

		cfeed_shard_get(change->feed_id, change->shard, false, &sh);
		values[1] = Int32GetDatum(change->shard);
		spi_level = cfeed_spi_connect();
		(void) cfeed_spi_plan(&publish_plan, "INSERT INTO cfeed.change (feed_id, shard, change_id) "
							  "VALUES ($1, $2, $3)", 3, types);
		(void) cfeed_spi_run(&publish_plan, values, SPI_OK_INSERT, "cfeed.publish's insert");
		cfeed_spi_finish(spi_level);
		return;
	}

	values[1] = Int32GetDatum(cfeed_shard_of_key(change->feed_id, change->key, change->keylen));
	spi_level = cfeed_spi_connect();
	plan = cfeed_schema_has(CFEED_SCHEMA_INLINE_IMAGES) ? &insert_plan : &insert_plan_no_images;
	if (plan == &insert_plan)
		(void) cfeed_spi_plan(plan,
							  "INSERT INTO cfeed.change (feed_id, shard, change_id, tbl, op, \"row\") "
							  "VALUES ($1, $2, $3, $4::pg_catalog.regclass, $5, $6)",
							  6, types);
	else
		(void) cfeed_spi_plan(plan,
							  "WITH c AS (INSERT INTO cfeed.change (feed_id, shard, change_id) "
							  "VALUES ($1, $2, $3)) "
							  "INSERT INTO cfeed.row_image (change_id, feed_id, tbl, op, \"row\") "
							  "VALUES ($3, $1, $4::pg_catalog.regclass, $5, $6)",
							  6, types);
	values[3] = ObjectIdGetDatum(change->tbl);
	values[4] = CStringGetTextDatum(change->op);
	values[5] = cfeed_row_image(RelationGetRelid(change->rel), change->tuple,
								RelationGetDescr(change->rel));
	/* the image is made before: no code of the caller's runs in its scope */
	previous = cfeed_image_scope_enter(change->tbl, change->feed_id);
	PG_TRY();
	{
		(void) cfeed_spi_run(plan, values, SPI_OK_INSERT, "publishing a row");
	}
	PG_FINALLY();
	{
		cfeed_image_scope_leave(previous);
	}
	PG_END_TRY();
	cfeed_spi_finish(spi_level);
}

/*
 * open_change_direct
 *		Open cfeed.change for a direct insert, or return NULL (nothing open)
 *		when the SQL path must run instead.
 */
static Relation
open_change_direct(void)
{
	Relation	changerel;

	/* shard_config first, as DROP EXTENSION locks them (no deadlock) */
	(void) cfeed_relid_locked("shard_config", AccessShareLock);
	changerel = cfeed_table_open("change", RowExclusiveLock);

	if (!cfeed_shards_guarded() || !cfeed_direct_ok(changerel, CMD_INSERT))
	{
		table_close(changerel, NoLock);
		return NULL;
	}
	return changerel;
}

/*
 * insert_change
 *		Insert the change into cfeed.change (opened by open_change_direct,
 *		closed here) on shard, heap and indexes, with the defaults of its
 *		columns, and its image when it has one.  Allocates in the current
 *		memory context.
 */
static void
insert_change(Relation changerel, const CfeedChange *change, int32 shard)
{
	TupleTableSlot *slot = MakeSingleTupleTableSlot(RelationGetDescr(changerel), &TTSOpsVirtual);

	ExecClearTuple(slot);
	memset(slot->tts_isnull, false, sizeof(bool) * CHANGE_NATTS);
	slot->tts_values[Anum_change_feed_id - 1] = Int32GetDatum(change->feed_id);
	slot->tts_values[Anum_change_shard - 1] = Int32GetDatum(shard);
	slot->tts_values[Anum_change_change_id - 1] = Int64GetDatum(change->change_id);
	slot->tts_isnull[Anum_change_sequence - 1] = true;
	slot->tts_isnull[Anum_change_stamped_at - 1] = true;
	slot->tts_values[Anum_change_written_at - 1] =
		TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	slot->tts_values[Anum_change_writer_xid - 1] =
		FullTransactionIdGetDatum(GetTopFullTransactionId());
	if (change->rel != NULL)
	{
		slot->tts_values[Anum_change_tbl - 1] = ObjectIdGetDatum(change->tbl);
		slot->tts_values[Anum_change_op - 1] = CStringGetTextDatum(change->op);
		slot->tts_values[Anum_change_row - 1] =
			cfeed_row_image(RelationGetRelid(change->rel), change->tuple,
							RelationGetDescr(change->rel));
	}
	else
	{
		slot->tts_isnull[Anum_change_tbl - 1] = true;
		slot->tts_isnull[Anum_change_op - 1] = true;
		slot->tts_isnull[Anum_change_row - 1] = true;
	}
	ExecStoreVirtualTuple(slot);

	/*
	 * The shard check of a direct write: the feed's shards lock, held in
	 * share mode until the transaction ends, keeps the shard from going away
	 * (cfeed_shard_locked took it).  The row is unstamped.
	 */
	Assert(shard >= 0 && cfeed_shards_lock_held(change->feed_id, AccessShareLock));
	Assert(slot->tts_isnull[Anum_change_sequence - 1] &&
		   slot->tts_isnull[Anum_change_stamped_at - 1]);
	cfeed_change_ids_guard();
	cfeed_note_write();
	cfeed_direct_insert(changerel, slot);
	ExecDropSingleTupleTableSlot(slot);
	table_close(changerel, NoLock);
}

/*
 * cfeed_append
 *		Append the change as the current user: directly when direct.c and
 *		the shards lock allow it, else by an INSERT (see the file header).
 *		cfeed.publish (no image) is checked first as the executor checks an
 *		INSERT; a tracked change is part of a statement checked already.
 *		Either needs the current user's write grant on the feed (42501).
 */
void
cfeed_append(const CfeedChange *change)
{
	Relation	changerel;
	int32		shard;

	if (change->rel == NULL)
	{
		PreventCommandIfReadOnly("INSERT");
		PreventCommandIfParallelMode("INSERT");
	}
	cfeed_check_write(change->feed_id);
	changerel = open_change_direct();
	if (changerel != NULL)
	{
		shard = cfeed_shard_locked(change->feed_id, change->key, change->keylen,
								   change->shard);
		if (shard >= 0)
		{
			insert_change(changerel, change, shard);
			return;
		}
		table_close(changerel, NoLock);
	}
	append_with_sql(change);
}
