/*-------------------------------------------------------------------------
 *
 * track_trigger.c
 *	  The row triggers of a tracked table (cfeed._track_row,
 *	  cfeed._track_change_id) that publish every INSERT, UPDATE and DELETE
 *	  to its feed with an image of the row, and its TRUNCATE trigger
 *	  (cfeed._track_truncate) that refuses TRUNCATE.  tracked.c describes
 *	  the triggers; track_ddl.c creates them.
 *
 * Per-key order
 * -------------
 * A change is published once its row has been written or locked: the AFTER
 * ROW trigger runs after the heap and index insertions (a writer that waited
 * for a conflicting key on a unique index has waited already), and a BEFORE
 * ROW UPDATE or DELETE trigger runs only after PostgreSQL has locked the row
 * (GetTupleForTrigger), so a writer blocked on that lock draws the later
 * change_id.  The one exception is the change_id of an INSERT into a table
 * with a change_id column: it must be drawn in the BEFORE INSERT trigger,
 * before the unique-index check (see README.md, "Per-key order").
 *
 * An UPDATE that changes the key publishes a 'delete' of the old row on the
 * old key's shard, then the 'update' on the new key's shard, with the delete
 * drawing the lower change_id (the BEFORE trigger remembers it for the AFTER
 * trigger in a per-transaction map when the table has a change_id column).
 *
 * Cost per row
 * ------------
 * Per relation the trigger resolves once, until a relcache invalidation of
 * the relation: feed, key columns and their output functions, the change_id
 * column, the tracked root of a partition and its number (table_numbers.c).  Per top-level statement: the
 * feed's shard count.  Per row: the key's text form, nextval, and
 * cfeed_append (append.c), which takes the feed's shards lock
 * once per transaction and inserts the change with its image (row_image.c)
 * directly, with the writer's privileges.
 *
 * While cfeed.backfill numbers a table's existing rows it silences the
 * table's triggers in its backend for its own statement's rows
 * (cfeed_track_silence), which writes their change_id column; rows that
 * the table's other triggers write meanwhile are published.
 *
 * Locking: the triggers run under the writer's locks on the table; a
 * change's shard is locked by append.c (the feed's shards lock).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/partition.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "commands/trigger.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "cache.h"
#include "cfeed.h"
#include "track.h"

PG_FUNCTION_INFO_V1(cfeed_track_row);
PG_FUNCTION_INFO_V1(cfeed_track_change_id);
PG_FUNCTION_INFO_V1(cfeed_track_truncate);

/* What the triggers of one relation need, valid until its invalidation. */
typedef struct CfeedTrackRel
{
	Oid			relid;			/* hash key: the relation the trigger fired on */
	bool		valid;			/* cleared by a relcache invalidation of relid */
	int32		feed_id;
	Oid			tracked;		/* the tracked table (a partition's root) */
	int32		number;			/* its number (table_numbers.c) */
	bool		number_settled; /* false: created by this transaction */
	AttrNumber	change_id_att;	/* 0 when the table has no change_id column */
	CfeedTrackKey key;
} CfeedTrackRel;

/*
 * A change_id drawn by the BEFORE trigger for a delete that the AFTER trigger
 * publishes: a key-changing UPDATE's tombstone (by the update's change_id),
 * or a DELETE of a row (by relation and tid; a row moved to another partition
 * is deleted there, then inserted with a change_id its BEFORE INSERT trigger
 * draws, so the delete's must be drawn first).
 */
typedef struct CfeedPendingKey
{
	int64		update_id;		/* 0 for a DELETE */
	Oid			relid;			/* InvalidOid for an UPDATE */
	ItemPointerData tid;
} CfeedPendingKey;

typedef struct CfeedKeyChange
{
	CfeedPendingKey key;
	int64		delete_id;
} CfeedKeyChange;

static HTAB *track_cache = NULL;
static HTAB *keychange_map = NULL;
static LocalTransactionId keychange_lxid = InvalidLocalTransactionId;

/*
 * The table whose tracking triggers backfill() silences in this backend (a
 * tracked table or one of its partitions), and the trigger depth of the
 * statement whose rows they silence.
 */
static CfeedTrackSilence silence = {InvalidOid, 0};

/*
 * trigger_depth
 *		pg_trigger_depth(): how many triggers are running in this backend,
 *		the one calling it included.
 */
static int
trigger_depth(void)
{
	return DatumGetInt32(OidFunctionCall0Coll(F_PG_TRIGGER_DEPTH, InvalidOid));
}

/*
 * cfeed_track_silence
 *		Make the tracking triggers of table relid do nothing in this backend
 *		for the rows the caller's statements update, and return what was
 *		silenced before (a backfill run by a trigger of another backfill's
 *		table), which the caller puts back with cfeed_track_unsilence, on
 *		error too.  Only those rows: a row that one of the table's other
 *		triggers writes meanwhile fires them one level deeper, and is
 *		published as any other.
 */
CfeedTrackSilence
cfeed_track_silence(Oid relid)
{
	CfeedTrackSilence previous = silence;

	silence.relid = relid;
	silence.depth = trigger_depth();
	return previous;
}

/*
 * cfeed_track_unsilence
 *		Put back what cfeed_track_silence returned.
 */
void
cfeed_track_unsilence(CfeedTrackSilence previous)
{
	silence = previous;
}

/*
 * silenced
 *		Whether backfill() silences this firing, for an UPDATE, of a trigger
 *		of tr: backfill's statement updates the table it names (the tracked
 *		table, or a partition of it, perhaps partitioned itself) at its depth.
 */
static bool
silenced(CfeedTrackRel *tr, TriggerEvent ev)
{
	if (!OidIsValid(silence.relid) || !TRIGGER_FIRED_BY_UPDATE(ev) ||
		trigger_depth() != silence.depth + 1)
		return false;
	if (tr->tracked == silence.relid || tr->relid == silence.relid)
		return true;
	return get_rel_relispartition(tr->relid) &&
		list_member_oid(get_partition_ancestors(tr->relid), silence.relid);
}

/*
 * track_cache_invalidate
 *		The cache's invalidation callback (cache.c): the tracking state of
 *		the relation (or of all, for InvalidOid) must be resolved again.  Every
 *		input of that state (the trigger's arguments, the primary key, the
 *		columns, partition ancestry) changes only with an invalidation of
 *		the relation.
 */
static void
track_cache_invalidate(Oid relid)
{
	HASH_SEQ_STATUS status;
	CfeedTrackRel *tr;

	if (track_cache == NULL)
		return;
	if (OidIsValid(relid))
	{
		tr = (CfeedTrackRel *) hash_search(track_cache, &relid, HASH_FIND, NULL);
		if (tr != NULL)
			tr->valid = false;
		return;
	}
	hash_seq_init(&status, track_cache);
	while ((tr = (CfeedTrackRel *) hash_seq_search(&status)) != NULL)
		tr->valid = false;
}

/*
 * track_rel_get
 *		The cached tracking state of the relation a trigger fired on, resolved
 *		again after an invalidation of the relation.
 */
static CfeedTrackRel *
track_rel_get(Relation rel, Trigger *trig)
{
	Oid			relid = RelationGetRelid(rel);
	CfeedTrackRel *tr;
	bool		found;
	AttrNumber	att;

	if (track_cache == NULL)
		track_cache = cfeed_cache_hash(CFEED_CACHE_TRACKED_RELS, track_cache_invalidate,
									   "cfeed tracked relations", sizeof(Oid),
									   sizeof(CfeedTrackRel));
	tr = (CfeedTrackRel *) hash_search(track_cache, &relid, HASH_ENTER, &found);
	if (!found)
	{
		tr->key.nkeys = 0;
		tr->valid = false;
	}

	if (!tr->valid)
	{
		if (trig->tgnargs != 2)
			elog(ERROR, "cfeed: trigger \"%s\" on \"%s\" needs 2 arguments",
				 trig->tgname, RelationGetRelationName(rel));
		cfeed_track_check_permanent(rel);
		tr->feed_id = cfeed_track_feed_arg(trig);
		cfeed_track_resolve_key(rel, trig->tgargs[1], &tr->key, TopMemoryContext);

		att = get_attnum(relid, CFEED_CHANGE_ID_COLUMN);
		tr->change_id_att = (att > 0 &&
							 TupleDescAttr(RelationGetDescr(rel), att - 1)->atttypid == INT8OID)
			? att : 0;

		tr->tracked = relid;
		if (rel->rd_rel->relispartition)
		{
			List	   *ancestors = get_partition_ancestors(relid);
			ListCell   *lc;

			foreach(lc, ancestors)
			{
				Oid			anc = lfirst_oid(lc);

				if (!OidIsValid(get_trigger_oid(anc, CFEED_TRACK_TRIGGER, true)))
					break;
				tr->tracked = anc;
			}
			list_free(ancestors);
		}
		tr->number_settled = false;
		tr->valid = true;
	}
	/* a number this transaction created is looked up until it commits */
	if (!tr->number_settled)
		tr->number = cfeed_table_number(tr->tracked, &tr->number_settled);
	return tr;
}

/*
 * pending_key / keychange_remember / keychange_take
 *		The per-transaction map of delete change_ids drawn by the BEFORE
 *		trigger (CfeedPendingKey).  take() returns 0 when there is none;
 *		remember() overwrites, so an entry left by a rolled-back
 *		subtransaction is replaced by the next BEFORE trigger for that row.
 */
static CfeedPendingKey
pending_key(int64 update_id, Oid relid, ItemPointer tid)
{
	CfeedPendingKey k;

	memset(&k, 0, sizeof(k));
	k.update_id = update_id;
	k.relid = relid;
	if (tid)
		ItemPointerCopy(tid, &k.tid);
	return k;
}

static void
keychange_remember(CfeedPendingKey key, int64 delete_id)
{
	CfeedKeyChange *e;

	if (keychange_map == NULL || keychange_lxid != CFEED_MY_LXID)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(CfeedPendingKey);
		ctl.entrysize = sizeof(CfeedKeyChange);
		ctl.hcxt = TopTransactionContext;
		keychange_map = hash_create("cfeed pending deletes", 64, &ctl,
									HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		keychange_lxid = CFEED_MY_LXID;
	}
	e = (CfeedKeyChange *) hash_search(keychange_map, &key, HASH_ENTER, NULL);
	e->delete_id = delete_id;
}

static int64
keychange_take(CfeedPendingKey key)
{
	CfeedKeyChange *e;
	bool		found;
	int64		id;

	if (keychange_map == NULL || keychange_lxid != CFEED_MY_LXID)
		return 0;
	e = (CfeedKeyChange *) hash_search(keychange_map, &key, HASH_FIND, &found);
	if (!found)
		return 0;
	id = e->delete_id;
	hash_search(keychange_map, &key, HASH_REMOVE, NULL);
	return id;
}

/*
 * next_change_id
 *		A new change_id from the sequence cfeed.change_id.
 */
static int64
next_change_id(void)
{
	return nextval_internal(cfeed_relid_locked("change_id", RowExclusiveLock), true);
}

/*
 * row_change_id
 *		The change_id column of a row, or 0 when absent or null.
 */
static int64
row_change_id(CfeedTrackRel *tr, HeapTuple tuple, TupleDesc desc)
{
	bool		isnull;
	Datum		d;

	if (tr->change_id_att == 0)
		return 0;
	d = heap_getattr(tuple, tr->change_id_att, desc, &isnull);
	return isnull ? 0 : DatumGetInt64(d);
}

/*
 * publish_row
 *		Append the change of row tuple of rel (the relation the trigger fired
 *		on) to the feed, on the shard of the row's key text, with the row's
 *		image and operation op, as the current user.  Allocates in the
 *		current memory context (the trigger's per-row one).
 */
static void
publish_row(CfeedTrackRel *tr, const char *key, int keylen, int64 change_id,
			const char *op, Relation rel, HeapTuple tuple)
{
	CfeedChange change;

	change.feed_id = tr->feed_id;
	change.shard = -1;
	change.key = key;
	change.keylen = keylen;
	change.change_id = change_id;
	change.tbl = (Oid) tr->number;
	change.op = op;
	change.rel = rel;
	change.tuple = tuple;
	cfeed_append(&change);
}

/*
 * cfeed_track_row
 *		AFTER INSERT OR UPDATE OR DELETE ... FOR EACH ROW on a tracked table:
 *		publishes the change and the row image (the new row for inserts and
 *		updates, the old row for deletes).
 */
Datum
cfeed_track_row(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Relation	rel;
	TupleDesc	desc;
	CfeedTrackRel *tr;
	TriggerEvent ev;

	if (!CALLED_AS_TRIGGER(fcinfo) ||
		!TRIGGER_FIRED_AFTER(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("function cfeed._track_row() must be fired as an AFTER ROW trigger")));
	ev = trigdata->tg_event;
	rel = trigdata->tg_relation;
	desc = RelationGetDescr(rel);
	tr = track_rel_get(rel, trigdata->tg_trigger);
	if (silenced(tr, ev))
		return PointerGetDatum(NULL);

	if (TRIGGER_FIRED_BY_INSERT(ev))
	{
		HeapTuple	tuple = trigdata->tg_trigtuple;
		int64		id = row_change_id(tr, tuple, desc);
		int			len;
		char	   *key = cfeed_track_key_text(&tr->key, tuple, desc, &len);

		if (id == 0)
			id = next_change_id();
		publish_row(tr, key, len, id, "insert", rel, tuple);
	}
	else if (TRIGGER_FIRED_BY_DELETE(ev))
	{
		HeapTuple	tuple = trigdata->tg_trigtuple;
		int64		id = 0;
		int			len;
		char	   *key = cfeed_track_key_text(&tr->key, tuple, desc, &len);

		if (tr->change_id_att != 0)
			id = keychange_take(pending_key(0, RelationGetRelid(rel), &tuple->t_self));
		if (id == 0)
			id = next_change_id();
		publish_row(tr, key, len, id, "delete", rel, tuple);
	}
	else if (TRIGGER_FIRED_BY_UPDATE(ev))
	{
		HeapTuple	oldtup = trigdata->tg_trigtuple;
		HeapTuple	newtup = trigdata->tg_newtuple;
		int			oldlen;
		int			newlen;
		char	   *oldkey = cfeed_track_key_text(&tr->key, oldtup, desc, &oldlen);
		char	   *newkey = cfeed_track_key_text(&tr->key, newtup, desc, &newlen);
		int64		id = row_change_id(tr, newtup, desc);

		if (strcmp(oldkey, newkey) != 0)
		{
			/* The old key's tombstone first, with the lower change_id. */
			int64		delete_id = (id != 0) ? keychange_take(pending_key(id, InvalidOid, NULL)) : 0;

			if (delete_id == 0)
				delete_id = next_change_id();
			publish_row(tr, oldkey, oldlen, delete_id, "delete", rel, oldtup);
		}
		if (id == 0)
			id = next_change_id();
		publish_row(tr, newkey, newlen, id, "update", rel, newtup);
	}
	else
		elog(ERROR, "cfeed._track_row() fired for an unexpected event");

	return PointerGetDatum(NULL);
}

/*
 * cfeed_track_change_id
 *		BEFORE INSERT OR UPDATE OR DELETE ... FOR EACH ROW on a tracked table
 *		with a change_id column: draws the change's change_id and stores it in
 *		the row (for a DELETE, remembers it for the AFTER trigger).  For an
 *		UPDATE that changes the key it first draws the old key's tombstone's
 *		change_id.  Returns the row to write.
 */
Datum
cfeed_track_change_id(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Relation	rel;
	TupleDesc	desc;
	CfeedTrackRel *tr;
	HeapTuple	newtup;
	int64		delete_id = 0;
	int64		id;
	int			col;
	Datum		value;
	bool		isnull = false;

	if (!CALLED_AS_TRIGGER(fcinfo) ||
		!TRIGGER_FIRED_BEFORE(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("function cfeed._track_change_id() must be fired as a BEFORE ROW trigger")));
	rel = trigdata->tg_relation;
	desc = RelationGetDescr(rel);
	newtup = TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event)
		? trigdata->tg_newtuple : trigdata->tg_trigtuple;

	/* The AFTER trigger carries the feed and key. */
	{
		Trigger    *after = cfeed_track_trigger(rel);

		if (after == NULL)
			return PointerGetDatum(newtup);
		tr = track_rel_get(rel, after);
	}
	if (tr->change_id_att == 0 || silenced(tr, trigdata->tg_event))
		return PointerGetDatum(newtup);

	/* A DELETE: draw its change_id now, before a moved row's INSERT draws one. */
	if (TRIGGER_FIRED_BY_DELETE(trigdata->tg_event))
	{
		keychange_remember(pending_key(0, RelationGetRelid(rel), &newtup->t_self),
						   next_change_id());
		return PointerGetDatum(newtup);
	}

	if (TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
	{
		int			len;
		char	   *oldkey = cfeed_track_key_text(&tr->key, trigdata->tg_trigtuple, desc, &len);
		char	   *newkey = cfeed_track_key_text(&tr->key, newtup, desc, &len);

		if (strcmp(oldkey, newkey) != 0)
			delete_id = next_change_id();
	}
	id = next_change_id();
	if (delete_id != 0)
		keychange_remember(pending_key(id, InvalidOid, NULL), delete_id);

	col = tr->change_id_att;
	value = Int64GetDatum(id);
	return PointerGetDatum(heap_modify_tuple_by_cols(newtup, desc, 1, &col, &value, &isnull));
}

/*
 * cfeed_track_truncate
 *		BEFORE TRUNCATE on a tracked table or one of its partitions: refuses.
 */
Datum
cfeed_track_truncate(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_BY_TRUNCATE(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("function cfeed._track_truncate() must be fired as a TRUNCATE trigger")));
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("cannot truncate table \"%s\": it is tracked by feed %d",
					RelationGetRelationName(trigdata->tg_relation),
					cfeed_track_feed_arg(trigdata->tg_trigger)),
			 errdetail("TRUNCATE fires no row triggers, so the feed would miss the deletes."),
			 errhint("Use DELETE (published as tombstones), or run cfeed.untrack() first.")));
	PG_RETURN_NULL();
}
