/*
 * cfeed._hold_layout(feed_id): the feed's shards lock in share mode until
 * the transaction ends, as src/shards.c: in this edition the advisory lock
 * its writers hold (cfeed._sqled_layout) and cfeed.reshard takes in
 * exclusive mode.  42501 unless the caller may read the feed.
 */
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF _hold_layout.feed_id IS NULL THEN PERFORM cfeed._null_arg('feed_id'); END IF;
	PERFORM cfeed._sqled_check_read(_hold_layout.feed_id, NULL);
	PERFORM pg_catalog.pg_advisory_xact_lock_shared(1667655013, _hold_layout.feed_id);
END
$fn$;
