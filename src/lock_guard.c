/*-------------------------------------------------------------------------
 *
 * lock_guard.c
 *	  LOCK TABLE on the tables of extension cfeed: a role that does not own
 *	  such a table may lock it in ROW EXCLUSIVE mode at most.
 *
 * PostgreSQL lets a role with UPDATE, DELETE or TRUNCATE on a table LOCK it
 * in any mode.  cfeed grants such privileges for one feed on tables every
 * feed shares: DELETE on cfeed.change to a feed's deleters, UPDATE on
 * cfeed.lease to consumers, DELETE on cfeed.failed_change to dead-letter
 * operators, DELETE on the grant tables to grantors.  An ACCESS EXCLUSIVE
 * lock one of them holds would stop every writer, reader, consumer and
 * sweep of every feed (a SHARE lock every writer, a SHARE UPDATE EXCLUSIVE
 * lock VACUUM) for as long as its transaction stays open, far past what its
 * grant is for.  So the ProcessUtility hook (utility.c) refuses (42501) a
 * LOCK in a mode stronger than ROW EXCLUSIVE, the mode their own DML takes,
 * of a table of extension cfeed that the role does not own (a superuser
 * owns every table; the extension's owner owns cfeed's).  It refuses before
 * PostgreSQL asks for the lock: a request that waited for a holder would
 * already hold up every later request behind it.
 *
 * A LOCK of a view also locks the relations its query reads, with the
 * view owner's privileges (the caller's, for a security_invoker view:
 * PostgreSQL's LockViewRecurse): a view that a role owns and that reads
 * cfeed.lease would lock cfeed.lease for it.  The check walks the views as
 * PostgreSQL does, each relation read judged by that role, and a view of
 * extension cfeed is judged as its tables are.
 *
 * What the check judges must be what PostgreSQL locks.  A view is locked
 * first, as LOCK would lock it (in the statement's mode, once the role may:
 * LockTableAclCheck's privileges), so that its query cannot be replaced
 * before PostgreSQL reads it; a table is not (an ACCESS EXCLUSIVE lock
 * taken early could deadlock two LOCKs of one table).  And the statement
 * PostgreSQL runs names each relation qualified with its schema, as found
 * (a view's name read under its lock): a name whose schema another session
 * renames cannot come to mean a table of cfeed's, whose schema and names
 * only its owner can change.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "rewrite/rewriteHandler.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "cfeed.h"
#include "compat.h"

/* A LOCK statement's check, while it walks the relations it would lock. */
typedef struct LockCheck
{
	LOCKMODE	mode;
	bool		nowait;
	Oid			user;			/* whose ownership and privileges count: the
								 * caller, or the owner of the view walked */
	Oid			extension;		/* extension cfeed */
	List	   *views;			/* the views being walked (against a loop) */
} LockCheck;

/* The lock modes as LOCK names them, by LOCKMODE. */
static const char *const lock_mode_names[] = {
	"", "ACCESS SHARE", "ROW SHARE", "ROW EXCLUSIVE", "SHARE UPDATE EXCLUSIVE",
	"SHARE", "SHARE ROW EXCLUSIVE", "EXCLUSIVE", "ACCESS EXCLUSIVE"
};

static void check_relation(Oid relid, LockCheck *check);

/*
 * check_owned
 *		Refuse (42501) a relation of extension cfeed that check->user does not
 *		own.
 */
static void
check_owned(Oid relid, LockCheck *check)
{
	if (getExtensionOfObject(RelationRelationId, relid) != check->extension ||
		cfeed_rel_ownercheck(relid, check->user))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied to lock table %s in %s mode",
					quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
											   get_rel_name(relid)),
					lock_mode_names[check->mode]),
			 errdetail("The tables of extension cfeed are shared by every feed: only their owner may lock them in a mode stronger than ROW EXCLUSIVE."),
			 errhint("Lock it in ROW EXCLUSIVE mode or weaker, or as its owner.")));
}

/*
 * lock_view
 *		Lock a view as LOCK will (check->mode, NOWAIT as the statement says),
 *		if check->user has a privilege that lets it (LockTableAclCheck: any
 *		of UPDATE, DELETE, TRUNCATE, MAINTAIN for these modes); else false,
 *		and PostgreSQL refuses the LOCK when it gets there.
 */
static bool
lock_view(Oid relid, LockCheck *check)
{
	if (pg_class_aclcheck(relid, check->user, CFEED_ACL_LOCK_ANY) != ACLCHECK_OK)
		return false;
	if (!check->nowait)
		LockRelationOid(relid, check->mode);
	else if (!ConditionalLockRelationOid(relid, check->mode))
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("could not obtain lock on relation \"%s\"", get_rel_name(relid))));
	return true;
}

/*
 * lock_walker
 *		Check each relation a view's query reads, in its subqueries, CTEs and
 *		sublinks too, as PostgreSQL's LockViewRecurse_walker locks them.
 */
static bool
lock_walker(Node *node, LockCheck *check)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
	{
		Query	   *query = (Query *) node;
		ListCell   *lc;

		foreach(lc, query->rtable)
		{
			RangeTblEntry *rte = lfirst_node(RangeTblEntry, lc);

			if (rte->rtekind == RTE_RELATION)
				check_relation(rte->relid, check);
		}
		return query_tree_walker(query, lock_walker, check, 0);
	}
	return expression_tree_walker(node, lock_walker, check);
}

/*
 * check_relation
 *		Refuse the LOCK if it would lock a relation of extension cfeed that
 *		check->user does not own; walk a view's query, once the view is
 *		locked, as the role PostgreSQL checks it as.
 */
static void
check_relation(Oid relid, LockCheck *check)
{
	Relation	view;
	Oid			saved_user = check->user;

	check_owned(relid, check);
	if (get_rel_relkind(relid) != RELKIND_VIEW || list_member_oid(check->views, relid) ||
		!lock_view(relid, check))
		return;
	view = relation_open(relid, NoLock);
	check->views = lappend_oid(check->views, relid);
	if (!RelationHasSecurityInvoker(view))
		check->user = view->rd_rel->relowner;
	(void) lock_walker((Node *) get_view_query(view), check);
	check->user = saved_user;
	check->views = list_delete_last(check->views);
	relation_close(view, NoLock);
}

/*
 * cfeed_guard_lock_statement
 *		The ProcessUtility hook's check of a LOCK statement (see the file
 *		header), before PostgreSQL runs it: pstmt, or a copy of it whose
 *		relations are named with their schemas, for PostgreSQL to run.  A
 *		name that does not resolve is left for PostgreSQL to report.
 */
PlannedStmt *
cfeed_guard_lock_statement(PlannedStmt *pstmt)
{
	LockStmt   *stmt = (LockStmt *) pstmt->utilityStmt;
	PlannedStmt *copy;
	LockCheck	check;
	ListCell   *lc;

	Assert(IsA(stmt, LockStmt));
	if (stmt->mode <= RowExclusiveLock || stmt->mode >= (int) lengthof(lock_mode_names))
		return pstmt;
	check.extension = get_extension_oid("cfeed", true);
	if (!OidIsValid(check.extension))
		return pstmt;
	check.mode = stmt->mode;
	check.nowait = stmt->nowait;
	check.views = NIL;
	copy = copyObject(pstmt);
	stmt = (LockStmt *) copy->utilityStmt;
	foreach(lc, stmt->relations)
	{
		RangeVar   *rv = lfirst_node(RangeVar, lc);
		Oid			relid = RangeVarGetRelid(rv, NoLock, true);

		if (!OidIsValid(relid))
			continue;
		check.user = GetUserId();
		check_relation(relid, &check);
		/* its name as of now (a view's under its lock), with its schema */
		rv->schemaname = get_namespace_name(get_rel_namespace(relid));
		rv->relname = get_rel_name(relid);
		rv->catalogname = NULL;
	}
	return copy;
}
