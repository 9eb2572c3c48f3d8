/*
 * cfeed._readable_feeds(): the feeds the caller may read, as
 * src/read_access.c.  The SQL edition has no planner support function,
 * which alone uses it.
 */
	LANGUAGE sql STABLE PARALLEL SAFE
	AS $fn$
	SELECT COALESCE(pg_catalog.array_agg(f.feed_id ORDER BY f.feed_id), '{}')
	FROM cfeed.feed f WHERE cfeed._may_read(f.feed_id)
$fn$;
