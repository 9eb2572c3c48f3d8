/*
 * cfeed.untrack(tbl): as src/track_ddl.c: the caller must own the table,
 * which it locks in ACCESS EXCLUSIVE mode (DROP TRIGGER's), with its
 * partitions; 42704 when it is not tracked.  Drops the tracking triggers
 * (the TRUNCATE triggers of its partitions too); the published changes
 * and their images stay.
 */
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_name name;
	v_trig record;
BEGIN
	IF untrack.tbl IS NULL THEN PERFORM cfeed._null_arg('tbl'); END IF;
	v_name := cfeed._sqled_track_table(untrack.tbl, 'ACCESS EXCLUSIVE');
	IF cfeed._sqled_track_args(untrack.tbl) IS NULL THEN
		RAISE EXCEPTION 'table "%" is not tracked', v_name
			USING ERRCODE = '42704', HINT = 'Track it with cfeed.track().';
	END IF;
	EXECUTE pg_catalog.format('DROP TRIGGER cfeed_track ON %s', cfeed._sqled_qualified(untrack.tbl));
	FOR v_trig IN
		SELECT g.tgname, g.tgrelid FROM pg_catalog.pg_trigger g
		WHERE (g.tgrelid = untrack.tbl AND g.tgname IN ('cfeed_track_change_id', 'cfeed_track_truncate'))
		   OR (g.tgname = 'cfeed_track_truncate'
			   AND g.tgrelid IN (SELECT p.relid FROM pg_catalog.pg_partition_tree(untrack.tbl) p
								 WHERE p.relid <> untrack.tbl
								   AND (SELECT c.relkind FROM pg_catalog.pg_class c WHERE c.oid = untrack.tbl) = 'p'))
		ORDER BY g.tgrelid <> untrack.tbl, g.tgname LOOP
		EXECUTE pg_catalog.format('DROP TRIGGER %I ON %s', v_trig.tgname, cfeed._sqled_qualified(v_trig.tgrelid));
	END LOOP;
END
$fn$;
