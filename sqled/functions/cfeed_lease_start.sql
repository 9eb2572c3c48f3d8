/*
 * cfeed._lease_start(feed_id, shard): as src/splits.c: just before the
 * shard's first stored change, looked up below the read policy by the
 * view cfeed._sqled_lease_starts (a security barrier, owned by the
 * extension's owner, whose rows are those of the feeds the caller may
 * read); null for a feed the caller may not read or a shard that stores
 * no change.  Every shard of the SQL edition is stored in rows.
 */
	LANGUAGE sql STABLE STRICT PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
	SELECT l.lease_start FROM cfeed._sqled_lease_starts l
	WHERE l.feed_id OPERATOR(pg_catalog.=) $1 AND l.shard OPERATOR(pg_catalog.=) $2
$fn$;
