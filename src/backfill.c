/*-------------------------------------------------------------------------
 *
 * backfill.c
 *	  cfeed.backfill: numbering the existing rows of a tracked table into
 *	  each shard's migration range, in one statement.
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
#include "parser/scansup.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "cfeed.h"
#include "track.h"

PG_FUNCTION_INFO_V1(cfeed_backfill);

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
	volatile int64 rows = 0;
	Oid			types[2] = {INT4OID, OIDOID};
	Datum		values[2];

	cfeed_require_arg(fcinfo, 0, "tbl");
	cfeed_require_arg(fcinfo, 1, "feed_id");
	relid = PG_GETARG_OID(0);
	feed_id = PG_GETARG_INT32(1);

	rel = cfeed_track_open_table(relid, ShareLock);
	cfeed_track_check_owner(rel);
	count = cfeed_feed_shard_count(feed_id);
	trig = cfeed_track_trigger(rel);
	tracked_feed = trig ? cfeed_track_feed_arg(trig) : 0;
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
		cfeed_track_resolve_key(rel, OidIsValid(pk) ? "" : trig->tgargs[1], &key, CurrentMemoryContext);
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
	qname = cfeed_qualified_name(relid);
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
	cfeed_track_silence(relid);
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
		cfeed_track_silence(InvalidOid);
	}
	PG_END_TRY();
	cfeed_spi_finish(spi_level);
	PG_RETURN_INT64(rows);
}
