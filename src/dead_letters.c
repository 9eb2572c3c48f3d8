/*-------------------------------------------------------------------------
 *
 * dead_letters.c
 *	  cfeed.fail and cfeed.resolve_dead_letter: the caller's checks, then
 *	  the work as the extension's owner.
 *
 *	  A member that reports a failure must not be able to write
 *	  cfeed.failed_change itself: with UPDATE on it, it could clear a dead
 *	  letter (erased without the operator's DELETE), forge dead letters or
 *	  push a retry far ahead.  So the table is written only by the
 *	  extension's owner: these functions check what the caller may do (a
 *	  read grant on the feed and, for fail, UPDATE on cfeed.lease, as
 *	  checkpoint; for resolve_dead_letter, DELETE on cfeed.failed_change),
 *	  then run the internal cfeed._fail or cfeed._resolve_dead_letter
 *	  (revoked from PUBLIC; fencing and every other check are there) as the
 *	  owner.  A SECURITY DEFINER function could not check the caller: inside
 *	  it the current user is the owner.  As for a sweep, an error's abort
 *	  restores the caller.
 *
 *	  cfeed._fail sees every change, but decides whether the failed change is
 *	  the next one its member processes (which sets it aside) as the member
 *	  reads: cfeed.fail passes the caller to it, and cfeed._read_as reads as
 *	  the caller for it.  A change the caller may not see (of a tracked
 *	  table it may not SELECT) is one its read_group never gives it and its
 *	  checkpoints pass over, so it does not keep a poison change after it
 *	  from being set aside.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/tuplestore.h"

#include "cfeed.h"

PG_FUNCTION_INFO_V1(cfeed_fail);
PG_FUNCTION_INFO_V1(cfeed_resolve_dead_letter);
PG_FUNCTION_INFO_V1(cfeed_read_as);

/*
 * check_table_privilege
 *		Raise 42501 unless the current user has the privilege on the cfeed
 *		table.
 */
static void
check_table_privilege(const char *table, AclMode mode)
{
	Oid			relid = get_relname_relid(table, cfeed_schema_oid(false));

	if (!OidIsValid(relid))
		elog(ERROR, "cfeed: table cfeed.%s is missing", table);
	if (pg_class_aclcheck(relid, GetUserId(), mode) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, table);
}

/*
 * any_null
 *		Whether an argument is null: the internal function then raises 22004
 *		before it does anything, as it always did, so the caller's checks
 *		(which need the feed) wait.
 */
static bool
any_null(FunctionCallInfo fcinfo)
{
	int			i;

	for (i = 0; i < PG_NARGS(); i++)
		if (PG_ARGISNULL(i))
			return true;
	return false;
}

/*
 * run_as
 *		Run sql as role userid with the function's arguments as $1.. and,
 *		when reader is valid, reader (an oid) after them; the rows it
 *		returns go to rsinfo's tuplestore when there is one.
 */
static void
run_as(FunctionCallInfo fcinfo, Oid userid, const char *sql, const Oid *types, Oid reader,
	   ReturnSetInfo *rsinfo)
{
	int			nargs = PG_NARGS();
	Oid			argtypes[8];
	Datum		values[8];
	char		nulls[8];
	CfeedSavedUser saved_user;
	int			spi_level;
	int			rc;
	uint64		i;

	Assert(nargs < (int) lengthof(values));
	for (i = 0; i < (uint64) nargs; i++)
	{
		argtypes[i] = types[i];
		values[i] = PG_ARGISNULL(i) ? (Datum) 0 : PG_GETARG_DATUM(i);
		nulls[i] = PG_ARGISNULL(i) ? 'n' : ' ';
	}
	if (OidIsValid(reader))
	{
		argtypes[nargs] = OIDOID;
		values[nargs] = ObjectIdGetDatum(reader);
		nulls[nargs++] = ' ';
	}

	saved_user = cfeed_become_user(userid);
	spi_level = cfeed_spi_connect();
	rc = SPI_execute_with_args(sql, nargs, argtypes, values, nulls, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "cfeed: \"%s\" failed: %s", sql, SPI_result_code_string(rc));
	if (rsinfo != NULL)
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);

		for (i = 0; i < SPI_processed; i++)
		{
			HeapTuple	tuple = SPI_tuptable->vals[i];
			int			natts = rsinfo->setDesc->natts;
			Datum		row[8];
			bool		rownulls[8];
			int			a;

			Assert(natts <= (int) lengthof(row));
			for (a = 0; a < natts; a++)
				row[a] = SPI_getbinval(tuple, SPI_tuptable->tupdesc, a + 1, &rownulls[a]);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row, rownulls);
		}
		MemoryContextSwitchTo(oldcxt);
	}
	cfeed_spi_finish(spi_level);
	cfeed_restore_user(saved_user);
}

/*
 * check_visible
 *		After cfeed._fail found the change (as the owner, who sees every
 *		change): raise what it raises for a change that does not exist
 *		(42704) when the caller may not see it, a change of a table whose
 *		row images the caller may not read, which cfeed.read leaves out for
 *		the caller.  The error undoes the failure recorded, and the caller
 *		learns no more of the change than of a deleted one.
 */
static void
check_visible(int32 feed_id, int32 shard, int64 number)
{
	Oid			types[3] = {INT4OID, INT4OID, INT8OID};
	Datum		values[3] = {Int32GetDatum(feed_id), Int32GetDatum(shard), Int64GetDatum(number)};
	int			spi_level = cfeed_spi_connect();
	bool		isnull;
	bool		visible;

	if (SPI_execute_with_args("SELECT EXISTS (SELECT FROM cfeed.read($1, $2, $3 - 1, 1) r "
							  "WHERE r.change_sequence_number = $3)",
							  3, types, values, NULL, false, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "cfeed: the visibility check of a failed change failed");
	visible = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	cfeed_spi_finish(spi_level);
	if (!visible)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("change " INT64_FORMAT " of shard %d of feed %d does not exist", number, shard, feed_id),
				 errhint("Report the change_sequence_number of a change cfeed.read_group() returned.")));
}

/*
 * cfeed_fail
 *		SQL: cfeed.fail(group_name text, feed_id int, shard int, owner text,
 *		epoch bigint, change_sequence_number bigint, error text)
 *		returns table (attempts int, retry_at timestamptz, dead_letter bool).
 *		The caller needs a read grant on the feed and UPDATE on cfeed.lease,
 *		and must see the change (check_visible).
 */
Datum
cfeed_fail(PG_FUNCTION_ARGS)
{
	static const Oid types[] = {TEXTOID, INT4OID, INT4OID, TEXTOID, INT8OID, INT8OID, TEXTOID};
	bool		with_reader;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	if (!any_null(fcinfo))
	{
		cfeed_check_read(PG_GETARG_INT32(1));
		check_table_privilege("lease", ACL_UPDATE);
	}

	/*
	 * The caller goes last, as the reader; a schema before 1.9 (until ALTER
	 * EXTENSION cfeed UPDATE) has the cfeed._fail without it, which decides
	 * as the owner.
	 */
	with_reader = cfeed_schema_has(CFEED_SCHEMA_RANGES);
	run_as(fcinfo, cfeed_extension_owner(),
		   with_reader ?
		   "SELECT f.attempts, f.retry_at, f.dead_letter FROM cfeed._fail($1, $2, $3, $4, $5, $6, $7, $8) f" :
		   "SELECT f.attempts, f.retry_at, f.dead_letter FROM cfeed._fail($1, $2, $3, $4, $5, $6, $7) f",
		   types, with_reader ? GetUserId() : InvalidOid, (ReturnSetInfo *) fcinfo->resultinfo);
	check_visible(PG_GETARG_INT32(1), PG_GETARG_INT32(2), PG_GETARG_INT64(5));
	return (Datum) 0;
}

/*
 * cfeed_resolve_dead_letter
 *		SQL: cfeed.resolve_dead_letter(group_name text, feed_id int, shard
 *		int, change_sequence_number bigint) returns void.  The caller
 *		needs a read grant on the feed and DELETE on cfeed.failed_change.
 */
Datum
cfeed_resolve_dead_letter(PG_FUNCTION_ARGS)
{
	static const Oid types[] = {TEXTOID, INT4OID, INT4OID, INT8OID};

	if (!any_null(fcinfo))
	{
		cfeed_check_read(PG_GETARG_INT32(1));
		check_table_privilege("failed_change", ACL_DELETE);
	}
	run_as(fcinfo, cfeed_extension_owner(), "SELECT cfeed._resolve_dead_letter($1, $2, $3, $4)",
		   types, InvalidOid, NULL);
	PG_RETURN_VOID();
}

/*
 * cfeed_read_as
 *		SQL: cfeed._read_as(reader oid, feed_id int, shard int, cursor bigint,
 *		max_count int) returns table (change_sequence_number bigint): the
 *		numbers of the changes cfeed.read gives role reader, read as it (so
 *		with its errors).  For cfeed._fail, which runs as the owner; EXECUTE
 *		revoked from PUBLIC.
 */
Datum
cfeed_read_as(PG_FUNCTION_ARGS)
{
	static const Oid types[] = {OIDOID, INT4OID, INT4OID, INT8OID, INT4OID};
	Oid			reader = PG_GETARG_OID(0);

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(reader)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("role with OID %u does not exist", reader)));
	run_as(fcinfo, reader,
		   "SELECT r.change_sequence_number FROM cfeed.read($2, $3, $4, $5) r",
		   types, InvalidOid, (ReturnSetInfo *) fcinfo->resultinfo);
	return (Datum) 0;
}
