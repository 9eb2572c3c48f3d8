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
 * view owner's privileges (PostgreSQL's LockViewRecurse): a view that a
 * role owns and that reads cfeed.lease would lock cfeed.lease for it.  The
 * check walks the views it is given as PostgreSQL does, each relation read
 * judged by the owner of the view that reads it, from the view's rule in
 * the catalog (the views are not locked for it).
 *
 * cfeed's own statements need nothing more: they lock in strong modes as
 * the extension's owner, or in C (create_feed's lock of cfeed.feed).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_rewrite.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "rewrite/rewriteSupport.h"
#include "storage/lockdefs.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "cfeed.h"
#include "compat.h"

/* A LOCK statement's check, while it walks the relations it would lock. */
typedef struct LockCheck
{
	LOCKMODE	mode;
	Oid			user;			/* whose ownership counts: the caller, or the
								 * owner of the view being walked */
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
 * relation_owner
 *		The owner of a relation, or InvalidOid when it is gone.
 */
static Oid
relation_owner(Oid relid)
{
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tuple))
		return InvalidOid;
	owner = ((Form_pg_class) GETSTRUCT(tuple))->relowner;
	ReleaseSysCache(tuple);
	return owner;
}

/*
 * view_query
 *		The query of a view, from its _RETURN rule in pg_rewrite, or NULL
 *		when it has none (gone meanwhile).
 */
static Query *
view_query(Oid relid)
{
	HeapTuple	tuple = SearchSysCache2(RULERELNAME, ObjectIdGetDatum(relid),
										PointerGetDatum(ViewSelectRuleName));
	Datum		action;
	bool		isnull;
	List	   *actions = NIL;

	if (!HeapTupleIsValid(tuple))
		return NULL;
	action = SysCacheGetAttr(RULERELNAME, tuple, Anum_pg_rewrite_ev_action, &isnull);
	if (!isnull)
		actions = (List *) stringToNode(TextDatumGetCString(action));
	ReleaseSysCache(tuple);
	return list_length(actions) == 1 ? linitial_node(Query, actions) : NULL;
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
 *		Refuse the LOCK if it would lock a table of extension cfeed that
 *		check->user does not own in a mode stronger than ROW EXCLUSIVE;
 *		walk a view's query with its owner as the user.
 */
static void
check_relation(Oid relid, LockCheck *check)
{
	char		relkind = get_rel_relkind(relid);

	if (relkind == RELKIND_VIEW)
	{
		Oid			saved_user = check->user;
		Query	   *query;

		if (list_member_oid(check->views, relid) || (query = view_query(relid)) == NULL)
			return;
		check->views = lappend_oid(check->views, relid);
		check->user = relation_owner(relid);
		(void) lock_walker((Node *) query, check);
		check->user = saved_user;
		check->views = list_delete_last(check->views);
		return;
	}
	if (getExtensionOfObject(RelationRelationId, relid) != check->extension ||
		cfeed_rel_ownercheck(relid, check->user))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied to lock table %s in %s mode",
					quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
											   get_rel_name(relid)),
					lock_mode_names[check->mode]),
			 errdetail("A table of extension cfeed is shared by every feed: only its owner may lock it in a mode stronger than ROW EXCLUSIVE."),
			 errhint("Lock it in ROW EXCLUSIVE mode or weaker, or as its owner.")));
}

/*
 * cfeed_check_lock_statement
 *		The ProcessUtility hook's check of a LOCK statement (see the file
 *		header), before PostgreSQL runs it.  A name that does not resolve is
 *		left for PostgreSQL to report.
 */
void
cfeed_check_lock_statement(LockStmt *stmt)
{
	LockCheck	check;
	ListCell   *lc;

	if (stmt->mode <= RowExclusiveLock || stmt->mode >= (int) lengthof(lock_mode_names))
		return;
	check.extension = get_extension_oid("cfeed", true);
	if (!OidIsValid(check.extension))
		return;
	check.mode = stmt->mode;
	check.user = GetUserId();
	check.views = NIL;
	foreach(lc, stmt->relations)
	{
		Oid			relid = RangeVarGetRelid(lfirst_node(RangeVar, lc), NoLock, true);

		if (OidIsValid(relid))
			check_relation(relid, &check);
	}
}
