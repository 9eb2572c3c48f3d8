/*-------------------------------------------------------------------------
 *
 * track.c
 *	  Tracking a table: cfeed.track, cfeed.untrack, cfeed.backfill, and the
 *	  row triggers that publish every INSERT, UPDATE and DELETE of a tracked
 *	  table to a feed together with an image of the row (cfeed.row_image).
 *
 * Triggers
 * --------
 * track(tbl, feed_id, key) creates, on tbl:
 *
 *	 cfeed_track			AFTER INSERT OR UPDATE OR DELETE, FOR EACH ROW,
 *							cfeed._track_row('<feed_id>', '<key>')
 *	 cfeed_track_change_id	BEFORE INSERT OR UPDATE OR DELETE, FOR EACH ROW,
 *							only when tbl has a bigint column change_id: sets
 *							it (and draws a DELETE's change_id, see below)
 *	 cfeed_track_truncate	BEFORE TRUNCATE, FOR EACH STATEMENT, on tbl and
 *							each of its partitions: refuses TRUNCATE
 *
 * Row triggers on a partitioned table are cloned to its partitions
 * (PostgreSQL 13+), including partitions attached later; the TRUNCATE
 * trigger is a statement trigger and is not, so track() creates it on every
 * existing partition.  The feed and key live in the trigger arguments (names,
 * never OIDs, so pg_dump/pg_restore keep them); '' as key means the primary
 * key, resolved again after any change to the table so that it follows
 * renames.
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
 * column, the tracked root of a partition.  Per top-level statement: the
 * feed's shard count.  Per row: the key's text form, nextval, and
 * cfeed_append (append.c), which takes the feed's shards lock
 * once per transaction and inserts the change with its image (row_image.c)
 * directly, with the writer's privileges.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/objectaddress.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "parser/scansup.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/typcache.h"
#include "utils/varlena.h"

#include "cache.h"
#include "cfeed.h"

#define CFEED_TRACK_TRIGGER		"cfeed_track"
#define CFEED_TRACK_ID_TRIGGER	"cfeed_track_change_id"
#define CFEED_TRACK_TRUNCATE	"cfeed_track_truncate"
#define CFEED_CHANGE_ID_COLUMN	"change_id"

/* Separator between the text forms of the columns of a multi-column key. */
#define CFEED_KEY_SEPARATOR		'|'

PG_FUNCTION_INFO_V1(cfeed_track);
PG_FUNCTION_INFO_V1(cfeed_untrack);
PG_FUNCTION_INFO_V1(cfeed_backfill);
PG_FUNCTION_INFO_V1(cfeed_track_key);
PG_FUNCTION_INFO_V1(cfeed_track_row);
PG_FUNCTION_INFO_V1(cfeed_track_change_id);
PG_FUNCTION_INFO_V1(cfeed_track_truncate);

/* The key columns of one relation and how to print them. */
typedef struct CfeedTrackKey
{
	int			nkeys;
	AttrNumber	attnums[INDEX_MAX_KEYS];
	Oid			types[INDEX_MAX_KEYS];
	FmgrInfo	out[INDEX_MAX_KEYS];
} CfeedTrackKey;

/* What the triggers of one relation need, valid until its invalidation. */
typedef struct CfeedTrackRel
{
	Oid			relid;			/* hash key: the relation the trigger fired on */
	bool		valid;			/* cleared by a relcache invalidation of relid */
	int32		feed_id;
	Oid			tracked;		/* the tracked table (a partition's root) */
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

/* The tracked table whose triggers backfill() silences in this backend. */
static Oid	backfill_relid = InvalidOid;

/*
 * find_track_trigger
 *		The cfeed_track trigger of a relation, or NULL when it is not tracked.
 */
static Trigger *
find_track_trigger(Relation rel)
{
	TriggerDesc *td = rel->trigdesc;
	int			i;

	if (td == NULL)
		return NULL;
	for (i = 0; i < td->numtriggers; i++)
	{
		if (strcmp(td->triggers[i].tgname, CFEED_TRACK_TRIGGER) == 0 &&
			td->triggers[i].tgnargs == 2)
			return &td->triggers[i];
	}
	return NULL;
}

/*
 * parse_feed_arg
 *		The feed_id argument of a tracking trigger.
 */
static int32
parse_feed_arg(Trigger *trig)
{
	if (trig->tgnargs < 1)
		elog(ERROR, "cfeed: trigger \"%s\" has no feed argument", trig->tgname);
	return pg_strtoint32(trig->tgargs[0]);
}

/*
 * resolve_key
 *		Fill key with the columns of keyspec in rel: a comma-separated list of
 *		column names (quoted as identifiers), or the primary key's columns
 *		when keyspec is empty.  Output functions are looked up in mcxt and
 *		only when a column's type changed.  Errors: 55000 when there is no
 *		primary key, 42703 for an unknown column.
 */
static void
resolve_key(Relation rel, const char *keyspec, CfeedTrackKey *key, MemoryContext mcxt)
{
	AttrNumber	attnums[INDEX_MAX_KEYS];
	int			nkeys = 0;
	int			i;
	TupleDesc	desc = RelationGetDescr(rel);

	if (keyspec[0] == '\0')
	{
		Oid			pkoid = cfeed_primary_key_index(rel);
		Relation	idx;

		if (!OidIsValid(pkoid))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("table \"%s\" has no primary key", RelationGetRelationName(rel)),
					 errdetail("cfeed shards a tracked table's changes by its primary key unless a key is given."),
					 errhint("Add a primary key, or track it with cfeed.track(tbl, feed_id, key => 'column').")));
		idx = index_open(pkoid, AccessShareLock);
		nkeys = idx->rd_index->indnkeyatts;
		for (i = 0; i < nkeys; i++)
			attnums[i] = idx->rd_index->indkey.values[i];
		index_close(idx, AccessShareLock);
	}
	else
	{
		char	   *copy = pstrdup(keyspec);
		List	   *names;
		ListCell   *lc;

		if (!SplitIdentifierString(copy, ',', &names) || names == NIL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid key \"%s\" for table \"%s\"", keyspec, RelationGetRelationName(rel)),
					 errhint("Give a column name, or several separated by commas.")));
		if (list_length(names) > INDEX_MAX_KEYS)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("a key may have at most %d columns", INDEX_MAX_KEYS)));
		foreach(lc, names)
		{
			char	   *name = (char *) lfirst(lc);
			AttrNumber	att = get_attnum(RelationGetRelid(rel), name);

			if (att <= 0)
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_COLUMN),
						 errmsg("column \"%s\" of table \"%s\" does not exist",
								name, RelationGetRelationName(rel)),
						 errhint("The key names columns of the tracked table.")));
			attnums[nkeys++] = att;
		}
	}

	for (i = 0; i < nkeys; i++)
	{
		Oid			type = TupleDescAttr(desc, attnums[i] - 1)->atttypid;

		if (i >= key->nkeys || key->types[i] != type)
		{
			Oid			outfunc;
			bool		isvarlena;

			getTypeOutputInfo(type, &outfunc, &isvarlena);
			fmgr_info_cxt(outfunc, &key->out[i], mcxt);
			key->types[i] = type;
		}
		key->attnums[i] = attnums[i];
	}
	key->nkeys = nkeys;
}

/*
 * key_text
 *		The key's text form of a row: the key column's output (what psql
 *		shows, and what format('%s', col) gives), or for several columns their
 *		outputs joined with '|'.  A NULL column counts as the empty string.
 *		Returns a palloc'd string and its length.
 */
static char *
key_text(CfeedTrackKey *key, HeapTuple tuple, TupleDesc desc, int *len)
{
	StringInfoData buf;
	int			i;

	if (key->nkeys == 1)
	{
		bool		isnull;
		Datum		d = heap_getattr(tuple, key->attnums[0], desc, &isnull);
		char	   *s = isnull ? pstrdup("") : OutputFunctionCall(&key->out[0], d);

		*len = strlen(s);
		return s;
	}

	initStringInfo(&buf);
	for (i = 0; i < key->nkeys; i++)
	{
		bool		isnull;
		Datum		d = heap_getattr(tuple, key->attnums[i], desc, &isnull);

		if (i > 0)
			appendStringInfoChar(&buf, CFEED_KEY_SEPARATOR);
		if (!isnull)
			appendStringInfoString(&buf, OutputFunctionCall(&key->out[i], d));
	}
	*len = buf.len;
	return buf.data;
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
	{
		cfeed_cache_register(CFEED_CACHE_TRACKED_RELS, track_cache_invalidate);
		track_cache = cfeed_cache_hash("cfeed tracked relations", sizeof(Oid),
									   sizeof(CfeedTrackRel));
	}
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
		tr->feed_id = parse_feed_arg(trig);
		resolve_key(rel, trig->tgargs[1], &tr->key, TopMemoryContext);

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
		tr->valid = true;
	}
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
	change.tbl = tr->tracked;
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
	if (tr->tracked == backfill_relid)
		return PointerGetDatum(NULL);

	if (TRIGGER_FIRED_BY_INSERT(ev))
	{
		HeapTuple	tuple = trigdata->tg_trigtuple;
		int64		id = row_change_id(tr, tuple, desc);
		int			len;
		char	   *key = key_text(&tr->key, tuple, desc, &len);

		if (id == 0)
			id = next_change_id();
		publish_row(tr, key, len, id, "insert", rel, tuple);
	}
	else if (TRIGGER_FIRED_BY_DELETE(ev))
	{
		HeapTuple	tuple = trigdata->tg_trigtuple;
		int64		id = 0;
		int			len;
		char	   *key = key_text(&tr->key, tuple, desc, &len);

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
		char	   *oldkey = key_text(&tr->key, oldtup, desc, &oldlen);
		char	   *newkey = key_text(&tr->key, newtup, desc, &newlen);
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
		Trigger    *after = find_track_trigger(rel);

		if (after == NULL)
			return PointerGetDatum(newtup);
		tr = track_rel_get(rel, after);
	}
	if (tr->tracked == backfill_relid || tr->change_id_att == 0)
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
		char	   *oldkey = key_text(&tr->key, trigdata->tg_trigtuple, desc, &len);
		char	   *newkey = key_text(&tr->key, newtup, desc, &len);

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
					parse_feed_arg(trigdata->tg_trigger)),
			 errdetail("TRUNCATE fires no row triggers, so the feed would miss the deletes."),
			 errhint("Use DELETE (published as tombstones), or run cfeed.untrack() first.")));
	PG_RETURN_NULL();
}

/*
 * check_owner
 *		42501 unless the current user owns the table; 42809 unless it is a
 *		table or partitioned table.
 */
/*
 * open_user_table
 *		Open the table a track/untrack/backfill call names, with 42P01 for an
 *		OID that is no relation (a regclass argument can carry any OID).
 */
static Relation
open_user_table(Oid relid, LOCKMODE lockmode)
{
	Relation	rel = try_relation_open(relid, lockmode);

	if (rel == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	return rel;
}

static void
check_owner(Relation rel)
{
	char		relkind = rel->rd_rel->relkind;

	if (relkind != RELKIND_RELATION && relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table", RelationGetRelationName(rel)),
				 errhint("cfeed tracks tables and partitioned tables.")));
	if (!cfeed_rel_ownercheck(RelationGetRelid(rel), GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, get_relkind_objtype(relkind),
					   RelationGetRelationName(rel));
}

/*
 * qualified_name
 *		The relation's schema-qualified, quoted name, for SQL text.
 */
static char *
qualified_name(Oid relid)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  get_rel_name(relid));
}

/*
 * partitions_of
 *		The table's partitions at every level (without the table itself);
 *		NIL unless it is partitioned.  Locks them in lockmode.
 */
static List *
partitions_of(Relation rel, LOCKMODE lockmode)
{
	if (rel->rd_rel->relkind != RELKIND_PARTITIONED_TABLE)
		return NIL;
	return list_delete_first(find_all_inheritors(RelationGetRelid(rel), lockmode, NULL));
}

/*
 * cfeed_track
 *		SQL: cfeed.track(tbl regclass, feed_id int, key text) returns void.
 *		Installs the tracking triggers; the caller must own tbl.
 */
Datum
cfeed_track(PG_FUNCTION_ARGS)
{
	int			spi_level;
	Oid			relid;
	int32		feed_id;
	Relation	rel;
	Trigger    *existing;
	StringInfoData keyspec;
	CfeedTrackKey key;
	AttrNumber	cid_att;
	char	   *qname;
	char	   *args;
	List	   *parts;
	ListCell   *lc;

	cfeed_require_arg(fcinfo, 0, "tbl");
	cfeed_require_arg(fcinfo, 1, "feed_id");
	relid = PG_GETARG_OID(0);
	feed_id = PG_GETARG_INT32(1);

	/* CREATE TRIGGER's lock, taken up front rather than upgraded. */
	rel = open_user_table(relid, ShareRowExclusiveLock);
	check_owner(rel);
	(void) cfeed_feed_shard_count(feed_id);

	existing = find_track_trigger(rel);
	if (existing != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" is already tracked by feed %d",
						RelationGetRelationName(rel), parse_feed_arg(existing)),
				 errdetail("A table publishes to one feed."),
				 errhint("Run cfeed.untrack() first to track it with another feed or key.")));

	/* The key, normalized to quoted identifiers; '' stands for the primary key. */
	initStringInfo(&keyspec);
	key.nkeys = 0;
	if (PG_ARGISNULL(2))
		resolve_key(rel, "", &key, CurrentMemoryContext);
	else
	{
		char	   *given = text_to_cstring(PG_GETARG_TEXT_PP(2));
		int			i;

		if (given[strspn(given, " \t\n\r")] == '\0')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("key must name at least one column of table \"%s\"",
							RelationGetRelationName(rel)),
					 errhint("Pass key => NULL to use the primary key.")));

		resolve_key(rel, given, &key, CurrentMemoryContext);
		for (i = 0; i < key.nkeys; i++)
		{
			if (i > 0)
				appendStringInfoChar(&keyspec, ',');
			appendStringInfoString(&keyspec,
								   quote_identifier(get_attname(relid, key.attnums[i], false)));
		}
	}

	cid_att = get_attnum(relid, CFEED_CHANGE_ID_COLUMN);
	if (cid_att > 0 && get_atttype(relid, cid_att) != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" of table \"%s\" must be of type bigint",
						CFEED_CHANGE_ID_COLUMN, RelationGetRelationName(rel)),
				 errdetail("cfeed stores each change's change_id in a table's change_id column."),
				 errhint("Rename the column or change its type to bigint.")));

	/*
	 * Row-level security (1.4): a reader sees a row image only if the table's
	 * policies do not apply to it (read_access.c), checked at every read, so
	 * that enabling it later holds too.  Say so now: to the table's other
	 * readers, its changes will not show in the feed.
	 */
	if (rel->rd_rel->relrowsecurity)
		ereport(NOTICE,
				(errmsg("table \"%s\" has row-level security: its changes are shown only to roles its policies do not apply to",
						RelationGetRelationName(rel)),
				 errdetail("A change carries a copy of its row, which cfeed cannot check against the table's policies."),
				 errhint("Its owner, superusers and roles with BYPASSRLS see them, if they may read feed %d.",
						 feed_id)));

	qname = qualified_name(relid);
	args = psprintf("%s, %s", quote_literal_cstr(psprintf("%d", feed_id)),
					quote_literal_cstr(keyspec.data));
	parts = partitions_of(rel, ShareRowExclusiveLock);
	table_close(rel, NoLock);

	spi_level = cfeed_spi_connect();
	cfeed_spi_exec(psprintf("CREATE TRIGGER " CFEED_TRACK_TRIGGER
					 " AFTER INSERT OR UPDATE OR DELETE ON %s FOR EACH ROW"
					 " EXECUTE FUNCTION cfeed._track_row(%s)", qname, args), 0, NULL, NULL, NULL, SPI_OK_UTILITY);
	if (cid_att > 0)
		cfeed_spi_exec(psprintf("CREATE TRIGGER " CFEED_TRACK_ID_TRIGGER
						 " BEFORE INSERT OR UPDATE OR DELETE ON %s FOR EACH ROW"
						 " EXECUTE FUNCTION cfeed._track_change_id(%s)", qname, args), 0, NULL, NULL, NULL, SPI_OK_UTILITY);
	cfeed_spi_exec(psprintf("CREATE TRIGGER " CFEED_TRACK_TRUNCATE
					 " BEFORE TRUNCATE ON %s FOR EACH STATEMENT"
					 " EXECUTE FUNCTION cfeed._track_truncate(%s)", qname, args), 0, NULL, NULL, NULL, SPI_OK_UTILITY);
	foreach(lc, parts)
	{
		Oid			part = lfirst_oid(lc);
		char		kind = get_rel_relkind(part);

		if (kind != RELKIND_RELATION && kind != RELKIND_PARTITIONED_TABLE)
			continue;
		cfeed_spi_exec(psprintf("CREATE TRIGGER " CFEED_TRACK_TRUNCATE
						 " BEFORE TRUNCATE ON %s FOR EACH STATEMENT"
						 " EXECUTE FUNCTION cfeed._track_truncate(%s)",
						 qualified_name(part), args), 0, NULL, NULL, NULL, SPI_OK_UTILITY);
	}
	cfeed_spi_finish(spi_level);
	PG_RETURN_VOID();
}

/*
 * cfeed_untrack
 *		SQL: cfeed.untrack(tbl regclass) returns void.  Drops the tracking
 *		triggers; the caller must own tbl.  The published changes and row
 *		images stay.
 */
Datum
cfeed_untrack(PG_FUNCTION_ARGS)
{
	int			spi_level;
	Oid			relid;
	Relation	rel;
	char	   *qname;
	List	   *parts;
	ListCell   *lc;

	cfeed_require_arg(fcinfo, 0, "tbl");
	relid = PG_GETARG_OID(0);
	rel = open_user_table(relid, AccessExclusiveLock);
	check_owner(rel);
	if (find_track_trigger(rel) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("table \"%s\" is not tracked", RelationGetRelationName(rel)),
				 errhint("Track it with cfeed.track().")));
	qname = qualified_name(relid);
	parts = partitions_of(rel, AccessExclusiveLock);
	table_close(rel, NoLock);

	spi_level = cfeed_spi_connect();
	cfeed_spi_exec(psprintf("DROP TRIGGER " CFEED_TRACK_TRIGGER " ON %s", qname), 0, NULL, NULL, NULL, SPI_OK_UTILITY);
	if (OidIsValid(get_trigger_oid(relid, CFEED_TRACK_ID_TRIGGER, true)))
		cfeed_spi_exec(psprintf("DROP TRIGGER " CFEED_TRACK_ID_TRIGGER " ON %s", qname), 0, NULL, NULL, NULL, SPI_OK_UTILITY);
	if (OidIsValid(get_trigger_oid(relid, CFEED_TRACK_TRUNCATE, true)))
		cfeed_spi_exec(psprintf("DROP TRIGGER " CFEED_TRACK_TRUNCATE " ON %s", qname), 0, NULL, NULL, NULL, SPI_OK_UTILITY);
	foreach(lc, parts)
	{
		Oid			part = lfirst_oid(lc);

		if (OidIsValid(get_trigger_oid(part, CFEED_TRACK_TRUNCATE, true)))
			cfeed_spi_exec(psprintf("DROP TRIGGER " CFEED_TRACK_TRUNCATE " ON %s",
							 qualified_name(part)), 0, NULL, NULL, NULL, SPI_OK_UTILITY);
	}
	cfeed_spi_finish(spi_level);
	PG_RETURN_VOID();
}

/*
 * A cached key for cfeed._track_key, per call site (fn_extra).
 */
typedef struct CfeedTrackKeyCache
{
	Oid			relid;
	Oid			rowtype;
	CfeedTrackKey key;
} CfeedTrackKeyCache;

/*
 * cfeed_track_key
 *		SQL: cfeed._track_key(tbl regclass, r record) returns text.  The key's
 *		text form of a row of a tracked table, as the triggers compute it.
 */
Datum
cfeed_track_key(PG_FUNCTION_ARGS)
{
	CfeedTrackKeyCache *cache = (CfeedTrackKeyCache *) fcinfo->flinfo->fn_extra;
	Oid			relid;
	HeapTupleHeader rec;
	HeapTupleData tuple;
	TupleDesc	desc;
	char	   *k;
	int			len;

	cfeed_require_arg(fcinfo, 0, "tbl");
	cfeed_require_arg(fcinfo, 1, "r");
	relid = PG_GETARG_OID(0);
	rec = PG_GETARG_HEAPTUPLEHEADER(1);

	if (cache == NULL || cache->relid != relid)
	{
		Relation	rel = table_open(relid, AccessShareLock);
		Trigger    *trig = find_track_trigger(rel);

		if (trig == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("table \"%s\" is not tracked", RelationGetRelationName(rel)),
					 errhint("Track it with cfeed.track().")));
		if (cache == NULL)
		{
			cache = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(CfeedTrackKeyCache));
			fcinfo->flinfo->fn_extra = cache;
		}
		cache->relid = InvalidOid;
		resolve_key(rel, trig->tgargs[1], &cache->key, fcinfo->flinfo->fn_mcxt);
		cache->rowtype = rel->rd_rel->reltype;
		cache->relid = relid;
		table_close(rel, AccessShareLock);
	}
	if (HeapTupleHeaderGetTypeId(rec) != cache->rowtype)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("the row is not a row of table \"%s\"", get_rel_name(relid))));

	desc = lookup_rowtype_tupdesc(HeapTupleHeaderGetTypeId(rec), HeapTupleHeaderGetTypMod(rec));
	tuple.t_len = HeapTupleHeaderGetDatumLength(rec);
	ItemPointerSetInvalid(&tuple.t_self);
	tuple.t_tableOid = InvalidOid;
	tuple.t_data = rec;
	k = key_text(&cache->key, &tuple, desc, &len);
	ReleaseTupleDesc(desc);
	PG_RETURN_TEXT_P(cstring_to_text_with_len(k, len));
}

/*
 * order_by_clause
 *		Validate an ORDER BY list given as text -- column names (plain or
 *		double-quoted) of tbl, each optionally followed by ASC or DESC and
 *		NULLS FIRST or NULLS LAST, separated by commas -- and return it
 *		rebuilt from quoted identifiers and keywords, safe to put into SQL.
 *		22023 for anything else, 42703 for an unknown column.
 */
static char *
order_by_clause(Oid relid, const char *given)
{
	StringInfoData out;
	const char *p = given;
	bool		first = true;

	initStringInfo(&out);
	for (;;)
	{
		StringInfoData ident;
		AttrNumber	att;

		while (scanner_isspace(*p))
			p++;
		initStringInfo(&ident);
		if (*p == '"')
		{
			p++;
			for (;;)
			{
				if (*p == '\0')
					goto bad;
				if (*p == '"')
				{
					if (p[1] != '"')
						break;
					p++;
				}
				appendStringInfoChar(&ident, *p++);
			}
			p++;
			if (ident.len == 0)
				goto bad;
		}
		else
		{
			if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == '_' ||
				  IS_HIGHBIT_SET(*p)))
				goto bad;
			while ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == '_' ||
				   (*p >= '0' && *p <= '9') || *p == '$' || IS_HIGHBIT_SET(*p))
				appendStringInfoChar(&ident, *p++);
			ident.data = downcase_identifier(ident.data, ident.len, false, false);
		}
		att = get_attnum(relid, ident.data);
		if (att <= 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("column \"%s\" of table \"%s\" does not exist",
							ident.data, get_rel_name(relid)),
					 errhint("order_by lists column names of the table.")));
		if (!first)
			appendStringInfoString(&out, ", ");
		first = false;
		appendStringInfoString(&out, "t.");
		appendStringInfoString(&out, quote_identifier(ident.data));

		/* Optional direction and NULLS placement: words up to ',' or the end. */
		{
			int			nwords = 0;
			char	   *words[3];

			for (;;)
			{
				const char *start;

				while (scanner_isspace(*p))
					p++;
				if (*p == ',' || *p == '\0')
					break;
				start = p;
				while ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z'))
					p++;
				if (p == start || nwords == 3)
					goto bad;
				words[nwords++] = downcase_identifier(start, p - start, false, false);
			}
			if (nwords >= 1 && (strcmp(words[0], "asc") == 0 || strcmp(words[0], "desc") == 0))
			{
				appendStringInfo(&out, " %s", strcmp(words[0], "asc") == 0 ? "ASC" : "DESC");
				memmove(words, words + 1, sizeof(char *) * 2);
				nwords--;
			}
			if (nwords == 2 && strcmp(words[0], "nulls") == 0 &&
				(strcmp(words[1], "first") == 0 || strcmp(words[1], "last") == 0))
				appendStringInfo(&out, " NULLS %s", strcmp(words[1], "first") == 0 ? "FIRST" : "LAST");
			else if (nwords != 0)
				goto bad;
		}
		if (*p == '\0')
			break;
		p++;					/* the comma */
	}
	return out.data;

bad:
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid order_by \"%s\"", given),
			 errdetail("order_by is a comma-separated list of column names, each optionally followed by ASC or DESC and NULLS FIRST or NULLS LAST."),
			 errhint("For example: order_by => 'created_at, id DESC'.")));
	return NULL;				/* keep the compiler quiet */
}

/*
 * shard_has_history
 *		Whether a shard has any change numbered at or below its start value
 *		(its migration range), whoever can see it: a direct scan of
 *		change_sequence_idx with a fresh snapshot, needing no SELECT privilege.
 */
static bool
shard_has_history(int32 feed_id, int32 shard, int64 start)
{
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData keys[3];
	Oid			index;
	bool		found;
	Snapshot	snapshot = RegisterSnapshot(GetLatestSnapshot());

	rel = cfeed_table_open("change", AccessShareLock);
	/* Heap attribute numbers of cfeed.change: feed_id, shard, change_sequence_number. */
	ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(feed_id));
	ScanKeyInit(&keys[1], 2, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(shard));
	ScanKeyInit(&keys[2], 4, BTLessEqualStrategyNumber, F_INT8LE, Int64GetDatum(start));
	index = cfeed_relid_locked("change_sequence_idx", AccessShareLock);
	scan = systable_beginscan(rel, index, true, snapshot, 3, keys);
	found = HeapTupleIsValid(systable_getnext(scan));
	systable_endscan(scan);
	UnlockRelationOid(index, AccessShareLock);
	table_close(rel, AccessShareLock);
	UnregisterSnapshot(snapshot);
	return found;
}

/*
 * cfeed_backfill
 *		SQL: cfeed.backfill(tbl regclass, feed_id int, order_by text) returns
 *		bigint.  Numbers the existing rows of a table tracked by the feed into
 *		each shard's migration range, start-k+1 .. start for a shard with k
 *		rows, in order_by order (the primary key's, else the key's, when
 *		null), with 'insert' row images, and sets the rows' change_id column.
 *		Holds tbl in SHARE mode.  Returns the number of rows.  The caller must
 *		own tbl.
 */
Datum
cfeed_backfill(PG_FUNCTION_ARGS)
{
	int			spi_level;
	Oid			relid;
	int32		feed_id;
	Relation	rel;
	Trigger    *trig;
	int32		tracked_feed;
	int32		count;
	int32		s;
	char	   *order;
	char	   *qname;
	bool		has_cid;
	StringInfoData sql;
	int64		rows = 0;
	Oid			types[2] = {INT4OID, OIDOID};
	Datum		values[2];

	cfeed_require_arg(fcinfo, 0, "tbl");
	cfeed_require_arg(fcinfo, 1, "feed_id");
	relid = PG_GETARG_OID(0);
	feed_id = PG_GETARG_INT32(1);

	rel = open_user_table(relid, ShareLock);
	check_owner(rel);
	count = cfeed_feed_shard_count(feed_id);
	trig = find_track_trigger(rel);
	tracked_feed = trig ? parse_feed_arg(trig) : 0;
	if (trig == NULL || tracked_feed != feed_id)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" is not tracked by feed %d", RelationGetRelationName(rel), feed_id),
				 errdetail("backfill() shards the rows by the key the table is tracked with."),
				 errhint("Run cfeed.track() and cfeed.backfill() in one transaction, so that history and live changes meet exactly.")));

	if (PG_ARGISNULL(2))
	{
		CfeedTrackKey key;
		Oid			pk = cfeed_primary_key_index(rel);
		StringInfoData ob;
		int			i;

		key.nkeys = 0;
		resolve_key(rel, OidIsValid(pk) ? "" : trig->tgargs[1], &key, CurrentMemoryContext);
		initStringInfo(&ob);
		for (i = 0; i < key.nkeys; i++)
			appendStringInfo(&ob, "%st.%s", i > 0 ? ", " : "",
							 quote_identifier(get_attname(relid, key.attnums[i], false)));
		order = ob.data;
	}
	else
		order = order_by_clause(relid, text_to_cstring(PG_GETARG_TEXT_PP(2)));

	for (s = 0; s < count; s++)
	{
		CfeedShard	sh;

		if (!cfeed_shard_fetch(feed_id, s, NULL, false, &sh))
			continue;
		if (shard_has_history(feed_id, s, sh.start_number))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("shard %d of feed %d already has history", s, feed_id),
					 errdetail("Changes numbered at or below the shard's start value " INT64_FORMAT " exist; a shard's history is written once.",
							   sh.start_number),
					 errhint("Backfill a feed once, before or right after it starts tracking.")));
	}

	has_cid = get_attnum(relid, CFEED_CHANGE_ID_COLUMN) > 0;
	qname = qualified_name(relid);
	table_close(rel, NoLock);

	/*
	 * One statement: rows in order with their shard and image; change_ids in
	 * that order; numbers start-k+1 .. start per shard; then the changes with
	 * their images (until ALTER EXTENSION cfeed UPDATE to 1.3, the images in
	 * cfeed.row_image) and the rows' change_id.  A shard without room makes
	 * the last column name it, and the error below undoes everything.
	 */
	initStringInfo(&sql);
	appendStringInfo(&sql,
					 "WITH r AS MATERIALIZED ("
					 " SELECT t.tableoid AS toid, t.ctid AS tid, pg_catalog.to_jsonb(t) AS j,"
					 "  cfeed.shard_for($1, cfeed._track_key($2, t)) AS shard,"
					 "  pg_catalog.row_number() OVER (ORDER BY %s) AS o"
					 " FROM %s t),"
					 " n AS MATERIALIZED ("
					 " SELECT r.*, pg_catalog.nextval('cfeed.change_id') AS cid"
					 " FROM (SELECT * FROM r ORDER BY o) r),"
					 " s AS MATERIALIZED ("
					 " SELECT n.*, sh.start_sequence_number AS start,"
					 "  pg_catalog.count(*) OVER (PARTITION BY n.shard) AS k,"
					 "  sh.start_sequence_number - pg_catalog.count(*) OVER (PARTITION BY n.shard)"
					 "   + pg_catalog.row_number() OVER (PARTITION BY n.shard ORDER BY n.o) AS seq"
					 " FROM n JOIN cfeed.shard_config sh ON sh.feed_id = $1 AND sh.shard = n.shard),"
					 " i AS (SELECT s.*, %s AS image FROM s),",
					 order, qname,
					 has_cid ? "s.j OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object('change_id', s.cid)" : "s.j");
	if (cfeed_images_inline())
		appendStringInfoString(&sql,
							   " c AS (INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number,"
							   "  tbl, op, \"row\")"
							   " SELECT $1, i.shard, i.cid, i.seq, $2::pg_catalog.regclass, 'insert', i.image"
							   " FROM i ORDER BY i.o)");
	else
		appendStringInfoString(&sql,
							   " c AS (INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number)"
							   " SELECT $1, i.shard, i.cid, i.seq FROM i ORDER BY i.o),"
							   " ri AS (INSERT INTO cfeed.row_image (change_id, feed_id, tbl, op, \"row\")"
							   " SELECT i.cid, $1, $2::pg_catalog.regclass, 'insert', i.image FROM i)");
	if (has_cid)
		appendStringInfo(&sql,
						 ", u AS (UPDATE %s t SET change_id = s.cid FROM s"
						 " WHERE t.tableoid = s.toid AND t.ctid = s.tid)",
						 qname);
	appendStringInfoString(&sql,
						   " SELECT pg_catalog.count(*),"
						   " (SELECT pg_catalog.format('%s %s %s', s.shard, s.k, s.start)"
						   "  FROM s WHERE s.seq < 1 LIMIT 1) FROM s");

	values[0] = Int32GetDatum(feed_id);
	values[1] = ObjectIdGetDatum(relid);
	spi_level = cfeed_spi_connect();
	cfeed_spi_exec(psprintf("LOCK TABLE %s IN SHARE MODE", qname), 0, NULL, NULL, NULL, SPI_OK_UTILITY);
	backfill_relid = relid;
	PG_TRY();
	{
		int			rc = SPI_execute_with_args(sql.data, 2, types, values, NULL, false, 0);
		bool		isnull;
		Datum		full;

		if (rc != SPI_OK_SELECT || SPI_processed != 1)
			elog(ERROR, "cfeed.backfill: statement failed: %s", SPI_result_code_string(rc));
		rows = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		full = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
		if (!isnull)
		{
			int			fshard;
			long long	k;
			long long	start;

			if (sscanf(TextDatumGetCString(full), "%d %lld %lld", &fshard, &k, &start) != 3)
				elog(ERROR, "cfeed.backfill: bad room report");
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("shard %d of feed %d has no room for %lld history rows",
							fshard, feed_id, k),
					 errdetail("History is numbered 1 .. %lld, the shard's migration range, which holds %lld rows.",
							   start, start),
					 errhint("Use more shards, or create the shard with a higher start value.")));
		}
	}
	PG_FINALLY();
	{
		backfill_relid = InvalidOid;
	}
	PG_END_TRY();
	cfeed_spi_finish(spi_level);
	PG_RETURN_INT64(rows);
}
