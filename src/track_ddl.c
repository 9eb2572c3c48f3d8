/*-------------------------------------------------------------------------
 *
 * track_ddl.c
 *	  cfeed.track and cfeed.untrack: creating and dropping the tracking
 *	  triggers of a table (tracked.c describes them).
 *
 *	  The caller must own the table.  track() takes the table's SHARE ROW
 *	  EXCLUSIVE lock (CREATE TRIGGER's) up front rather than upgrading to it,
 *	  untrack() its ACCESS EXCLUSIVE lock (DROP TRIGGER's), and both lock the
 *	  table's partitions the same way before creating or dropping their
 *	  TRUNCATE triggers.  The triggers are created and dropped by SQL, with
 *	  search_path pinned.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "cfeed.h"
#include "track.h"

PG_FUNCTION_INFO_V1(cfeed_track);
PG_FUNCTION_INFO_V1(cfeed_untrack);

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
 * run_ddl
 *		Run one CREATE or DROP TRIGGER (inside cfeed_spi_connect).
 */
static void
run_ddl(const char *sql)
{
	cfeed_spi_exec(sql, 0, NULL, NULL, NULL, SPI_OK_UTILITY);
}

/*
 * normalized_key
 *		The key argument of track() for rel, as the trigger keeps it: the
 *		columns as quoted identifiers joined by commas, or '' for the primary
 *		key (key NULL).  Errors as cfeed_track_resolve_key, and 22023 for a
 *		key of blanks.
 */
static char *
normalized_key(Relation rel, text *key_arg)
{
	StringInfoData keyspec;
	CfeedTrackKey key;
	char	   *given;
	int			i;

	key.nkeys = 0;
	if (key_arg == NULL)
	{
		cfeed_track_resolve_key(rel, "", &key, CurrentMemoryContext);
		return "";
	}
	given = text_to_cstring(key_arg);
	if (given[strspn(given, " \t\n\r")] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("key must name at least one column of table \"%s\"",
						RelationGetRelationName(rel)),
				 errhint("Pass key => NULL to use the primary key.")));

	cfeed_track_resolve_key(rel, given, &key, CurrentMemoryContext);
	initStringInfo(&keyspec);
	for (i = 0; i < key.nkeys; i++)
	{
		if (i > 0)
			appendStringInfoChar(&keyspec, ',');
		appendStringInfoString(&keyspec,
							   quote_identifier(get_attname(RelationGetRelid(rel), key.attnums[i], false)));
	}
	return keyspec.data;
}

/*
 * has_change_id_column
 *		Whether rel has a change_id column for the triggers to set; 42804
 *		when it has one that is not bigint.
 */
static bool
has_change_id_column(Relation rel)
{
	Oid			relid = RelationGetRelid(rel);
	AttrNumber	cid_att = get_attnum(relid, CFEED_CHANGE_ID_COLUMN);

	if (cid_att > 0 && get_atttype(relid, cid_att) != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" of table \"%s\" must be of type bigint",
						CFEED_CHANGE_ID_COLUMN, RelationGetRelationName(rel)),
				 errdetail("cfeed stores each change's change_id in a table's change_id column."),
				 errhint("Rename the column or change its type to bigint.")));
	return cid_att > 0;
}

/*
 * create_triggers
 *		Create the tracking triggers of table relid, with trigger arguments
 *		args: the row triggers (the change_id one when has_cid), and the
 *		TRUNCATE trigger on it and on each of its partitions (parts) that is
 *		a table.
 */
static void
create_triggers(Oid relid, const char *args, bool has_cid, List *parts)
{
	int			spi_level = cfeed_spi_connect();
	char	   *qname = cfeed_qualified_name(relid);
	ListCell   *lc;

	run_ddl(psprintf("CREATE TRIGGER " CFEED_TRACK_TRIGGER
					 " AFTER INSERT OR UPDATE OR DELETE ON %s FOR EACH ROW"
					 " EXECUTE FUNCTION cfeed._track_row(%s)", qname, args));
	if (has_cid)
		run_ddl(psprintf("CREATE TRIGGER " CFEED_TRACK_ID_TRIGGER
						 " BEFORE INSERT OR UPDATE OR DELETE ON %s FOR EACH ROW"
						 " EXECUTE FUNCTION cfeed._track_change_id(%s)", qname, args));
	foreach(lc, lcons_oid(relid, parts))
	{
		Oid			part = lfirst_oid(lc);
		char		kind = get_rel_relkind(part);

		if (kind != RELKIND_RELATION && kind != RELKIND_PARTITIONED_TABLE)
			continue;
		run_ddl(psprintf("CREATE TRIGGER " CFEED_TRACK_TRUNCATE
						 " BEFORE TRUNCATE ON %s FOR EACH STATEMENT"
						 " EXECUTE FUNCTION cfeed._track_truncate(%s)",
						 cfeed_qualified_name(part), args));
	}
	cfeed_spi_finish(spi_level);
}

/*
 * cfeed_track
 *		SQL: cfeed.track(tbl regclass, feed_id int, key text) returns void.
 *		Installs the tracking triggers and numbers the table (or writes its
 *		current name into its number); the caller must own tbl and may
 *		write the feed.
 */
Datum
cfeed_track(PG_FUNCTION_ARGS)
{
	Oid			relid;
	int32		feed_id;
	Relation	rel;
	Trigger    *existing;
	char	   *keyspec;
	bool		has_cid;
	char	   *args;
	List	   *parts;

	cfeed_require_arg(fcinfo, 0, "tbl");
	cfeed_require_arg(fcinfo, 1, "feed_id");
	relid = PG_GETARG_OID(0);
	feed_id = PG_GETARG_INT32(1);

	/* CREATE TRIGGER's lock, taken up front rather than upgraded. */
	rel = cfeed_track_open_table(relid, ShareRowExclusiveLock);
	cfeed_track_check_owner(rel);

	/* before the lookup: the same words whether the feed exists or not */
	cfeed_check_write(feed_id);

	cfeed_track_check_permanent(rel);
	(void) cfeed_feed_shard_count(feed_id);

	existing = cfeed_track_trigger(rel);
	if (existing != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" is already tracked by feed %d",
						RelationGetRelationName(rel), cfeed_track_feed_arg(existing)),
				 errdetail("A table publishes to one feed."),
				 errhint("Run cfeed.untrack() first to track it with another feed or key.")));

	keyspec = normalized_key(rel, PG_ARGISNULL(2) ? NULL : PG_GETARG_TEXT_PP(2));
	has_cid = has_change_id_column(rel);

	/*
	 * Row-level security: a reader sees a row image only if the table's
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

	args = psprintf("%s, %s", quote_literal_cstr(psprintf("%d", feed_id)),
					quote_literal_cstr(keyspec));
	parts = partitions_of(rel, ShareRowExclusiveLock);
	table_close(rel, NoLock);
	create_triggers(relid, args, has_cid, parts);
	/* its number for cfeed.change.tbl, with its current name */
	cfeed_table_number_refresh(relid);
	PG_RETURN_VOID();
}

/*
 * drop_trigger
 *		Drop trigger name of relation relid if it has it (inside
 *		cfeed_spi_connect).
 */
static void
drop_trigger(const char *name, Oid relid)
{
	if (OidIsValid(get_trigger_oid(relid, name, true)))
		run_ddl(psprintf("DROP TRIGGER %s ON %s", quote_identifier(name),
						 cfeed_qualified_name(relid)));
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
	List	   *parts;
	ListCell   *lc;

	cfeed_require_arg(fcinfo, 0, "tbl");
	relid = PG_GETARG_OID(0);
	rel = cfeed_track_open_table(relid, AccessExclusiveLock);
	cfeed_track_check_owner(rel);
	if (cfeed_track_trigger(rel) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("table \"%s\" is not tracked", RelationGetRelationName(rel)),
				 errhint("Track it with cfeed.track().")));
	parts = partitions_of(rel, AccessExclusiveLock);
	table_close(rel, NoLock);

	spi_level = cfeed_spi_connect();
	run_ddl(psprintf("DROP TRIGGER " CFEED_TRACK_TRIGGER " ON %s", cfeed_qualified_name(relid)));
	drop_trigger(CFEED_TRACK_ID_TRIGGER, relid);
	drop_trigger(CFEED_TRACK_TRUNCATE, relid);
	foreach(lc, parts)
		drop_trigger(CFEED_TRACK_TRUNCATE, lfirst_oid(lc));
	cfeed_spi_finish(spi_level);
	PG_RETURN_VOID();
}
