/*
 * cfeed._feed_exists(feed_id): whether a feed the caller may read or write
 * exists (cfeed._sqled_feed_exists, through the security-barrier views
 * any role may read); false for null and for the other feeds.
 */
	LANGUAGE sql STABLE PARALLEL SAFE
	AS $fn$
	SELECT $1 IS NOT NULL AND cfeed._sqled_feed_exists($1)
$fn$;
