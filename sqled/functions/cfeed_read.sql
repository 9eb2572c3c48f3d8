/*
 * cfeed.read(feed_id, shard, cursor, max_count, wait_ms): the stamped
 * changes after the cursor (null: from the beginning, history included),
 * ascending, at most max_count; when there are none and wait_ms > 0, waits
 * for the head to pass both the cursor and the head read before the query,
 * then reads again with a new snapshot.  As the caller: SELECT on
 * cfeed.change and a read grant of the feed.
 */
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE ROWS 1000
	SET search_path = pg_catalog, pg_temp
	AS $fn$
#variable_conflict use_column
DECLARE
	v_feed int := read.feed_id;
	v_shard int := read.shard;
	v_cursor bigint := COALESCE(read.cursor, -9223372036854775808);
	v_max int := read.max_count;
	v_head bigint;
	v_found bool;
BEGIN
	IF v_feed IS NULL THEN PERFORM cfeed._null_arg('feed_id'); END IF;
	IF v_shard IS NULL THEN PERFORM cfeed._null_arg('shard'); END IF;
	IF v_max IS NULL THEN PERFORM cfeed._null_arg('max_count'); END IF;
	IF read.wait_ms IS NULL THEN PERFORM cfeed._null_arg('wait_ms'); END IF;
	IF v_max < 0 THEN
		RAISE EXCEPTION 'argument "max_count" must not be negative, got %', v_max
			USING ERRCODE = '22023', HINT = 'Pass max_count => 0 or more.';
	END IF;
	PERFORM cfeed._sqled_check_wait('cfeed.read', read.wait_ms, 'wait_ms');
	PERFORM cfeed._sqled_check_read(v_feed, 'change');
	v_head := cfeed._sqled_head(v_feed, v_shard);
	IF v_head IS NULL THEN
		PERFORM cfeed._sqled_check_shard(v_feed, v_shard);
	END IF;
	IF v_max = 0 THEN
		RETURN;
	END IF;
	RETURN QUERY
		SELECT c.change_sequence_number, c.change_id, c.stamped_at FROM cfeed.change c
		WHERE c.feed_id = v_feed AND c.shard = v_shard AND c.change_sequence_number > v_cursor
		ORDER BY c.change_sequence_number LIMIT v_max;
	v_found := FOUND;
	IF NOT v_found AND read.wait_ms > 0
	   AND cfeed._sqled_wait_for_head(v_feed, v_shard, GREATEST(v_cursor, v_head), read.wait_ms)
		   > GREATEST(v_cursor, v_head) THEN
		PERFORM cfeed._sqled_check_read(v_feed, 'change');
		RETURN QUERY
			SELECT c.change_sequence_number, c.change_id, c.stamped_at FROM cfeed.change c
			WHERE c.feed_id = v_feed AND c.shard = v_shard AND c.change_sequence_number > v_cursor
			ORDER BY c.change_sequence_number LIMIT v_max;
	END IF;
END
$fn$;
