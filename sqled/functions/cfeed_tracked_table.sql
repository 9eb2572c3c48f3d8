/*
 * cfeed._tracked_table(tbl int): the table of a tracked table's number,
 * null where there is none here (nor a table dropped since), looked up
 * without the caller's privileges on cfeed.tracked_table, as in
 * src/table_numbers.c (readers' policy checks and read_rows call it).
 */
	LANGUAGE sql STABLE STRICT PARALLEL SAFE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
	SELECT t.tbl FROM cfeed.tracked_table t
	WHERE t.table_no OPERATOR(pg_catalog.=) $1
	  AND EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) t.tbl::pg_catalog.oid)
	LIMIT 1
$fn$;
