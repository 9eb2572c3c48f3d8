/*
 * cfeed._change_shard_guard(): BEFORE UPDATE that moves a change to
 * another feed or shard: the new shard must exist (23503), as the foreign
 * key's check of an UPDATE did.  A pending change that moves gets the
 * moving transaction's writer_xid: its new shard's sweep group may have
 * passed the old one over (its watermark), never the mover's xid.
 */
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF NEW.feed_id IS NOT NULL AND NEW.shard IS NOT NULL
	   AND pg_catalog.current_setting('session_replication_role') <> 'replica'
	   AND cfeed._may_write(NEW.feed_id) THEN
		PERFORM cfeed._sqled_shard_start(NEW.feed_id, NEW.shard);
	END IF;
	IF NEW.change_sequence_number IS NULL THEN
		NEW.writer_xid := pg_catalog.pg_current_xact_id();
	END IF;
	RETURN NEW;
END
$fn$;
