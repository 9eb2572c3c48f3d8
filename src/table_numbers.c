/*-------------------------------------------------------------------------
 *
 * table_numbers.c
 *	  The numbers of tracked tables: what cfeed.change.tbl holds.
 *
 *	  A change of a tracked table names its table by a number, whose row in
 *	  cfeed.tracked_table (table_no, tbl regclass, name text) holds the table
 *	  (a regclass: it follows renames and dumps by name) and its qualified
 *	  name.  A number needs no table to exist where the change is copied to:
 *	  logical replication carries cfeed.change to a subscriber without the
 *	  tracked table (a regclass, sent by name, would fail the subscriber's
 *	  apply there), and cfeed.tracked_table's
 *	  number and name with it; there tbl resolves the name to a table of
 *	  the subscriber's, or stays null (cfeed._tracked_table_resolve).  The
 *	  number costs a change row what the regclass did: four bytes.
 *
 *	  A database updated from a schema whose tbl was a regclass keeps its
 *	  changes' OIDs as their numbers (the update relabels the column, no
 *	  rewrite); new numbers are random positive int4s, so that two clusters
 *	  that track tables (a subscriber of its own) rarely draw the same one
 *	  (OIDs kept by the update do collide across clusters: docs/replication.md).
 *	  A database not yet updated has no cfeed.tracked_table (schema.c): its
 *	  "number" is the table's OID, the column a regclass.
 *
 *	  Lookups read cfeed.tracked_table directly, with a fresh snapshot,
 *	  without the caller's privileges: a writer publishes, and a reader's
 *	  policy check runs, without SELECT on it.  A number is created as the
 *	  extension's owner, under the lock of the table's relid (locks.c:
 *	  numbers are created by cfeed.track, and by a writer only for a table
 *	  tracked without one).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "cfeed.h"
#include "track.h"

PG_FUNCTION_INFO_V1(cfeed_tracked_table);

/* Columns of cfeed.tracked_table. */
#define Anum_tracked_table_no		1
#define Anum_tracked_table_tbl		2

#define TRACKED_TABLE				"tracked_table"

/* A query's lookups of numbers (fn_extra of its call sites). */
#define NUMBER_MEMO_SIZE			8

typedef struct CfeedNumberMemo
{
	int			used;
	int			next;			/* the entry to replace when full */
	int32		numbers[NUMBER_MEMO_SIZE];
	Oid			relids[NUMBER_MEMO_SIZE];
} CfeedNumberMemo;

/*
 * lookup
 *		The row of cfeed.tracked_table whose column attnum (the number, or
 *		the table) equals value, through the index on it, with a fresh
 *		snapshot (the query's in parallel mode, leader or worker: a number
 *		the query's snapshot misses is carried by no change it sees): its other column (*other, InvalidOid when null) and
 *		whether it was inserted by this transaction (*own).  False when
 *		there is none; when a table has several numbers (a subscriber's own
 *		and its publisher's), the first the index returns.
 */
static bool
lookup(AttrNumber attnum, Datum value, Oid *other, bool *own)
{
	Relation	rel = cfeed_table_open(TRACKED_TABLE, AccessShareLock);
	Relation	index = cfeed_index_open(attnum == Anum_tracked_table_no
										 ? "tracked_table_pkey" : "tracked_table_tbl_idx",
										 AccessShareLock);
	Snapshot	snapshot = cfeed_fresh_snapshot();
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tuple;
	bool		found = false;

	ScanKeyInit(&key, attnum, BTEqualStrategyNumber,
				attnum == Anum_tracked_table_no ? F_INT4EQ : F_OIDEQ, value);
	scan = systable_beginscan(rel, RelationGetRelid(index), true, snapshot, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		bool		isnull;
		Datum		d = heap_getattr(tuple, attnum == Anum_tracked_table_no
									 ? Anum_tracked_table_tbl : Anum_tracked_table_no,
									 RelationGetDescr(rel), &isnull);

		*other = isnull ? InvalidOid : DatumGetObjectId(d);
		*own = TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(tuple->t_data));
		found = true;
	}
	systable_endscan(scan);
	UnregisterSnapshot(snapshot);
	index_close(index, AccessShareLock);
	table_close(rel, NoLock);
	return found;
}

/*
 * number_create
 *		Give table relid a number, or refresh the name of the one it has, as
 *		the extension's owner.
 */
static void
number_create(Oid relid)
{
	Oid			types[2] = {OIDOID, TEXTOID};
	Datum		values[2];
	int			spi_level;
	Oid			number;
	bool		own;
	CfeedSavedUser saved = cfeed_become_owner();

	values[0] = ObjectIdGetDatum(relid);
	values[1] = CStringGetTextDatum(cfeed_qualified_name(relid));
	/*
	 * One transaction at a time numbers a table (the lock of its relid, not
	 * of cfeed.tracked_table: writers of other tables, and a subscriber's
	 * apply, go on); whether it has a number is asked once the lock is held,
	 * with a fresh snapshot, so that a number committed meanwhile is taken
	 * even in a REPEATABLE READ transaction, whose own snapshot misses it.
	 */
	cfeed_number_lock(relid);
	spi_level = cfeed_spi_connect();
	if (lookup(Anum_tracked_table_tbl, ObjectIdGetDatum(relid), &number, &own))
		cfeed_spi_exec("UPDATE cfeed.tracked_table t SET name = $2"
					   " WHERE t.tbl OPERATOR(pg_catalog.=) $1::pg_catalog.regclass"
					   " AND t.name IS DISTINCT FROM $2",
					   2, types, values, NULL, SPI_OK_UPDATE);
	else
		cfeed_spi_exec("INSERT INTO cfeed.tracked_table (table_no, tbl, name)"
					   " SELECT n.no, $1::pg_catalog.regclass, $2"
					   " FROM (SELECT 1 OPERATOR(pg_catalog.+) pg_catalog.floor(pg_catalog.random()"
					   "  OPERATOR(pg_catalog.*) 2147483646)::pg_catalog.int4 AS no"
					   "  FROM pg_catalog.generate_series(1, 16)) n"
					   " WHERE NOT EXISTS (SELECT FROM cfeed.tracked_table t"
					   "  WHERE t.table_no OPERATOR(pg_catalog.=) n.no)"
					   " LIMIT 1",
					   2, types, values, NULL, SPI_OK_INSERT);
	cfeed_spi_finish(spi_level);
	cfeed_restore_user(saved);
}

/*
 * cfeed_table_number
 *		The number of tracked table relid (what cfeed.change.tbl holds),
 *		created if it has none; its OID in a database not yet updated.  *settled
 *		is false when the number was created by this transaction, which may
 *		still roll back: the caller must not keep it beyond it.
 */
int32
cfeed_table_number(Oid relid, bool *settled)
{
	Oid			number;
	bool		own;

	*settled = true;
	if (!cfeed_schema_has(CFEED_SCHEMA_TABLE_NUMBERS))
		return (int32) relid;
	if (!lookup(Anum_tracked_table_tbl, ObjectIdGetDatum(relid), &number, &own))
	{
		number_create(relid);
		if (!lookup(Anum_tracked_table_tbl, ObjectIdGetDatum(relid), &number, &own))
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not number tracked table \"%s\"", get_rel_name(relid)),
					 errdetail("cfeed.tracked_table changed concurrently."),
					 errhint("Retry the transaction.")));
	}
	*settled = !own;
	return (int32) number;
}

/*
 * cfeed_table_number_refresh
 *		For cfeed.track: give table relid a number, or write its current name
 *		into the number it has (a renamed table's name, for subscribers).
 */
void
cfeed_table_number_refresh(Oid relid)
{
	if (cfeed_schema_has(CFEED_SCHEMA_TABLE_NUMBERS))
		number_create(relid);
}

/*
 * cfeed_table_of_number
 *		The table of number tbl, in a query whose call site is flinfo (its
 *		lookups are remembered there): InvalidOid when the number has no
 *		table here (a subscriber without it), names a table dropped since,
 *		or is unknown.
 */
Oid
cfeed_table_of_number(FmgrInfo *flinfo, int32 tbl)
{
	CfeedNumberMemo *memo = (CfeedNumberMemo *) flinfo->fn_extra;
	Oid			relid;
	bool		own;
	int			i;

	if (memo == NULL)
		memo = flinfo->fn_extra = MemoryContextAllocZero(flinfo->fn_mcxt, sizeof(CfeedNumberMemo));
	for (i = 0; i < memo->used; i++)
	{
		if (memo->numbers[i] == tbl)
			return memo->relids[i];
	}
	if (!lookup(Anum_tracked_table_no, Int32GetDatum(tbl), &relid, &own) ||
		(OidIsValid(relid) && !SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid))))
		relid = InvalidOid;
	i = memo->used < NUMBER_MEMO_SIZE ? memo->used++ : memo->next++ % NUMBER_MEMO_SIZE;
	memo->numbers[i] = tbl;
	memo->relids[i] = relid;
	return relid;
}

/*
 * cfeed_tracked_table
 *		SQL: cfeed._tracked_table(tbl int) returns regclass, STRICT.
 *		The table of a change's number, null where there is none
 *		(read_rows' tbl).
 */
Datum
cfeed_tracked_table(PG_FUNCTION_ARGS)
{
	Oid			relid = cfeed_table_of_number(fcinfo->flinfo, PG_GETARG_INT32(0));

	if (!OidIsValid(relid))
		PG_RETURN_NULL();
	PG_RETURN_OID(relid);
}
