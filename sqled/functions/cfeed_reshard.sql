/*
 * cfeed.reshard(feed_id, shards, wait_ms): closes the feed's open shards
 * f .. n-1 and creates shards children n .. n+k-1, child n+i continuing
 * parent f + (i mod m) (m open shards), as src/reshard.c, in the caller's
 * transaction.  Per-key order: every writer of a change holds the feed's
 * shards lock (1667655013, feed_id) in share mode from the moment it
 * placed the change until it commits (cfeed._sqled_shard_start, and
 * cfeed.shard_for where it can write); reshard takes it in exclusive mode,
 * so the changes placed by the old layout are committed before the shards
 * close, and the changes placed after the close see it (or wait for its
 * commit and then see it).  Unlike the C function, which waits for the
 * lock's holders without joining its queue, reshard waits in the queue
 * (lock_timeout wait_ms, the only wait SQL has that ends when the holders
 * end): while it waits, the feed's new writers queue behind it, up to
 * wait_ms; 55P03 after wait_ms (wait_ms 0: no wait), or after the
 * session's lock_timeout when it is positive and smaller.  The layout is read
 * again once the lock is held (READ COMMITTED: each statement's snapshot
 * is new).  The
 * extension's owner's and superusers' only (the owner of cfeed's tables
 * in the SQL edition), checked here too for a role granted EXECUTE.
 */
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE ROWS 16
	SET search_path = pg_catalog, pg_temp
	AS $fn$
#variable_conflict use_column
DECLARE
	v_feed int := reshard.feed_id;
	v_shards int := reshard.shards;
	v_layout record;
	v_open int;
	v_timeout text := pg_catalog.current_setting('lock_timeout');
	v_session_ms int := (SELECT g.setting::int FROM pg_catalog.pg_settings g WHERE g.name = 'lock_timeout');
	v_limit_ms int;
	v_locked bool := true;
	v_count bigint;
	i int;
BEGIN
	IF v_feed IS NULL THEN PERFORM cfeed._null_arg('feed_id'); END IF;
	IF v_shards IS NULL THEN PERFORM cfeed._null_arg('shards'); END IF;
	IF reshard.wait_ms IS NULL THEN PERFORM cfeed._null_arg('wait_ms'); END IF;
	IF reshard.wait_ms < 0 THEN
		RAISE EXCEPTION 'argument "wait_ms" must not be negative, got %', reshard.wait_ms
			USING ERRCODE = '22023', HINT = 'Pass wait_ms => 0 or more.';
	END IF;
	PERFORM cfeed._sqled_may_reshard(v_feed, 'cfeed.reshard()', 'reshard');
	v_limit_ms := CASE WHEN v_session_ms > 0 AND v_session_ms < reshard.wait_ms THEN v_session_ms ELSE reshard.wait_ms END;
	IF NOT EXISTS (SELECT FROM cfeed.feed f WHERE f.feed_id = v_feed) THEN
		RAISE EXCEPTION 'feed % does not exist', v_feed
			USING ERRCODE = '42704', HINT = 'Create it with cfeed.create_feed().';
	END IF;

	-- bad input fails before the wait, and again after it if it became so
	FOR i IN 1 .. 2 LOOP
		SELECT * INTO v_layout FROM cfeed._sqled_layout(v_feed, false);
		v_open := v_layout.shard_count - v_layout.first_open;
		IF v_shards < 2 * v_open OR v_shards % v_open <> 0 THEN
			RAISE EXCEPTION 'cannot reshard feed % into % shards', v_feed, v_shards
				USING ERRCODE = '22023',
					  DETAIL = pg_catalog.format('The feed has %s open shards (%s to %s); each gets the same number of children, at least two.',
												 v_open, v_layout.first_open, v_layout.max_shard),
					  HINT = pg_catalog.format('Give a multiple of %s, at least %s.', v_open, 2 * v_open);
		END IF;
		IF v_shards > 65536 - v_layout.shard_count THEN
			RAISE EXCEPTION 'cannot reshard feed % into % shards', v_feed, v_shards
				USING ERRCODE = '22023',
					  DETAIL = pg_catalog.format('Its shards would be numbered up to %s; a feed has at most %s shard numbers.',
												 v_layout.shard_count - 1 + v_shards, 65536);
		END IF;
		EXIT WHEN i = 2;

		-- the feed's shards lock in exclusive mode, waited for up to wait_ms
		-- (or the session's lock_timeout when it is positive and smaller)
		IF reshard.wait_ms = 0 THEN
			v_locked := pg_catalog.pg_try_advisory_xact_lock(1667655013, v_feed);
		ELSE
			BEGIN
				PERFORM pg_catalog.set_config('lock_timeout', v_limit_ms::text, true);
				PERFORM pg_catalog.pg_advisory_xact_lock(1667655013, v_feed);
				PERFORM pg_catalog.set_config('lock_timeout', v_timeout, true);
			EXCEPTION WHEN lock_not_available THEN
				v_locked := false;
			END;
		END IF;
		IF NOT v_locked THEN
			RAISE EXCEPTION 'could not lock the shards of feed % within % ms', v_feed, v_limit_ms
				USING ERRCODE = '55P03',
					  DETAIL = 'Transactions that wrote to the feed held its shards lock all that time: resharding waits until the writers that placed changes by the current shards have ended.',
					  HINT = CASE WHEN v_limit_ms < reshard.wait_ms
								  THEN pg_catalog.format('The session''s lock_timeout (%s ms) is below wait_ms (%s ms) and bounds the wait: raise it, or end the long transactions that wrote to the feed.',
														 v_limit_ms, reshard.wait_ms)
								  ELSE 'Try again, with a larger wait_ms, or end the long transactions that wrote to the feed.' END;
		END IF;
	END LOOP;

	UPDATE cfeed.shard_config s SET closed = true
	WHERE s.feed_id = v_feed AND s.shard >= v_layout.first_open;
	INSERT INTO cfeed.shard_config (feed_id, shard, sweep_group, longpoll, parent, storage)
	SELECT p.feed_id, v_layout.shard_count + c.i, p.sweep_group, p.longpoll, p.shard, p.storage
	FROM pg_catalog.generate_series(0, v_shards - 1) c(i)
	JOIN cfeed.shard_config p ON p.feed_id = v_feed AND p.shard = v_layout.first_open + c.i % v_open
	ORDER BY c.i;
	GET DIAGNOSTICS v_count = ROW_COUNT;
	IF v_count <> v_shards THEN
		RAISE EXCEPTION 'cfeed.reshard created % shards of feed %, not %', v_count, v_feed, v_shards
			USING ERRCODE = 'XX000';
	END IF;
	RETURN QUERY
		SELECT v_layout.shard_count + c.i, v_layout.first_open + c.i % v_open
		FROM pg_catalog.generate_series(0, v_shards - 1) c(i)
		ORDER BY c.i;
END
$fn$;
