/*
 * cfeed._feed_id(name): the id of the feed of that name when the caller may
 * read or write it (cfeed._sqled_known_feeds, a security-barrier view any
 * role may read), else null: the same answer whether it exists or not.
 */
	LANGUAGE sql STABLE PARALLEL SAFE
	AS $fn$
	SELECT f.feed_id FROM cfeed._sqled_known_feeds f WHERE f.name OPERATOR(pg_catalog.=) $1
$fn$;
