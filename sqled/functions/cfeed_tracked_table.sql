/* cfeed._tracked_table(tbl int): the table of a tracked table's number. */
	LANGUAGE sql STABLE STRICT PARALLEL SAFE
	AS $fn$
	SELECT t.tbl FROM cfeed.tracked_table t WHERE t.table_no OPERATOR(pg_catalog.=) $1
$fn$;
