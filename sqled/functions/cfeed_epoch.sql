/*
 * cfeed.epoch(): as src/epoch.c: the latest feed epoch of this database
 * (0 before its first sweep that stamped), read as the owner of cfeed's
 * tables (SECURITY DEFINER: any role may ask, as in the C edition).
 */
	LANGUAGE sql STABLE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
	SELECT COALESCE(pg_catalog.max(e.epoch), 0) FROM cfeed.epoch e
$fn$;
