/*-------------------------------------------------------------------------
 *
 * direct.c
 *	  Writing rows of cfeed.change without the executor: what an INSERT or
 *	  UPDATE would do, for the two hot paths that write one row at a time or
 *	  one batch per transaction, where executor start-up costs more than the
 *	  writing (append.c: a change, with a tracked row's image; stamp.c: the
 *	  stamps of a sweep).  Every heap and index write of cfeed goes through
 *	  the three calls here.
 *
 * The caller opens cfeed.change, asks cfeed_direct_ok() whether the direct
 * way has the statement's exact semantics, and then writes each row with
 * cfeed_direct_insert() or cfeed_direct_update(), which write the heap
 * tuple and its index entries.  When cfeed_direct_ok() says no, the caller
 * runs its SQL instead, which gives whatever a DBA has added to the table
 * its exact semantics:
 *
 *	 - row-level security that applies to the user and could refuse the
 *	   row (rls_direct_ok: per-feed access's own permissive INSERT policy
 *	   does not);
 *	 - a rule (an INSERT or UPDATE rule rewrites the statement; any rule
 *	   sends the caller to SQL, where the rewriter decides);
 *	 - a trigger for the command other than the ones the caller stands in
 *	   for: for INSERT the change_guard trigger (the shard check, which
 *	   the caller does itself with the feed's shards lock; in a database
 *	   not yet updated, a WHEN clause the callers' rows never satisfy)
 *	   and, in a database whose cfeed.change still has its foreign key to
 *	   shard_config (not deferred), that key's check; for UPDATE
 *	   change_stamp_guard, which lets a sweep's own numbers pass
 *	   (cfeed_stamping), change_shard_guard and change_stamped_keys_guard,
 *	   whose WHEN clauses the sweep's rows never satisfy (a stamp changes
 *	   no key), and change_image_guard, which refuses
 *	   only a new row image (triggers_known);
 *	 - CHECK constraints, NOT NULL constraints other than the install
 *	   script's, or stored generated columns;
 *	 - an index that is not a plain immediate btree (expression, exclusion
 *	   and deferrable indexes need the executor; other access methods may
 *	   keep per-query state in their IndexInfo, which is cached here);
 *	 - a table access method other than heap, or a column layout other than
 *	   the install script's;
 *	 - the privilege for the command missing at table level for the current
 *	   user (granted on columns only, say): the SQL reports or allows it
 *	   exactly;
 *	 - an executor permission hook (sepgsql), which only the executor calls.
 *
 * Per backend the IndexInfo of cfeed.change's indexes is cached,
 * with their predicates prepared, and rebuilt when the relation's index list
 * changes (a new index has a new OID; an index's definition never changes
 * under its OID); and what its INSERT policies say, until an invalidation
 * (insert_policies).  Everything else (triggers, whom row-level security
 * applies to, privileges, indisready) is read from the relation at every
 * call: relations cannot stay open past the statement, whose end a row
 * trigger does not see.
 *
 * Locking: the caller holds cfeed.change in ROW EXCLUSIVE mode until its
 * transaction ends; its indexes are opened with ROW EXCLUSIVE, as the
 * executor opens them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/pg_am.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "optimizer/optimizer.h"
#include "storage/lmgr.h"
#include "rewrite/rowsecurity.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"

#include "cache.h"
#include "cfeed.h"

#define CHANGE_GUARD_TRIGGER		"change_guard"
#define CHANGE_STAMP_GUARD_TRIGGER	"change_stamp_guard"
#define CHANGE_IMAGE_GUARD_TRIGGER	"change_image_guard"
#define CHANGE_SHARD_GUARD_TRIGGER	"change_shard_guard"
#define CHANGE_KEYS_GUARD_TRIGGER	"change_stamped_keys_guard"

/*
 * The column types of cfeed.change as the scripts create it: tbl is an int
 * (a table's number), or a regclass (its OID) in a schema not yet updated
 * to table numbers; the writer stores the same four bytes (append.c).
 */
static const Oid change_types[CHANGE_NATTS] =
{INT4OID, INT4OID, INT8OID, INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID, XID8OID,
INT4OID, TEXTOID, JSONBOID};
static const Oid change_types_1_7[CHANGE_NATTS] =
{INT4OID, INT4OID, INT8OID, INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID, XID8OID,
REGCLASSOID, TEXTOID, JSONBOID};

/* The NOT NULL columns of cfeed.change as the scripts create it. */
static const bool change_notnull[CHANGE_NATTS] =
{true, true, true, false, false, true, true, false, false, false};

/* The indexes of cfeed.change, as last seen. */
typedef struct CfeedIndexCache
{
	Oid			relid;			/* InvalidOid: not built */
	List	   *indexoids;		/* the index list the entries were built for */
	int			nindexes;
	Oid		   *oids;
	IndexInfo **infos;			/* ii_PredicateState prepared */
	bool		direct_ok;		/* all plain immediate btrees */
	MemoryContext cxt;
} CfeedIndexCache;

/* cfeed.change's indexes, and the context their predicates are checked in. */
static CfeedIndexCache change_indexes;
static ExprContext *predicate_econtext = NULL;

/*
 * layout_matches
 *		Whether a table has exactly the columns the caller builds, NOT NULL
 *		where notnull says (a column a DBA made NOT NULL besides needs the
 *		executor's check; the callers never write NULL into the others).
 */
static bool
layout_matches(Relation rel, const Oid *types, const bool *notnull, int natts)
{
	TupleDesc	desc = RelationGetDescr(rel);
	int			i;

	if (desc->natts != natts)
		return false;
	for (i = 0; i < natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped || att->atttypid != types[i] ||
			(att->attnotnull && !notnull[i]))
			return false;
	}
	return true;
}

/*
 * triggers_known
 *		Whether every trigger of rel for cmd (INSERT or UPDATE) is one the
 *		direct way stands in for: for INSERT change_guard, which without a
 *		WHEN clause checks the shard as the direct writer does and with one
 *		(a database not yet updated) fires only for rows the direct writer
 *		never writes, and the foreign-key check against shard_config of a
 *		database whose cfeed.change still has that key, not deferred (an
 *		INSERT checks at once, an UPDATE leaves the key alone);
 *		for UPDATE change_stamp_guard, which lets a sweep's own numbers
 *		pass (cfeed_stamping), change_shard_guard, whose WHEN clause
 *		holds only for a row moved to another feed or shard (the sweep's
 *		UPDATE sets neither), and change_image_guard, which refuses only a
 *		new row image (the sweep's UPDATE leaves the image alone).
 */
static bool
triggers_known(Relation rel, CmdType cmd, Oid shard_config)
{
	TriggerDesc *td = rel->trigdesc;
	int			i;

	if (td == NULL)
		return true;
	for (i = 0; i < td->numtriggers; i++)
	{
		Trigger    *t = &td->triggers[i];

		if (cmd == CMD_INSERT ? !TRIGGER_FOR_INSERT(t->tgtype) : !TRIGGER_FOR_UPDATE(t->tgtype))
			continue;
		if (t->tgisinternal && t->tgconstrrelid == shard_config && !t->tgdeferrable &&
			t->tgfoid == (cmd == CMD_INSERT ? F_RI_FKEY_CHECK_INS : F_RI_FKEY_CHECK_UPD))
			continue;
		if (!t->tgisinternal && TRIGGER_FOR_ROW(t->tgtype) && TRIGGER_FOR_BEFORE(t->tgtype) &&
			(cmd == CMD_INSERT ? strcmp(t->tgname, CHANGE_GUARD_TRIGGER) == 0 :
			 ((t->tgqual != NULL && (strcmp(t->tgname, CHANGE_STAMP_GUARD_TRIGGER) == 0 ||
									 strcmp(t->tgname, CHANGE_SHARD_GUARD_TRIGGER) == 0 ||
									 strcmp(t->tgname, CHANGE_KEYS_GUARD_TRIGGER) == 0)) ||
			  strcmp(t->tgname, CHANGE_IMAGE_GUARD_TRIGGER) == 0)))
			continue;
		return false;
	}
	return true;
}

/*
 * index_cache_get
 *		The index cache of rel, rebuilt when its index list has changed.
 */
static CfeedIndexCache *
index_cache_get(CfeedIndexCache *c, Relation rel)
{
	List	   *indexoids = RelationGetIndexList(rel);
	MemoryContext old;
	ListCell   *lc;
	int			i = 0;

	if (c->relid == RelationGetRelid(rel) && equal(indexoids, c->indexoids))
	{
		list_free(indexoids);
		return c;
	}

	if (c->cxt == NULL)
		c->cxt = AllocSetContextCreate(TopMemoryContext, "cfeed direct indexes",
									   ALLOCSET_SMALL_SIZES);
	c->relid = InvalidOid;
	MemoryContextReset(c->cxt);
	old = MemoryContextSwitchTo(c->cxt);
	c->indexoids = list_copy(indexoids);
	c->nindexes = list_length(indexoids);
	c->oids = palloc(sizeof(Oid) * Max(c->nindexes, 1));
	c->infos = palloc(sizeof(IndexInfo *) * Max(c->nindexes, 1));
	c->direct_ok = true;
	foreach(lc, indexoids)
	{
		Relation	idx = index_open(lfirst_oid(lc), RowExclusiveLock);
		IndexInfo  *info = BuildIndexInfo(idx);

		if (idx->rd_rel->relam != BTREE_AM_OID || info->ii_Expressions != NIL ||
			info->ii_ExclusionOps != NULL || !idx->rd_index->indimmediate)
			c->direct_ok = false;
		if (info->ii_Predicate != NIL)
			info->ii_PredicateState =
				ExecInitQual((List *) expression_planner((Expr *) info->ii_Predicate), NULL);
		c->oids[i] = RelationGetRelid(idx);
		c->infos[i] = info;
		i++;
		index_close(idx, NoLock);
	}
	MemoryContextSwitchTo(old);
	list_free(indexoids);
	c->relid = RelationGetRelid(rel);
	return c;
}

/*
 * is_true_const
 *		Whether a policy expression is the constant true.
 */
static bool
is_true_const(Expr *expr)
{
	return expr != NULL && IsA(expr, Const) && !((Const *) expr)->constisnull &&
		DatumGetBool(((Const *) expr)->constvalue);
}

/*
 * is_write_check
 *		Whether a policy expression is cfeed._may_write(feed_id), the check
 *		of the policy change_write, which cfeed_append makes itself
 *		(cfeed_check_write) before it writes directly.
 */
static bool
is_write_check(Expr *expr)
{
	FuncExpr   *call = (FuncExpr *) expr;
	char	   *name;
	bool		is;

	if (expr == NULL || !IsA(expr, FuncExpr) || list_length(call->args) != 1 ||
		!IsA(linitial(call->args), Var) ||
		((Var *) linitial(call->args))->varattno != Anum_change_feed_id ||
		get_func_namespace(call->funcid) != cfeed_schema_oid(true))
		return false;
	name = get_func_name(call->funcid);
	is = name != NULL && strcmp(name, "_may_write") == 0;
	if (name != NULL)
		pfree(name);
	return is;
}

/*
 * for_insert
 *		Whether the policy applies to INSERT; if so, *check is the check it
 *		puts on a new row (its WITH CHECK, else its USING; NULL for none).
 */
static bool
for_insert(RowSecurityPolicy *policy, Expr **check)
{
	if (policy->polcmd != '*' && policy->polcmd != ACL_INSERT_CHR)
		return false;
	*check = policy->with_check_qual != NULL ? policy->with_check_qual : policy->qual;
	return true;
}

/*
 * for_public
 *		Whether the policy applies to PUBLIC (so to every role).
 */
static bool
for_public(RowSecurityPolicy *policy)
{
	Datum	   *roles;
	int			nroles;
	int			i;

	deconstruct_array(policy->roles, OIDOID, sizeof(Oid), true,
					  TYPALIGN_INT, &roles, NULL, &nroles);
	for (i = 0; i < nroles; i++)
		if (DatumGetObjectId(roles[i]) == ACL_ID_PUBLIC)
			return true;
	return false;
}

/*
 * What the INSERT policies of cfeed.change say, whoever writes
 * (insert_policies): one walk of the relation's policy list, done again
 * only after a relcache invalidation of the table (CREATE, ALTER or DROP
 * POLICY send one) or a change to pg_proc or pg_namespace (is_write_check
 * names a function by schema and name), rather than at every change
 * written.  Whom the policies apply to is decided at every call
 * (check_enable_rls), as is row_security.  gen counts invalidations, so
 * that one arriving during a walk (its catalog lookups read invalidations)
 * leaves the memo unset.
 */
typedef struct CfeedPolicyMemo
{
	Oid			relid;			/* InvalidOid: not known */
	uint64		gen;
	bool		insert_direct;	/* the policies let a direct INSERT through */
	bool		needs_grant;	/* they refuse a change the user may not write */
} CfeedPolicyMemo;

static CfeedPolicyMemo policy_memo;

static void
policy_memo_invalidate(Oid relid)
{
	if (!OidIsValid(relid) || relid == policy_memo.relid)
		policy_memo.relid = InvalidOid;
	policy_memo.gen++;
}

/*
 * insert_policies
 *		The memo of rel's INSERT policies (rel->rd_rsdesc not NULL):
 *		insert_direct when no restrictive policy but one for
 *		cfeed._may_write(feed_id) applies to INSERT and a permissive one for
 *		PUBLIC is WITH CHECK (true) or cfeed._may_write(feed_id) (see
 *		rls_direct_ok); needs_grant when a restrictive policy for PUBLIC, or
 *		every permissive one, checks cfeed._may_write(feed_id) (see
 *		cfeed_insert_needs_grant).
 */
static const CfeedPolicyMemo *
insert_policies(Relation rel)
{
	uint64		gen;
	bool		allowed = false;
	bool		restricted = false;
	bool		public_write_check = false;
	bool		every_permissive = true;
	ListCell   *lc;

	if (policy_memo.relid == RelationGetRelid(rel))
		return &policy_memo;
	cfeed_cache_register(CFEED_CACHE_POLICIES, policy_memo_invalidate);
	gen = policy_memo.gen;
	foreach(lc, rel->rd_rsdesc->policies)
	{
		RowSecurityPolicy *policy = (RowSecurityPolicy *) lfirst(lc);
		Expr	   *check;
		bool		write_check;

		if (!for_insert(policy, &check))
			continue;
		write_check = is_write_check(check);
		if (policy->permissive)
		{
			every_permissive &= write_check;
			if (is_true_const(check) || write_check)
				allowed |= for_public(policy);
		}
		else
		{
			restricted |= !write_check;
			public_write_check |= write_check && for_public(policy);
		}
	}
	policy_memo.insert_direct = allowed && !restricted;
	policy_memo.needs_grant = public_write_check || every_permissive;
	if (policy_memo.gen == gen)
		policy_memo.relid = RelationGetRelid(rel);
	return &policy_memo;
}

/*
 * rls_direct_ok
 *		On a relation with row-level security enabled: whether
 *		the current user's cmd (an INSERT or UPDATE without RETURNING) is, as
 *		far as the policies go, exactly what it would be without them.  True
 *		when they do not apply to the user (the owner, who stamps; superusers;
 *		BYPASSRLS), and for an INSERT when the policies for it are
 *		cfeed._may_write(feed_id) (change_write: the caller has made that
 *		check, cfeed_check_write) or permissive ones, one of which is for
 *		PUBLIC WITH CHECK (true) or cfeed._may_write(feed_id): per-feed
 *		access then costs a writer a look at the memo of the policies
 *		(insert_policies).  Otherwise the caller's SQL applies them.
 */
static bool
rls_direct_ok(Relation rel, CmdType cmd)
{
	if (cmd == CMD_INSERT && row_security && rel->rd_rsdesc != NULL &&
		insert_policies(rel)->insert_direct)
		return true;
	return check_enable_rls(RelationGetRelid(rel), InvalidOid, true) != RLS_ENABLED;
}

/*
 * cfeed_insert_needs_grant
 *		Whether row-level security on rel (cfeed.change) refuses the current
 *		user's INSERT of a change to a feed it may not write: the policies
 *		apply to the user, and either a restrictive policy for PUBLIC for
 *		INSERT checks cfeed._may_write(feed_id) (change_write in a database
 *		that had policies of its own before 1.4), or every permissive one
 *		does (change_write).  change_guard (guard.c) then refuses such a
 *		row first, with cfeed.publish's error, before its shard check says
 *		anything of the feed's shards; with a permissive policy of a DBA's
 *		own, the policies decide, after it.
 */
bool
cfeed_insert_needs_grant(Relation rel)
{
	return rel->rd_rsdesc != NULL &&
		check_enable_rls(RelationGetRelid(rel), InvalidOid, true) == RLS_ENABLED &&
		insert_policies(rel)->needs_grant;
}

/*
 * cfeed_direct_ok
 *		Whether the current user's cmd (INSERT or UPDATE of the columns the
 *		callers set) on rel, cfeed.change, can be done directly with the
 *		statement's semantics (see the file header).  For an UPDATE, also
 *		checks what the executor would: a replica identity when the table
 *		publishes updates.
 */
bool
cfeed_direct_ok(Relation rel, CmdType cmd)
{
	TupleConstr *constr = RelationGetDescr(rel)->constr;

	if (ExecutorCheckPerms_hook != NULL ||
		rel->rd_rel->relkind != RELKIND_RELATION ||
		rel->rd_rel->relam != HEAP_TABLE_AM_OID ||
		(rel->rd_rel->relrowsecurity && !rls_direct_ok(rel, cmd)) ||
		rel->rd_rules != NULL ||
		(!layout_matches(rel, change_types, change_notnull, CHANGE_NATTS) &&
		 !layout_matches(rel, change_types_1_7, change_notnull, CHANGE_NATTS)) ||
		(constr != NULL && (constr->num_check > 0 || constr->has_generated_stored)) ||
		!triggers_known(rel, cmd, cfeed_relid("shard_config")))
		return false;
	if (pg_class_aclcheck(RelationGetRelid(rel), GetUserId(),
						  cmd == CMD_INSERT ? ACL_INSERT : ACL_UPDATE) != ACLCHECK_OK)
		return false;
	if (!index_cache_get(&change_indexes, rel)->direct_ok)
		return false;
	if (cmd == CMD_UPDATE)
		CheckCmdReplicaIdentity(rel, CMD_UPDATE);
	return true;
}

/*
 * assert_direct_target
 *		What a direct write assumes of rel (assert-enabled builds only): the
 *		caller holds it in ROW EXCLUSIVE mode or stronger, it is a heap table,
 *		and cfeed_direct_ok() has built the index cache for it and said yes.
 */
static inline void
assert_direct_target(Relation rel pg_attribute_unused())
{
	Assert(CheckRelationLockedByMe(rel, RowExclusiveLock, true));
	Assert(rel->rd_rel->relkind == RELKIND_RELATION &&
		   rel->rd_rel->relam == HEAP_TABLE_AM_OID);
	Assert(change_indexes.relid == RelationGetRelid(rel) && change_indexes.direct_ok);
}

/*
 * index_insert_all
 *		Insert the index entries of the heap tuple just written from slot
 *		(tts_tid set): into every index of rel, a partial index only when the
 *		row satisfies its predicate, a unique one checked by the index AM.
 */
static void
index_insert_all(Relation rel, CfeedIndexCache *indexes, TupleTableSlot *slot)
{
	int			i;

	/* the heap tuple is written: its address is what the entries point at */
	Assert(ItemPointerIsValid(&slot->tts_tid));
	Assert(slot->tts_tableOid == RelationGetRelid(rel));
	if (predicate_econtext == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		predicate_econtext = CreateStandaloneExprContext();
		MemoryContextSwitchTo(old);
	}
	predicate_econtext->ecxt_scantuple = slot;

	for (i = 0; i < indexes->nindexes; i++)
	{
		IndexInfo  *info = indexes->infos[i];
		Relation	idx;
		Datum		values[INDEX_MAX_KEYS];
		bool		isnull[INDEX_MAX_KEYS];
		bool		skip;

		/* A partial index the row is not in is not even opened. */
		skip = info->ii_PredicateState != NULL &&
			!ExecQual(info->ii_PredicateState, predicate_econtext);
		ResetExprContext(predicate_econtext);
		if (skip)
			continue;

		/* indisready is read per row: CREATE INDEX CONCURRENTLY flips it. */
		idx = index_open(indexes->oids[i], RowExclusiveLock);
		/* an index of rel, a plain btree (index_cache_get checked) */
		Assert(idx->rd_index->indrelid == RelationGetRelid(rel));
		Assert(idx->rd_rel->relam == BTREE_AM_OID);
		if (idx->rd_index->indisready)
		{
			FormIndexDatum(info, slot, NULL, values, isnull);
			cfeed_index_insert(idx, values, isnull, &slot->tts_tid, rel,
							   idx->rd_index->indisunique ? UNIQUE_CHECK_YES : UNIQUE_CHECK_NO,
							   info);
		}
		index_close(idx, NoLock);
	}
	predicate_econtext->ecxt_scantuple = NULL;
}

/*
 * cfeed_direct_insert
 *		Insert the row in slot into rel, heap and indexes, as the current
 *		command.  The caller has had cfeed_direct_ok(rel, CMD_INSERT) say
 *		yes in this statement.
 */
void
cfeed_direct_insert(Relation rel, TupleTableSlot *slot)
{
	assert_direct_target(rel);
	table_tuple_insert(rel, slot, GetCurrentCommandId(true), 0, NULL);
	index_insert_all(rel, &change_indexes, slot);
}

/*
 * cfeed_direct_update
 *		Replace the version of row tid visible to snapshot with the row in
 *		newslot, heap and (unless the update is HOT) indexes, as the current
 *		command.  Returns false, having written nothing, when that version
 *		was updated or deleted meanwhile.  The caller has had
 *		cfeed_direct_ok(rel, CMD_UPDATE) say yes in this statement.
 */
bool
cfeed_direct_update(Relation rel, ItemPointer tid, TupleTableSlot *newslot,
					Snapshot snapshot)
{
	TM_Result	result;
	TM_FailureData tmfd;
	LockTupleMode lockmode;
	cfeed_update_indexes update_indexes;

	assert_direct_target(rel);
	Assert(ItemPointerIsValid(tid));
	Assert(IsMVCCSnapshot(snapshot));
	result = table_tuple_update(rel, tid, newslot, GetCurrentCommandId(true), snapshot,
								InvalidSnapshot, true, &tmfd, &lockmode, &update_indexes);
	if (result == TM_Updated || result == TM_Deleted)
		return false;
	if (result != TM_Ok)
		elog(ERROR, "cfeed sweep: unexpected result %d updating a change", (int) result);
	if (cfeed_indexes_to_update(update_indexes))
		index_insert_all(rel, &change_indexes, newslot);
	return true;
}
