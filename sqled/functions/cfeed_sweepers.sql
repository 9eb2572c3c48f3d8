/*
 * cfeed._sweepers(): the background sweepers; the SQL edition has none
 * (see pg_stat_activity for the sessions running cfeed.sweep_loop or
 * `cfeed sweep`).
 */
	LANGUAGE sql VOLATILE PARALLEL SAFE
	AS $fn$
	SELECT NULL::int, NULL::name, NULL::int, NULL::bigint, NULL::bigint, NULL::timestamptz, NULL::text
	WHERE false
$fn$;
