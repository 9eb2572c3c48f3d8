/*
 * cfeed.channel(feed_id, shard): cfeed_<feed_id>_<shard>, the LISTEN channel
 * of a shard; 42501 for a role that may neither read nor write the feed.
 */
	LANGUAGE plpgsql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF channel.feed_id IS NULL THEN PERFORM cfeed._null_arg('feed_id'); END IF;
	IF channel.shard IS NULL THEN PERFORM cfeed._null_arg('shard'); END IF;
	PERFORM cfeed._sqled_check_known(channel.feed_id);
	PERFORM cfeed._sqled_check_shard(channel.feed_id, channel.shard);
	RETURN 'cfeed_' || channel.feed_id || '_' || channel.shard;
END
$fn$;
