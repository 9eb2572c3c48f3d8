/*-------------------------------------------------------------------------
 *
 * schema.c
 *	  The one place that knows what each version of cfeed's schema has.
 *
 *	  A database runs this library's code with the schema its last CREATE
 *	  or ALTER EXTENSION gave it, which may be an older version until
 *	  ALTER EXTENSION cfeed UPDATE runs; and during that update's scripts,
 *	  pg_extension.extversion already names the target while the objects
 *	  the scripts create are still to come.  So a feature is present when
 *	  the object that carries it exists, looked up by name in the cfeed
 *	  schema: the questions "does this database's cfeed have X" are asked
 *	  here, through cfeed_schema_has or cfeed_schema_relid, and the table
 *	  below says which version brought which object.  Four checks stay
 *	  where they are because they look at an object the caller has in hand
 *	  anyway, per row or per relcache entry, and at its state rather than
 *	  its existence: the shard_config guard trigger, enabled always
 *	  (shards.c); change_guard without a WHEN clause and a tuple descriptor
 *	  without the image columns (guard.c); the triggers of a foreign key on
 *	  cfeed.change (direct.c); and the sweeper's list of the triggers it
 *	  wants enabled always (sweeper.c).
 *
 *	  State: none; each question is a syscache lookup (the relation's name
 *	  in the schema, and a column's).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/attnum.h"
#include "utils/lsyscache.h"

#include "cfeed.h"

/* What a feature's object is: a relation of schema cfeed, or its column. */
typedef struct CfeedSchemaObject
{
	const char *version;		/* the version of the schema that brought it */
	const char *relname;
	const char *attname;		/* NULL: the relation itself */
} CfeedSchemaObject;

static const CfeedSchemaObject schema_objects[] = {
	[CFEED_SCHEMA_INLINE_IMAGES] = {"1.3", "change", "row"},
	[CFEED_SCHEMA_READ_GRANTS] = {"1.4", "read_grant", NULL},
	[CFEED_SCHEMA_EPOCHS] = {"1.5", "epoch", NULL},
	[CFEED_SCHEMA_WRITE_GRANTS] = {"1.8", "write_grant", NULL},
	[CFEED_SCHEMA_CHANGE_ID_TIMELINE] = {"1.8", "change_id_timeline", NULL},
	[CFEED_SCHEMA_TABLE_NUMBERS] = {"1.8", "tracked_table", NULL},
	[CFEED_SCHEMA_RANGES] = {"1.9", "sweep_mark", NULL},
};

StaticAssertDecl(lengthof(schema_objects) == CFEED_SCHEMA_FEATURES,
				 "every schema feature has its object");

/*
 * cfeed_schema_relid
 *		The relation that carries a feature in this database's cfeed schema,
 *		or InvalidOid when the schema (or the relation, or its column) is
 *		not there.
 */
Oid
cfeed_schema_relid(CfeedSchemaFeature feature)
{
	const CfeedSchemaObject *o = &schema_objects[feature];
	Oid			nsp = cfeed_schema_oid(true);
	Oid			relid;

	if (!OidIsValid(nsp))
		return InvalidOid;
	relid = get_relname_relid(o->relname, nsp);
	if (OidIsValid(relid) && o->attname != NULL &&
		get_attnum(relid, o->attname) == InvalidAttrNumber)
		return InvalidOid;
	return relid;
}

/*
 * cfeed_schema_has
 *		Whether this database's cfeed schema has a feature.
 */
bool
cfeed_schema_has(CfeedSchemaFeature feature)
{
	return OidIsValid(cfeed_schema_relid(feature));
}
