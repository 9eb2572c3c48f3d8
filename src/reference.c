/*-------------------------------------------------------------------------
 *
 * reference.c
 *	  The cascade of the references between cfeed's tables (since 1.9:
 *	  triggers in place of their foreign keys, so that a parallel pg_restore
 *	  restores a dump; src/sql/cfeed--1.8--1.9.sql).  The referencing side's
 *	  check is PL/pgSQL (cfeed._reference_check: the referenced rows exist,
 *	  locked FOR KEY SHARE); the cascade is here, in C, because it must see
 *	  the rows committed since the snapshot of a REPEATABLE READ or
 *	  SERIALIZABLE transaction, as PostgreSQL's own cascades do
 *	  (ri_triggers.c): it deletes with the latest snapshot and the
 *	  transaction's as the crosscheck, so that a referencing row the
 *	  transaction cannot see fails the DELETE with a serialization failure
 *	  rather than being left behind.
 *
 *	  Trigger arguments: the reference's name, the referencing table (in
 *	  schema cfeed), the key's columns (the same names in both tables).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "cfeed.h"

PG_FUNCTION_INFO_V1(cfeed_reference_cascade);

/*
 * cfeed_reference_cascade
 *		Trigger cfeed._reference_cascade(), AFTER DELETE (its transition
 *		table of old rows) or AFTER TRUNCATE of a referenced table, for each
 *		statement: deletes the referencing rows of the deleted ones, or
 *		truncates the referencing table (unless it is empty: a table the
 *		same TRUNCATE lists is empty by now, and may not be truncated again
 *		while that statement uses it).  As the extension's owner, below
 *		row-level security, as a foreign key's cascade.
 */
Datum
cfeed_reference_cascade(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Trigger    *trigger;
	StringInfoData sql;
	CfeedSavedUser saved_user;
	int			spi_level;
	int			i;

	if (!CALLED_AS_TRIGGER(fcinfo) ||
		!TRIGGER_FIRED_AFTER(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_STATEMENT(trigdata->tg_event) ||
		RelationGetNamespace(trigdata->tg_relation) != cfeed_schema_oid(false) ||
		trigdata->tg_trigger->tgnargs < 3 ||
		(TRIGGER_FIRED_BY_DELETE(trigdata->tg_event) && trigdata->tg_trigger->tgoldtable == NULL))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("function cfeed._reference_cascade() must be fired after each DELETE or TRUNCATE statement on a table of cfeed")));
	trigger = trigdata->tg_trigger;

	initStringInfo(&sql);
	saved_user = cfeed_become_owner();
	spi_level = cfeed_spi_connect();
	if (TRIGGER_FIRED_BY_TRUNCATE(trigdata->tg_event))
	{
		appendStringInfo(&sql, "SELECT FROM cfeed.%s LIMIT 1", quote_identifier(trigger->tgargs[1]));
		if (SPI_execute(sql.data, true, 1) != SPI_OK_SELECT)
			elog(ERROR, "cfeed: the look at a referencing table failed");
		if (SPI_processed > 0)
		{
			resetStringInfo(&sql);
			appendStringInfo(&sql, "TRUNCATE cfeed.%s", quote_identifier(trigger->tgargs[1]));
			if (SPI_execute(sql.data, false, 0) != SPI_OK_UTILITY)
				elog(ERROR, "cfeed: the cascade of a TRUNCATE failed");
		}
	}
	else
	{
		SPIPlanPtr	plan;
		Snapshot	test_snapshot = InvalidSnapshot;
		Snapshot	crosscheck_snapshot = InvalidSnapshot;

		appendStringInfo(&sql, "DELETE FROM cfeed.%s c USING %s o WHERE ",
						 quote_identifier(trigger->tgargs[1]), quote_identifier(trigger->tgoldtable));
		for (i = 2; i < trigger->tgnargs; i++)
			appendStringInfo(&sql, "%sc.%s OPERATOR(pg_catalog.=) o.%s", i > 2 ? " AND " : "",
							 quote_identifier(trigger->tgargs[i]), quote_identifier(trigger->tgargs[i]));
		if (SPI_register_trigger_data(trigdata) != SPI_OK_TD_REGISTER)
			elog(ERROR, "cfeed: SPI_register_trigger_data failed");
		plan = SPI_prepare(sql.data, 0, NULL);
		if (plan == NULL)
			elog(ERROR, "cfeed: the cascade's plan failed: %s", SPI_result_code_string(SPI_result));
		if (IsolationUsesXactSnapshot())
		{
			CommandCounterIncrement();
			test_snapshot = GetLatestSnapshot();
			crosscheck_snapshot = GetTransactionSnapshot();
		}
		if (SPI_execute_snapshot(plan, NULL, NULL, test_snapshot, crosscheck_snapshot,
								 false, true, 0) != SPI_OK_DELETE)
			elog(ERROR, "cfeed: the cascade of a DELETE failed");
	}
	cfeed_spi_finish(spi_level);
	cfeed_restore_user(saved_user);
	pfree(sql.data);
	return PointerGetDatum(NULL);
}
