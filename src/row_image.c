/*-------------------------------------------------------------------------
 *
 * row_image.c
 *	  The image of a tracked row for cfeed.row_image: exactly what
 *	  to_jsonb(row) gives, built with what can be decided once per relation
 *	  decided once.
 *
 *	  to_jsonb(record) works out for every column of every row how to
 *	  convert the column's type (three or four syscache lookups), and turns
 *	  an integer into a jsonb number by printing it and parsing the text as
 *	  numeric.  Here each column gets a converter when the relation is first
 *	  seen: bool, smallint, integer, bigint, text and varchar columns are
 *	  converted directly, to the values to_jsonb would make (a number equal
 *	  to the integer; the string of the text); a column of any other type
 *	  (domains included) goes through to_jsonb of that one value, which is
 *	  what to_jsonb(record) does for it, and the result is added to the
 *	  object as to_jsonb(record) adds it.  The regress test track compares
 *	  the images with to_jsonb(t) over many types.
 *
 *	  A relation's converters are dropped at any relcache invalidation of
 *	  it (ALTER TABLE, RENAME COLUMN, DROP), so they always match its
 *	  current columns.
 *
 *	  Locking: none; the trigger's caller holds the relation open.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "nodes/makefuncs.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "cache.h"
#include "cfeed.h"

/* How one column is converted. */
typedef enum CfeedColumnKind
{
	CFEED_COL_DROPPED,
	CFEED_COL_BOOL,
	CFEED_COL_INT2,
	CFEED_COL_INT4,
	CFEED_COL_INT8,
	CFEED_COL_TEXT,				/* text, varchar */
	CFEED_COL_OTHER				/* to_jsonb(value) */
} CfeedColumnKind;

typedef struct CfeedImageColumn
{
	CfeedColumnKind kind;
	char	   *name;
	int			namelen;
	FmgrInfo	to_jsonb;		/* CFEED_COL_OTHER: typed for this column */
} CfeedImageColumn;

/* The converters of one relation's columns, in its own memory context. */
typedef struct CfeedImagePlan
{
	Oid			relid;			/* hash key */
	bool		valid;
	int			natts;
	CfeedImageColumn *columns;
	MemoryContext cxt;
} CfeedImagePlan;

static HTAB *image_plans = NULL;

/*
 * image_plans_invalidate
 *		The cache's invalidation callback (cache.c): forget the relation's
 *		plan (or all plans, for InvalidOid).
 */
static void
image_plans_invalidate(Oid relid)
{
	HASH_SEQ_STATUS status;
	CfeedImagePlan *plan;

	if (image_plans == NULL)
		return;
	if (OidIsValid(relid))
	{
		plan = (CfeedImagePlan *) hash_search(image_plans, &relid, HASH_FIND, NULL);
		if (plan != NULL)
			plan->valid = false;
		return;
	}
	hash_seq_init(&status, image_plans);
	while ((plan = (CfeedImagePlan *) hash_seq_search(&status)) != NULL)
		plan->valid = false;
}

/*
 * column_kind
 *		The converter for a column type.
 */
static CfeedColumnKind
column_kind(Oid type)
{
	switch (type)
	{
		case BOOLOID:
			return CFEED_COL_BOOL;
		case INT2OID:
			return CFEED_COL_INT2;
		case INT4OID:
			return CFEED_COL_INT4;
		case INT8OID:
			return CFEED_COL_INT8;
		case TEXTOID:
		case VARCHAROID:
			return CFEED_COL_TEXT;
		default:
			return CFEED_COL_OTHER;
	}
}

/*
 * image_plan_get
 *		The valid plan of a relation with tuple descriptor desc, built when
 *		missing or invalidated.
 */
static CfeedImagePlan *
image_plan_get(Oid relid, TupleDesc desc)
{
	CfeedImagePlan *plan;
	bool		found;
	MemoryContext old;
	int			i;

	if (image_plans == NULL)
		image_plans = cfeed_cache_hash(CFEED_CACHE_ROW_IMAGES, image_plans_invalidate,
									   "cfeed row image plans", sizeof(Oid),
									   sizeof(CfeedImagePlan));
	plan = (CfeedImagePlan *) hash_search(image_plans, &relid, HASH_ENTER, &found);
	if (!found)
	{
		plan->valid = false;
		plan->cxt = AllocSetContextCreate(TopMemoryContext, "cfeed row image plan",
										  ALLOCSET_SMALL_SIZES);
	}
	else if (plan->valid && plan->natts == desc->natts)
		return plan;
	plan->valid = false;

	MemoryContextReset(plan->cxt);
	old = MemoryContextSwitchTo(plan->cxt);
	plan->natts = desc->natts;
	plan->columns = palloc0(sizeof(CfeedImageColumn) * Max(desc->natts, 1));
	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		CfeedImageColumn *col = &plan->columns[i];

		if (att->attisdropped)
		{
			col->kind = CFEED_COL_DROPPED;
			continue;
		}
		col->kind = column_kind(att->atttypid);
		col->name = pstrdup(NameStr(att->attname));
		col->namelen = strlen(col->name);
		if (col->kind == CFEED_COL_OTHER)
		{
			/* to_jsonb reads its argument's type from the call expression. */
			fmgr_info_cxt(F_TO_JSONB, &col->to_jsonb, plan->cxt);
			fmgr_info_set_expr((Node *) makeFuncExpr(F_TO_JSONB, JSONBOID,
													 list_make1(makeNullConst(att->atttypid,
																			  att->atttypmod,
																			  att->attcollation)),
													 InvalidOid, InvalidOid,
													 COERCE_EXPLICIT_CALL),
							   &col->to_jsonb);
		}
	}
	MemoryContextSwitchTo(old);
	plan->valid = true;
	return plan;
}

/*
 * push_other
 *		Add to_jsonb(value) as the value of the current key: a scalar as it
 *		is, an array or object by its contents.
 */
static void
push_other(JsonbParseState **state, FmgrInfo *finfo, Datum value)
{
	Jsonb	   *j = DatumGetJsonbP(FunctionCall1(finfo, value));
	JsonbValue	v;

	if (JB_ROOT_IS_SCALAR(j))
	{
		if (!JsonbExtractScalar(&j->root, &v))
			elog(ERROR, "cfeed: to_jsonb returned a malformed scalar");
	}
	else
	{
		v.type = jbvBinary;
		v.val.binary.data = &j->root;
		v.val.binary.len = VARSIZE(j) - VARHDRSZ;
	}
	(void) pushJsonbValue(state, WJB_VALUE, &v);
}

/*
 * cfeed_row_image
 *		to_jsonb() of a row of relation relid (descriptor desc), as a jsonb
 *		Datum allocated in the current memory context.
 */
Datum
cfeed_row_image(Oid relid, HeapTuple tuple, TupleDesc desc)
{
	CfeedImagePlan *plan = image_plan_get(relid, desc);
	JsonbParseState *state = NULL;
	JsonbValue *result;
	Datum	   *values = palloc(sizeof(Datum) * Max(desc->natts, 1));
	bool	   *nulls = palloc(sizeof(bool) * Max(desc->natts, 1));
	int			i;

	heap_deform_tuple(tuple, desc, values, nulls);
	(void) pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	for (i = 0; i < plan->natts; i++)
	{
		CfeedImageColumn *col = &plan->columns[i];
		JsonbValue	v;

		if (col->kind == CFEED_COL_DROPPED)
			continue;
		v.type = jbvString;
		v.val.string.val = col->name;
		v.val.string.len = col->namelen;
		(void) pushJsonbValue(&state, WJB_KEY, &v);

		if (nulls[i])
		{
			v.type = jbvNull;
			(void) pushJsonbValue(&state, WJB_VALUE, &v);
			continue;
		}
		switch (col->kind)
		{
			case CFEED_COL_BOOL:
				v.type = jbvBool;
				v.val.boolean = DatumGetBool(values[i]);
				break;
			case CFEED_COL_INT2:
				v.type = jbvNumeric;
				v.val.numeric = DatumGetNumeric(DirectFunctionCall1(int2_numeric, values[i]));
				break;
			case CFEED_COL_INT4:
				v.type = jbvNumeric;
				v.val.numeric = DatumGetNumeric(DirectFunctionCall1(int4_numeric, values[i]));
				break;
			case CFEED_COL_INT8:
				v.type = jbvNumeric;
				v.val.numeric = DatumGetNumeric(DirectFunctionCall1(int8_numeric, values[i]));
				break;
			case CFEED_COL_TEXT:
				{
					text	   *t = DatumGetTextPP(values[i]);

					v.type = jbvString;
					v.val.string.val = VARDATA_ANY(t);
					v.val.string.len = VARSIZE_ANY_EXHDR(t);
					/* to_jsonb's limit, with its error */
					if (v.val.string.len > JENTRY_OFFLENMASK)
						ereport(ERROR,
								(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
								 errmsg("string too long to represent as jsonb string"),
								 errdetail("Due to an implementation restriction, jsonb strings cannot exceed %d bytes.",
										   JENTRY_OFFLENMASK)));
					break;
				}
			case CFEED_COL_OTHER:
				push_other(&state, &col->to_jsonb, values[i]);
				continue;
			case CFEED_COL_DROPPED:
				break;
		}
		(void) pushJsonbValue(&state, WJB_VALUE, &v);
	}
	result = pushJsonbValue(&state, WJB_END_OBJECT, NULL);
	return JsonbPGetDatum(JsonbValueToJsonb(result));
}
