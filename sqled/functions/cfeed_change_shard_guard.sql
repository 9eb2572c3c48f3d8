/*
 * cfeed._change_shard_guard(): BEFORE UPDATE that moves a change to
 * another feed or shard: the new shard must exist (23503), as the foreign
 * key's check of an UPDATE did.  A pending change keeps its writer_xid,
 * and may not leave its sweep group (change_stamped_keys_guard, after
 * this): another group's sweeps may have passed its writer over.
 */
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	-- only on cfeed.change: on a role's own table it would check and lock feeds for it
	IF TG_RELID <> 'cfeed.change'::pg_catalog.regclass::pg_catalog.oid THEN
		RAISE EXCEPTION 'function cfeed._change_shard_guard() must be fired on cfeed.change' USING ERRCODE = '39P01';
	END IF;
	IF NEW.feed_id IS NOT NULL AND NEW.shard IS NOT NULL
	   AND pg_catalog.current_setting('session_replication_role') <> 'replica'
	   AND cfeed._may_write(NEW.feed_id) THEN
		PERFORM cfeed._sqled_shard_start(NEW.feed_id, NEW.shard);
	END IF;
	RETURN NEW;
END
$fn$;
