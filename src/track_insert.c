/*-------------------------------------------------------------------------
 *
 * track_insert.c
 *	  Writing one change: a tracked table's, its cfeed.change row with the
 *	  row's image, for the AFTER ROW trigger of track.c; and cfeed.publish's
 *	  (feed.c), without an image, on the shard the caller names.
 *
 * Why not SQL
 * -----------
 * The obvious way, one kept SPI plan that inserts the row, costs several
 * times the tracked row's own INSERT (for cfeed.publish, 2.2x the server
 * CPU of an application's one-row INSERT, against 1.4x written directly),
 * and almost none of it is the writing:
 * per row, executor start-up and shutdown of the plan; the foreign-key check
 * of cfeed.change, which is another SPI query with its own executor start-up;
 * the WHEN clause of change_guard, parsed again (stringToNode) at every
 * executor start; and search_path pinned and restored around the SPI call.
 * So the row is inserted here directly, heap and indexes (direct.c),
 * doing what the INSERT would do:
 *
 *	 privileges		INSERT on cfeed.change for the current user, as the
 *					INSERT checks them (table level; else the SQL path)
 *	 defaults		written_at = now() (the transaction's start),
 *					writer_xid = cfeed._writer_xid() (top-level xid, and the
 *					note that wakes the sweeper at commit)
 *	 change_guard	its WHEN clause is false for these rows (no sequence
 *					number, no stamped_at, writer_xid the current one), so
 *					it would not fire
 *	 foreign key	change_shard_fkey: the shard is one of the feed's, and
 *					cannot go away before this transaction ends (see "The
 *					foreign key" below)
 *	 indexes		every index, partial ones by their predicate, unique
 *					ones checked by the index AM
 *
 * When anything would make that list incomplete (row-level security, other
 * triggers, constraints, indexes or layout: see direct.c), or an executor
 * permission hook (sepgsql) is loaded, the SQL path runs instead, with the
 * exact semantics of the INSERT (test: sql/track_write.sql).  The shard
 * counts of feeds are cached per backend (below).
 *
 * The foreign key
 * ---------------
 * The foreign key's own check locks the shard's row FOR KEY SHARE, after an
 * index lookup: a WAL record and, with concurrent writers, a new multixact
 * on a row all writers of the shard lock.  Instead, since 1.2, the guard
 * trigger of cfeed.shard_config (cfeed_shard_config_guard) makes a shard
 * row that goes away (DELETE, or UPDATE of its key) take a heavyweight lock
 * on its feed's set of shards in exclusive mode, and sends an invalidation
 * of shard_config for every change to the set of shards.  One lock per feed,
 * not per shard: a bulk write to a feed of thousands of shards must not fill
 * the lock table, and deleting a shard is rare enough to wait for all the
 * feed's writers.  A direct writer then:
 *
 *	 1. processes the invalidations that came, takes the feed's shard count
 *		from this backend's memory (read with a fresh snapshot after
 *		shard_config's last invalidation), and the key's shard from it;
 *	 2. takes the feed's shards lock in share mode, until the transaction
 *		ends;
 *	 3. if that lock is new, processes the invalidations that came before
 *		it, and starts again from 1 if shard_config's was among them.
 *
 * cfeed.publish, whose caller names the shard, checks at 1 that it is one of
 * the feed's shards 0..n-1 (the highest is remembered with the count) and
 * otherwise leaves the change to the SQL path, which reports a missing shard
 * or writes to one this backend does not know yet.
 *
 * A transaction that deleted the shard committed either before 3, and its
 * invalidation (sent before its locks are released) is seen there, or after
 * this transaction, having waited for it at its BEFORE trigger; after that
 * its foreign key's check (NO ACTION, at the end of its statement) sees this
 * transaction's change and fails, as with the foreign key's lock.  A lock
 * held already was checked when it was taken, and an aborted subtransaction
 * releases its locks.  When a concurrent deletion renumbers the shards, the
 * writer waits for it and then places the change by the new count (the
 * foreign key would fail with 23503).  Without the guard (a database at 1.0
 * or 1.1 until ALTER EXTENSION UPDATE) changes take the SQL path.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/pg_am.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "optimizer/optimizer.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/xid8.h"

#include "cache.h"
#include "cfeed.h"
#include "shmem.h"

/* Columns of cfeed.shard_config used here. */
#define Anum_shard_feed_id			1
#define Anum_shard_shard			2
#define Anum_shard_sweep_group		3

#define SHARD_GUARD_TRIGGER			"shard_config_guard"

PG_FUNCTION_INFO_V1(cfeed_shard_config_guard);

/* The shards of a feed, valid while gen is shard_counts_gen. */
typedef struct CfeedShardCount
{
	int32		feed_id;		/* hash key */
	int32		count;
	int32		max_shard;		/* -1 when none */
	uint64		gen;
} CfeedShardCount;

static CfeedIndexCache change_indexes;
static HTAB *shard_counts = NULL;
static uint64 shard_counts_gen = 1;	/* bumped by shard_config's invalidations */
static Oid	shard_config_relid = InvalidOid;
static uint64 guard_gen = 0;	/* guard_present holds while it is shard_counts_gen */
static bool guard_present = false;
static SPIPlanPtr insert_plan = NULL;
static SPIPlanPtr insert_plan_1_2 = NULL;	/* a database still at 1.2 or earlier */

/*
 * shard_counts_invalidate
 *		The cache's invalidation callback (cache.c): shard_config (or every
 *		relation) has changed; forget the shard counts and whether the guard
 *		trigger exists.
 */
static void
shard_counts_invalidate(Oid relid)
{
	if (!OidIsValid(relid) || relid == shard_config_relid)
		shard_counts_gen++;
}

/*
 * shard_guard_present
 *		Whether cfeed.shard_config has its guard trigger (from 1.2 on), always
 *		enabled; without it the shard counts are not cached and the direct
 *		path is not taken.
 */
static bool
shard_guard_present(void)
{
	cfeed_cache_register(CFEED_CACHE_SHARD_COUNTS, shard_counts_invalidate);
	if (guard_gen != shard_counts_gen)
	{
		Relation	rel = cfeed_table_open("shard_config", AccessShareLock);
		TriggerDesc *td = rel->trigdesc;
		int			i;

		shard_config_relid = RelationGetRelid(rel);
		guard_present = false;
		for (i = 0; td != NULL && i < td->numtriggers; i++)
		{
			Trigger    *t = &td->triggers[i];

			if (strcmp(t->tgname, SHARD_GUARD_TRIGGER) == 0 &&
				t->tgenabled == TRIGGER_FIRES_ALWAYS &&
				TRIGGER_FOR_ROW(t->tgtype) && TRIGGER_FOR_BEFORE(t->tgtype) &&
				TRIGGER_FOR_INSERT(t->tgtype) && TRIGGER_FOR_DELETE(t->tgtype) &&
				TRIGGER_FOR_UPDATE(t->tgtype) && t->tgqual == NULL)
				guard_present = true;
		}
		table_close(rel, AccessShareLock);
		guard_gen = shard_counts_gen;
	}
	return guard_present;
}

/*
 * feed_shards
 *		The number of shards of a feed and the highest shard number,
 *		remembered until shard_config's next invalidation (the guard trigger
 *		must be present: the caller checks).
 */
static CfeedShardCount *
feed_shards(int32 feed_id)
{
	uint64		gen = shard_counts_gen;
	CfeedShardCount *entry;
	int32		count;
	int32		max_shard;

	if (shard_counts == NULL)
	{
		cfeed_cache_register(CFEED_CACHE_SHARD_COUNTS, shard_counts_invalidate);
		shard_counts = cfeed_cache_hash("cfeed shard counts", sizeof(int32),
										sizeof(CfeedShardCount));
	}
	entry = (CfeedShardCount *) hash_search(shard_counts, &feed_id, HASH_FIND, NULL);
	if (entry != NULL && entry->gen == gen)
		return entry;

	cfeed_feed_shards(feed_id, &count, &max_shard);
	entry = (CfeedShardCount *) hash_search(shard_counts, &feed_id, HASH_ENTER, NULL);
	entry->count = count;
	entry->max_shard = max_shard;
	entry->gen = gen;			/* stale at once if an invalidation came meanwhile */
	return entry;
}

/*
 * shard_count
 *		The number of shards of a feed: remembered when the guard trigger
 *		sends shard_config's invalidations, else read each time (fresh
 *		snapshot; errors as cfeed_feed_shard_count).
 */
static int32
shard_count(int32 feed_id)
{
	CfeedShardCount *entry;

	if (!shard_guard_present())
		return cfeed_feed_shard_count(feed_id);
	entry = feed_shards(feed_id);
	cfeed_check_shard_count(feed_id, entry->count, entry->max_shard);
	return entry->count;
}

/*
 * key_shard
 *		The shard of a key by the feed's shard count as of the last committed
 *		change to the feed's shards (the invalidations that came are read
 *		first), and in *gen the invalidation count it was chosen at.
 */
static int32
key_shard(int32 feed_id, const char *key, int keylen, uint64 *gen)
{
	AcceptInvalidationMessages();
	*gen = shard_counts_gen;
	return cfeed_key_shard(key, keylen, shard_count(feed_id));
}

/*
 * shards_locked
 *		The foreign-key check of a change to a feed (see the file header):
 *		take the feed's shards lock in share mode, then read the
 *		invalidations that came before it.  True when the shards the change
 *		was placed by, as of invalidation count gen, are still current.
 */
static bool
shards_locked(int32 feed_id, uint64 gen)
{
	if (!cfeed_shards_lock(feed_id, AccessShareLock))
		return true;			/* held since it was checked */
	AcceptInvalidationMessages();
	return gen == shard_counts_gen;
}

/*
 * lock_key_shard
 *		The shard of a key, with the foreign-key check of a change to it.
 */
static int32
lock_key_shard(int32 feed_id, const char *key, int keylen)
{
	for (;;)
	{
		uint64		gen;
		int32		shard = key_shard(feed_id, key, keylen, &gen);

		if (shards_locked(feed_id, gen))
			return shard;
	}
}

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
 * cfeed_shard_config_guard
 *		BEFORE INSERT OR DELETE OR UPDATE OF feed_id, shard, sweep_group ...
 *		FOR EACH ROW on cfeed.shard_config (enabled always): a shard that
 *		goes away waits for the direct writers of changes to its feed (the
 *		lock of lock_key_shard, in exclusive mode); a shard that moves to
 *		another sweep group waits for the sweeps of both groups and keeps
 *		them waiting until this transaction ends (the sweep locks); and every
 *		backend forgets its shard counts and sweep watermarks when this
 *		transaction commits (the invalidation, sent before the locks are
 *		released).  Sweep groups are moved by 1.4's trigger, feed_id and
 *		shard by 1.2's.
 */
Datum
cfeed_shard_config_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	TriggerEvent ev;
	bool		key_changed;
	bool		group_changed;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_BEFORE(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("function cfeed._shard_config_guard() must be fired as a BEFORE ROW trigger")));
	ev = trigdata->tg_event;
	key_changed = TRIGGER_FIRED_BY_UPDATE(ev) &&
		(shard_column(trigdata, Anum_shard_feed_id, false) !=
		 shard_column(trigdata, Anum_shard_feed_id, true) ||
		 shard_column(trigdata, Anum_shard_shard, false) !=
		 shard_column(trigdata, Anum_shard_shard, true));
	group_changed = TRIGGER_FIRED_BY_UPDATE(ev) &&
		shard_column(trigdata, Anum_shard_sweep_group, false) !=
		shard_column(trigdata, Anum_shard_sweep_group, true);

	/* an UPDATE that changes neither (cfeed.shard sets sweep_group always) */
	if (TRIGGER_FIRED_BY_UPDATE(ev) && !key_changed && !group_changed)
		return PointerGetDatum(trigdata->tg_newtuple);

	if (TRIGGER_FIRED_BY_DELETE(ev) || key_changed)
		(void) cfeed_shards_lock(shard_column(trigdata, Anum_shard_feed_id, false),
								 AccessExclusiveLock);
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
 * insert_with_sql
 *		The SQL path: one kept plan inserting the change with its image, run
 *		with the caller's privileges, search_path pinned.  Until ALTER
 *		EXTENSION cfeed UPDATE to 1.3 the image goes to cfeed.row_image.
 */
static void
insert_with_sql(int32 feed_id, int32 shard, int64 change_id, Oid tbl,
				const char *op, HeapTuple tuple, TupleDesc desc)
{
	int			spi_level = cfeed_spi_connect();
	Oid			types[6] = {INT4OID, INT4OID, INT8OID, OIDOID, TEXTOID, RECORDOID};
	Datum		values[6];
	SPIPlanPtr *plan = cfeed_images_inline() ? &insert_plan : &insert_plan_1_2;

	if (plan == &insert_plan)
		(void) cfeed_spi_plan(plan,
							  "INSERT INTO cfeed.change (feed_id, shard, change_id, tbl, op, \"row\") "
							  "VALUES ($1, $2, $3, $4::pg_catalog.regclass, $5, pg_catalog.to_jsonb($6))",
							  6, types);
	else
		(void) cfeed_spi_plan(plan,
							  "WITH c AS (INSERT INTO cfeed.change (feed_id, shard, change_id) "
							  "VALUES ($1, $2, $3)) "
							  "INSERT INTO cfeed.row_image (change_id, feed_id, tbl, op, \"row\") "
							  "VALUES ($3, $1, $4::pg_catalog.regclass, $5, pg_catalog.to_jsonb($6))",
							  6, types);
	values[0] = Int32GetDatum(feed_id);
	values[1] = Int32GetDatum(shard);
	values[2] = Int64GetDatum(change_id);
	values[3] = ObjectIdGetDatum(tbl);
	values[4] = CStringGetTextDatum(op);
	values[5] = heap_copy_tuple_as_datum(tuple, desc);
	(void) cfeed_spi_run(plan, values, SPI_OK_INSERT, "publishing a row");
	cfeed_spi_finish(spi_level);
}

/*
 * open_change_direct
 *		Open cfeed.change for a direct insert, or return NULL (nothing open)
 *		when the SQL path must run instead; *indexes as cfeed_direct_ok.
 */
static Relation
open_change_direct(CfeedIndexCache **indexes)
{
	Relation	changerel;

	/* shard_config first, as DROP EXTENSION locks them (no deadlock) */
	(void) cfeed_relid_locked("shard_config", AccessShareLock);
	changerel = cfeed_table_open("change", RowExclusiveLock);

	if (ExecutorCheckPerms_hook != NULL || !shard_guard_present() ||
		!cfeed_direct_ok(changerel, CMD_INSERT, cfeed_change_types, cfeed_change_notnull, CHANGE_NATTS,
						 cfeed_relid("shard_config"), &change_indexes, indexes))
	{
		table_close(changerel, NoLock);
		return NULL;
	}
	return changerel;
}

/*
 * insert_change
 *		Insert one unstamped change into cfeed.change (opened by
 *		open_change_direct, closed here), heap and indexes, with the defaults
 *		of its columns; with the image of row tuple of rel (tracked table tbl
 *		or one of its partitions) and operation op, or without an image when
 *		rel is NULL.
 */
static void
insert_change(Relation changerel, CfeedIndexCache *indexes, int32 feed_id, int32 shard,
			  int64 change_id, Oid tbl, const char *op, Relation rel, HeapTuple tuple)
{
	TupleTableSlot *slot = MakeSingleTupleTableSlot(RelationGetDescr(changerel), &TTSOpsVirtual);

	ExecClearTuple(slot);
	memset(slot->tts_isnull, false, sizeof(bool) * CHANGE_NATTS);
	slot->tts_values[Anum_change_feed_id - 1] = Int32GetDatum(feed_id);
	slot->tts_values[Anum_change_shard - 1] = Int32GetDatum(shard);
	slot->tts_values[Anum_change_change_id - 1] = Int64GetDatum(change_id);
	slot->tts_isnull[Anum_change_sequence - 1] = true;
	slot->tts_isnull[Anum_change_stamped_at - 1] = true;
	slot->tts_values[Anum_change_written_at - 1] =
		TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	slot->tts_values[Anum_change_writer_xid - 1] =
		FullTransactionIdGetDatum(GetTopFullTransactionId());
	if (rel != NULL)
	{
		slot->tts_values[Anum_change_tbl - 1] = ObjectIdGetDatum(tbl);
		slot->tts_values[Anum_change_op - 1] = CStringGetTextDatum(op);
		slot->tts_values[Anum_change_row - 1] =
			cfeed_row_image(RelationGetRelid(rel), tuple, RelationGetDescr(rel));
	}
	else
	{
		slot->tts_isnull[Anum_change_tbl - 1] = true;
		slot->tts_isnull[Anum_change_op - 1] = true;
		slot->tts_isnull[Anum_change_row - 1] = true;
	}
	ExecStoreVirtualTuple(slot);
	cfeed_note_write();
	table_tuple_insert(changerel, slot, GetCurrentCommandId(true), 0, NULL);
	cfeed_direct_index_insert(changerel, indexes, slot);
	ExecDropSingleTupleTableSlot(slot);
	table_close(changerel, NoLock);
}

/*
 * cfeed_track_publish
 *		Publish a change of row tuple of rel (tracked table tbl, or one of
 *		its partitions) to the feed, on the shard of the row's key text:
 *		insert (feed_id, shard, change_id) into cfeed.change, with the row's
 *		image and operation op, as the current user.  Allocates in the
 *		current memory context (the trigger's per-row one).
 */
void
cfeed_track_publish(int32 feed_id, const char *key, int keylen,
					int64 change_id, Oid tbl, const char *op,
					Relation rel, HeapTuple tuple)
{
	CfeedIndexCache *indexes = NULL;
	Relation	changerel = open_change_direct(&indexes);

	if (changerel == NULL)
	{
		uint64		gen;

		insert_with_sql(feed_id, key_shard(feed_id, key, keylen, &gen),
						change_id, tbl, op, tuple, RelationGetDescr(rel));
		return;
	}
	insert_change(changerel, indexes, feed_id, lock_key_shard(feed_id, key, keylen),
				  change_id, tbl, op, rel, tuple);
}

/*
 * cfeed_publish_direct
 *		cfeed.publish's insert of (feed_id, shard, change_id), written
 *		directly as the current user.  Returns false, having written nothing,
 *		when it must run as SQL instead: what open_change_direct refuses, or
 *		a shard that is not among the feed's shards 0..n-1 as this backend
 *		knows them (the SQL path reports a missing one, and writes to a shard
 *		added since, or of a feed whose shards are numbered otherwise).
 */
bool
cfeed_publish_direct(int32 feed_id, int32 shard, int64 change_id)
{
	CfeedIndexCache *indexes = NULL;
	Relation	changerel;
	uint64		gen;

	/* as the executor checks an INSERT */
	PreventCommandIfReadOnly("INSERT");
	PreventCommandIfParallelMode("INSERT");
	changerel = open_change_direct(&indexes);
	if (changerel == NULL)
		return false;
	do
	{
		CfeedShardCount *shards;

		AcceptInvalidationMessages();
		gen = shard_counts_gen;
		shards = feed_shards(feed_id);
		if (shard < 0 || shard >= shards->count || shards->max_shard != shards->count - 1)
		{
			table_close(changerel, NoLock);
			return false;
		}
	} while (!shards_locked(feed_id, gen));

	insert_change(changerel, indexes, feed_id, shard, change_id, InvalidOid, NULL, NULL, NULL);
	return true;
}
