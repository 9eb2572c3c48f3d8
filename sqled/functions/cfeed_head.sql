/*
 * cfeed.head(feed_id, shard): the shard's last stamped number (its start
 * value before the first stamp), as of the calling statement's snapshot.
 */
	LANGUAGE plpgsql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_head bigint;
BEGIN
	IF head.feed_id IS NULL THEN PERFORM cfeed._null_arg('feed_id'); END IF;
	IF head.shard IS NULL THEN PERFORM cfeed._null_arg('shard'); END IF;
	PERFORM cfeed._sqled_check_read(head.feed_id, 'shard');
	SELECT s.last_change_sequence_number INTO v_head FROM cfeed.shard s
	WHERE s.feed_id = head.feed_id AND s.shard = head.shard;
	IF NOT FOUND THEN
		PERFORM cfeed._sqled_check_shard(head.feed_id, head.shard);
	END IF;
	RETURN v_head;
END
$fn$;
