/*
 * cfeed._read_grant_changed(): nothing to do in the SQL edition, which
 * caches no access decisions (the C edition invalidates its caches here).
 */
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	RETURN NULL;
END
$fn$;
