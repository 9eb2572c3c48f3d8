/*
 * cfeed.cursor_at(feed_id, shard, at): the cursor from which reading
 * returns the changes stamped at or after `at`: a binary search over the
 * stamped range (gapless above the start value, stamped_at never
 * decreasing; a number without a row, removed by retention, counts as
 * stamped before), then, when nothing there was stamped before `at`, the
 * history below the start value (src/read.c).  As of the calling
 * statement's snapshot.
 */
	LANGUAGE plpgsql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_lo bigint;
	v_hi bigint;
	v_start bigint;
	v_mid bigint;
	v_before bool;
	v_cursor bigint;
BEGIN
	IF cursor_at.feed_id IS NULL THEN PERFORM cfeed._null_arg('feed_id'); END IF;
	IF cursor_at.shard IS NULL THEN PERFORM cfeed._null_arg('shard'); END IF;
	IF cursor_at.at IS NULL THEN PERFORM cfeed._null_arg('at'); END IF;
	PERFORM cfeed._sqled_check_read(cursor_at.feed_id, 'shard');
	SELECT s.last_change_sequence_number, s.start_sequence_number INTO v_hi, v_start
	FROM cfeed.shard s WHERE s.feed_id = cursor_at.feed_id AND s.shard = cursor_at.shard;
	IF NOT FOUND THEN
		PERFORM cfeed._sqled_check_shard(cursor_at.feed_id, cursor_at.shard);
	END IF;
	PERFORM cfeed._sqled_check_read(cursor_at.feed_id, 'change');

	-- invariant: lo was stamped before `at` (or is the start), hi + 1 was not
	v_lo := v_start;
	WHILE v_lo < v_hi LOOP
		v_mid := v_lo + (v_hi - v_lo) / 2 + (v_hi - v_lo) % 2;
		SELECT c.stamped_at < cursor_at.at INTO v_before FROM cfeed.change c
		WHERE c.feed_id = cursor_at.feed_id AND c.shard = cursor_at.shard
		  AND c.change_sequence_number = v_mid;
		IF NOT FOUND OR v_before IS NOT FALSE THEN
			v_lo := v_mid;
		ELSE
			v_hi := v_mid - 1;
		END IF;
	END LOOP;
	IF v_lo > v_start THEN
		RETURN v_lo;
	END IF;

	SELECT CASE WHEN COALESCE(pg_catalog.bool_and(c.stamped_at < cursor_at.at), true) THEN v_start
				ELSE COALESCE(pg_catalog.max(c.change_sequence_number) FILTER (WHERE c.stamped_at < cursor_at.at),
							  GREATEST(pg_catalog.min(c.change_sequence_number), -9223372036854775807) - 1) END
	INTO v_cursor
	FROM cfeed.change c
	WHERE c.feed_id = cursor_at.feed_id AND c.shard = cursor_at.shard
	  AND c.change_sequence_number <= v_start;
	RETURN COALESCE(v_cursor, v_start);
END
$fn$;
