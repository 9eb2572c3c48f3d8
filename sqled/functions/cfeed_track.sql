/*
 * cfeed.track(tbl, feed_id, key): as src/track_ddl.c: the caller must own
 * the table (42501; 42809 for what is not a table), which it locks in
 * SHARE ROW EXCLUSIVE mode (CREATE TRIGGER's) before anything else; it
 * must be a writer of the feed (42501, the same whether the feed exists or
 * not), and the feed must exist (42704); the table must not be tracked (55000); the key
 * is the primary key (null) or a list of its columns (22023, 42703); a
 * change_id column must be bigint (42804).  Creates the triggers
 * cfeed_track, cfeed_track_change_id (with a change_id column) and
 * cfeed_track_truncate (on the table and each of its partitions), with
 * the arguments feed_id and the key (quoted identifiers joined by commas,
 * '' for the primary key), and gives the table its number (or writes its
 * current name into the one it has).
 */
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_name name;
	v_args text[];
	v_keyspec text := '';
	v_qname text := cfeed._sqled_qualified(track.tbl);
	v_trigargs text;
	v_part oid;
BEGIN
	IF track.tbl IS NULL THEN PERFORM cfeed._null_arg('tbl'); END IF;
	IF track.feed_id IS NULL THEN PERFORM cfeed._null_arg('feed_id'); END IF;
	v_name := cfeed._sqled_track_table(track.tbl, 'SHARE ROW EXCLUSIVE');
	PERFORM cfeed._sqled_check_write(track.feed_id);
	PERFORM cfeed._sqled_check_permanent(track.tbl);
	PERFORM cfeed._sqled_layout(track.feed_id, false);

	v_args := cfeed._sqled_track_args(track.tbl);
	IF v_args IS NOT NULL THEN
		RAISE EXCEPTION 'table "%" is already tracked by feed %', v_name, v_args[1]::int
			USING ERRCODE = '55000',
				  DETAIL = 'A table publishes to one feed.',
				  HINT = 'Run cfeed.untrack() first to track it with another feed or key.';
	END IF;

	IF track.key IS NULL THEN
		PERFORM cfeed._sqled_key_columns(track.tbl, '');
	ELSIF pg_catalog.btrim(track.key, E' \t\n\r') = '' THEN
		RAISE EXCEPTION 'key must name at least one column of table "%"', v_name
			USING ERRCODE = '22023', HINT = 'Pass key => NULL to use the primary key.';
	ELSE
		SELECT pg_catalog.string_agg(pg_catalog.quote_ident(c), ',' ORDER BY o) INTO v_keyspec
		FROM pg_catalog.unnest(cfeed._sqled_key_columns(track.tbl, track.key)) WITH ORDINALITY u(c, o);
	END IF;

	IF EXISTS (SELECT FROM pg_catalog.pg_attribute a
			   WHERE a.attrelid = track.tbl AND a.attname = 'change_id' AND a.attnum > 0 AND NOT a.attisdropped
				 AND a.atttypid <> 'pg_catalog.int8'::pg_catalog.regtype) THEN
		RAISE EXCEPTION 'column "change_id" of table "%" must be of type bigint', v_name
			USING ERRCODE = '42804',
				  DETAIL = 'cfeed stores each change''s change_id in a table''s change_id column.',
				  HINT = 'Rename the column or change its type to bigint.';
	END IF;

	-- row-level security: a reader sees a row image only if the table's
	-- policies do not apply to it (cfeed._may_read_image)
	IF (SELECT c.relrowsecurity FROM pg_catalog.pg_class c WHERE c.oid = track.tbl) THEN
		RAISE NOTICE 'table "%" has row-level security: its changes are shown only to roles its policies do not apply to', v_name
			USING DETAIL = 'A change carries a copy of its row, which cfeed cannot check against the table''s policies.',
				  HINT = pg_catalog.format('Its owner, superusers and roles with BYPASSRLS see them, if they may read feed %s.', track.feed_id);
	END IF;

	v_trigargs := pg_catalog.quote_literal(track.feed_id::text) || ', ' || pg_catalog.quote_literal(v_keyspec);
	EXECUTE pg_catalog.format('CREATE TRIGGER cfeed_track AFTER INSERT OR UPDATE OR DELETE ON %s FOR EACH ROW'
							  ' EXECUTE FUNCTION cfeed._track_row(%s)', v_qname, v_trigargs);
	IF cfeed._sqled_change_id_column(track.tbl) THEN
		EXECUTE pg_catalog.format('CREATE TRIGGER cfeed_track_change_id BEFORE INSERT OR UPDATE OR DELETE ON %s'
								  ' FOR EACH ROW EXECUTE FUNCTION cfeed._track_change_id(%s)', v_qname, v_trigargs);
	END IF;
	FOR v_part IN SELECT track.tbl::pg_catalog.oid
				  UNION ALL
				  SELECT p.relid FROM pg_catalog.pg_partition_tree(track.tbl) p
				  JOIN pg_catalog.pg_class c ON c.oid = p.relid
				  WHERE p.relid <> track.tbl AND c.relkind IN ('r', 'p')
					AND (SELECT c2.relkind FROM pg_catalog.pg_class c2 WHERE c2.oid = track.tbl) = 'p' LOOP
		EXECUTE pg_catalog.format('CREATE TRIGGER cfeed_track_truncate BEFORE TRUNCATE ON %s FOR EACH STATEMENT'
								  ' EXECUTE FUNCTION cfeed._track_truncate(%s)', cfeed._sqled_qualified(v_part), v_trigargs);
	END LOOP;
	-- its number for cfeed.change.tbl, with its current name
	PERFORM cfeed._sqled_table_number(track.tbl, true);
END
$fn$;
