/*
 * cfeed._read_as(reader, feed_id, shard, cursor, max_count): as
 * src/dead_letters.c: the numbers of the changes after the cursor that
 * cfeed.read gives the role reader, for cfeed._fail, which runs as the
 * owner of cfeed's tables after cfeed.fail checked that the reader may
 * read the feed.  A SECURITY DEFINER function cannot take on a role, so
 * the read policy's rule (cfeed._may_read_image) is applied here for the
 * reader: a change with a row image of a table the reader may not read
 * is left out, unless the reader reads every change (a superuser, BYPASSRLS,
 * the privileges of the owner of cfeed's tables).
 */
	LANGUAGE sql STABLE STRICT PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
	SELECT c.change_sequence_number
	FROM cfeed.change c, pg_catalog.pg_roles m, pg_catalog.pg_class o
	WHERE m.oid = $1 AND o.oid = 'cfeed.change'::pg_catalog.regclass
	  AND c.feed_id = $2 AND c.shard = $3 AND c.change_sequence_number > $4
	  AND (c.tbl IS NULL OR m.rolsuper OR m.rolbypassrls OR pg_catalog.pg_has_role($1, o.relowner, 'USAGE')
		   OR cfeed._sqled_may_read_table_as($1, cfeed._tracked_table(c.tbl)))
	ORDER BY c.change_sequence_number LIMIT $5
$fn$;
