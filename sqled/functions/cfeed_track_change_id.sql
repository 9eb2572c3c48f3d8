/*
 * cfeed._track_change_id(): BEFORE INSERT OR UPDATE OR DELETE ... FOR EACH
 * ROW on a tracked table with a bigint change_id column (trigger
 * cfeed_track_change_id), as src/track_trigger.c: draws the change's
 * change_id and sets the row's column to it (an INSERT's before the
 * unique-index check: per-key order); for an UPDATE that changes the key,
 * first the old key's tombstone's, which it leaves to cfeed._track_row
 * (cfeed._sqled_pending_put).  A DELETE from a partition draws its
 * change_id here too (a row moved to another partition: its delete before
 * its insert there); from a table that is no partition the AFTER trigger
 * draws it.  Feed and key are those of the table's cfeed_track trigger;
 * without it, nothing.
 */
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_args text[];
	v_cols name[];
	v_key text;
	v_oldkey text;
	v_del bigint;
	v_id bigint;
BEGIN
	IF TG_WHEN <> 'BEFORE' OR TG_LEVEL <> 'ROW' THEN
		RAISE EXCEPTION 'function cfeed._track_change_id() must be fired as a BEFORE ROW trigger'
			USING ERRCODE = '39P01';
	END IF;
	v_args := cfeed._sqled_track_args(TG_RELID);
	IF v_args IS NULL OR NOT cfeed._sqled_change_id_column(TG_RELID) THEN
		IF TG_OP = 'DELETE' THEN
			RETURN OLD;
		END IF;
		RETURN NEW;
	END IF;

	IF TG_OP = 'DELETE' THEN
		IF (SELECT c.relispartition FROM pg_catalog.pg_class c WHERE c.oid = TG_RELID) THEN
			PERFORM cfeed._sqled_pending_put('d' || TG_RELID || ':' || pg_catalog.md5(OLD::text),
											 pg_catalog.nextval('cfeed.change_id'));
		END IF;
		RETURN OLD;
	END IF;
	IF TG_OP = 'UPDATE' THEN
		v_cols := cfeed._sqled_key_columns(TG_RELID, v_args[2]);
		EXECUTE 'SELECT ' || cfeed._sqled_key_expr(v_cols, '$1') || ', ' || cfeed._sqled_key_expr(v_cols, '$2')
			INTO v_key, v_oldkey USING NEW, OLD;
		IF v_oldkey <> v_key THEN
			v_del := pg_catalog.nextval('cfeed.change_id');
		END IF;
	END IF;
	v_id := pg_catalog.nextval('cfeed.change_id');
	IF v_del IS NOT NULL THEN
		PERFORM cfeed._sqled_pending_put('u' || v_id, v_del);
	END IF;
	NEW.change_id := v_id;
	RETURN NEW;
END
$fn$;
