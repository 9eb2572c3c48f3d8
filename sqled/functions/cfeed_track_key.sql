/*
 * cfeed._track_key(tbl, r): the key text of a row of a tracked table, as
 * its triggers compute it (src/tracked.c), for the caller's own queries
 * (and backfill's): 42P01 for an OID that is no relation, 42501 unless the
 * caller may SELECT it (checked before anything else of it), 42809 for
 * what is not a table, 55000 when it is not tracked, 42804 for a row of
 * another type.
 */
	LANGUAGE plpgsql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_class record;
	v_args text[];
	v_key text;
BEGIN
	IF _track_key.tbl IS NULL THEN PERFORM cfeed._null_arg('tbl'); END IF;
	IF pg_catalog.num_nulls(_track_key.r) = 1 THEN PERFORM cfeed._null_arg('r'); END IF;
	SELECT c.relname, c.relkind, c.reltype INTO v_class
	FROM pg_catalog.pg_class c WHERE c.oid = _track_key.tbl::pg_catalog.oid;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'relation with OID % does not exist', _track_key.tbl::pg_catalog.oid
			USING ERRCODE = '42P01';
	END IF;
	IF NOT pg_catalog.has_table_privilege(_track_key.tbl, 'SELECT') THEN
		RAISE EXCEPTION 'permission denied for % %', CASE v_class.relkind WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view'
			WHEN 'S' THEN 'sequence' WHEN 'f' THEN 'foreign table' WHEN 'i' THEN 'index' WHEN 'I' THEN 'index'
			ELSE 'table' END, v_class.relname
			USING ERRCODE = '42501';
	END IF;
	IF v_class.relkind NOT IN ('r', 'p') THEN
		RAISE EXCEPTION '"%" is not a table', v_class.relname USING ERRCODE = '42809';
	END IF;
	v_args := cfeed._sqled_track_args(_track_key.tbl);
	IF v_args IS NULL THEN
		RAISE EXCEPTION 'table "%" is not tracked', v_class.relname
			USING ERRCODE = '55000', HINT = 'Track it with cfeed.track().';
	END IF;
	IF pg_catalog.pg_typeof(_track_key.r) <> v_class.reltype::pg_catalog.regtype THEN
		RAISE EXCEPTION 'the row is not a row of table "%"', v_class.relname USING ERRCODE = '42804';
	END IF;
	EXECUTE 'SELECT ' || cfeed._sqled_key_expr(cfeed._sqled_key_columns(_track_key.tbl, v_args[2]), '$1')
		INTO v_key USING _track_key.r;
	RETURN v_key;
END
$fn$;
