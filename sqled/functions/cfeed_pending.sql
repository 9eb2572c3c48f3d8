/*
 * cfeed._pending(): as src/pending.c, for the shards of the SQL edition,
 * all stored in rows: those of the feeds the caller may read with changes
 * that have no number, read from the view cfeed._sqled_unstamped, which
 * counts below the read policy with its owner's privileges and checks the
 * caller (a function cannot: inside a SECURITY DEFINER one the caller is
 * gone).  PL/pgSQL: the view is made after the functions (epilogue.sql).
 */
	LANGUAGE plpgsql STABLE PARALLEL SAFE ROWS 10
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	RETURN QUERY SELECT p.feed_id, p.shard, p.pending, p.oldest_written_at FROM cfeed._sqled_unstamped p;
END
$fn$;
