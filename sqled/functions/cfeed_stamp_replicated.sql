/*
 * cfeed._stamp_replicated(): a stamp inserted in replica mode passes as it
 * is.  The SQL edition does not take a publisher's stamps (topology A for
 * feeds stored in ranges needs the C extension on the subscriber:
 * docs/sql-edition.md).
 */
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	RETURN NEW;
END
$fn$;
