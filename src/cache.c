/*-------------------------------------------------------------------------
 *
 * cache.c
 *	  The registry of cfeed's backend-local caches (cache.h lists them): one
 *	  relcache invalidation callback and one callback per watched system
 *	  catalog for all of them, each passing the invalidation on to every
 *	  registered cache that it concerns; and the hash tables they keep.
 *
 *	  Registration is per backend and for its life (PostgreSQL cannot
 *	  unregister a callback); a cache registers when it is first filled,
 *	  the same callback every time, so a second registration changes
 *	  nothing.  No locks: all of it is backend-local.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "cache.h"

/* The system catalogs a cache watches besides relations (at most two). */
typedef struct CfeedCacheWatch
{
	int			ncatalogs;
	int			catalogs[2];	/* syscache ids */
} CfeedCacheWatch;

static const CfeedCacheWatch watches[CFEED_CACHE_COUNT] = {
	[CFEED_CACHE_RELIDS] = {1, {NAMESPACEOID}},
	[CFEED_CACHE_READ_ACCESS] = {2, {AUTHOID, AUTHMEMROLEMEM}},
	[CFEED_CACHE_POLICIES] = {2, {PROCOID, NAMESPACEOID}},
	[CFEED_CACHE_LOCKERS] = {2, {RULERELNAME, AUTHMEMROLEMEM}},
};

/* Each cache's callback, and whether cfeed's one relcache callback is set. */
static CfeedInvalidate registered[CFEED_CACHE_COUNT];
static bool relcache_callback_set = false;

/*
 * relcache_invalidate
 *		Relcache invalidation callback: the relation, or every relation for
 *		InvalidOid, has changed.
 */
static void
relcache_invalidate(Datum arg pg_attribute_unused(), Oid relid)
{
	int			id;

	for (id = 0; id < CFEED_CACHE_COUNT; id++)
		if (registered[id] != NULL)
			registered[id] (relid);
}

/*
 * catalog_invalidate
 *		Syscache invalidation callback (arg: the syscache id): tell the caches
 *		that watch the catalog to drop everything.
 */
static void
catalog_invalidate(Datum arg pg_attribute_unused(), int cacheid,
				   uint32 hashvalue pg_attribute_unused())
{
	int			id;
	int			i;

	for (id = 0; id < CFEED_CACHE_COUNT; id++)
		for (i = 0; i < watches[id].ncatalogs; i++)
			if (registered[id] != NULL && watches[id].catalogs[i] == cacheid)
				registered[id] (InvalidOid);
}

/*
 * watched_before
 *		Whether a registered cache other than id watches syscache cacheid
 *		(its callback is in place already).
 */
static bool
watched_before(CfeedCacheId id, int cacheid)
{
	int			other;
	int			i;

	for (other = 0; other < CFEED_CACHE_COUNT; other++)
		for (i = 0; other != (int) id && i < watches[other].ncatalogs; i++)
			if (registered[other] != NULL && watches[other].catalogs[i] == cacheid)
				return true;
	return false;
}

/*
 * cfeed_cache_register
 *		From now on, pass the invalidations that concern cache id to
 *		invalidate (see cache.h).  Call before filling the cache.
 */
void
cfeed_cache_register(CfeedCacheId id, CfeedInvalidate invalidate)
{
	int			i;

	if (registered[id] == invalidate)
		return;
	Assert(registered[id] == NULL);
	if (!relcache_callback_set)
	{
		CacheRegisterRelcacheCallback(relcache_invalidate, (Datum) 0);
		relcache_callback_set = true;
	}
	for (i = 0; i < watches[id].ncatalogs; i++)
		if (!watched_before(id, watches[id].catalogs[i]))
			CacheRegisterSyscacheCallback(watches[id].catalogs[i], catalog_invalidate,
										  Int32GetDatum(watches[id].catalogs[i]));
	registered[id] = invalidate;
}

/*
 * cfeed_cache_hash
 *		The hash table of cache id, for the life of the backend, keys
 *		compared as bytes; registers invalidate first (none for NULL).
 */
HTAB *
cfeed_cache_hash(CfeedCacheId id, CfeedInvalidate invalidate, const char *name,
				 Size keysize, Size entrysize)
{
	HASHCTL		ctl;

	if (invalidate != NULL)
		cfeed_cache_register(id, invalidate);

	ctl.keysize = keysize;
	ctl.entrysize = entrysize;
	ctl.hcxt = TopMemoryContext;
	return hash_create(name, 16, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}
