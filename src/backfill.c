/*-------------------------------------------------------------------------
 *
 * backfill.c
 *	  cfeed.backfill: numbering the existing rows of a tracked table into
 *	  each shard's migration range (start-k+1 .. start for a shard with k
 *	  rows), with 'insert' row images.
 *
 *	  One statement takes the rows in order_by order (order_by.c checks it),
 *	  with their shard (cfeed.shard_for of cfeed._track_key, as the triggers
 *	  place them) and image, draws their change_ids in that order, numbers
 *	  them per shard, sets the rows' change_id column and returns the
 *	  changes, with the first shard whose numbers would fall below 1
 *	  (backfill then raises "no room", which undoes it all).  Further
 *	  statements insert the changes in batches (with their images; in a
 *	  database whose cfeed.change has no image columns yet, not yet
 *	  updated, the images into cfeed.row_image).  Only these may write row
 *	  images (guard.c's image scope), and they run no code of the caller's:
 *	  the first statement, which does (the table's triggers, policies and
 *	  constraints), has run to its end before.
 *
 *	  Locking: the table is held in SHARE mode (writers wait), so history
 *	  and the changes the triggers publish after it meet exactly; its
 *	  tracking triggers are silenced in this backend for the rows of the
 *	  statement, which writes their change_id itself (a row that one of the
 *	  table's other triggers writes meanwhile is published as live).  The
 *	  caller must own the table.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/table.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "storage/lmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"

#include "cfeed.h"
#include "track.h"

PG_FUNCTION_INFO_V1(cfeed_backfill);

/* The columns of the numbering statement's rows, one per change. */
#define BACKFILL_SHARD			1	/* int */
#define BACKFILL_CHANGE_ID		2	/* bigint */
#define BACKFILL_NUMBER			3	/* bigint: in the shard's migration range */
#define BACKFILL_IMAGE			4	/* jsonb: the 'insert' row image */
#define BACKFILL_LOWEST			5	/* bigint: the lowest number of all */
#define BACKFILL_FULL_SHARD		6	/* int: the shard of the lowest */
#define BACKFILL_FULL_ROWS		7	/* bigint: its row count */
#define BACKFILL_FULL_START		8	/* bigint: its start value */
#define BACKFILL_KEPT			9	/* bool: every row updated, on its shard */

/* The changes inserted by one statement (their images held in memory). */
#define BACKFILL_BATCH			1000

/*
 * open_tracked_table
 *		Open table relid for backfill in SHARE mode, checking that the caller
 *		owns it and that feed feed_id tracks it; the tracking trigger in
 *		*trig and the feed's shard count in *count.
 */
static Relation
open_tracked_table(Oid relid, int32 feed_id, Trigger **trig, int32 *count)
{
	Relation	rel = cfeed_track_open_table(relid, ShareLock);

	cfeed_track_check_owner(rel);
	*count = cfeed_feed_shard_count(feed_id);
	*trig = cfeed_track_trigger(rel);
	if (*trig == NULL || cfeed_track_feed_arg(*trig) != feed_id)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" is not tracked by feed %d", RelationGetRelationName(rel), feed_id),
				 errdetail("backfill() shards the rows by the key the table is tracked with."),
				 errhint("Run cfeed.track() and cfeed.backfill() in one transaction, so that history and live changes meet exactly.")));
	return rel;
}

/*
 * default_order
 *		The order of backfill without order_by: the primary key's columns,
 *		else the tracking key's, as "t.<column>, ...".
 */
static char *
default_order(Relation rel, Trigger *trig)
{
	CfeedTrackKey key;
	Oid			pk = cfeed_primary_key_index(rel);
	StringInfoData ob;
	int			i;

	key.nkeys = 0;
	cfeed_track_resolve_key(rel, OidIsValid(pk) ? "" : trig->tgargs[1], &key, CurrentMemoryContext);
	initStringInfo(&ob);
	for (i = 0; i < key.nkeys; i++)
		appendStringInfo(&ob, "%st.%s", i > 0 ? ", " : "",
						 quote_identifier(get_attname(RelationGetRelid(rel), key.attnums[i], false)));
	return ob.data;
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
	Snapshot	snapshot = cfeed_fresh_snapshot();

	rel = cfeed_table_open("change", AccessShareLock);
	ScanKeyInit(&keys[0], Anum_change_feed_id, BTEqualStrategyNumber, F_INT4EQ,
				Int32GetDatum(feed_id));
	ScanKeyInit(&keys[1], Anum_change_shard, BTEqualStrategyNumber, F_INT4EQ,
				Int32GetDatum(shard));
	ScanKeyInit(&keys[2], Anum_change_sequence, BTLessEqualStrategyNumber, F_INT8LE,
				Int64GetDatum(start));
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
 * read_starts
 *		The start values of the feed's shards 0..count-1, as a bigint array
 *		for the statement: read here, without the caller's privileges on
 *		cfeed.shard_config, which the documented grants do not include (a
 *		statement that joined the table would fail with 42501 for a table
 *		owner with only those grants).  55000 when a shard has history
 *		already.
 */
static Datum
read_starts(int32 feed_id, int32 count)
{
	Datum	   *starts = palloc(sizeof(Datum) * count);
	int32		s;

	for (s = 0; s < count; s++)
	{
		CfeedShard	sh;

		if (!cfeed_shard_fetch(feed_id, s, NULL, false, &sh))
			cfeed_shard_missing(feed_id, s, ERRCODE_UNDEFINED_OBJECT, NULL);
		starts[s] = Int64GetDatum(sh.start_number);
		if (shard_has_history(feed_id, s, sh.start_number))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("shard %d of feed %d already has history", s, feed_id),
					 errdetail("Changes numbered at or below the shard's start value " INT64_FORMAT " exist; a shard's history is written once.",
							   sh.start_number),
					 errhint("Backfill a feed once, before or right after it starts tracking.")));
	}
	return PointerGetDatum(construct_array(starts, count, INT8OID, sizeof(int64),
										   FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

/*
 * backfill_statement
 *		The statement that numbers the rows (see the file header), $1 the
 *		feed, $2 the table, read and written as target (its quoted name,
 *		after ONLY unless it is partitioned: an inheritance parent's triggers
 *		do not fire for its children's rows), $3 the start values of the
 *		feed's shards 0..n-1 (read_starts); has_cid when it has a change_id
 *		column, which it sets.  Such a row's image is the row that UPDATE
 *		wrote, after the table's other BEFORE triggers (an updated_at column
 *		set by one, say), so that history shows the row as it is; and
 *		BACKFILL_KEPT tells whether every row was updated, kept the change_id
 *		set and stayed on its shard.
 *		It returns the changes to insert in order_by order, the BACKFILL_*
 *		columns.
 */
static char *
backfill_statement(const char *order, const char *target, bool has_cid)
{
	StringInfoData sql;

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
					 " SELECT n.*, $3[n.shard + 1] AS start,"
					 "  pg_catalog.count(*) OVER (PARTITION BY n.shard) AS k,"
					 "  $3[n.shard + 1] - pg_catalog.count(*) OVER (PARTITION BY n.shard)"
					 "   + pg_catalog.row_number() OVER (PARTITION BY n.shard ORDER BY n.o) AS seq"
					 " FROM n)",
					 order, target);
	if (has_cid)
		appendStringInfo(&sql,
						 ", u AS (UPDATE %s t SET change_id = s.cid FROM s"
						 " WHERE t.tableoid = s.toid AND t.ctid = s.tid"
						 " RETURNING s.o, pg_catalog.to_jsonb(t) AS j,"
						 "  t.change_id = s.cid"
						 "  AND cfeed.shard_for($1, cfeed._track_key($2, t)) = s.shard AS kept)",
						 target);
	appendStringInfo(&sql,
					 " SELECT s.shard, s.cid, s.seq, %s AS image,"
					 "  pg_catalog.min(s.seq) OVER w, pg_catalog.first_value(s.shard) OVER w,"
					 "  pg_catalog.first_value(s.k) OVER w, pg_catalog.first_value(s.start) OVER w,"
					 "  %s"
					 " FROM s%s"
					 " WINDOW w AS (ORDER BY s.seq ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)"
					 " ORDER BY s.o",
					 has_cid ? "u.j" : "s.j",
					 has_cid ? "pg_catalog.bool_and(u.kept IS TRUE) OVER w" : "true",
					 has_cid ? " LEFT JOIN u ON u.o = s.o" : "");
	return sql.data;
}

/*
 * insert_statement
 *		The statement that inserts one batch of the changes backfill_statement
 *		returned, in their order: $1 the feed, $2 the table's number for
 *		cfeed.change.tbl (table_numbers.c), $3 the table, $4-$7 the batch's
 *		shards, change_ids, numbers and images (the BACKFILL_INSERT_TYPES).
 *		It runs no code of the caller's: it reads nothing but its arguments.
 */
static const char *
insert_statement(void)
{
	if (cfeed_schema_has(CFEED_SCHEMA_INLINE_IMAGES))
		return "INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number,"
			"  tbl, op, \"row\")"
			" SELECT $1, b.shard, b.cid, b.seq, $2, 'insert', b.image"
			" FROM ROWS FROM (pg_catalog.unnest($4), pg_catalog.unnest($5), pg_catalog.unnest($6),"
			"  pg_catalog.unnest($7)) WITH ORDINALITY AS b (shard, cid, seq, image, o)"
			" ORDER BY b.o";
	/* a database whose cfeed.change has no image columns yet */
	return "WITH b AS (SELECT * FROM ROWS FROM (pg_catalog.unnest($4), pg_catalog.unnest($5),"
		"  pg_catalog.unnest($6), pg_catalog.unnest($7)) WITH ORDINALITY AS b (shard, cid, seq, image, o)),"
		" c AS (INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number)"
		"  SELECT $1, b.shard, b.cid, b.seq FROM b ORDER BY b.o)"
		" INSERT INTO cfeed.row_image (change_id, feed_id, tbl, op, \"row\")"
		" SELECT b.cid, $1, $3::pg_catalog.regclass, 'insert', b.image FROM b";
}

/*
 * result_column
 *		Column attnum of the first fetched row (inside SPI); NULL sets
 *		*isnull.
 */
static Datum
result_column(int attnum, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, attnum, isnull);
}

/*
 * check_first_row
 *		From the first fetched row in SPI_tuptable, whose window columns speak
 *		of all: raise 55000 when a trigger skipped or moved a row
 *		(BACKFILL_KEPT), or "no room" when the lowest number is below 1 (its
 *		shard's migration range is too small for its rows).
 */
static void
check_first_row(int32 feed_id)
{
	bool		isnull;
	int32		shard;
	int64		k;
	int64		start;

	if (!DatumGetBool(result_column(BACKFILL_KEPT, &isnull)))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("a trigger skipped or moved a row that backfill numbered"),
				 errdetail("backfill() sets each row's change_id with an UPDATE, which fires the table's other triggers; a BEFORE UPDATE trigger returned no row, set change_id to another value, or changed the row's key so that it belongs to another shard."),
				 errhint("Let the table's triggers pass an UPDATE that sets change_id alone, then backfill again.")));
	if (DatumGetInt64(result_column(BACKFILL_LOWEST, &isnull)) >= 1)
		return;
	shard = DatumGetInt32(result_column(BACKFILL_FULL_SHARD, &isnull));
	k = DatumGetInt64(result_column(BACKFILL_FULL_ROWS, &isnull));
	start = DatumGetInt64(result_column(BACKFILL_FULL_START, &isnull));
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("shard %d of feed %d has no room for " INT64_FORMAT " history rows",
					shard, feed_id, k),
			 errdetail("History is numbered 1 .. " INT64_FORMAT ", the shard's migration range, which holds " INT64_FORMAT " rows.",
					   start, start),
			 errhint("Use more shards, or create the shard with a higher start value.")));
}

/*
 * column_array
 *		Column attnum of the fetched rows (SPI_tuptable), none null, as an
 *		array of type elem.
 */
static Datum
column_array(int attnum, Oid elem)
{
	int			n = (int) SPI_processed;
	Datum	   *datums = palloc(sizeof(Datum) * n);
	int16		typlen;
	bool		typbyval;
	char		typalign;
	int			i;

	for (i = 0; i < n; i++)
	{
		bool		isnull;

		datums[i] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, attnum, &isnull);
	}
	get_typlenbyvalalign(elem, &typlen, &typbyval, &typalign);
	return PointerGetDatum(construct_array(datums, n, elem, typlen, typbyval, typalign));
}

/*
 * insert_batch
 *		Insert the changes fetched into SPI_tuptable with the statement
 *		insert (insert_statement), whose first three arguments values holds,
 *		in the image scope of the table's number values[1]; frees the fetched
 *		rows.  batch holds the batch's arrays until the caller resets it.
 */
static void
insert_batch(SPIPlanPtr insert, Datum *values, int32 feed_id, MemoryContext batch)
{
	MemoryContext caller = MemoryContextSwitchTo(batch);
	CfeedImageScope previous;
	volatile int rc;

	values[3] = column_array(BACKFILL_SHARD, INT4OID);
	values[4] = column_array(BACKFILL_CHANGE_ID, INT8OID);
	values[5] = column_array(BACKFILL_NUMBER, INT8OID);
	values[6] = column_array(BACKFILL_IMAGE, JSONBOID);
	MemoryContextSwitchTo(caller);
	SPI_freetuptable(SPI_tuptable);

	/* images of this table for this feed only (the caller owns the table) */
	previous = cfeed_image_scope_enter(DatumGetObjectId(values[1]), feed_id);
	PG_TRY();
	{
		rc = SPI_execute_plan(insert, values, NULL, false, 0);
	}
	PG_FINALLY();
	{
		cfeed_image_scope_leave(previous);
	}
	PG_END_TRY();
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "cfeed.backfill: inserting the changes failed: %s", SPI_result_code_string(rc));
}

/*
 * number_and_insert
 *		Run the numbering statement sql (backfill_statement) with the feed,
 *		the table and the shards' start values, and insert its changes in
 *		batches; returns their count, or raises "no room".  The first fetch
 *		runs the statement to its end (a data-modifying WITH in a cursor),
 *		and with it every code of the caller's it runs (the table's other
 *		triggers, its policies, its constraints' and order_by's functions),
 *		so that none runs in insert_batch's image scope.
 */
static int64
number_and_insert(const char *sql, int32 feed_id, Oid relid, Datum starts)
{
	Oid			types[7] = {INT4OID, OIDOID, INT8ARRAYOID, INT4ARRAYOID, INT8ARRAYOID,
	INT8ARRAYOID, JSONBARRAYOID};
	Datum		values[7];
	bool		settled;
	int64		rows = 0;
	SPIPlanPtr	insert;
	Portal		portal;
	MemoryContext batch = AllocSetContextCreate(CurrentMemoryContext, "cfeed backfill batch",
												ALLOCSET_DEFAULT_SIZES);

	values[0] = Int32GetDatum(feed_id);
	values[1] = ObjectIdGetDatum(relid);
	values[2] = starts;
	portal = SPI_cursor_open_with_args(NULL, sql, 3, types, values, NULL, false, 0);

	types[1] = OIDOID;			/* the table's number */
	types[2] = OIDOID;			/* the table */
	values[1] = ObjectIdGetDatum((Oid) cfeed_table_number(relid, &settled));
	values[2] = ObjectIdGetDatum(relid);
	insert = SPI_prepare(insert_statement(), 7, types);
	if (insert == NULL)
		elog(ERROR, "cfeed.backfill: SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		SPI_cursor_fetch(portal, true, BACKFILL_BATCH);
		if (SPI_processed == 0)
			break;
		if (rows == 0)
			check_first_row(feed_id);
		rows += SPI_processed;
		insert_batch(insert, values, feed_id, batch);
		MemoryContextReset(batch);
	}
	SPI_cursor_close(portal);
	SPI_freeplan(insert);
	MemoryContextDelete(batch);
	return rows;
}

/*
 * run_statement
 *		number_and_insert with the table's triggers silenced (inside SPI).
 */
static int64
run_statement(const char *sql, int32 feed_id, Oid relid, Datum starts)
{
	volatile int64 rows;
	CfeedTrackSilence previous = cfeed_track_silence(relid);

	PG_TRY();
	{
		rows = number_and_insert(sql, feed_id, relid, starts);
	}
	PG_FINALLY();
	{
		cfeed_track_unsilence(previous);
	}
	PG_END_TRY();
	return rows;
}

/*
 * cfeed_backfill
 *		SQL: cfeed.backfill(tbl regclass, feed_id int, order_by text) returns
 *		bigint.  Numbers the existing rows of a table tracked by the feed into
 *		each shard's migration range, start-k+1 .. start for a shard with k
 *		rows, in order_by order (the primary key's, else the key's, when
 *		null), with 'insert' row images, and sets the rows' change_id column.
 *		Holds tbl in SHARE mode.  Returns the number of rows.  The caller must
 *		own tbl and may write the feed (42501).
 */
Datum
cfeed_backfill(PG_FUNCTION_ARGS)
{
	Oid			relid;
	int32		feed_id;
	int32		count;
	Relation	rel;
	Trigger    *trig;
	char	   *order;
	char	   *target;
	char	   *sql;
	int			spi_level;
	int64		rows;
	Datum		starts;

	cfeed_require_arg(fcinfo, 0, "tbl");
	cfeed_require_arg(fcinfo, 1, "feed_id");
	relid = PG_GETARG_OID(0);
	feed_id = PG_GETARG_INT32(1);
	cfeed_check_write(feed_id);

	rel = open_tracked_table(relid, feed_id, &trig, &count);

	/*
	 * The table's own row-level security would hide rows from the numbering
	 * statement: history would silently miss them, and a second backfill
	 * is refused.
	 */
	if (check_enable_rls(relid, InvalidOid, false) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("row-level security of table \"%s\" applies to backfill()", RelationGetRelationName(rel)),
				 errdetail("It would number only the rows the policies let you see."),
				 errhint("Run backfill() as a role the table's row-level security does not apply to (its owner, unless FORCE ROW LEVEL SECURITY is set; a role with BYPASSRLS).")));
	if (PG_ARGISNULL(2))
		order = default_order(rel, trig);
	else
		order = cfeed_order_by_clause(relid, text_to_cstring(PG_GETARG_TEXT_PP(2)));
	starts = read_starts(feed_id, count);
	target = cfeed_qualified_name(relid);
	if (rel->rd_rel->relkind != RELKIND_PARTITIONED_TABLE)
		target = psprintf("ONLY %s", target);
	sql = backfill_statement(order, target,
							 get_attnum(relid, CFEED_CHANGE_ID_COLUMN) > 0);
	table_close(rel, NoLock);

	spi_level = cfeed_spi_connect();
	cfeed_spi_exec(psprintf("LOCK TABLE %s IN SHARE MODE", target), 0, NULL, NULL, NULL,
				   SPI_OK_UTILITY);
	rows = run_statement(sql, feed_id, relid, starts);
	cfeed_spi_finish(spi_level);
	PG_RETURN_INT64(rows);
}
