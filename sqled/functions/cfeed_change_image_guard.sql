/*
 * cfeed._change_image_guard(): BEFORE UPDATE on cfeed.change: an UPDATE
 * that writes a row image (tbl, op, row) is refused (42501) unless logical
 * replication's apply or a role with the owner's privileges makes it;
 * anyone else's new written_at is undone (as an INSERT's, src/guard.c).
 * Fires for the sweep's stamping UPDATE too, which writes none.
 */
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	-- only on cfeed.change: on a role's own table it would check and lock feeds for it
	IF TG_RELID <> 'cfeed.change'::pg_catalog.regclass::pg_catalog.oid THEN
		RAISE EXCEPTION 'function cfeed._change_image_guard() must be fired on cfeed.change' USING ERRCODE = '39P01';
	END IF;
	IF (NEW.tbl IS NOT NULL AND NEW.tbl IS DISTINCT FROM OLD.tbl)
	   OR (NEW.op IS NOT NULL AND NEW.op IS DISTINCT FROM OLD.op)
	   OR (NEW."row" IS NOT NULL AND NEW."row" IS DISTINCT FROM OLD."row") THEN
		IF pg_catalog.current_setting('session_replication_role') <> 'replica'
		   AND NOT cfeed._sqled_owner() THEN
			RAISE EXCEPTION 'permission denied to write a row image to feed %', NEW.feed_id
				USING ERRCODE = '42501',
					  DETAIL = 'Row images come only from cfeed''s tracking.',
					  HINT = 'Leave tbl, op and row out of the INSERT; to publish a table''s rows, track it with cfeed.track().';
		END IF;
	END IF;
	IF NEW.written_at IS DISTINCT FROM OLD.written_at AND NEW.written_at IS NOT NULL
	   AND pg_catalog.current_setting('session_replication_role') <> 'replica'
	   AND NOT cfeed._sqled_owner() THEN
		NEW.written_at := OLD.written_at;
	END IF;
	RETURN NEW;
END
$fn$;
