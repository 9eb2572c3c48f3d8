/*-------------------------------------------------------------------------
 *
 * tracked.c
 *	  What makes a table tracked, for the DDL (track_ddl.c), the triggers
 *	  (track_trigger.c) and backfill (backfill.c): its cfeed_track trigger,
 *	  whose arguments carry the feed and the key; the key's columns and a
 *	  row's key text (also cfeed._track_key, for backfill's SQL); and the
 *	  checks on the table a call names.
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
 * The key's text form is the key column's output (what psql shows), or for
 * several columns their outputs joined with '|'; its shard is FNV-1a of it
 * (shards.c).  No locks are taken here beyond the caller's on the table.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "catalog/objectaddress.h"
#include "catalog/pg_class.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/typcache.h"
#include "utils/varlena.h"

#include "cfeed.h"
#include "track.h"

/* Separator between the text forms of the columns of a multi-column key. */
#define CFEED_KEY_SEPARATOR		'|'

PG_FUNCTION_INFO_V1(cfeed_track_key);

/*
 * cfeed_track_trigger
 *		The cfeed_track trigger of a relation, or NULL when it is not tracked.
 */
Trigger *
cfeed_track_trigger(Relation rel)
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
 * cfeed_track_feed_arg
 *		The feed_id argument of a tracking trigger.
 */
int32
cfeed_track_feed_arg(Trigger *trig)
{
	if (trig->tgnargs < 1)
		elog(ERROR, "cfeed: trigger \"%s\" has no feed argument", trig->tgname);
	return pg_strtoint32(trig->tgargs[0]);
}

/*
 * cfeed_track_resolve_key
 *		Fill key with the columns of keyspec in rel: a comma-separated list of
 *		column names (quoted as identifiers), or the primary key's columns
 *		when keyspec is empty.  Output functions are looked up in mcxt and
 *		only when a column's type changed.  Errors: 55000 when there is no
 *		primary key, 42703 for an unknown column.
 */
void
cfeed_track_resolve_key(Relation rel, const char *keyspec, CfeedTrackKey *key, MemoryContext mcxt)
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
 * cfeed_track_key_text
 *		The key's text form of a row: the key column's output (what psql
 *		shows, and what format('%s', col) gives), or for several columns their
 *		outputs joined with '|'.  A NULL column counts as the empty string.
 *		Returns a palloc'd string and its length.
 */
char *
cfeed_track_key_text(CfeedTrackKey *key, HeapTuple tuple, TupleDesc desc, int *len)
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
 * cfeed_track_open_table
 *		Open the table a track/untrack/backfill call names, with 42P01 for an
 *		OID that is no relation (a regclass argument can carry any OID).
 */
Relation
cfeed_track_open_table(Oid relid, LOCKMODE lockmode)
{
	Relation	rel = try_relation_open(relid, lockmode);

	if (rel == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	return rel;
}

/*
 * cfeed_track_check_owner
 *		42501 unless the current user owns the table; 42809 unless it is a
 *		table or partitioned table.
 */
void
cfeed_track_check_owner(Relation rel)
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
 * cfeed_track_check_permanent
 *		0A000 for a temporary table: PostgreSQL drops it at commit or at the
 *		session's end without the event trigger by which cfeed forgets a
 *		dropped tracked table, so its number (or, in a schema before table
 *		numbers, its OID in cfeed.change.tbl) would go on naming its OID,
 *		which a later table may get, and that table would seem to have
 *		written the temporary table's rows.  cfeed.track refuses it, and so
 *		do the triggers when attached to one by hand.
 */
void
cfeed_track_check_permanent(Relation rel)
{
	if (rel->rd_rel->relpersistence == RELPERSISTENCE_TEMP)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot track temporary table \"%s\"", RelationGetRelationName(rel)),
				 errdetail("PostgreSQL drops a temporary table without the event trigger by which cfeed forgets a dropped tracked table."),
				 errhint("Track a permanent table.")));
}

/*
 * cfeed_qualified_name
 *		The relation's schema-qualified, quoted name, for SQL text.
 */
char *
cfeed_qualified_name(Oid relid)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  get_rel_name(relid));
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
 * open_keyed_table
 *		Open the table of cfeed._track_key (EXECUTE is PUBLIC: backfill calls
 *		it with its caller's privileges) in ACCESS SHARE mode: 42P01 when it
 *		does not exist, 42501 unless the caller may SELECT it (checked before
 *		locking, so that nobody holds a lock on a table it may not read),
 *		42809 when it is not a table (never XX000, even for an OID such as
 *		0 that names no relation).
 */
static Relation
open_keyed_table(Oid relid)
{
	AclResult	aclresult;
	Relation	rel;

	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	aclresult = pg_class_aclcheck(relid, GetUserId(), ACL_SELECT);
	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, get_relkind_objtype(get_rel_relkind(relid)),
					   get_rel_name(relid));
	rel = try_table_open(relid, AccessShareLock);
	if (rel == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	if (rel->rd_rel->relkind != RELKIND_RELATION &&
		rel->rd_rel->relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table", RelationGetRelationName(rel))));
	return rel;
}

/*
 * cfeed_track_key
 *		SQL: cfeed._track_key(tbl regclass, r record) returns text.  The key's
 *		text form of a row of a tracked table, as the triggers compute it.
 *		The caller must be able to SELECT the table (open_keyed_table).
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
		Relation	rel = open_keyed_table(relid);
		Trigger    *trig = cfeed_track_trigger(rel);

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
		cfeed_track_resolve_key(rel, trig->tgargs[1], &cache->key, fcinfo->flinfo->fn_mcxt);
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
	k = cfeed_track_key_text(&cache->key, &tuple, desc, &len);
	ReleaseTupleDesc(desc);
	PG_RETURN_TEXT_P(cstring_to_text_with_len(k, len));
}
