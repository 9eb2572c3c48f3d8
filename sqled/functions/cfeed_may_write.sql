/*
 * cfeed._may_write(feed_id): whether the current user may write the feed,
 * by the read rule with the write grants.  False for null.
 */
	LANGUAGE sql STABLE PARALLEL SAFE
	AS $fn$
	SELECT $1 IS NOT NULL
	   AND (cfeed._sqled_privileged()
			OR EXISTS (SELECT FROM cfeed._sqled_write_grants g
					   WHERE g.feed_id IS NULL OR g.feed_id OPERATOR(pg_catalog.=) $1))
$fn$;
