/*
 * cfeed._reference_cascade(): the cascade of a reference between cfeed's
 * tables (src/reference.c), AFTER DELETE or TRUNCATE for each statement:
 * deletes the referencing rows of the deleted ones, or truncates the
 * referencing table (unless it is empty: a table the same TRUNCATE lists is
 * empty by now, and may not be truncated again while it is in use).
 * PL/pgSQL sees only its transaction's snapshot, so where that snapshot is
 * the transaction's (REPEATABLE READ, SERIALIZABLE) a referencing row
 * committed since would be left behind, where the C edition fails with a
 * serialization failure: a feed's, a shard's or an epoch's rows are
 * deleted in READ COMMITTED only (25000; docs/sql-edition.md).  A lease's
 * (acquire in REPEATABLE READ lets go of a consumed shard's) cascades to
 * its failures as it can.
 */
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	-- TG_ARGV: the reference's name, the referencing table, the key's columns
	v_child text := TG_ARGV[1];
	v_columns text[] := TG_ARGV[2:TG_NARGS - 1];
	v_any bool;
BEGIN
	IF TG_TABLE_SCHEMA <> 'cfeed' THEN
		RAISE EXCEPTION 'function cfeed._reference_cascade() must be fired on a table of cfeed' USING ERRCODE = '39P01';
	END IF;
	IF TG_OP = 'TRUNCATE' THEN
		EXECUTE format('SELECT EXISTS (SELECT FROM cfeed.%I)', v_child) INTO v_any;
		IF v_any THEN
			EXECUTE format('TRUNCATE cfeed.%I', v_child);
		END IF;
		RETURN NULL;
	END IF;
	IF TG_TABLE_NAME <> 'lease'
	   AND pg_catalog.current_setting('transaction_isolation') IN ('repeatable read', 'serializable') THEN
		RAISE EXCEPTION 'cannot delete rows of cfeed.% in a REPEATABLE READ or SERIALIZABLE transaction', TG_TABLE_NAME
			USING ERRCODE = '25000',
				  DETAIL = format('Rows of cfeed.%s written since the transaction''s snapshot would be left behind.', v_child),
				  HINT = 'Delete it in a READ COMMITTED transaction.';
	END IF;
	EXECUTE format('DELETE FROM cfeed.%I c USING old_rows o WHERE %s', v_child,
				   (SELECT string_agg(format('c.%1$I = o.%1$I', c), ' AND ') FROM unnest(v_columns) c));
	RETURN NULL;
END
$fn$;
