/*
 * cfeed.wait(feed_id, shard, cursor, timeout_ms): waits until the shard's
 * head passes the cursor or the timeout ends, polling the head (the SQL
 * edition has no shared memory); returns the head.  Waiting needs READ
 * COMMITTED (25000, as src/wait.c).
 */
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF wait.feed_id IS NULL THEN PERFORM cfeed._null_arg('feed_id'); END IF;
	IF wait.shard IS NULL THEN PERFORM cfeed._null_arg('shard'); END IF;
	IF wait.cursor IS NULL THEN PERFORM cfeed._null_arg('cursor'); END IF;
	IF wait.timeout_ms IS NULL THEN PERFORM cfeed._null_arg('timeout_ms'); END IF;
	PERFORM cfeed._sqled_check_wait('cfeed.wait', wait.timeout_ms, 'timeout_ms');
	PERFORM cfeed._sqled_check_read(wait.feed_id, 'shard');
	PERFORM cfeed._sqled_check_shard(wait.feed_id, wait.shard);
	IF pg_catalog.current_setting('transaction_isolation') IN ('repeatable read', 'serializable') THEN
		-- timeout_ms 0: the head as of the transaction's snapshot
		RETURN cfeed.head(wait.feed_id, wait.shard);
	END IF;
	RETURN cfeed._sqled_wait_for_head(wait.feed_id, wait.shard, wait.cursor, wait.timeout_ms);
END
$fn$;
