/*-------------------------------------------------------------------------
 *
 * stamp.c
 *	  The write step of a sweep: giving the batch's changes their numbers
 *	  and stamped_at in cfeed.change.
 *
 * The update is made without the executor (stamp_direct, with direct.c):
 * per change, the version the sweep's snapshot saw is updated in the heap
 * and the new version's index entries are made, as an UPDATE would do; a
 * version updated or deleted meanwhile fails the sweep.  An SPI UPDATE,
 * whose executor start-up and shutdown cost more than stamping a typical
 * batch of a few changes, runs instead when what a DBA has added to
 * cfeed.change needs the executor (see direct.c: triggers, row-level
 * security, CHECKs, indexes that are not plain btrees).
 *
 * Either way the update must touch every change the sweep read as
 * unstamped, or the sweep fails (40001) and changes nothing: a concurrent
 * sweep of another group got there first (a shard moved between groups,
 * isolation test sweep_moved_shard).
 *
 * Neither way waits for a row lock.  A change whose row another
 * transaction has locked (a DELETE or UPDATE of a pending change, a SELECT
 * ... FOR UPDATE, still running) would hold up the stamping of every feed
 * of the sweep group for as long as that transaction stays open: the sweep
 * finds such a change while collecting (cfeed_stamp_would_wait) and leaves
 * it, and the changes after it in its shard, for a later sweep (sweep.c).
 * A lock taken after that look, just before the write, is found there
 * without waiting either: each change is locked first, without waiting
 * (lock_batch; an update itself would wait).  A change that cannot be
 * locked, and the rest of its shard's, are then not written, and flagged
 * locked for the caller, which leaves them as it would have (isolation
 * test locked_race).  That lock costs a WAL record per change stamped, so
 * it is taken only when a role other than the table's owner may lock a
 * change's row: UPDATE or DELETE granted on cfeed.change, or a view or rule
 * not cfeed's that uses it (others_may_lock).  The owner's own
 * transactions are waited for, as ever.
 *
 * The stamping transaction commits synchronously, at
 * cfeed.sweep_synchronous_commit (a level of synchronous_commit, default on,
 * never off), set for that transaction only (cfeed_stamp_commit_level): with
 * synchronous_standby_names, a stamp becomes visible only once a
 * synchronous standby has it, while the application's writers keep their
 * own synchronous_commit (a writer's commit precedes the stamp of its
 * change in the WAL, so a stamp that reached the standby brings its change
 * along; docs/replication.md).
 *
 * Locking: the caller (sweep.c) holds the group's sweep lock and cfeed.change
 * in ROW EXCLUSIVE mode until its transaction ends, taken before its
 * snapshot, so the tuple addresses it collected are still the changes'.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/indexing.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_class.h"
#include "catalog/pg_depend.h"
#include "catalog/pg_rewrite.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "rewrite/prs2lock.h"
#include "rewrite/rewriteDefine.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "cache.h"
#include "cfeed.h"

/* stamp_with_sql's UPDATE, kept for the backend's life (cache.h) */
static SPIPlanPtr update_changes_plan = NULL;

/* The current transaction stamped (its commit level is set again at commit). */
static bool stamped_in_xact = false;

/* stamp_with_sql's update is running (cfeed_stamping). */
static bool stamping_with_sql = false;

/*
 * build_array
 *		A one-dimensional array of n pass-by-value datums.
 */
static Datum
build_array(Datum *values, int n, Oid elemtype)
{
	int16		typlen;
	bool		typbyval;
	char		typalign;

	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	return PointerGetDatum(construct_array(values, n, elemtype, typlen, typbyval, typalign));
}

/*
 * concurrent_sweep_error
 *		A stamping update touched fewer of the batch's changes than it read
 *		as pending: another transaction changed or deleted one first (a
 *		sweep of another group, of a shard moved between groups; an UPDATE
 *		or a DELETE of a pending change).
 */
static void
concurrent_sweep_error(uint64 expected, uint64 updated)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("another transaction changed the changes this sweep read as pending"),
			 errdetail("Expected to update " UINT64_FORMAT " rows, updated " UINT64_FORMAT ".",
					   expected, updated),
			 errhint("Nothing was stamped by this sweep; run it again.  A sweep of another group (a shard moved between groups), or an UPDATE or DELETE of a pending change in cfeed.change, does this.")));
}

/*
 * cfeed_stamp_would_wait
 *		Whether stamping the change in slot, the version of it the sweep's
 *		snapshot sees as just fetched from cfeed.change, would wait
 *		for another transaction: one still running holds a lock on it (its
 *		DELETE, UPDATE or SELECT ... FOR SHARE or UPDATE).  So does the
 *		sweep's own transaction, when it locked the change before the sweep:
 *		that change is left too.  Heap only (the slot holds the page's
 *		buffer pinned); with another access method only the lock step before
 *		the write (lock_batch) finds a lock, when it is taken.
 */
bool
cfeed_stamp_would_wait(TupleTableSlot *slot)
{
	BufferHeapTupleTableSlot *bslot = (BufferHeapTupleTableSlot *) slot;
	TM_Result	result;

	if (!TTS_IS_BUFFERTUPLE(slot))
		return false;
	Assert(BufferIsValid(bslot->buffer));
	LockBuffer(bslot->buffer, BUFFER_LOCK_SHARE);
	/* as a writer inserted it, with no xmax: the common case, at once */
	if (bslot->base.tuple->t_data->t_infomask & HEAP_XMAX_INVALID)
		result = TM_Ok;
	else
		result = HeapTupleSatisfiesUpdate(bslot->base.tuple, GetCurrentCommandId(false),
										  bslot->buffer);
	LockBuffer(bslot->buffer, BUFFER_LOCK_UNLOCK);
	return result == TM_BeingModified;
}

/*
 * leave_shard_from
 *		Flag changes[i] and the rest of its shard's (the batch is ordered by
 *		shard) as locked: not written, for the caller to leave.  Returns the
 *		index after the shard's last change.
 */
static int
leave_shard_from(CfeedPendingChange *changes, int n, int i)
{
	int			j;

	for (j = i; j < n && changes[j].feed_id == changes[i].feed_id &&
		 changes[j].shard == changes[i].shard; j++)
		changes[j].locked = true;
	return j;
}

/*
 * acl_lets_others_lock
 *		Whether an ACL (of cfeed.change or one of its columns) grants UPDATE
 *		or DELETE, which let a role lock rows, to a role that does not have
 *		the owner's privileges (PUBLIC included).
 */
static bool
acl_lets_others_lock(Datum acldatum, Oid owner)
{
	Acl		   *acl = DatumGetAclP(acldatum);
	AclItem    *items = ACL_DAT(acl);
	int			i;

	for (i = 0; i < ACL_NUM(acl); i++)
		if ((ACLITEM_GET_PRIVS(items[i]) & (ACL_UPDATE | ACL_DELETE)) != 0 &&
			(items[i].ai_grantee == ACL_ID_PUBLIC ||
			 !has_privs_of_role(items[i].ai_grantee, owner)))
			return true;
	return false;
}

/*
 * foreign_rule_uses
 *		Whether a rule that is not one of extension cfeed's views' uses
 *		relation rel: a view over it that a DBA made, or a rule of another
 *		table.  Roles granted such a view lock rel's rows with the view
 *		owner's privileges, which rel's ACL does not show.
 */
static bool
foreign_rule_uses(Relation rel)
{
	Oid			extension = get_extension_oid("cfeed", false);
	Relation	depend = table_open(DependRelationId, AccessShareLock);
	Relation	rewrite = table_open(RewriteRelationId, AccessShareLock);
	ScanKeyData key[2];
	SysScanDesc scan;
	HeapTuple	tuple;
	bool		found = false;

	ScanKeyInit(&key[0], Anum_pg_depend_refclassid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(RelationRelationId));
	ScanKeyInit(&key[1], Anum_pg_depend_refobjid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(RelationGetRelid(rel)));
	scan = systable_beginscan(depend, DependReferenceIndexId, true, NULL, 2, key);
	while (!found && HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		Form_pg_depend dep = (Form_pg_depend) GETSTRUCT(tuple);
		ScanKeyData rulekey;
		SysScanDesc rulescan;
		HeapTuple	rule;

		if (dep->classid != RewriteRelationId)
			continue;
		ScanKeyInit(&rulekey, Anum_pg_rewrite_oid, BTEqualStrategyNumber, F_OIDEQ,
					ObjectIdGetDatum(dep->objid));
		rulescan = systable_beginscan(rewrite, RewriteOidIndexId, true, NULL, 1, &rulekey);
		rule = systable_getnext(rulescan);
		found = HeapTupleIsValid(rule) &&
			getExtensionOfObject(RelationRelationId,
								 ((Form_pg_rewrite) GETSTRUCT(rule))->ev_class) != extension;
		systable_endscan(rulescan);
	}
	systable_endscan(scan);
	table_close(rewrite, AccessShareLock);
	table_close(depend, AccessShareLock);
	return found;
}

/* others_may_lock's answer for relation lockers_relid (cache.h) */
static Oid	lockers_relid = InvalidOid;
static bool lockers_may;
static uint64 lockers_gen = 0;

static void
lockers_invalidate(Oid relid)
{
	if (!OidIsValid(relid) || relid == lockers_relid)
		lockers_relid = InvalidOid;
	lockers_gen++;
}

/*
 * look_for_lockers
 *		Whether a role other than cfeed.change's owner (and the roles with its
 *		privileges, superusers) may lock a change's row: UPDATE or DELETE
 *		granted on the table or on one of its columns, or a view or rule not
 *		cfeed's that uses it (foreign_rule_uses).  Otherwise only the owner's
 *		transactions lock one (a SECURITY DEFINER function of the owner's
 *		included: docs/security.md), and lock_batch is skipped: its lock
 *		costs a WAL record per change.  Read from the catalogs (others_may_lock
 *		keeps the answer).
 */
static bool
look_for_lockers(Relation rel)
{
	Oid			owner = rel->rd_rel->relowner;
	HeapTuple	tuple;
	Datum		acl;
	bool		isnull;
	bool		may = false;
	AttrNumber	attnum;

	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(RelationGetRelid(rel)));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for relation %u", RelationGetRelid(rel));
	acl = SysCacheGetAttr(RELOID, tuple, Anum_pg_class_relacl, &isnull);
	may = !isnull && acl_lets_others_lock(acl, owner);
	ReleaseSysCache(tuple);
	for (attnum = 1; !may && attnum <= RelationGetNumberOfAttributes(rel); attnum++)
	{
		tuple = SearchSysCache2(ATTNUM, ObjectIdGetDatum(RelationGetRelid(rel)),
								Int16GetDatum(attnum));
		if (!HeapTupleIsValid(tuple))
			continue;
		acl = SysCacheGetAttr(ATTNUM, tuple, Anum_pg_attribute_attacl, &isnull);
		may = !isnull && acl_lets_others_lock(acl, owner);
		ReleaseSysCache(tuple);
	}
	return may || foreign_rule_uses(rel);
}

/*
 * others_may_lock
 *		look_for_lockers' answer, kept until an invalidation says it may have
 *		changed (a GRANT or REVOKE on cfeed.change or its columns, a view or
 *		rule made or dropped, a change of role membership): each sweep that
 *		writes rows asks, and the catalog scans would cost more than the
 *		rest of a small sweep.  An answer read while an invalidation came is
 *		not kept.
 */
static bool
others_may_lock(Relation rel)
{
	uint64		gen;
	bool		may;

	cfeed_cache_register(CFEED_CACHE_LOCKERS, lockers_invalidate);
	if (lockers_relid == RelationGetRelid(rel))
		return lockers_may;
	gen = lockers_gen;
	may = look_for_lockers(rel);
	if (gen == lockers_gen)
	{
		lockers_relid = RelationGetRelid(rel);
		lockers_may = may;
	}
	return may;
}

/*
 * lock_batch
 *		Lock each of the batch's changes for the update, without waiting
 *		(which the update would do).  A change another transaction locked
 *		since the sweep collected it is left, with the rest of its shard's
 *		(leave_shard_from); one updated or deleted meanwhile fails the sweep
 *		(40001), as the update would.  Returns how many were left.
 */
static int
lock_batch(Relation rel, CfeedPendingChange *changes, int n, Snapshot snapshot)
{
	TupleTableSlot *slot = table_slot_create(rel, NULL);
	CommandId	cid = GetCurrentCommandId(true);
	int			nleft = 0;
	int			i = 0;

	while (i < n)
	{
		TM_FailureData tmfd;
		TM_Result	result;

		CHECK_FOR_INTERRUPTS();
		result = table_tuple_lock(rel, &changes[i].tid, snapshot, slot, cid,
								  LockTupleNoKeyExclusive, LockWaitSkip, 0, &tmfd);
		if (result == TM_WouldBlock)
		{
			int			end = leave_shard_from(changes, n, i);

			nleft += end - i;
			i = end;
			continue;
		}
		if (result != TM_Ok)
			concurrent_sweep_error(n, 0);
		i++;
	}
	ExecDropSingleTupleTableSlot(slot);
	return nleft;
}

/*
 * pin_plan_shapes
 *		Make the sweep's update plan as a nested loop of TID scans over the
 *		batch.  A hash or merge join would read the whole table (or the
 *		pending index with its dead entries) on every sweep, which is exactly
 *		the cost this design avoids.  The plan is generic, made once per
 *		backend (cfeed_spi_connect).  The settings last until AtEOXact_GUC
 *		with the returned nest level.
 */
static int
pin_plan_shapes(void)
{
	static const char *const off[] = {"enable_hashjoin", "enable_mergejoin",
	"enable_seqscan", "enable_bitmapscan", "enable_material"};

	return cfeed_plan_settings_off(off, lengthof(off));
}

/*
 * stamp_with_sql
 *		Write the numbers with one update of the batch's changes not left
 *		locked, which must touch each of them (a concurrent sweep would have
 *		made some invisible).
 */
static void
stamp_with_sql(Relation rel, CfeedPendingChange *changes, int n)
{
	Datum	   *tids = palloc(sizeof(Datum) * n);
	Datum	   *numbers = palloc(sizeof(Datum) * n);
	Datum	   *times = palloc(sizeof(Datum) * n);
	Datum		args[3];
	Oid			types[3] = {TIDARRAYOID, INT8ARRAYOID, TIMESTAMPTZARRAYOID};
	int			i;
	int			nestlevel;
	int			nwrite = 0;
	int			spi_level = cfeed_spi_connect();

	for (i = 0; rel->rd_rules != NULL && i < rel->rd_rules->numLocks; i++)
	{
		RewriteRule *rule = rel->rd_rules->rules[i];

		if (rule->event == CMD_UPDATE && rule->isInstead && rule->enabled != RULE_DISABLED)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cfeed cannot stamp changes: a DO INSTEAD rule replaces updates of cfeed.change"),
					 errdetail("Stamps are written by an update of cfeed.change, which the rule would replace."),
					 errhint("Drop the rule, or make it DO ALSO.")));
	}
	for (i = 0; i < n; i++)
	{
		if (changes[i].locked)
			continue;
		tids[nwrite] = PointerGetDatum(&changes[i].tid);
		times[nwrite] = TimestampTzGetDatum(changes[i].stamped_at);
		numbers[nwrite++] = Int64GetDatum(changes[i].number);
	}

	nestlevel = pin_plan_shapes();
	args[0] = PointerGetDatum(construct_array(tids, nwrite, TIDOID, sizeof(ItemPointerData), false, TYPALIGN_SHORT));
	args[1] = build_array(numbers, nwrite, INT8OID);
	args[2] = build_array(times, nwrite, TIMESTAMPTZOID);
	stamping_with_sql = true;
	PG_TRY();
	{
		int			rc = SPI_execute_plan(cfeed_spi_plan(&update_changes_plan,
														 "UPDATE cfeed.change c SET change_sequence_number = u.number, stamped_at = u.at "
														 "FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), "
														 "pg_catalog.unnest($3)) AS u(tid, number, at) "
														 "WHERE c.ctid = u.tid",
														 3, types),
										  args, NULL, false, 0);

		if (rc != SPI_OK_UPDATE)
			elog(ERROR, "cfeed sweep: updating the changes failed: %s", SPI_result_code_string(rc));
		if (SPI_processed != (uint64) nwrite)
			concurrent_sweep_error(nwrite, SPI_processed);
	}
	PG_FINALLY();
	{
		stamping_with_sql = false;
	}
	PG_END_TRY();
	AtEOXact_GUC(true, nestlevel);
	cfeed_spi_finish(spi_level);
}

/*
 * cfeed_stamping
 *		Whether the update that gives changes their numbers is a sweep's own
 *		(stamp_with_sql): change_stamp_guard lets it pass.
 */
bool
cfeed_stamping(void)
{
	return stamping_with_sql;
}

/*
 * stamp_direct
 *		Write the numbers without the executor (direct.c), as the update of
 *		stamp_with_sql would: per change, the version visible to the sweep's
 *		snapshot is updated to a new one with its number and stamped_at, and
 *		the new version's index entries are made, for each change not left
 *		locked.  Each update must succeed (else a concurrent sweep got there
 *		first).  Returns false, having written nothing, when the update must
 *		run as SQL (see direct.c).  rel is cfeed.change, locked by the caller
 *		until its transaction ends.
 */
static bool
stamp_direct(Relation rel, CfeedPendingChange *changes, int n, Snapshot snapshot)
{
	TupleTableSlot *oldslot;
	TupleTableSlot *newslot;
	int			i;

	if (!cfeed_direct_ok(rel, CMD_UPDATE))
		return false;

	oldslot = table_slot_create(rel, NULL);
	newslot = MakeSingleTupleTableSlot(RelationGetDescr(rel), &TTSOpsVirtual);
	for (i = 0; i < n; i++)
	{
		if (changes[i].locked)
			continue;
		CHECK_FOR_INTERRUPTS();
		if (!table_tuple_fetch_row_version(rel, &changes[i].tid, snapshot, oldslot))
			concurrent_sweep_error(n, i);
		slot_getallattrs(oldslot);

		/*
		 * newslot's by-reference values point into the old version on its
		 * page: the slot keeps the buffer pinned until the update has copied
		 * them into the new version.
		 */
		Assert(TTS_IS_BUFFERTUPLE(oldslot) &&
			   BufferIsValid(((BufferHeapTupleTableSlot *) oldslot)->buffer));

		/*
		 * The address the sweep collected is still the change's (cfeed.change
		 * is locked against rewrites since before the snapshot), and the
		 * version its snapshot sees is unstamped.
		 */
		Assert(DatumGetInt32(oldslot->tts_values[Anum_change_feed_id - 1]) == changes[i].feed_id &&
			   DatumGetInt32(oldslot->tts_values[Anum_change_shard - 1]) == changes[i].shard &&
			   DatumGetInt64(oldslot->tts_values[Anum_change_change_id - 1]) == changes[i].change_id);
		Assert(oldslot->tts_isnull[Anum_change_sequence - 1]);
		ExecClearTuple(newslot);
		memcpy(newslot->tts_values, oldslot->tts_values, sizeof(Datum) * CHANGE_NATTS);
		memcpy(newslot->tts_isnull, oldslot->tts_isnull, sizeof(bool) * CHANGE_NATTS);
		newslot->tts_values[Anum_change_sequence - 1] = Int64GetDatum(changes[i].number);
		newslot->tts_isnull[Anum_change_sequence - 1] = false;
		newslot->tts_values[Anum_change_stamped_at - 1] = TimestampTzGetDatum(changes[i].stamped_at);
		newslot->tts_isnull[Anum_change_stamped_at - 1] = false;
		ExecStoreVirtualTuple(newslot);
		if (!cfeed_direct_update(rel, &changes[i].tid, newslot, snapshot))
			concurrent_sweep_error(n, i);
	}
	ExecDropSingleTupleTableSlot(newslot);
	ExecDropSingleTupleTableSlot(oldslot);
	CommandCounterIncrement();
	return true;
}

/*
 * cfeed_stamp
 *		Write the numbers and stamped_at of changes[0..n-1] into
 *		cfeed.change, rel, opened by the caller; snapshot is the sweep's.
 *		Directly when direct.c allows it, else with one SQL update, each
 *		change locked first (lock_batch).  A change another transaction
 *		locked since the sweep collected it is not written, nor are the
 *		changes after it in its shard: they are flagged locked, and their
 *		number is returned, for the caller to leave them.
 */
int
cfeed_stamp(Relation rel, CfeedPendingChange *changes, int n, Snapshot snapshot)
{
	int			nleft;
#ifdef USE_ASSERT_CHECKING
	int			i;

	/*
	 * The sweep holds cfeed.change against rewrites, and the batch is
	 * ordered by shard with each shard's numbers consecutive: gapless, and
	 * following change_id order.  None was found locked (the sweep left
	 * those).
	 */
	Assert(CheckRelationLockedByMe(rel, RowExclusiveLock, true));
	Assert(n > 0 && IsMVCCSnapshot(snapshot));
	Assert(!changes[0].locked);
	for (i = 1; i < n; i++)
	{
		const CfeedPendingChange *a = &changes[i - 1];
		const CfeedPendingChange *b = &changes[i];

		Assert(!b->locked);
		if (a->feed_id == b->feed_id && a->shard == b->shard)
			Assert(b->number == a->number + 1 && b->change_id >= a->change_id);
		else
			Assert(a->feed_id < b->feed_id || (a->feed_id == b->feed_id && a->shard < b->shard));
	}
#endif

	nleft = others_may_lock(rel) ? lock_batch(rel, changes, n, snapshot) : 0;
	if (nleft < n && !stamp_direct(rel, changes, n, snapshot))
		stamp_with_sql(rel, changes, n);
	return nleft;
}

/*
 * set_stamp_level
 *		synchronous_commit := cfeed.sweep_synchronous_commit, for the rest of
 *		the transaction, and a flush at commit.
 */
static void
set_stamp_level(void)
{
	const struct config_enum_entry *e;

	for (e = cfeed_sync_commit_options; e->name != NULL; e++)
		if (e->val == cfeed_sweep_synchronous_commit)
			break;
	(void) set_config_option("synchronous_commit", e->name, PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_LOCAL, true, 0, false);
	ForceSyncCommit();
}

/*
 * stamp_xact_callback
 *		A transaction that stamped sets its level again just before it
 *		commits: the application may have changed synchronous_commit after
 *		the sweep (SET LOCAL, or a function's SET clause, which also undoes
 *		what was set inside the function).
 */
static void
stamp_xact_callback(XactEvent event, void *arg pg_attribute_unused())
{
	if (!stamped_in_xact)
		return;
	if (event == XACT_EVENT_PRE_COMMIT)
		set_stamp_level();
	else if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
			 event == XACT_EVENT_PREPARE || event == XACT_EVENT_PARALLEL_COMMIT ||
			 event == XACT_EVENT_PARALLEL_ABORT)
		stamped_in_xact = false;
}

/*
 * cfeed_stamp_commit_level
 *		Make the current (stamping) transaction commit synchronously, at
 *		cfeed.sweep_synchronous_commit, whatever synchronous_commit says,
 *		then or later in the transaction; the setting ends with it.
 */
void
cfeed_stamp_commit_level(void)
{
	static bool callback_registered = false;

	if (!callback_registered)
	{
		RegisterXactCallback(stamp_xact_callback, NULL);
		callback_registered = true;
	}
	set_stamp_level();
	stamped_in_xact = true;
}
