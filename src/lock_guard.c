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
 * view owner's privileges (the caller's, for a security_invoker view), and
 * a LOCK of a table its inheritance children.  What the check judges must
 * be what PostgreSQL locks, so the guard takes the statement's locks
 * itself first, exactly as PostgreSQL's LockTableCommand would (the same
 * relations, in the same order and modes, with the same privilege checks
 * and errors), and judges each relation just before it locks it, as the
 * role PostgreSQL checks it as; a view of extension cfeed is judged as its
 * tables are.  PostgreSQL's own LOCK then runs and finds every lock held.
 * The statement it runs names each relation with the schema it was found
 * in: held locked, it cannot be renamed, so the name means the relation
 * judged.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/objectaddress.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "rewrite/rewriteHandler.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "cfeed.h"
#include "compat.h"

/* A LOCK statement's locks, as the guard takes them. */
typedef struct LockGuard
{
	LOCKMODE	mode;
	bool		nowait;
	Oid			extension;		/* extension cfeed */
} LockGuard;

/* A view's walk (LockViewRecurse's context). */
typedef struct ViewWalk
{
	LockGuard  *guard;
	Oid			check_as_user;	/* the view's owner, or for a security_invoker
								 * view the caller */
	Oid			viewoid;
	List	   *ancestor_views;
} ViewWalk;

/* The lock modes as LOCK names them, by LOCKMODE. */
static const char *const lock_mode_names[] = {
	"", "ACCESS SHARE", "ROW SHARE", "ROW EXCLUSIVE", "SHARE UPDATE EXCLUSIVE",
	"SHARE", "SHARE ROW EXCLUSIVE", "EXCLUSIVE", "ACCESS EXCLUSIVE"
};

static void lock_view(Oid viewoid, LockGuard *guard, List *ancestor_views);

/*
 * check_owned
 *		Refuse (42501) a relation of extension cfeed that user does not own.
 */
static void
check_owned(Oid relid, Oid user, LockGuard *guard)
{
	if (getExtensionOfObject(RelationRelationId, relid) != guard->extension ||
		cfeed_rel_ownercheck(relid, user))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied to lock table %s in %s mode",
					quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
											   get_rel_name(relid)),
					lock_mode_names[guard->mode]),
			 errdetail("The tables of extension cfeed are shared by every feed: only their owner may lock them in a mode stronger than ROW EXCLUSIVE."),
			 errhint("Lock it in ROW EXCLUSIVE mode or weaker, or as its owner.")));
}

/*
 * lock_acl_check
 *		PostgreSQL's LockTableAclCheck for the modes the guard handles (above
 *		ROW EXCLUSIVE), then the guard's own check.
 */
static void
lock_acl_check(Oid relid, char relkind, const char *relname, Oid user, LockGuard *guard)
{
	AclResult	aclresult = pg_class_aclcheck(relid, user, CFEED_ACL_LOCK_ANY);

	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, get_relkind_objtype(relkind), relname);
	check_owned(relid, user, guard);
}

/*
 * lock_relation
 *		Lock a relation as PostgreSQL's LOCK does, NOWAIT when asked.
 */
static void
lock_relation(Oid relid, const char *relname, LockGuard *guard)
{
	if (!guard->nowait)
		LockRelationOid(relid, guard->mode);
	else if (!ConditionalLockRelationOid(relid, guard->mode))
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("could not obtain lock on relation \"%s\"", relname)));
}

/*
 * lock_children
 *		PostgreSQL's LockTableRecurse: lock a table's inheritance children
 *		(user: the role the parent was judged as).
 */
static void
lock_children(Oid relid, Oid user, LockGuard *guard)
{
	ListCell   *lc;

	foreach(lc, find_all_inheritors(relid, NoLock, NULL))
	{
		Oid			child = lfirst_oid(lc);
		char	   *relname;

		if (child == relid)
			continue;
		relname = get_rel_name(child);
		if (relname == NULL)
			continue;			/* dropped meanwhile */
		check_owned(child, user, guard);
		lock_relation(child, relname, guard);
		if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(child)))
			UnlockRelationOid(child, guard->mode);
	}
}

/*
 * lock_view_walker
 *		PostgreSQL's LockViewRecurse_walker: judge and lock each table and
 *		view a view's query reads, in its subqueries, CTEs and sublinks too.
 */
static bool
lock_view_walker(Node *node, ViewWalk *walk)
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
			char	   *relname;

			if (rte->rtekind != RTE_RELATION)
				continue;
			/* the OLD and NEW entries of a view's rule (before 16) */
			if (rte->relid == walk->viewoid &&
				(strcmp(rte->eref->aliasname, "old") == 0 ||
				 strcmp(rte->eref->aliasname, "new") == 0))
				continue;
			if (rte->relkind != RELKIND_RELATION && rte->relkind != RELKIND_PARTITIONED_TABLE &&
				rte->relkind != RELKIND_VIEW)
				continue;
			if (list_member_oid(walk->ancestor_views, rte->relid))
				continue;
			relname = get_rel_name(rte->relid);
			lock_acl_check(rte->relid, rte->relkind, relname, walk->check_as_user, walk->guard);
			lock_relation(rte->relid, relname, walk->guard);
			if (rte->relkind == RELKIND_VIEW)
				lock_view(rte->relid, walk->guard, walk->ancestor_views);
			else if (rte->inh)
				lock_children(rte->relid, walk->check_as_user, walk->guard);
		}
		return query_tree_walker(query, lock_view_walker, walk, QTW_IGNORE_JOINALIASES);
	}
	return expression_tree_walker(node, lock_view_walker, walk);
}

/*
 * lock_view
 *		PostgreSQL's LockViewRecurse, for a view the guard has locked.
 */
static void
lock_view(Oid viewoid, LockGuard *guard, List *ancestor_views)
{
	Relation	view = table_open(viewoid, NoLock);
	ViewWalk	walk;

	walk.guard = guard;
	walk.check_as_user = RelationHasSecurityInvoker(view) ? GetUserId() : view->rd_rel->relowner;
	walk.viewoid = viewoid;
	walk.ancestor_views = lappend_oid(list_copy(ancestor_views), viewoid);
	(void) lock_view_walker((Node *) get_view_query(view), &walk);
	table_close(view, NoLock);
}

/*
 * lock_target_callback
 *		PostgreSQL's RangeVarCallbackForLockTable, then the guard's check: run
 *		on each relation a LOCK's name resolves to, before it is locked.
 */
static void
lock_target_callback(const RangeVar *rv, Oid relid,
					 Oid oldrelid pg_attribute_unused(), void *arg)
{
	LockGuard  *guard = arg;
	char		relkind;

	if (!OidIsValid(relid) || (relkind = get_rel_relkind(relid)) == '\0')
		return;
	if (relkind != RELKIND_RELATION && relkind != RELKIND_PARTITIONED_TABLE &&
		relkind != RELKIND_VIEW)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("cannot lock relation \"%s\"", rv->relname),
				 errdetail_relkind_not_supported(relkind)));
	lock_acl_check(relid, relkind, rv->relname, GetUserId(), guard);
}

/*
 * cfeed_guard_lock_statement
 *		The ProcessUtility hook's guard of a LOCK statement (see the file
 *		header): take its locks, judging each relation, and return the
 *		statement for PostgreSQL to run, a copy naming each relation with
 *		its schema.  Left to PostgreSQL: a mode of ROW EXCLUSIVE or weaker,
 *		a database without cfeed, and a statement PostgreSQL refuses before
 *		it locks anything (outside a transaction block, top_level; in
 *		parallel mode; in recovery).
 */
PlannedStmt *
cfeed_guard_lock_statement(PlannedStmt *pstmt, bool top_level)
{
	LockStmt   *stmt = (LockStmt *) pstmt->utilityStmt;
	PlannedStmt *copy;
	LockGuard	guard;
	ListCell   *lc;

	Assert(IsA(stmt, LockStmt));
	if (stmt->mode <= RowExclusiveLock || stmt->mode >= (int) lengthof(lock_mode_names) ||
		(top_level && !IsTransactionBlock() && !IsSubTransaction()) ||
		IsInParallelMode() || RecoveryInProgress())
		return pstmt;
	guard.extension = get_extension_oid("cfeed", true);
	if (!OidIsValid(guard.extension))
		return pstmt;
	guard.mode = stmt->mode;
	guard.nowait = stmt->nowait;
	copy = copyObject(pstmt);
	stmt = (LockStmt *) copy->utilityStmt;
	foreach(lc, stmt->relations)
	{
		RangeVar   *rv = lfirst_node(RangeVar, lc);
		Oid			relid = RangeVarGetRelidExtended(rv, guard.mode,
													 guard.nowait ? RVR_NOWAIT : 0,
													 lock_target_callback, &guard);

		if (get_rel_relkind(relid) == RELKIND_VIEW)
			lock_view(relid, &guard, NIL);
		else if (rv->inh)
			lock_children(relid, GetUserId(), &guard);
		/* held locked: its name cannot change until the statement ends */
		rv->schemaname = get_namespace_name(get_rel_namespace(relid));
		rv->catalogname = NULL;
	}
	return copy;
}
