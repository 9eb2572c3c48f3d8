/*
 * cfeed._read_to_end(feed_id, shard, cursor): as src/splits.c: null for a
 * feed the caller may not read (checked here, with the caller's
 * privileges); else whether the shard is closed, has no stamped change
 * after cursor and no unstamped change left, looked up below the read
 * policy through cfeed._sqled_shard_ends (the feeds the caller may read):
 * a member that does not see a parent's last changes must not decide that
 * its group consumed the parent.
 */
	LANGUAGE sql STABLE STRICT PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
	SELECT CASE WHEN cfeed._may_read($1) THEN
		COALESCE((SELECT e.closed AND NOT e.pending
						 AND (e.last_number IS NULL OR e.last_number OPERATOR(pg_catalog.<=) $3)
				  FROM cfeed._sqled_shard_ends e
				  WHERE e.feed_id OPERATOR(pg_catalog.=) $1 AND e.shard OPERATOR(pg_catalog.=) $2), false)
	END
$fn$;
