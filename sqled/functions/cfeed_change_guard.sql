/*
 * cfeed._change_guard(): BEFORE INSERT on cfeed.change, every row (as
 * src/guard.c).  Refuses first a row of a feed the caller may not write,
 * with cfeed.publish's 42501, whatever its shard (the policy change_write
 * would refuse it after; the row tells such a role nothing of the feed's
 * shards, and it takes no lock of the feed's).  Checks the shard (23503,
 * the foreign key of cfeed.change) holding the feed's shards lock, except
 * in replica mode and for the owner's restored rows (another writer_xid, or an earlier written_at);
 * refuses row images (tbl, op, row) from anyone but the owner (42501)
 * except in cfeed's own INSERTs of a tracked change or of backfilled
 * history (cfeed._sqled_from_tracking: the C edition's image scope);
 * forces writer_xid to the inserting transaction's for unnumbered rows
 * (the sweep finds changes by it), and written_at to its start but in rows
 * copied in (replica mode, the owner's); lets writers number only history, at or
 * below the shard's start value and from 1 (22023).
 */
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_replica bool := pg_catalog.current_setting('session_replication_role') = 'replica';
	v_restored bool;
	v_start bigint;
	v_context text;
BEGIN
	-- only on cfeed.change: on a role's own table it would check and lock feeds for it
	IF TG_RELID <> 'cfeed.change'::pg_catalog.regclass::pg_catalog.oid THEN
		RAISE EXCEPTION 'function cfeed._change_guard() must be fired on cfeed.change' USING ERRCODE = '39P01';
	END IF;
	v_restored := NEW.writer_xid IS DISTINCT FROM pg_catalog.pg_current_xact_id()
		OR NEW.written_at < pg_catalog.transaction_timestamp();
	-- only a row copied in keeps a written_at of its own (as src/guard.c)
	IF NEW.written_at IS DISTINCT FROM pg_catalog.transaction_timestamp() AND NEW.written_at IS NOT NULL
	   AND NOT v_replica AND NOT cfeed._sqled_owner() THEN
		NEW.written_at := pg_catalog.transaction_timestamp();
		v_restored := NEW.writer_xid IS DISTINCT FROM pg_catalog.pg_current_xact_id();
	END IF;
	IF NEW.feed_id IS NOT NULL AND NOT v_replica THEN
		PERFORM cfeed._sqled_check_write(NEW.feed_id);
	END IF;
	IF NEW.feed_id IS NOT NULL AND NEW.shard IS NOT NULL AND NOT v_replica
	   AND NOT (v_restored AND cfeed._sqled_owner()) THEN
		v_start := cfeed._sqled_shard_start(NEW.feed_id, NEW.shard);
	END IF;
	IF (NEW.tbl IS NOT NULL OR NEW.op IS NOT NULL OR NEW."row" IS NOT NULL)
	   AND NOT v_replica AND NOT cfeed._sqled_owner() THEN
		GET DIAGNOSTICS v_context = PG_CONTEXT;
		IF NOT cfeed._sqled_from_tracking(v_context) THEN
			RAISE EXCEPTION 'permission denied to write a row image to feed %', NEW.feed_id
				USING ERRCODE = '42501',
					  DETAIL = 'Row images come only from cfeed''s tracking.',
					  HINT = 'Leave tbl, op and row out of the INSERT; to publish a table''s rows, track it with cfeed.track().';
		END IF;
	END IF;
	IF NEW.change_sequence_number IS NULL AND NEW.stamped_at IS NULL AND NOT v_restored THEN
		RETURN NEW;
	END IF;
	IF NEW.change_sequence_number IS NULL OR NOT v_replica THEN
		NEW.writer_xid := pg_catalog.pg_current_xact_id();
	END IF;
	IF NEW.change_sequence_number IS NULL THEN
		IF NEW.stamped_at IS NOT NULL THEN
			RAISE EXCEPTION 'stamped_at of a change for shard % of feed % must be null', NEW.shard, NEW.feed_id
				USING ERRCODE = '22023',
					  DETAIL = 'The sweeper sets stamped_at when it stamps the change.',
					  HINT = 'Leave stamped_at out of the INSERT.';
		END IF;
		RETURN NEW;
	END IF;
	PERFORM cfeed._sqled_check_number(NEW.feed_id, NEW.shard, NEW.change_sequence_number, v_restored);
	NEW.stamped_at := COALESCE(NEW.stamped_at, pg_catalog.transaction_timestamp());
	RETURN NEW;
END
$fn$;
