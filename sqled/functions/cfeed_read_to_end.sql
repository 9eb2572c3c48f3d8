/*
 * cfeed._read_to_end(feed_id, shard, cursor): as src/splits.c, but with
 * the caller's privileges (the SQL edition has no way below the read
 * policy that still knows the caller): the shard is ended, and the cursor
 * at its head or no change the caller may read after it.  Null for a feed
 * the caller may not read.
 */
	LANGUAGE sql STABLE STRICT PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
	SELECT CASE WHEN cfeed._may_read($1) THEN EXISTS (
		SELECT FROM cfeed.shard s
		WHERE s.feed_id OPERATOR(pg_catalog.=) $1 AND s.shard OPERATOR(pg_catalog.=) $2 AND s.ended
		  AND ($3 OPERATOR(pg_catalog.>=) s.last_change_sequence_number
			   OR NOT EXISTS (SELECT FROM cfeed.change c
							  WHERE c.feed_id OPERATOR(pg_catalog.=) $1 AND c.shard OPERATOR(pg_catalog.=) $2
								AND c.change_sequence_number OPERATOR(pg_catalog.>) $3))) END
$fn$;
