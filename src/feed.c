/*-------------------------------------------------------------------------
 *
 * feed.c
 *	  The SQL entry points of the write side: cfeed.create_feed,
 *	  cfeed.publish (written by append.c), cfeed.shard_for (the hash of
 *	  shards.c, part of the public contract), cfeed.channel, and
 *	  cfeed._feed_created_here and cfeed._sweep_group_in_use (what the
 *	  view cfeed.shard's trigger shard_access asks).
 *
 *	  create_feed locks cfeed.feed in SHARE ROW EXCLUSIVE mode, so that
 *	  concurrent calls pick feed ids and names one at a time.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "fmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"

#include "cfeed.h"

#define CFEED_MAX_NAME			200

PG_FUNCTION_INFO_V1(cfeed_create_feed);
PG_FUNCTION_INFO_V1(cfeed_publish);
PG_FUNCTION_INFO_V1(cfeed_shard_for);
PG_FUNCTION_INFO_V1(cfeed_channel);
PG_FUNCTION_INFO_V1(cfeed_feed_created_here);
PG_FUNCTION_INFO_V1(cfeed_feed_exists_sql);
PG_FUNCTION_INFO_V1(cfeed_feed_id_sql);
PG_FUNCTION_INFO_V1(cfeed_sweep_group_in_use_sql);

/*
 * check_feed_name
 *		A feed name is 1..200 characters of [A-Za-z0-9_-] (22023 otherwise).
 */
static void
check_feed_name(const char *name)
{
	size_t		len = strlen(name);
	const char *p;

	if (len == 0 || len > CFEED_MAX_NAME)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("feed name must have 1 to %d characters", CFEED_MAX_NAME)));
	for (p = name; *p; p++)
	{
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
			  (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid feed name \"%s\"", name),
					 errdetail("A feed name may contain only letters A-Z and a-z, digits, \"_\" and \"-\".")));
	}
}

/*
 * cfeed_create_feed
 *		SQL: cfeed.create_feed(name, shards, feed_id, sweep_group, longpoll,
 *		comment) returns int.  Creates the feed and shards 0..shards-1 with the
 *		caller's privileges (shard 0 through cfeed.shard, whose checks then
 *		hold for the others: below); feed_id defaults to one above the
 *		highest.
 */
Datum
cfeed_create_feed(PG_FUNCTION_ARGS)
{
	int			spi_level;
	char	   *name;
	int32		shards;
	int32		feed_id;
	bool		isnull;
	Oid			types[6] = {INT4OID, TEXTOID, TEXTOID, INT4OID, INT4OID, BOOLOID};
	Datum		values[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};

	cfeed_require_arg(fcinfo, 0, "name");
	cfeed_require_arg(fcinfo, 1, "shards");
	cfeed_require_arg(fcinfo, 3, "sweep_group");
	cfeed_require_arg(fcinfo, 4, "longpoll");
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	shards = PG_GETARG_INT32(1);
	check_feed_name(name);
	if (shards < 1 || shards > CFEED_MAX_SHARDS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a feed must have 1 to %d shards, not %d", CFEED_MAX_SHARDS, shards)));

	spi_level = cfeed_spi_connect();

	/*
	 * Concurrent create_feed calls pick feed ids and names one at a time.
	 * The lock is taken in C, for a caller with INSERT on cfeed.feed, which
	 * a LOCK statement would refuse to a role that does not own it
	 * (lock_guard.c); the INSERT below checks the privilege again.
	 */
	if (pg_class_aclcheck(cfeed_relid("feed"), GetUserId(), ACL_INSERT) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, "feed");
	(void) cfeed_relid_locked("feed", ShareRowExclusiveLock);

	if (PG_ARGISNULL(2))
	{
		int64		next;

		cfeed_spi_exec("SELECT COALESCE(pg_catalog.max(feed_id), 0)::pg_catalog.int8 + 1 FROM cfeed.feed",
					   0, NULL, NULL, NULL, SPI_OK_SELECT);
		next = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		/* past the top of int: a name in the way says so first, below */
		feed_id = next > PG_INT32_MAX ? PG_INT32_MAX : (int32) next;
	}
	else
		feed_id = PG_GETARG_INT32(2);

	values[0] = Int32GetDatum(feed_id);
	values[1] = PointerGetDatum(cstring_to_text(name));
	cfeed_spi_exec("SELECT feed_id, name FROM cfeed.feed WHERE feed_id = $1 OR name = $2"
				   " ORDER BY name = $2 DESC",
				   2, types, values, NULL, SPI_OK_SELECT);
	if (SPI_processed > 0)
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		int32		old_id = DatumGetInt32(SPI_getbinval(tup, SPI_tuptable->tupdesc, 1, &isnull));
		char	   *old_name = SPI_getvalue(tup, SPI_tuptable->tupdesc, 2);

		/* name the feed that is in the way, not the one we meant to create */
		if (strcmp(old_name, name) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("feed \"%s\" already exists", name),
					 errdetail("Feed %d has that name; feed names are unique.", old_id),
					 errhint("Choose another name.")));
		if (PG_ARGISNULL(2))
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("cannot pick a feed id for feed \"%s\": feed %d exists", name, PG_INT32_MAX),
					 errdetail("create_feed picks the id above the highest, and %d is the highest an int holds.", PG_INT32_MAX),
					 errhint("Give the feed_id.")));
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("feed %d already exists", feed_id),
				 errdetail("Feed %d is named \"%s\"; feed ids are unique.", old_id, old_name),
				 errhint("Choose another feed_id, or leave it null to take the next free one.")));
	}

	if (PG_ARGISNULL(5))
		nulls[2] = 'n';
	else
		values[2] = PG_GETARG_DATUM(5);
	values[3] = Int32GetDatum(shards);
	values[4] = PG_GETARG_DATUM(3);
	values[5] = PG_GETARG_DATUM(4);
	cfeed_spi_exec("INSERT INTO cfeed.feed (feed_id, name, comment) VALUES ($1, $2, $3)",
			 3, types, values, nulls, SPI_OK_INSERT);

	/*
	 * Shard 0 through the view, as the caller: its triggers check the write
	 * grant (or the feed created here), that a role other than the owner
	 * starts no new sweep group, and write shard_config as the owner.  The
	 * other shards are the same but for their number, so what the view let
	 * through for shard 0 holds for them: they go to shard_config in one
	 * statement, as the owner.  Through the view each shard was an INSERT
	 * of its own, whose statement triggers ran per shard (10,000 shards
	 * took 8-12 s).
	 */
	cfeed_spi_exec("INSERT INTO cfeed.shard (feed_id, shard, sweep_group, longpoll) VALUES ($1, 0, $5, $6)",
				   6, types, values, nulls, SPI_OK_INSERT);
	if (shards > 1)
	{
		CfeedSavedUser saved_user = cfeed_become_owner();

		cfeed_spi_exec("INSERT INTO cfeed.shard_config (feed_id, shard, sweep_group, longpoll) "
					   "SELECT $1, s, $5, $6 FROM pg_catalog.generate_series(1, $4 - 1) AS s",
					   6, types, values, nulls, SPI_OK_INSERT);
		cfeed_restore_user(saved_user);
	}

	cfeed_spi_finish(spi_level);
	PG_RETURN_INT32(feed_id);
}

/*
 * cfeed_publish
 *		SQL: cfeed.publish(feed_id, shard, change_id) returns bigint.  Appends
 *		the change with the caller's privileges (INSERT on cfeed.change); the
 *		shard's existence is checked without needing SELECT on the catalogs.
 */
Datum
cfeed_publish(PG_FUNCTION_ARGS)
{
	CfeedChange change;

	cfeed_require_arg(fcinfo, 0, "feed_id");
	cfeed_require_arg(fcinfo, 1, "shard");
	cfeed_require_arg(fcinfo, 2, "change_id");
	memset(&change, 0, sizeof(change));
	change.feed_id = PG_GETARG_INT32(0);
	change.shard = PG_GETARG_INT32(1);
	change.change_id = PG_GETARG_INT64(2);
	cfeed_append(&change);
	PG_RETURN_INT64(change.change_id);
}

/*
 * check_known
 *		Raise 42501 (cfeed_check_read's, the same words whether the feed
 *		exists or not) unless the current user may read or write the feed:
 *		whether a feed exists, and its shards, are its readers' and writers'
 *		to know (SPEC §8).
 */
static void
check_known(int32 feed_id)
{
	if (!cfeed_may_write_feed(feed_id))
		cfeed_check_read(feed_id);
}

/*
 * cfeed_shard_for
 *		SQL: cfeed.shard_for(feed_id, key) returns int: the first open shard
 *		plus FNV-1a 32 of the key's UTF-8 bytes modulo the number of open
 *		shards.  Where the transaction can write and the current user may
 *		write the feed, the feed's shards lock is held from here until it
 *		ends (cfeed_shard_of_key), so that a change placed by this shard is
 *		not refused by a reshard committed between this call and its INSERT.
 *		A caller that may neither read nor write the feed gets 42501
 *		(check_known).
 */
Datum
cfeed_shard_for(PG_FUNCTION_ARGS)
{
	text	   *key;

	cfeed_require_arg(fcinfo, 0, "feed_id");
	cfeed_require_arg(fcinfo, 1, "key");
	check_known(PG_GETARG_INT32(0));
	key = PG_GETARG_TEXT_PP(1);
	PG_RETURN_INT32(cfeed_shard_of_key(PG_GETARG_INT32(0), VARDATA_ANY(key),
									   VARSIZE_ANY_EXHDR(key)));
}

/*
 * cfeed_channel
 *		SQL: cfeed.channel(feed_id, shard) returns text: cfeed_<feed_id>_<shard>,
 *		42501 for a caller that may neither read nor write the feed
 *		(check_known).
 */
Datum
cfeed_channel(PG_FUNCTION_ARGS)
{
	CfeedShard	sh;

	cfeed_require_arg(fcinfo, 0, "feed_id");
	cfeed_require_arg(fcinfo, 1, "shard");
	check_known(PG_GETARG_INT32(0));
	cfeed_shard_get(PG_GETARG_INT32(0), PG_GETARG_INT32(1), false, &sh);
	PG_RETURN_TEXT_P(cstring_to_text(psprintf(CFEED_CHANNEL_PREFIX "%d_%d",
											  sh.feed_id, sh.shard)));
}

/*
 * cfeed_feed_created_here
 *		SQL: cfeed._feed_created_here(feed_id) returns bool (since 1.9):
 *		whether this transaction created the feed.  The trigger shard_access
 *		of the view cfeed.shard lets the caller add the shards of such a
 *		feed without a write grant of it (cfeed.create_feed adds them through
 *		the view, as the caller).  False for null; of other transactions'
 *		feeds it tells nothing.
 */
Datum
cfeed_feed_created_here(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		PG_RETURN_BOOL(false);
	PG_RETURN_BOOL(cfeed_feed_mine(PG_GETARG_INT32(0)));
}

/*
 * cfeed_feed_exists_sql
 *		SQL: cfeed._feed_exists(feed_id) returns bool (since 1.9): whether a
 *		feed the caller may read or write exists, read without the caller's
 *		privileges on cfeed.feed (so that a consumer needs no SELECT on it,
 *		which showed every feed's name); false for null and for a feed the
 *		caller may neither read nor write, whether it exists or not.
 */
Datum
cfeed_feed_exists_sql(PG_FUNCTION_ARGS)
{
	int32		feed_id;

	if (PG_ARGISNULL(0))
		PG_RETURN_BOOL(false);
	feed_id = PG_GETARG_INT32(0);
	if (!cfeed_may_read_feed(feed_id) && !cfeed_may_write_feed(feed_id))
		PG_RETURN_BOOL(false);
	PG_RETURN_BOOL(cfeed_feed_exists(feed_id));
}

/*
 * cfeed_feed_id_sql
 *		SQL: cfeed._feed_id(name) returns int (since 1.9): the id of the feed
 *		of that name when the caller may read or write it, else null (for
 *		null, for a name no feed has, and for a feed the caller may neither
 *		read nor write: the same answer whether it exists or not).  Looked up
 *		as the extension's owner, so that a reader, who has no SELECT on
 *		cfeed.feed (it shows every feed's name), can name its own feed
 *		(cfeed tail --feed NAME).
 */
Datum
cfeed_feed_id_sql(PG_FUNCTION_ARGS)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1];
	int			spi_level;
	int32		feed_id = 0;
	bool		found;
	CfeedSavedUser saved_user;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	values[0] = PG_GETARG_DATUM(0);
	spi_level = cfeed_spi_connect();
	saved_user = cfeed_become_owner();
	cfeed_spi_exec("SELECT feed_id FROM cfeed.feed WHERE name = $1", 1, types, values, NULL, SPI_OK_SELECT);
	cfeed_restore_user(saved_user);
	found = SPI_processed == 1;
	if (found)
	{
		bool		isnull;

		feed_id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	}
	cfeed_spi_finish(spi_level);
	if (!found || (!cfeed_may_read_feed(feed_id) && !cfeed_may_write_feed(feed_id)))
		PG_RETURN_NULL();
	PG_RETURN_INT32(feed_id);
}

/*
 * cfeed_sweep_group_in_use_sql
 *		SQL: cfeed._sweep_group_in_use(sweep_group) returns bool (since 1.9):
 *		whether a shard is in the sweep group (0 always counts).  A new group
 *		takes a background sweeper from the cluster's cfeed.max_workers, so
 *		shard_access lets only the extension's owner start one.  Read
 *		without the caller's privileges (any role may ask; a group number in
 *		use is all it tells); false for null.
 */
Datum
cfeed_sweep_group_in_use_sql(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		PG_RETURN_BOOL(false);
	PG_RETURN_BOOL(cfeed_sweep_group_in_use(PG_GETARG_INT32(0)));
}
