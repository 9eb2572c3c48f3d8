/*-------------------------------------------------------------------------
 *
 * backfill.c
 *	  cfeed.backfill: numbering the existing rows of a tracked table into
 *	  each shard's migration range (start-k+1 .. start for a shard with k
 *	  rows), with 'insert' row images, in one statement.
 *
 *	  The statement takes the rows in order_by order (order_by.c checks it),
 *	  with their shard (cfeed.shard_for of cfeed._track_key, as the triggers
 *	  place them) and image, draws their change_ids in that order, numbers
 *	  them per shard, inserts the changes (with their images; in a database
 *	  whose cfeed.change has no image columns yet, not yet updated, the
 *	  images into cfeed.row_image) and sets the rows' change_id column.
 *	  It also returns, as typed columns, the first shard whose numbers
 *	  would fall below 1, and then inserts no change (the guard refuses
 *	  numbers below 1); backfill then raises "no room", which undoes it
 *	  all.
 *
 *	  Locking: the table is held in SHARE mode (writers wait), so history
 *	  and the changes the triggers publish after it meet exactly; its
 *	  triggers are silenced in this backend while the statement runs, which
 *	  writes the rows' change_id itself.  The caller must own the table.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/table.h"
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
#include "utils/snapmgr.h"

#include "cfeed.h"
#include "track.h"

PG_FUNCTION_INFO_V1(cfeed_backfill);

/* The columns of the statement's result. */
#define BACKFILL_ROWS			1	/* bigint: rows numbered */
#define BACKFILL_FULL_SHARD		2	/* int: a shard without room, or null */
#define BACKFILL_FULL_ROWS		3	/* bigint: its row count */
#define BACKFILL_FULL_START		4	/* bigint: its start value */

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
 *		The one statement of backfill (see the file header), $1 the feed,
 *		$2 the table, whose quoted name is qname, $3 the start values of the
 *		feed's shards 0..n-1 (read_starts), $4 the table's number for
 *		cfeed.change.tbl (table_numbers.c); has_cid when it has a change_id
 *		column.  Its one row has the BACKFILL_* columns.
 */
static char *
backfill_statement(const char *order, const char *qname, bool has_cid)
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
					 " FROM n),"
					 " i AS (SELECT s.*, %s AS image FROM s),",
					 order, qname,
					 has_cid ? "s.j OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object('change_id', s.cid)" : "s.j");
	if (cfeed_schema_has(CFEED_SCHEMA_INLINE_IMAGES))
		appendStringInfoString(&sql,
							   " c AS (INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number,"
							   "  tbl, op, \"row\")"
							   " SELECT $1, i.shard, i.cid, i.seq, $4, 'insert', i.image"
							   " FROM i WHERE NOT EXISTS (SELECT FROM s WHERE s.seq < 1) ORDER BY i.o)");
	else
		appendStringInfoString(&sql,
							   " c AS (INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number)"
							   " SELECT $1, i.shard, i.cid, i.seq FROM i"
							   " WHERE NOT EXISTS (SELECT FROM s WHERE s.seq < 1) ORDER BY i.o),"
							   " ri AS (INSERT INTO cfeed.row_image (change_id, feed_id, tbl, op, \"row\")"
							   " SELECT i.cid, $1, $2::pg_catalog.regclass, 'insert', i.image FROM i)");
	if (has_cid)
		appendStringInfo(&sql,
						 ", u AS (UPDATE %s t SET change_id = s.cid FROM s"
						 " WHERE t.tableoid = s.toid AND t.ctid = s.tid)",
						 qname);
	appendStringInfoString(&sql,
						   " SELECT n.rows, f.shard, f.k, f.start"
						   " FROM (SELECT pg_catalog.count(*) AS rows FROM s) n"
						   " LEFT JOIN (SELECT s.shard, s.k, s.start FROM s WHERE s.seq < 1 LIMIT 1) f ON true");
	return sql.data;
}

/*
 * result_column
 *		Column attnum of the statement's one result row (inside SPI); NULL
 *		sets *isnull.
 */
static Datum
result_column(int attnum, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, attnum, isnull);
}

/*
 * run_statement
 *		Run backfill's statement with the feed, the table, the shards'
 *		start values and the table's number, its triggers silenced (inside SPI); returns
 *		the rows numbered, or raises "no room" for the shard the statement
 *		names.
 */
static int64
run_statement(const char *sql, int32 feed_id, Oid relid, Datum starts)
{
	Oid			types[4] = {INT4OID, OIDOID, INT8ARRAYOID, OIDOID};
	Datum		values[4];
	bool		isnull;
	Datum		full;
	bool		settled;
	CfeedImageScope previous;

	values[0] = Int32GetDatum(feed_id);
	values[1] = ObjectIdGetDatum(relid);
	values[2] = starts;
	values[3] = ObjectIdGetDatum((Oid) cfeed_table_number(relid, &settled));
	cfeed_track_silence(relid);
	/* images of this table for this feed only (the caller owns the table) */
	previous = cfeed_image_scope_enter(DatumGetObjectId(values[3]), feed_id);
	PG_TRY();
	{
		int			rc = SPI_execute_with_args(sql, 4, types, values, NULL, false, 0);

		if (rc != SPI_OK_SELECT || SPI_processed != 1)
			elog(ERROR, "cfeed.backfill: statement failed: %s", SPI_result_code_string(rc));
	}
	PG_FINALLY();
	{
		cfeed_image_scope_leave(previous);
		cfeed_track_silence(InvalidOid);
	}
	PG_END_TRY();

	full = result_column(BACKFILL_FULL_SHARD, &isnull);
	if (!isnull)
	{
		int64		k = DatumGetInt64(result_column(BACKFILL_FULL_ROWS, &isnull));
		int64		start = DatumGetInt64(result_column(BACKFILL_FULL_START, &isnull));

		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("shard %d of feed %d has no room for " INT64_FORMAT " history rows",
						DatumGetInt32(full), feed_id, k),
				 errdetail("History is numbered 1 .. " INT64_FORMAT ", the shard's migration range, which holds " INT64_FORMAT " rows.",
						   start, start),
				 errhint("Use more shards, or create the shard with a higher start value.")));
	}
	return DatumGetInt64(result_column(BACKFILL_ROWS, &isnull));
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
	char	   *qname;
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
	if (PG_ARGISNULL(2))
		order = default_order(rel, trig);
	else
		order = cfeed_order_by_clause(relid, text_to_cstring(PG_GETARG_TEXT_PP(2)));
	starts = read_starts(feed_id, count);
	qname = cfeed_qualified_name(relid);
	sql = backfill_statement(order, qname,
							 get_attnum(relid, CFEED_CHANGE_ID_COLUMN) > 0);
	table_close(rel, NoLock);

	spi_level = cfeed_spi_connect();
	cfeed_spi_exec(psprintf("LOCK TABLE %s IN SHARE MODE", qname), 0, NULL, NULL, NULL,
				   SPI_OK_UTILITY);
	rows = run_statement(sql, feed_id, relid, starts);
	cfeed_spi_finish(spi_level);
	PG_RETURN_INT64(rows);
}
