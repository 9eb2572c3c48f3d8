/*
 * cfeed._read_to_end(feed_id, shard, cursor): as src/splits.c: null for a
 * feed the caller may not read (checked here, with the caller's
 * privileges); else whether the shard is closed, has no stamped change
 * after cursor and no unstamped change left, looked up below the read
 * policy by cfeed._sqled_read_to_end (SECURITY DEFINER): a member that
 * does not see a parent's last changes must not decide that its group
 * consumed the parent.
 */
	LANGUAGE sql STABLE STRICT PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
	SELECT CASE WHEN cfeed._may_read($1) THEN cfeed._sqled_read_to_end($1, $2, $3) END
$fn$;
