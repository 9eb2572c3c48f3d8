/*
 * cfeed._read_as(reader, feed_id, shard, cursor, max_count): as
 * src/dead_letters.c: the numbers of the changes after the cursor that
 * cfeed.read gives the role reader (42704 for an OID that is no role), for
 * cfeed._fail, which runs as the owner of cfeed's tables after cfeed.fail
 * checked that the reader may read the feed.  A SECURITY DEFINER function
 * cannot take on a role, so the read policy's rule (cfeed._may_read_image)
 * is applied here for the reader: a change with a row image of a table
 * the reader may not read is left out, unless the reader reads every
 * change (a superuser, BYPASSRLS, the privileges of the owner of cfeed's
 * tables).  Where cfeed.change has a read policy of an operator's beside
 * change_read, which this rule does not know, every change is given, as
 * up to 1.9: no change the reader may have been given is passed over, and
 * a poison change right after one hidden from the reader is not set aside.
 */
	LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
#variable_conflict use_column
BEGIN
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles m WHERE m.oid = _read_as.reader) THEN
		RAISE EXCEPTION 'role with OID % does not exist', _read_as.reader USING ERRCODE = '42704';
	END IF;
	RETURN QUERY
	SELECT c.change_sequence_number
	FROM cfeed.change c, pg_catalog.pg_roles m, pg_catalog.pg_class o
	WHERE m.oid = _read_as.reader AND o.oid = 'cfeed.change'::pg_catalog.regclass
	  AND c.feed_id = _read_as.feed_id AND c.shard = _read_as.shard
	  AND c.change_sequence_number > _read_as.cursor
	  AND (c.tbl IS NULL OR m.rolsuper OR m.rolbypassrls
		   OR pg_catalog.pg_has_role(_read_as.reader, o.relowner, 'USAGE')
		   OR EXISTS (SELECT FROM pg_catalog.pg_policy p
					  WHERE p.polrelid = o.oid AND p.polcmd IN ('r', '*') AND p.polname <> 'change_read')
		   OR cfeed._sqled_may_read_table_as(_read_as.reader, cfeed._tracked_table(c.tbl)))
	ORDER BY c.change_sequence_number LIMIT _read_as.max_count;
END
$fn$;
