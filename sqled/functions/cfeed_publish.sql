/*
 * cfeed.publish(feed_id, shard, change_id): records a change in the
 * caller's transaction, with its privileges (the INSERT pattern: INSERT on
 * cfeed.change, a write grant of the feed), and returns its change_id.
 */
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF publish.feed_id IS NULL THEN PERFORM cfeed._null_arg('feed_id'); END IF;
	IF publish.shard IS NULL THEN PERFORM cfeed._null_arg('shard'); END IF;
	IF publish.change_id IS NULL THEN PERFORM cfeed._null_arg('change_id'); END IF;
	PERFORM cfeed._sqled_check_write(publish.feed_id);
	PERFORM cfeed._sqled_check_shard(publish.feed_id, publish.shard);	-- 42704, as a function's
	INSERT INTO cfeed.change (feed_id, shard, change_id)
	VALUES (publish.feed_id, publish.shard, publish.change_id);
	RETURN publish.change_id;
END
$fn$;
