/*-------------------------------------------------------------------------
 *
 * track_insert.c
 *	  Writing one change of a tracked table: its cfeed.change row and its
 *	  cfeed.row_image, for the AFTER ROW trigger of track.c.
 *
 * Why not SQL
 * -----------
 * The obvious way, one kept SPI plan that inserts both rows, costs several
 * times the tracked row's own INSERT, and almost none of it is the writing:
 * per row, executor start-up and shutdown of the plan; the foreign-key check
 * of cfeed.change, which is another SPI query with its own executor start-up;
 * the WHEN clause of change_guard, parsed again (stringToNode) at every
 * executor start; and search_path pinned and restored around the SPI call.
 * So the rows are inserted here directly, heap and indexes, doing what the
 * INSERT would do:
 *
 *	 privileges		INSERT on both tables for the current user, as the
 *					INSERT checks them (table level; see the fallback)
 *	 defaults		written_at = now() (the transaction's start),
 *					writer_xid = cfeed._writer_xid() (top-level xid, and the
 *					note that wakes the sweeper at commit)
 *	 change_guard	its WHEN clause is false for these rows (no sequence
 *					number, no stamped_at, writer_xid the current one), so
 *					it would not fire
 *	 foreign key	change_shard_fkey: the shard_config row is looked up with
 *					a fresh snapshot and locked FOR KEY SHARE as the RI
 *					trigger's query does (a concurrent DELETE of the shard
 *					waits for this transaction, then finds the change); see
 *					lock_key_shard
 *	 indexes		every index, partial ones by their predicate, unique
 *					ones checked by the index AM
 *
 * When anything would make that list incomplete, the SQL path runs instead:
 * row-level security enabled on either table, a trigger on them other than
 * the two above, CHECK constraints or generated columns, an index that is
 * not a plain immediate btree (expression, exclusion and deferrable indexes
 * need the executor; other access methods may keep per-query state in their
 * IndexInfo, which is cached here), a table access method other than heap,
 * a column layout other than the install script's, an executor permission
 * hook (sepgsql), or INSERT granted only on columns.  Those are cases a DBA
 * creates deliberately; the SQL path then gives their exact semantics
 * (test: sql/track_write.sql).
 *
 * Caching
 * -------
 * Per backend, for each of the two tables: the IndexInfo of its indexes,
 * rebuilt when the relation's index list changes (a new index has a new OID;
 * an index's definition never changes under its OID), and the prepared
 * predicates.  Everything else (triggers, RLS, privileges, indisready) is
 * read from the relations, opened per row: relations cannot stay open past
 * the statement, whose end a row trigger does not see.
 *
 * The statement's first change for a feed reads all the feed's shard rows
 * with one index scan, which gives the shard count (for the key's shard)
 * and the row to lock.  The lock is then taken once per (feed, shard) until
 * the subtransaction or the command changes: a lock taken by this
 * transaction holds until it ends unless a subtransaction that took it
 * aborts (hence the subtransaction id), and only a command of this backend
 * could delete the shard meanwhile (hence the command id: any statement run
 * between two rows, e.g. by another trigger, advances it, because the rows
 * inserted here use it).  A bulk INSERT thus locks each shard once, and a
 * single-row INSERT pays one index scan of the feed's shards and one lock.
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
#include "executor/executor.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "optimizer/optimizer.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/xid8.h"

#include "cfeed.h"
#include "shmem.h"

/* Columns of cfeed.change and cfeed.row_image, fixed by the install script. */
#define CHANGE_NATTS				7
#define Anum_change_feed_id			1
#define Anum_change_shard			2
#define Anum_change_change_id		3
#define Anum_change_sequence		4
#define Anum_change_stamped_at		5
#define Anum_change_written_at		6
#define Anum_change_writer_xid		7

#define IMAGE_NATTS					5
#define Anum_image_change_id		1
#define Anum_image_feed_id			2
#define Anum_image_tbl				3
#define Anum_image_op				4
#define Anum_image_row				5

/* Columns of cfeed.shard_config used here. */
#define Anum_shard_feed_id			1
#define Anum_shard_shard			2

#define CHANGE_GUARD_TRIGGER		"change_guard"

static const Oid change_types[CHANGE_NATTS] =
{INT4OID, INT4OID, INT8OID, INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID, XID8OID};
static const Oid image_types[IMAGE_NATTS] =
{INT8OID, INT4OID, REGCLASSOID, TEXTOID, JSONBOID};

/* The indexes of one target table, as last seen. */
typedef struct CfeedIndexCache
{
	Oid			relid;			/* InvalidOid: not built */
	List	   *indexoids;		/* the index list the entries were built for */
	int			nindexes;
	Oid		   *oids;
	IndexInfo **infos;			/* ii_PredicateState prepared */
	bool		direct_ok;		/* all plain immediate btrees */
	MemoryContext cxt;
} CfeedIndexCache;

/* A (feed, shard) this transaction holds a KEY SHARE lock on. */
typedef struct CfeedShardLockKey
{
	int32		feed_id;
	int32		shard;
} CfeedShardLockKey;

typedef struct CfeedShardLock
{
	CfeedShardLockKey key;
	LocalTransactionId lxid;	/* valid while all three are current */
	SubTransactionId subxid;
	CommandId	cid;
} CfeedShardLock;

static CfeedIndexCache change_indexes;
static CfeedIndexCache image_indexes;
static HTAB *shard_locks = NULL;
static ExprContext *predicate_econtext = NULL;
static SPIPlanPtr insert_plan = NULL;

/*
 * layout_matches
 *		Whether a table has exactly the columns the direct path builds.
 */
static bool
layout_matches(Relation rel, const Oid *types, int natts)
{
	TupleDesc	desc = RelationGetDescr(rel);
	int			i;

	if (desc->natts != natts)
		return false;
	for (i = 0; i < natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped || att->atttypid != types[i])
			return false;
	}
	return true;
}

/*
 * insert_triggers_known
 *		Whether every INSERT trigger of rel is one the direct path stands in
 *		for: cfeed.change's foreign-key check against shard_config (not
 *		deferred: the direct path checks at once) and its change_guard (pass
 *		InvalidOid for a table that must have none).
 */
static bool
insert_triggers_known(Relation rel, Oid shard_config)
{
	TriggerDesc *td = rel->trigdesc;
	int			i;

	if (td == NULL)
		return true;
	for (i = 0; i < td->numtriggers; i++)
	{
		Trigger    *t = &td->triggers[i];

		if (!TRIGGER_FOR_INSERT(t->tgtype))
			continue;
		if (!OidIsValid(shard_config))
			return false;
		if (t->tgisinternal && t->tgfoid == F_RI_FKEY_CHECK_INS &&
			t->tgconstrrelid == shard_config && !t->tgdeferrable)
			continue;
		if (!t->tgisinternal && strcmp(t->tgname, CHANGE_GUARD_TRIGGER) == 0 &&
			TRIGGER_FOR_ROW(t->tgtype) && TRIGGER_FOR_BEFORE(t->tgtype) &&
			t->tgqual != NULL)
			continue;
		return false;
	}
	return true;
}

/*
 * index_cache_get
 *		The index cache of rel, rebuilt when its index list has changed.
 */
static CfeedIndexCache *
index_cache_get(CfeedIndexCache *c, Relation rel)
{
	List	   *indexoids = RelationGetIndexList(rel);
	MemoryContext old;
	ListCell   *lc;
	int			i = 0;

	if (c->relid == RelationGetRelid(rel) && equal(indexoids, c->indexoids))
	{
		list_free(indexoids);
		return c;
	}

	if (c->cxt == NULL)
		c->cxt = AllocSetContextCreate(TopMemoryContext, "cfeed track indexes",
									   ALLOCSET_SMALL_SIZES);
	c->relid = InvalidOid;
	MemoryContextReset(c->cxt);
	old = MemoryContextSwitchTo(c->cxt);
	c->indexoids = list_copy(indexoids);
	c->nindexes = list_length(indexoids);
	c->oids = palloc(sizeof(Oid) * Max(c->nindexes, 1));
	c->infos = palloc(sizeof(IndexInfo *) * Max(c->nindexes, 1));
	c->direct_ok = true;
	foreach(lc, indexoids)
	{
		Relation	idx = index_open(lfirst_oid(lc), RowExclusiveLock);
		IndexInfo  *info = BuildIndexInfo(idx);

		if (idx->rd_rel->relam != BTREE_AM_OID || info->ii_Expressions != NIL ||
			info->ii_ExclusionOps != NULL || !idx->rd_index->indimmediate)
			c->direct_ok = false;
		if (info->ii_Predicate != NIL)
			info->ii_PredicateState =
				ExecInitQual((List *) expression_planner((Expr *) info->ii_Predicate), NULL);
		c->oids[i] = RelationGetRelid(idx);
		c->infos[i] = info;
		i++;
		index_close(idx, NoLock);
	}
	MemoryContextSwitchTo(old);
	list_free(indexoids);
	c->relid = RelationGetRelid(rel);
	return c;
}

/*
 * direct_ok
 *		Whether rows of rel can be inserted directly by the current user with
 *		the semantics of an INSERT (see the file header).  Fills *indexes.
 */
static bool
direct_ok(Relation rel, CfeedIndexCache *cache, const Oid *types, int natts,
		  Oid shard_config, CfeedIndexCache **indexes)
{
	TupleConstr *constr = RelationGetDescr(rel)->constr;

	if (rel->rd_rel->relkind != RELKIND_RELATION ||
		rel->rd_rel->relam != HEAP_TABLE_AM_OID ||
		rel->rd_rel->relrowsecurity ||
		!layout_matches(rel, types, natts) ||
		(constr != NULL && (constr->num_check > 0 || constr->has_generated_stored)) ||
		!insert_triggers_known(rel, shard_config))
		return false;
	if (pg_class_aclcheck(RelationGetRelid(rel), GetUserId(), ACL_INSERT) != ACLCHECK_OK)
		return false;
	*indexes = index_cache_get(cache, rel);
	return (*indexes)->direct_ok;
}

/*
 * shard_lock_held
 *		Whether this transaction is known to hold the KEY SHARE lock on the
 *		shard's row (see the file header for when the cache entry holds).
 */
static bool
shard_lock_held(int32 feed_id, int32 shard)
{
	CfeedShardLockKey key;
	CfeedShardLock *entry;

	if (shard_locks == NULL)
		return false;
	memset(&key, 0, sizeof(key));
	key.feed_id = feed_id;
	key.shard = shard;
	entry = (CfeedShardLock *) hash_search(shard_locks, &key, HASH_FIND, NULL);
	return entry != NULL && entry->lxid == CFEED_MY_LXID &&
		entry->subxid == GetCurrentSubTransactionId() &&
		entry->cid == GetCurrentCommandId(false);
}

/*
 * report_missing_shard
 *		The foreign key's error, 23503, for a change to a missing shard.
 */
static void
pg_attribute_noreturn()
report_missing_shard(int32 feed_id, int32 shard, Relation changerel)
{
	ereport(ERROR,
			(errcode(ERRCODE_FOREIGN_KEY_VIOLATION),
			 errmsg("shard %d of feed %d does not exist", shard, feed_id),
			 errdetail("A change of a tracked table cannot be published to it (foreign key \"change_shard_fkey\")."),
			 errhint("Do not delete shards of a feed that tracks a table."),
			 errtableconstraint(changerel, "change_shard_fkey")));
}

/*
 * lock_shard_tuple
 *		The foreign key's lock: lock the shard_config row at tid (found with
 *		snapshot, still registered) FOR KEY SHARE, as RI_FKey_check's SELECT
 *		... FOR KEY SHARE does: following a concurrent update in READ
 *		COMMITTED, failing with a serialization error in REPEATABLE READ and
 *		SERIALIZABLE.  23503 when the row is gone; remembers the lock.
 */
static void
lock_shard_tuple(Relation rel, ItemPointer tid, Snapshot snapshot,
				 int32 feed_id, int32 shard, Relation changerel)
{
	uint8		flags = TUPLE_LOCK_FLAG_LOCK_UPDATE_IN_PROGRESS;
	TupleTableSlot *slot = table_slot_create(rel, NULL);
	TM_FailureData tmfd;
	TM_Result	res;
	bool		exists = false;
	bool		isnull;
	CfeedShardLockKey key;
	CfeedShardLock *entry;

	if (!IsolationUsesXactSnapshot())
		flags |= TUPLE_LOCK_FLAG_FIND_LAST_VERSION;
	res = table_tuple_lock(rel, tid, snapshot, slot, GetCurrentCommandId(true),
						   LockTupleKeyShare, LockWaitBlock, flags, &tmfd);
	switch (res)
	{
		case TM_Ok:
			/* A followed update could have changed the key. */
			exists = DatumGetInt32(slot_getattr(slot, Anum_shard_feed_id, &isnull)) == feed_id &&
				DatumGetInt32(slot_getattr(slot, Anum_shard_shard, &isnull)) == shard;
			break;
		case TM_SelfModified:
			/* Changed by this very command: gone, as for ExecLockRows. */
			break;
		case TM_Updated:
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not serialize access due to concurrent update")));
			break;
		case TM_Deleted:
			if (IsolationUsesXactSnapshot())
				ereport(ERROR,
						(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
						 errmsg("could not serialize access due to concurrent delete")));
			break;
		default:
			elog(ERROR, "cfeed: unexpected result %d locking shard %d of feed %d",
				 (int) res, shard, feed_id);
	}
	ExecDropSingleTupleTableSlot(slot);
	if (!exists)
		report_missing_shard(feed_id, shard, changerel);

	if (shard_locks == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(CfeedShardLockKey);
		ctl.entrysize = sizeof(CfeedShardLock);
		shard_locks = hash_create("cfeed shard locks", 16, &ctl,
								  HASH_ELEM | HASH_BLOBS);
	}
	memset(&key, 0, sizeof(key));
	key.feed_id = feed_id;
	key.shard = shard;
	entry = (CfeedShardLock *) hash_search(shard_locks, &key, HASH_ENTER, NULL);
	entry->lxid = CFEED_MY_LXID;
	entry->subxid = GetCurrentSubTransactionId();
	entry->cid = GetCurrentCommandId(false);
}

/*
 * lock_key_shard
 *		The shard of a key, with the foreign-key check of a change to it: the
 *		shard_config row locked FOR KEY SHARE.  The statement's first change
 *		for the feed reads all the feed's shards with one index scan, counts
 *		them (errors as cfeed_feed_shard_count) and locks the key's; later
 *		ones look up the key's shard unless its lock is held already.  A
 *		fresh snapshot, like cfeed's other lookups in its catalogs.
 */
static int32
lock_key_shard(CfeedTrackFeed *feed, const char *key, int keylen, Relation changerel)
{
	int32		shard = -1;
	Relation	rel;
	Snapshot	snapshot;
	SysScanDesc scan;
	ScanKeyData keys[2];
	HeapTuple	tup;
	ItemPointerData tid;
	bool		found = false;

	if (feed->shard_count > 0)
	{
		shard = cfeed_key_shard(key, keylen, feed->shard_count);
		if (shard_lock_held(feed->feed_id, shard))
			return shard;
	}

	rel = table_open(cfeed_relid("shard_config"), RowShareLock);
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	ScanKeyInit(&keys[0], Anum_shard_feed_id, BTEqualStrategyNumber,
				F_INT4EQ, Int32GetDatum(feed->feed_id));
	ScanKeyInit(&keys[1], Anum_shard_shard, BTEqualStrategyNumber,
				F_INT4EQ, Int32GetDatum(shard));
	scan = systable_beginscan(rel, cfeed_relid("shard_config_pkey"), true, snapshot,
							  feed->shard_count > 0 ? 2 : 1, keys);
	if (feed->shard_count > 0)
	{
		tup = systable_getnext(scan);
		if ((found = HeapTupleIsValid(tup)))
			tid = tup->t_self;
	}
	else
	{
		/*
		 * Every shard's row.  A tid stays valid after the scan: a tuple
		 * visible to a registered snapshot cannot be pruned away.
		 */
		int32		count = 0;
		int32		max_shard = -1;
		int			allocated = 16;
		ItemPointerData *tids = palloc(sizeof(ItemPointerData) * allocated);
		int32	   *shards = palloc(sizeof(int32) * allocated);
		int			i;

		while (HeapTupleIsValid(tup = systable_getnext(scan)))
		{
			bool		isnull;

			if (count == allocated)
			{
				allocated *= 2;
				tids = repalloc(tids, sizeof(ItemPointerData) * allocated);
				shards = repalloc(shards, sizeof(int32) * allocated);
			}
			shards[count] = DatumGetInt32(heap_getattr(tup, Anum_shard_shard,
													   RelationGetDescr(rel), &isnull));
			tids[count] = tup->t_self;
			max_shard = Max(max_shard, shards[count]);
			count++;
		}
		cfeed_check_shard_count(feed->feed_id, count, max_shard);
		shard = cfeed_key_shard(key, keylen, count);
		for (i = 0; i < count; i++)
		{
			if (shards[i] == shard)
			{
				tid = tids[i];
				found = true;
			}
		}
		feed->shard_count = count;
	}
	systable_endscan(scan);

	if (!found)
		report_missing_shard(feed->feed_id, shard, changerel);
	if (!shard_lock_held(feed->feed_id, shard))
		lock_shard_tuple(rel, &tid, snapshot, feed->feed_id, shard, changerel);
	UnregisterSnapshot(snapshot);
	table_close(rel, NoLock);
	return shard;
}

/*
 * insert_direct
 *		Insert the row in slot into rel and its indexes (see the header for
 *		what the caller has checked).
 */
static void
insert_direct(Relation rel, CfeedIndexCache *indexes, TupleTableSlot *slot)
{
	int			i;

	table_tuple_insert(rel, slot, GetCurrentCommandId(true), 0, NULL);

	if (predicate_econtext == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		predicate_econtext = CreateStandaloneExprContext();
		MemoryContextSwitchTo(old);
	}
	predicate_econtext->ecxt_scantuple = slot;

	for (i = 0; i < indexes->nindexes; i++)
	{
		IndexInfo  *info = indexes->infos[i];
		Relation	idx = index_open(indexes->oids[i], RowExclusiveLock);
		Datum		values[INDEX_MAX_KEYS];
		bool		isnull[INDEX_MAX_KEYS];

		/* indisready is read per row: CREATE INDEX CONCURRENTLY flips it. */
		if (idx->rd_index->indisready &&
			(info->ii_PredicateState == NULL ||
			 ExecQual(info->ii_PredicateState, predicate_econtext)))
		{
			FormIndexDatum(info, slot, NULL, values, isnull);
			cfeed_index_insert(idx, values, isnull, &slot->tts_tid, rel,
							   idx->rd_index->indisunique ? UNIQUE_CHECK_YES : UNIQUE_CHECK_NO,
							   info);
		}
		index_close(idx, NoLock);
		ResetExprContext(predicate_econtext);
	}
	predicate_econtext->ecxt_scantuple = NULL;
}

/*
 * insert_with_sql
 *		The SQL path: one kept plan inserting both rows, run with the
 *		caller's privileges, search_path pinned.
 */
static void
insert_with_sql(int32 feed_id, int32 shard, int64 change_id, Oid tbl,
				const char *op, HeapTuple tuple, TupleDesc desc)
{
	int			spi_level = cfeed_spi_connect();
	Datum		values[6];
	int			rc;

	if (insert_plan == NULL)
	{
		Oid			types[6] = {INT4OID, INT4OID, INT8OID, OIDOID, TEXTOID, RECORDOID};
		SPIPlanPtr	plan;

		plan = SPI_prepare("WITH c AS (INSERT INTO cfeed.change (feed_id, shard, change_id) "
						   "VALUES ($1, $2, $3)) "
						   "INSERT INTO cfeed.row_image (change_id, feed_id, tbl, op, \"row\") "
						   "VALUES ($3, $1, $4::pg_catalog.regclass, $5, pg_catalog.to_jsonb($6))",
						   6, types);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		insert_plan = plan;
	}
	values[0] = Int32GetDatum(feed_id);
	values[1] = Int32GetDatum(shard);
	values[2] = Int64GetDatum(change_id);
	values[3] = ObjectIdGetDatum(tbl);
	values[4] = CStringGetTextDatum(op);
	values[5] = heap_copy_tuple_as_datum(tuple, desc);
	rc = SPI_execute_plan(insert_plan, values, NULL, false, 0);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "cfeed: publishing a row failed: %s", SPI_result_code_string(rc));
	cfeed_spi_finish(spi_level);
}

/*
 * cfeed_track_publish
 *		Publish a change of row tuple of rel (tracked table tbl, or one of
 *		its partitions) to the feed, on the shard of the row's key text:
 *		insert (feed_id, shard, change_id) into cfeed.change and the row's
 *		image, with operation op, into cfeed.row_image, as the current user.  feed->shard_count is filled in
 *		at the statement's first change.  Allocates in the current memory
 *		context (the trigger's per-row one).
 */
void
cfeed_track_publish(CfeedTrackFeed *feed, const char *key, int keylen,
					int64 change_id, Oid tbl, const char *op,
					Relation rel, HeapTuple tuple)
{
	TupleDesc	desc = RelationGetDescr(rel);
	Relation	changerel;
	Relation	imagerel;
	CfeedIndexCache *change_idx = NULL;
	CfeedIndexCache *image_idx = NULL;
	TupleTableSlot *slot;
	int32		shard;

	changerel = table_open(cfeed_relid("change"), RowExclusiveLock);
	imagerel = table_open(cfeed_relid("row_image"), RowExclusiveLock);
	if (ExecutorCheckPerms_hook != NULL ||
		!direct_ok(changerel, &change_indexes, change_types, CHANGE_NATTS,
				   cfeed_relid("shard_config"), &change_idx) ||
		!direct_ok(imagerel, &image_indexes, image_types, IMAGE_NATTS,
				   InvalidOid, &image_idx))
	{
		table_close(imagerel, NoLock);
		table_close(changerel, NoLock);
		if (feed->shard_count == 0)
			feed->shard_count = cfeed_feed_shard_count(feed->feed_id);
		insert_with_sql(feed->feed_id, cfeed_key_shard(key, keylen, feed->shard_count),
						change_id, tbl, op, tuple, desc);
		return;
	}

	shard = lock_key_shard(feed, key, keylen, changerel);

	slot = MakeSingleTupleTableSlot(RelationGetDescr(changerel), &TTSOpsVirtual);
	ExecClearTuple(slot);
	memset(slot->tts_isnull, false, sizeof(bool) * CHANGE_NATTS);
	slot->tts_values[Anum_change_feed_id - 1] = Int32GetDatum(feed->feed_id);
	slot->tts_values[Anum_change_shard - 1] = Int32GetDatum(shard);
	slot->tts_values[Anum_change_change_id - 1] = Int64GetDatum(change_id);
	slot->tts_isnull[Anum_change_sequence - 1] = true;
	slot->tts_isnull[Anum_change_stamped_at - 1] = true;
	slot->tts_values[Anum_change_written_at - 1] =
		TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	slot->tts_values[Anum_change_writer_xid - 1] =
		FullTransactionIdGetDatum(GetTopFullTransactionId());
	ExecStoreVirtualTuple(slot);
	cfeed_note_write();
	insert_direct(changerel, change_idx, slot);
	ExecDropSingleTupleTableSlot(slot);

	slot = MakeSingleTupleTableSlot(RelationGetDescr(imagerel), &TTSOpsVirtual);
	ExecClearTuple(slot);
	memset(slot->tts_isnull, false, sizeof(bool) * IMAGE_NATTS);
	slot->tts_values[Anum_image_change_id - 1] = Int64GetDatum(change_id);
	slot->tts_values[Anum_image_feed_id - 1] = Int32GetDatum(feed->feed_id);
	slot->tts_values[Anum_image_tbl - 1] = ObjectIdGetDatum(tbl);
	slot->tts_values[Anum_image_op - 1] = CStringGetTextDatum(op);
	slot->tts_values[Anum_image_row - 1] = cfeed_row_image(RelationGetRelid(rel), tuple, desc);
	ExecStoreVirtualTuple(slot);
	insert_direct(imagerel, image_idx, slot);
	ExecDropSingleTupleTableSlot(slot);

	table_close(imagerel, NoLock);
	table_close(changerel, NoLock);
}
