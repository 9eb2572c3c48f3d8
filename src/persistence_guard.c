/*-------------------------------------------------------------------------
 *
 * persistence_guard.c
 *	  ALTER TABLE (or SEQUENCE) ... SET UNLOGGED of a table or sequence of
 *	  extension cfeed: refused (0A000) by the ProcessUtility hook
 *	  (utility.c), before PostgreSQL rewrites it.
 *
 *	  A crash empties an unlogged table.  cfeed.stamp (or cfeed.change, of
 *	  a feed stored in rows) would lose the numbers readers had seen, and
 *	  the sweeper would issue them again to other changes (guarantees 1 and
 *	  7 of the contract); cfeed.change would lose committed changes, the
 *	  marks which changes are stamped, the leases the consumers' cursors;
 *	  cfeed.change_id would start again and hand out change_ids twice.
 *	  So every table of the extension stays WAL-logged, whoever asks (the
 *	  extension's owner and superusers are the only roles PostgreSQL lets
 *	  ALTER them).  SET LOGGED, and every other ALTER TABLE, go ahead.
 *
 *	  Without the preload there is no hook, and a table made unlogged then
 *	  (or before 1.9) stays so: sweeps refuse (55000) to stamp into
 *	  cfeed.change, cfeed.stamp or cfeed.sweep_mark while it is unlogged
 *	  (cfeed_check_logged), so that no reader sees a stamp a crash would
 *	  take back.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "commands/extension.h"
#include "nodes/parsenodes.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "cfeed.h"

/* The relation's schema-qualified name, quoted as needed. */
static const char *
qualified_name(Oid relid)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  get_rel_name(relid));
}

/*
 * cfeed_guard_alter_table
 *		Refuse an ALTER TABLE or ALTER SEQUENCE that would make a relation
 *		of extension cfeed unlogged (the file header).
 */
void
cfeed_guard_alter_table(AlterTableStmt *stmt)
{
	ListCell   *lc;

	foreach(lc, stmt->cmds)
	{
		AlterTableCmd *cmd = lfirst_node(AlterTableCmd, lc);
		Oid			extension;
		Oid			relid;

		if (cmd->subtype != AT_SetUnLogged)
			continue;
		extension = get_extension_oid("cfeed", true);
		relid = RangeVarGetRelid(stmt->relation, NoLock, true);
		if (OidIsValid(extension) && OidIsValid(relid) &&
			getExtensionOfObject(RelationRelationId, relid) == extension)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("relation %s of extension cfeed cannot be made unlogged",
							qualified_name(relid)),
					 errdetail("A crash empties an unlogged table: cfeed would lose committed changes, or the numbers readers have seen and issue them again."),
					 errhint("Keep the tables of cfeed logged; to write less WAL, see the storage in ranges (cfeed.default_storage).")));
		return;
	}
}

/*
 * cfeed_check_logged
 *		55000 when the relation is unlogged (the file header); a sweep asks
 *		before it writes its stamps.
 */
void
cfeed_check_logged(Oid relid)
{
	if (get_rel_persistence(relid) == RELPERSISTENCE_UNLOGGED)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cfeed cannot stamp changes while %s is unlogged", qualified_name(relid)),
				 errdetail("A crash empties an unlogged table: the numbers readers have seen would be issued again."),
				 errhint("Make it logged again: ALTER TABLE %s SET LOGGED.", qualified_name(relid))));
}
