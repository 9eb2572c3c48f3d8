/*
 * cfeed._may_read(feed_id): whether the current user may read the feed
 * (src/read_access.c's rule): superuser, BYPASSRLS, the owner's
 * privileges, or a read grant of the feed or of every feed to a role it
 * has the privileges of (0: PUBLIC).  False for null.
 */
	LANGUAGE sql STABLE PARALLEL SAFE
	AS $fn$
	SELECT $1 IS NOT NULL
	   AND (cfeed._sqled_privileged()
			OR EXISTS (SELECT FROM cfeed._sqled_read_grants g
					   WHERE g.feed_id IS NULL OR g.feed_id OPERATOR(pg_catalog.=) $1))
$fn$;
