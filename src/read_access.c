/*-------------------------------------------------------------------------
 *
 * read_access.c
 *	  Per-feed access: which feeds the current user may read, which tracked
 *	  tables' row images it may see, and which feeds it may write.
 *
 * The rules
 * ---------
 * cfeed.read_grant holds the grants: (grantee, feed_id), a null feed_id
 * meaning every feed, grantee 0 meaning PUBLIC.  A role may read a feed when
 * it is a superuser, has BYPASSRLS, has the privileges of the extension's
 * owner, or has the privileges of a grantee of the feed or of every feed.
 * A role may see the row image of a change of table T when, besides, it may
 * SELECT every column of T (a table grant, or a grant on each column) and
 * T's own row-level security does not apply to it (T's owner unless FORCEd,
 * superusers, BYPASSRLS roles): an image is a copy of a row, so it is shown
 * only to whom T would show that row whatever T's policies say.  The
 * changes of a dropped table are seen only by the roles that bypass
 * cfeed.change's row-level security (its owner, superusers, BYPASSRLS).
 *
 * cfeed.write_grant holds the write grants, in the same form, and a role
 * may write a feed under the same rule with them: the INSERT pattern and
 * history rows (policy change_write: cfeed._may_write(feed_id)), deletes
 * (policy change_delete), and cfeed.publish, tracked writes and backfill
 * (append.c and backfill.c call cfeed_check_write, then write directly or
 * through the INSERT, which the policy checks again).  A database whose
 * schema has no cfeed.write_grant yet (not yet updated by ALTER EXTENSION
 * cfeed UPDATE) lets every writer write every feed.
 *
 * Where they are enforced: row-level security on cfeed.change (policy
 * change_read: cfeed._may_read_image(feed_id, tbl), per row; in a schema
 * whose cfeed.change.tbl is still a regclass, cfeed._may_read(feed_id,
 * tbl)), cfeed.row_image (row images kept outside their change's own
 * columns) and cfeed.lease (cfeed._may_read(feed_id)); the cfeed.shard
 * view, on which the other views join, filters on cfeed._may_read(feed_id);
 * and the C read functions (read.c) call cfeed_check_read first, so that a
 * feed the caller may not read is 42501 rather than silence.  The owner of
 * cfeed.change, who stamps, bypasses its row-level security.
 *
 * The cache
 * ---------
 * Per backend, for the current user: the grants (read whole, the table is
 * small) and the decisions made so far, per feed and per table, with the
 * last decision of each kind in front (a read asks about one feed for every
 * row).  Everything is dropped, and rebuilt on the next question, when the
 * user changes, at a relcache invalidation of cfeed.read_grant (its
 * statement trigger, cfeed._read_grant_changed, sends one), of a table
 * decided about (GRANT, REVOKE and ALTER TABLE ... ROW LEVEL SECURITY send
 * one), or of everything, and at any change of roles or role membership.
 * Invalidations are read at the start of every transaction, whenever a lock
 * is first taken, and by cfeed_check_read: a revoke takes effect at the
 * reader's next call of a read function (or after its wait), and for plain
 * SQL on cfeed.change at its next transaction, as a REVOKE would.
 *
 * Locking: cfeed.read_grant is read with ACCESS SHARE and a catalog
 * snapshot; the cache is backend-local (cache.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "executor/tuptable.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/pathnodes.h"
#include "nodes/supportnodes.h"
#include "parser/parse_func.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "lib/qunique.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "cache.h"
#include "cfeed.h"

/* Columns of cfeed.read_grant and cfeed.write_grant (the same). */
#define Anum_grant_grantee		1
#define Anum_grant_feed_id		2

typedef struct CfeedGrant
{
	Oid			grantee;		/* ACL_ID_PUBLIC: every role */
	int32		feed_id;
	bool		every_feed;		/* feed_id null in the table */
} CfeedGrant;

/* The grants of one table, as read by grants_load. */
typedef struct CfeedGrants
{
	Oid			relid;			/* the table when read, else InvalidOid */
	CfeedGrant *grants;
	int			ngrants;
	bool		all;			/* the user has every feed */
} CfeedGrants;

/* A decision about one feed (feed_id) or one table (its OID). */
typedef struct CfeedAccessEntry
{
	uint32		key;			/* hash key */
	bool		may;
} CfeedAccessEntry;

/* The decisions of one kind, and the last one asked for. */
typedef struct CfeedAccessMemo
{
	HTAB	   *decided;		/* NULL until access_prepare builds it */
	bool		last_set;
	uint32		last_key;
	bool		last_may;
} CfeedAccessMemo;

PG_FUNCTION_INFO_V1(cfeed_may_read);
PG_FUNCTION_INFO_V1(cfeed_may_write);
PG_FUNCTION_INFO_V1(cfeed_may_read_change);
PG_FUNCTION_INFO_V1(cfeed_may_read_image);
PG_FUNCTION_INFO_V1(cfeed_may_read_support);
PG_FUNCTION_INFO_V1(cfeed_readable_feeds);
PG_FUNCTION_INFO_V1(cfeed_read_grant_changed);

/*
 * The cache (see the file header).  Invalidation callbacks only clear
 * access_valid and count; memory is reset by access_prepare, never by a
 * callback, which may run in the middle of a decision.
 */
static MemoryContext access_cxt = NULL;
static bool access_valid = false;
static uint64 access_invals = 0;
static Oid	access_user = InvalidOid;
static CfeedGrants read_grants;
static CfeedGrants write_grants;
static ArrayType *readable_granted;	/* readable_feed_ids' array, from the grants */
static CfeedAccessMemo feed_access;
static CfeedAccessMemo table_access;
static CfeedAccessMemo write_access;

/*
 * access_forget
 *		Mark the cache stale (safe in an invalidation callback).
 */
static void
access_forget(void)
{
	access_valid = false;
	access_invals++;
}

/*
 * access_invalidate
 *		The cache's invalidation callback (cache.c): forget everything when
 *		the relation is cfeed.read_grant, cfeed.write_grant or a table
 *		decided about, or for
 *		InvalidOid (every relation; a change of roles or role membership:
 *		superuser, BYPASSRLS and memberships decide too).
 */
static void
access_invalidate(Oid relid)
{
	/* while the cache is being built, any invalidation makes it stale */
	if (!access_valid || !OidIsValid(relid) || relid == read_grants.relid ||
		relid == write_grants.relid ||
		(table_access.decided != NULL &&
		 hash_search(table_access.decided, &relid, HASH_FIND, NULL) != NULL))
		access_forget();
}

/*
 * grants_load
 *		Read the grants table (read_grant or write_grant) into *g (in
 *		access_cxt) with a fresh catalog snapshot; none when the database's
 *		schema has no such table.
 */
static void
grants_load(CfeedSchemaFeature table, CfeedGrants *g)
{
	Oid			relid = cfeed_schema_relid(table);
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tup;
	int			allocated = 16;

	g->ngrants = 0;
	g->relid = relid;
	g->grants = MemoryContextAlloc(access_cxt, sizeof(CfeedGrant) * allocated);
	if (!OidIsValid(relid) || (rel = try_relation_open(relid, AccessShareLock)) == NULL)
	{
		g->relid = InvalidOid;
		return;
	}
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		bool		isnull;
		Datum		feed = heap_getattr(tup, Anum_grant_feed_id, RelationGetDescr(rel), &isnull);
		CfeedGrant *one;

		if (g->ngrants == allocated)
		{
			allocated *= 2;
			g->grants = repalloc(g->grants, sizeof(CfeedGrant) * allocated);
		}
		one = &g->grants[g->ngrants++];
		one->every_feed = isnull;
		one->feed_id = isnull ? 0 : DatumGetInt32(feed);
		one->grantee = DatumGetObjectId(heap_getattr(tup, Anum_grant_grantee,
													 RelationGetDescr(rel), &isnull));
	}
	systable_endscan(scan);
	relation_close(rel, AccessShareLock);
}

/*
 * grantee_matches
 *		Whether the current user has the privileges of a grant's grantee.
 */
static bool
grantee_matches(const CfeedGrant *g)
{
	return g->grantee == ACL_ID_PUBLIC || has_privs_of_role(access_user, g->grantee);
}

/*
 * grants_prepare
 *		Load the grants of a grants table into *g and decide whether the user
 *		has every feed: when privileged, when the schema has no such table
 *		(not yet updated), or when granted every feed.
 */
static void
grants_prepare(CfeedSchemaFeature table, CfeedGrants *g, bool privileged)
{
	int			i;

	grants_load(table, g);
	g->all = privileged || !OidIsValid(g->relid);
	for (i = 0; i < g->ngrants && !g->all; i++)
		g->all = g->grants[i].every_feed && grantee_matches(&g->grants[i]);
}

/*
 * grants_have_feed
 *		Whether the user may read (or write) the feed under *g: every feed, or a grant of it
 *		to a role whose privileges the user has.
 */
static bool
grants_have_feed(const CfeedGrants *g, int32 feed_id)
{
	bool		may = g->all;
	int			i;

	for (i = 0; i < g->ngrants && !may; i++)
		may = !g->grants[i].every_feed && g->grants[i].feed_id == feed_id &&
			grantee_matches(&g->grants[i]);
	return may;
}

/*
 * access_prepare
 *		Make the cache current for GetUserId(): a no-op while nothing was
 *		invalidated and the user is the same.
 */
static void
access_prepare(void)
{
	Oid			user = GetUserId();
	uint64		invals = access_invals;
	HASHCTL		ctl;
	bool		privileged;

	if (access_valid && user == access_user)
		return;
	if (access_cxt == NULL)
	{
		access_cxt = AllocSetContextCreate(TopMemoryContext, "cfeed read access",
										   ALLOCSET_SMALL_SIZES);
		cfeed_cache_register(CFEED_CACHE_READ_ACCESS, access_invalidate);
	}
	access_valid = false;
	memset(&feed_access, 0, sizeof(feed_access));
	memset(&table_access, 0, sizeof(table_access));
	memset(&write_access, 0, sizeof(write_access));
	MemoryContextReset(access_cxt);
	readable_granted = NULL;

	access_user = user;
	privileged = superuser_arg(user) || has_bypassrls_privilege(user) ||
		has_privs_of_role(user, cfeed_extension_owner());
	grants_prepare(CFEED_SCHEMA_READ_GRANTS, &read_grants, privileged);
	grants_prepare(CFEED_SCHEMA_WRITE_GRANTS, &write_grants, privileged);

	ctl.keysize = sizeof(uint32);
	ctl.entrysize = sizeof(CfeedAccessEntry);
	ctl.hcxt = access_cxt;
	feed_access.decided = hash_create("cfeed feed access", 16, &ctl,
									  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	table_access.decided = hash_create("cfeed table access", 16, &ctl,
									   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	write_access.decided = hash_create("cfeed write access", 16, &ctl,
									   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	/* An invalidation read while building leaves the cache stale. */
	access_valid = (invals == access_invals);
}

/*
 * memo_decide
 *		The decision about key: the last one asked for, a remembered one, or
 *		decide(key), remembered unless the cache went stale while deciding
 *		(a role lookup reads invalidations).  The caller has run
 *		access_prepare.
 */
static bool
memo_decide(CfeedAccessMemo *memo, uint32 key, bool (*decide) (uint32 key))
{
	CfeedAccessEntry *entry;
	bool		may;

	if (memo->last_set && memo->last_key == key)
		return memo->last_may;
	entry = hash_search(memo->decided, &key, HASH_FIND, NULL);
	if (entry != NULL)
		may = entry->may;
	else
	{
		may = decide(key);
		if (!access_valid)
			return may;
		entry = hash_search(memo->decided, &key, HASH_ENTER, NULL);
		entry->may = may;
	}
	memo->last_set = true;
	memo->last_key = key;
	memo->last_may = may;
	return may;
}

/*
 * feed_decide
 *		Whether the current user may read the feed: every feed, or a grant
 *		of it to a role whose privileges the user has.
 */
static bool
feed_decide(uint32 key)
{
	return grants_have_feed(&read_grants, (int32) key);
}

/*
 * write_decide
 *		Whether the current user may write the feed (write grants).
 */
static bool
write_decide(uint32 key)
{
	return grants_have_feed(&write_grants, (int32) key);
}

/*
 * cfeed_may_read_feed
 *		Whether the current user may read the feed (see the file header).
 *		Does not check that the feed exists.
 */
bool
cfeed_may_read_feed(int32 feed_id)
{
	access_prepare();
	return memo_decide(&feed_access, (uint32) feed_id, feed_decide);
}

/*
 * cfeed_may_read_every_feed
 *		Whether the current user may read every feed of this database: a
 *		grant on every feed, or privileges that need no grant.
 */
bool
cfeed_may_read_every_feed(void)
{
	access_prepare();
	return read_grants.all;
}

/*
 * cfeed_may_write_feed
 *		Whether the current user may write the feed (see the file header).
 *		Does not check that the feed exists.
 */
bool
cfeed_may_write_feed(int32 feed_id)
{
	access_prepare();
	return memo_decide(&write_access, (uint32) feed_id, write_decide);
}

/*
 * cfeed_check_write
 *		Raise 42501 unless the current user may write the feed: what
 *		cfeed.publish, a tracked table's trigger and cfeed.backfill call
 *		before they write (the policy change_write checks the INSERT pattern
 *		the same way).
 */
void
cfeed_check_write(int32 feed_id)
{
	if (cfeed_may_write_feed(feed_id))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied to write feed %d", feed_id),
			 errdetail("Role \"%s\" has no write grant on feed %d.",
					   GetUserNameFromId(GetUserId(), false), feed_id),
			 errhint("The extension's owner grants it with cfeed.grant_write(%d, role).", feed_id)));
}

/*
 * has_dropped_column
 *		Whether relation relid has a dropped column.
 */
static bool
has_dropped_column(Oid relid)
{
	AttrNumber	att;

	/* a relation's columns are numbered 1 .. relnatts, dropped ones too */
	for (att = 1;; att++)
	{
		HeapTuple	tuple = SearchSysCache2(ATTNUM, ObjectIdGetDatum(relid), Int16GetDatum(att));
		bool		dropped;

		if (!HeapTupleIsValid(tuple))
			return false;
		dropped = ((Form_pg_attribute) GETSTRUCT(tuple))->attisdropped;
		ReleaseSysCache(tuple);
		if (dropped)
			return true;
	}
}

/*
 * table_decide
 *		Whether the current user may see the row images of relation relid:
 *		it exists, the user may SELECT it (or every column of it, when it has
 *		never dropped one: older images still hold a dropped column's values,
 *		which no column grant of today tells who could read), and its
 *		row-level security does not apply to the user.
 */
static bool
table_decide(uint32 relid)
{
	bool		missing = false;

	if (pg_class_aclcheck_ext(relid, access_user, ACL_SELECT, &missing) != ACLCHECK_OK)
	{
		if (missing || has_dropped_column(relid) ||
			pg_attribute_aclcheck_all(relid, access_user, ACL_SELECT, ACLMASK_ALL) != ACLCHECK_OK)
			return false;
	}
	if (missing)
		return false;
	return check_enable_rls(relid, access_user, true) != RLS_ENABLED;
}

/*
 * cfeed_may_read_table
 *		Whether the current user may see the row images of table relid.
 */
bool
cfeed_may_read_table(Oid relid)
{
	access_prepare();
	return memo_decide(&table_access, relid, table_decide);
}

/*
 * cfeed_check_read
 *		Raise 42501 unless the current user may read the feed.  Callers check
 *		it before looking the feed up, so that whether a feed exists is told
 *		only to those who may read it (or every feed), and again after a
 *		wait.  The invalidations that arrived since the transaction last read
 *		them are read first: a revoke committed meanwhile (while the caller
 *		slept, say) holds from the next call on, even within a transaction
 *		that would otherwise see it only at its next lock.
 */
void
cfeed_check_read(int32 feed_id)
{
	AcceptInvalidationMessages();
	if (cfeed_may_read_feed(feed_id))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied for feed %d", feed_id),
			 errdetail("Role \"%s\" has no read grant on feed %d.",
					   GetUserNameFromId(GetUserId(), false), feed_id),
			 errhint("The extension's owner grants it with cfeed.grant_read(%d, role).", feed_id)));
}

/*
 * cfeed_may_read
 *		SQL: cfeed._may_read(feed_id int) returns bool.  The filter of
 *		the cfeed.shard view and the policy of cfeed.lease; false for null.
 */
Datum
cfeed_may_read(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		PG_RETURN_BOOL(false);
	PG_RETURN_BOOL(cfeed_may_read_feed(PG_GETARG_INT32(0)));
}

/*
 * cfeed_may_read_change
 *		SQL: cfeed._may_read(feed_id int, tbl regclass) returns bool.
 *		The policy of cfeed.change and cfeed.row_image, run for every row a
 *		reader subject to it reads: may the user read the feed and, for a
 *		change with a row image (tbl not null), see the image?
 */
Datum
cfeed_may_read_change(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0) || !cfeed_may_read_feed(PG_GETARG_INT32(0)))
		PG_RETURN_BOOL(false);
	PG_RETURN_BOOL(PG_ARGISNULL(1) || cfeed_may_read_table(PG_GETARG_OID(1)));
}

/*
 * cfeed_may_read_image
 *		SQL: cfeed._may_read_image(feed_id int, tbl int) returns bool.
 *		The policy change_read of cfeed.change, whose tbl is a table's
 *		number: as cfeed._may_read(feed_id, tbl regclass) for the table
 *		of the number; a number with no table here (a subscriber without it,
 *		a table dropped since) shows its images to no one it applies to.
 */
Datum
cfeed_may_read_image(PG_FUNCTION_ARGS)
{
	Oid			relid;

	if (PG_ARGISNULL(0) || !cfeed_may_read_feed(PG_GETARG_INT32(0)))
		PG_RETURN_BOOL(false);
	if (PG_ARGISNULL(1))
		PG_RETURN_BOOL(true);
	relid = cfeed_table_of_number(fcinfo->flinfo, PG_GETARG_INT32(1));
	PG_RETURN_BOOL(OidIsValid(relid) && cfeed_may_read_table(relid));
}

/*
 * cfeed_may_write
 *		SQL: cfeed._may_write(feed_id int) returns bool.  The check of the
 *		policies change_write (INSERT) and change_delete; false for null.
 */
Datum
cfeed_may_write(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		PG_RETURN_BOOL(false);
	PG_RETURN_BOOL(cfeed_may_write_feed(PG_GETARG_INT32(0)));
}

/*
 * int32_cmp
 *		qsort comparator of int32s.
 */
static int
int32_cmp(const void *a, const void *b)
{
	int32		x = *(const int32 *) a;
	int32		y = *(const int32 *) b;

	return (x > y) - (x < y);
}

/*
 * sorted_ids
 *		ids[0..n-1] sorted, without duplicates, as an int[] in the current
 *		memory context: the order btree wants its array keys in (it sorts
 *		them at each rescan, at once when they are).
 */
static ArrayType *
sorted_ids(int32 *ids, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));
	int			i;

	qsort(ids, n, sizeof(int32), int32_cmp);
	n = n > 0 ? (int) qunique(ids, n, sizeof(int32), int32_cmp) : 0;
	for (i = 0; i < n; i++)
		d[i] = Int32GetDatum(ids[i]);
	return construct_array(d, n, INT4OID, sizeof(int32), true, TYPALIGN_INT);
}

/*
 * readable_feed_ids
 *		The feeds the current user may read, sorted: each feed of
 *		cfeed.feed (as of the active snapshot) when it may read every feed,
 *		else the feeds of the grants it has (whether they exist or not),
 *		kept with the access decisions.  A superset of what cfeed._may_read
 *		passes, as the index condition below needs.  The condition runs it
 *		at every start of an index scan (each rescan of a join's inner
 *		side), so the grants' array is made once per cache.
 */
static ArrayType *
readable_feed_ids(void)
{
	int32	   *ids;
	int			n = 0;
	int			i;
	ArrayType  *a;

	access_prepare();
	if (read_grants.all)
	{
		Relation	rel = cfeed_table_open("feed", AccessShareLock);
		TableScanDesc scan = table_beginscan(rel, GetActiveSnapshot(), 0, NULL);
		TupleTableSlot *slot = table_slot_create(rel, NULL);
		int			size = 16;

		ids = palloc(sizeof(int32) * size);
		while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
		{
			bool		isnull;

			if (n == size)
				ids = repalloc(ids, sizeof(int32) * (size *= 2));
			ids[n++] = DatumGetInt32(slot_getattr(slot, Anum_feed_feed_id, &isnull));
		}
		ExecDropSingleTupleTableSlot(slot);
		table_endscan(scan);
		table_close(rel, NoLock);
		return sorted_ids(ids, n);
	}
	if (readable_granted == NULL)
	{
		ids = palloc(sizeof(int32) * Max(read_grants.ngrants, 1));
		for (i = 0; i < read_grants.ngrants; i++)
			if (!read_grants.grants[i].every_feed && grantee_matches(&read_grants.grants[i]))
				ids[n++] = read_grants.grants[i].feed_id;
		a = sorted_ids(ids, n);
		if (!access_valid)
			return a;
		readable_granted = MemoryContextAlloc(access_cxt, VARSIZE(a));
		memcpy(readable_granted, a, VARSIZE(a));
	}
	a = palloc(VARSIZE(readable_granted));
	memcpy(a, readable_granted, VARSIZE(readable_granted));
	return a;
}

/*
 * cfeed_readable_feeds
 *		SQL: cfeed._readable_feeds() returns int[]: the feeds the caller may
 *		read (readable_feed_ids), for the index condition of the read
 *		policies (cfeed_may_read_support).
 */
Datum
cfeed_readable_feeds(PG_FUNCTION_ARGS)
{
	PG_RETURN_ARRAYTYPE_P(readable_feed_ids());
}

/*
 * readable_feeds_condition
 *		For cfeed._may_read(feed_id, ...) or cfeed._may_read_image(feed_id,
 *		tbl) on a btree index of integers whose column is feed_id: the lossy
 *		index condition feed_id = ANY (cfeed._readable_feeds()).  Without it,
 *		an index condition of the query's own (feed_id = 2 AND number > N:
 *		leakproof, so run before the policy) fetched another feed's rows for
 *		the policy to remove, and EXPLAIN ANALYZE counted them ("Rows Removed
 *		by Filter"): a reader learned that a feed existed, its shards, and
 *		how many changes lay in a range of numbers (so its head).  With it,
 *		the index scan never reaches a row of a feed the reader was not
 *		granted.  The array is the caller's at execution (a plan may be kept
 *		and run for another role), a superset of the feeds the policy
 *		passes, which stays the filter.  None for a role that may read every
 *		feed when the plan is made, nor for cfeed._may_write, nor in a
 *		schema without cfeed._readable_feeds (not yet updated to 1.9).  The
 *		plan depends on cfeed.read_grant, so that a plan kept (a prepared
 *		statement, PL/pgSQL) is made again when grants change, which
 *		invalidate it (cfeed._read_grant_changed): one made while its role
 *		read every feed gets the condition once it no longer does.
 */
static List *
readable_feeds_condition(SupportRequestIndexCondition *req)
{
	FuncExpr   *f = (FuncExpr *) req->node;
	Oid			readable;
	char	   *name;
	bool		every_feed;
	ScalarArrayOpExpr *saop;

	if (!IsA(f, FuncExpr) || req->indexarg != 0 || req->opfamily != INTEGER_BTREE_FAM_OID ||
		exprType(linitial(f->args)) != INT4OID)
		return NIL;
	name = get_func_name(f->funcid);
	if (name == NULL || (strcmp(name, "_may_read") != 0 && strcmp(name, "_may_read_image") != 0))
		return NIL;
	every_feed = cfeed_may_read_every_feed();
	if (OidIsValid(read_grants.relid))
		req->root->glob->relationOids = lappend_oid(req->root->glob->relationOids, read_grants.relid);
	if (every_feed)
		return NIL;
	readable = LookupFuncName(list_make2(makeString(get_namespace_name(get_func_namespace(f->funcid))),
										 makeString("_readable_feeds")),
							  0, NULL, true);
	if (!OidIsValid(readable))
		return NIL;

	saop = makeNode(ScalarArrayOpExpr);
	saop->opno = Int4EqualOperator;
	saop->opfuncid = F_INT4EQ;
	saop->useOr = true;
	saop->inputcollid = InvalidOid;
	saop->args = list_make2(copyObject(linitial(f->args)),
							makeFuncExpr(readable, INT4ARRAYOID, NIL, InvalidOid, InvalidOid,
										 COERCE_EXPLICIT_CALL));
	saop->location = -1;
	req->lossy = true;
	return list_make1(saop);
}

/*
 * cfeed_may_read_support
 *		SQL: the planner support function of both cfeed._may_read, of
 *		cfeed._may_read_image (and of cfeed._may_write).  Their selectivity
 *		is 1: a reader reads what it may read, and a plan for a third of the
 *		rows (the default for a boolean function) would turn a reader's read
 *		near a shard's head into a scan of the whole range and a sort.  On
 *		an index of feed_id, the read checks give an index condition
 *		(readable_feeds_condition).  Other requests get the defaults.
 */
Datum
cfeed_may_read_support(PG_FUNCTION_ARGS)
{
	Node	   *req = (Node *) PG_GETARG_POINTER(0);

	if (IsA(req, SupportRequestSelectivity))
	{
		SupportRequestSelectivity *sel = (SupportRequestSelectivity *) req;

		sel->selectivity = 1.0;
		PG_RETURN_POINTER(sel);
	}
	if (IsA(req, SupportRequestIndexCondition))
	{
		List	   *cond = readable_feeds_condition((SupportRequestIndexCondition *) req);

		if (cond != NIL)
			PG_RETURN_POINTER(cond);
	}
	PG_RETURN_POINTER(NULL);
}

/*
 * cfeed_read_grant_changed
 *		AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ... FOR EACH STATEMENT on
 *		cfeed.read_grant (enabled always): every backend forgets its read
 *		access decisions when the transaction commits (this one at once).
 */
Datum
cfeed_read_grant_changed(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_AFTER(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_STATEMENT(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("function cfeed._read_grant_changed() must be fired as an AFTER STATEMENT trigger")));
	CacheInvalidateRelcache(trigdata->tg_relation);
	return PointerGetDatum(NULL);
}
