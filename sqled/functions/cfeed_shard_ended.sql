/*
 * cfeed._shard_ended(feed_id, shard): as src/splits.c, for the shards of
 * the SQL edition, all stored in rows: null for a feed the caller may not
 * read, else whether the shard is closed and has no change without a
 * number: cfeed._read_to_end's answer for a cursor after every number
 * (looked up below the read policy, as it is).
 */
	LANGUAGE sql STABLE STRICT PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
	SELECT cfeed._read_to_end($1, $2, 9223372036854775807)
$fn$;
