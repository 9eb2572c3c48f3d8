/*
 * cfeed._track_row(): AFTER INSERT OR UPDATE OR DELETE ... FOR EACH ROW on
 * a tracked table (trigger cfeed_track, arguments feed_id and key), as
 * src/track_trigger.c: publishes the change, with the row as of the change
 * (to_jsonb of the new row, of the old one for a delete) on the shard of
 * the row's key text (cfeed.shard_for), as the writer (its INSERT on
 * cfeed.change, USAGE on cfeed.change_id, a write grant of the feed:
 * 42501).  The change_id is drawn here, after the row was written or
 * locked (per-key order), unless the table has a change_id column: then
 * the BEFORE trigger drew it (cfeed._track_change_id).  An UPDATE that
 * changes the key publishes the old row's delete on the old key's shard
 * first, with the lower change_id.  cfeed._change_guard lets the image in
 * for this INSERT only (cfeed._sqled_from_tracking, which holds its text).
 */
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_feed int;
	v_cols name[];
	v_no int;
	v_cid bool;
	v_key text;
	v_oldkey text;
	v_id bigint;
	v_del bigint;
	v_keys text[];
	v_ids bigint[];
	v_ops text[];
	v_rows jsonb[];
	v_shard int;
	i int;
BEGIN
	IF TG_WHEN <> 'AFTER' OR TG_LEVEL <> 'ROW' THEN
		RAISE EXCEPTION 'function cfeed._track_row() must be fired as an AFTER ROW trigger'
			USING ERRCODE = '39P01';
	END IF;
	IF TG_NARGS <> 2 THEN
		RAISE EXCEPTION 'cfeed: trigger "%" on "%" needs 2 arguments', TG_NAME, TG_TABLE_NAME;
	END IF;
	v_feed := TG_ARGV[0]::int;
	v_cols := cfeed._sqled_key_columns(TG_RELID, TG_ARGV[1]);
	v_cid := cfeed._sqled_change_id_column(TG_RELID);
	v_no := cfeed._sqled_table_number(TG_RELID, false);

	IF TG_OP = 'INSERT' THEN
		EXECUTE 'SELECT ' || cfeed._sqled_key_expr(v_cols, '$1') INTO v_key USING NEW;
		IF v_cid THEN
			v_id := NEW.change_id;
		END IF;
		v_keys := ARRAY[v_key];
		v_ids := ARRAY[COALESCE(v_id, pg_catalog.nextval('cfeed.change_id'))];
		v_ops := ARRAY['insert'];
		v_rows := ARRAY[pg_catalog.to_jsonb(NEW)];
	ELSIF TG_OP = 'DELETE' THEN
		EXECUTE 'SELECT ' || cfeed._sqled_key_expr(v_cols, '$1') INTO v_key USING OLD;
		IF v_cid THEN
			v_id := cfeed._sqled_pending_take('d' || TG_RELID || ':' || pg_catalog.md5(OLD::text), OLD.change_id,
											  pg_catalog.pg_sequence_last_value('cfeed.change_id') + 1);
		END IF;
		v_keys := ARRAY[v_key];
		v_ids := ARRAY[COALESCE(v_id, pg_catalog.nextval('cfeed.change_id'))];
		v_ops := ARRAY['delete'];
		v_rows := ARRAY[pg_catalog.to_jsonb(OLD)];
	ELSIF TG_OP = 'UPDATE' THEN
		EXECUTE 'SELECT ' || cfeed._sqled_key_expr(v_cols, '$1') || ', ' || cfeed._sqled_key_expr(v_cols, '$2')
			INTO v_key, v_oldkey USING NEW, OLD;
		IF v_cid THEN
			v_id := NEW.change_id;
		END IF;
		v_keys := '{}';
		v_ids := '{}';
		v_ops := '{}';
		v_rows := '{}';
		IF v_oldkey <> v_key THEN
			-- the old key's tombstone first, with the lower change_id
			IF v_id IS NOT NULL THEN
				v_del := cfeed._sqled_pending_take('u' || v_id, OLD.change_id, v_id);
			END IF;
			v_keys := ARRAY[v_oldkey];
			v_ids := ARRAY[COALESCE(v_del, pg_catalog.nextval('cfeed.change_id'))];
			v_ops := ARRAY['delete'];
			v_rows := ARRAY[pg_catalog.to_jsonb(OLD)];
		END IF;
		v_keys := v_keys || v_key;
		v_ids := v_ids || COALESCE(v_id, pg_catalog.nextval('cfeed.change_id'));
		v_ops := v_ops || 'update'::text;
		v_rows := v_rows || pg_catalog.to_jsonb(NEW);
	ELSE
		RAISE EXCEPTION 'cfeed._track_row() fired for an unexpected event';
	END IF;

	-- a writer without a write grant of the feed: cfeed.publish's 42501,
	-- before shard_for (which would refuse it as a reader)
	PERFORM cfeed._sqled_check_write(v_feed);
	FOR i IN 1 .. pg_catalog.cardinality(v_ids) LOOP
		v_shard := cfeed.shard_for(v_feed, v_keys[i]);
		INSERT INTO cfeed.change (feed_id, shard, change_id, tbl, op, "row") VALUES (v_feed, v_shard, v_ids[i], v_no, v_ops[i], v_rows[i]);
	END LOOP;
	RETURN NULL;
END
$fn$;
