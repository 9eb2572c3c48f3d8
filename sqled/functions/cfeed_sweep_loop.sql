/*
 * CALL cfeed.sweep_loop(sweep_group, wait_ms, duration_ms, sleep_ms, ...):
 * sweeps the group and commits, again and again for duration_ms (once for
 * 0), sleeping sleep_ms between sweeps (no commit wakes it: the SQL
 * edition has no shared memory); returns the changes stamped, the highest
 * lag and the number of sweeps.  One sweep_loop per group at a time: the
 * group's leader lock (session advisory lock, see the epilogue), polled
 * for up to wait_ms, and then the group's sweep lock for its first sweep,
 * polled for the rest of wait_ms (src/sweep_sql.c); without them,
 * iterations = 0.  A procedure that commits
 * can be neither SECURITY DEFINER nor have a SET clause: every name in it
 * is schema-qualified, and cfeed.sweep does the stamping as the owner.
 * Called inside a transaction block, its first COMMIT fails (2D000).  An
 * error between sweeps leaves the leader lock with the session (until
 * the session ends, or its next sweep_loop of the group ends).
 */
	LANGUAGE plpgsql
	AS $fn$
DECLARE
	v_start timestamptz := pg_catalog.clock_timestamp();
	v_left double precision;
	r record;
BEGIN
	IF sweep_loop.sweep_group IS NULL THEN PERFORM cfeed._null_arg('sweep_group'); END IF;
	IF sweep_loop.wait_ms IS NULL THEN PERFORM cfeed._null_arg('wait_ms'); END IF;
	IF sweep_loop.duration_ms IS NULL THEN PERFORM cfeed._null_arg('duration_ms'); END IF;
	IF sweep_loop.sleep_ms IS NULL THEN PERFORM cfeed._null_arg('sleep_ms'); END IF;
	IF sweep_loop.wait_ms < 0 OR sweep_loop.duration_ms < 0 OR sweep_loop.sleep_ms < 0 THEN
		RAISE EXCEPTION 'wait_ms, duration_ms and sleep_ms of cfeed.sweep_loop must not be negative'
			USING ERRCODE = '22023', HINT = 'Pass 0 or more for each (0 for duration_ms: one sweep).';
	END IF;
	change_count := 0;
	max_lag_ms := 0;
	iterations := 0;

	-- a turn: the group's leader lock, polled for up to wait_ms
	WHILE NOT pg_catalog.pg_try_advisory_lock(1667655014, sweep_loop.sweep_group) LOOP
		v_left := sweep_loop.wait_ms / 1000.0
			- EXTRACT(epoch FROM pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) v_start);
		IF v_left <= 0 THEN
			RETURN;
		END IF;
		PERFORM pg_catalog.pg_sleep(LEAST(v_left, 0.01));
	END LOOP;

	-- and the first sweep's turn: the group's sweep lock, polled for up to
	-- wait_ms too (a sweep() of another session may hold it); cfeed.sweep
	-- takes it again in this transaction
	WHILE NOT pg_catalog.pg_try_advisory_xact_lock(1667655012, sweep_loop.sweep_group) LOOP
		v_left := sweep_loop.wait_ms / 1000.0
			- EXTRACT(epoch FROM pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) v_start);
		IF v_left <= 0 THEN
			PERFORM pg_catalog.pg_advisory_unlock(1667655014, sweep_loop.sweep_group);
			RETURN;
		END IF;
		PERFORM pg_catalog.pg_sleep(LEAST(v_left, 0.01));
	END LOOP;

	LOOP
		FOR r IN SELECT s.change_count, s.lag_ms FROM cfeed.sweep(sweep_loop.sweep_group) s LOOP
			change_count := LEAST(change_count::bigint OPERATOR(pg_catalog.+) r.change_count, 2147483647);
			max_lag_ms := GREATEST(max_lag_ms, r.lag_ms);
		END LOOP;
		iterations := iterations OPERATOR(pg_catalog.+) 1;
		COMMIT;
		v_left := sweep_loop.duration_ms / 1000.0
			- EXTRACT(epoch FROM pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) v_start);
		EXIT WHEN v_left <= 0;
		PERFORM pg_catalog.pg_sleep(LEAST(v_left, sweep_loop.sleep_ms / 1000.0));
	END LOOP;
	PERFORM pg_catalog.pg_advisory_unlock(1667655014, sweep_loop.sweep_group);
END
$fn$;
