/*
 * cfeed.sweep(sweep_group): one sweep of a group now, in the caller's READ
 * COMMITTED transaction, as the owner of cfeed's tables (SECURITY
 * DEFINER); one row per shard that got changes.  The design of
 * src/sweep.c, in SQL:
 *
 *  1. begin: the group's sweep lock (transaction advisory lock, see the
 *     epilogue), then cfeed.shard_config and cfeed.change (ROW EXCLUSIVE:
 *     a rewrite or TRUNCATE waits for the sweep), and 55000 if those are
 *     the C extension's now (a move, sqled/move/); each later statement's
 *     snapshot is taken after the lock, so it sees every stamp of the
 *     sweeps before; the commit is made synchronous (guarantee 7).
 *  2. collect, number and write in ONE statement (one snapshot): the
 *     pending changes of the group's shards that the watermark points at
 *     and the statement's snapshot sees (committed, or the sweep's own
 *     transaction's), numbered per shard in change_id order on from the
 *     shard's head (highest stamped number, deleted head, start value),
 *     stamped_at the same clock reading for all (or, per shard, its latest
 *     stamped_at, if later: it never decreases in a shard).  A change
 *     whose row another transaction has locked (its DELETE or UPDATE of a pending
 *     change still running) is left, with the rest of its shard, for a
 *     later sweep: the sweep never waits for it, which would hold up every
 *     feed of the group (its writer's xid joins the watermark).  The
 *     UPDATE must touch every change it numbered (a change deleted or
 *     moved meanwhile would leave a gap): else 40001 and nothing is
 *     stamped.  The first sweep that stamps on a new server, timeline or
 *     database records a feed epoch with the heads before its stamps
 *     (cfeed._sqled_epoch_begin).
 *  3. announce: NOTIFY of each longpoll shard's new head on
 *     cfeed_<feed_id>_<shard> (sent at commit, with the stamps).
 *
 * The watermark (docs/design.md, "The xid watermark") keeps a held xmin
 * horizon from making every sweep walk the dead entries of the pending
 * index: after a sweep with snapshot S (taken after the lock, at or before
 * the stamping statement's), every transaction with xid < S.xmax not in
 * S.xip had finished, and its committed changes were stamped; the next
 * sweep looks only at writer_xid in S.xip or >= S.xmax, plus the sweep's
 * own transaction's xid (its later changes carry it).  It lives in a
 * session setting (cfeed_sqled.watermark_<group>), which PostgreSQL undoes
 * when the transaction rolls back, with the group's set of shards: a
 * shard that joined the group (whose pending changes the group never
 * looked at) makes the next sweep look at every pending change.  A
 * session without one (the first sweep) looks at every pending change.
 * It is a hint only: what the statement's snapshot sees decides.
 */
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
#variable_conflict use_column
DECLARE
	v_group int := sweep.sweep_group;
	v_setting text;
	v_shards text;
	v_wm text[];
	v_wm_xmax xid8;
	v_wm_xip xid8[];
	v_snap pg_snapshot;
	v_own xid8;
	v_now timestamptz;
	v_unlogged name;
	v_expected bigint;
	v_stamped bigint;
	v_left xid8[];
	v_feeds int[];
	v_shard_nos int[];
	v_counts int[];
	v_lasts bigint[];
	v_lags bigint[];
	v_notify bool[];
	v_room bool;
	i int;
BEGIN
	IF v_group IS NULL THEN PERFORM cfeed._null_arg('sweep_group'); END IF;
	IF pg_catalog.current_setting('transaction_isolation') IN ('repeatable read', 'serializable') THEN
		RAISE EXCEPTION 'cfeed cannot sweep in a REPEATABLE READ or SERIALIZABLE transaction'
			USING ERRCODE = '25000',
				  DETAIL = 'A sweep must see every change committed before it starts, which a transaction snapshot does not.',
				  HINT = 'Sweep in a READ COMMITTED transaction.';
	END IF;
	IF pg_catalog.current_setting('transaction_read_only') = 'on' THEN
		RAISE EXCEPTION 'cannot execute cfeed.sweep() in a read-only transaction'
			USING ERRCODE = '25006';
	END IF;

	-- 1. begin
	PERFORM pg_catalog.pg_advisory_xact_lock(1667655012, v_group);
	BEGIN
		LOCK TABLE cfeed.shard_config IN ACCESS SHARE MODE;
		LOCK TABLE cfeed.change IN ROW EXCLUSIVE MODE;
	EXCEPTION WHEN insufficient_privilege THEN
		-- the names now are the C extension's tables, its owner's
		IF pg_catalog.to_regprocedure('cfeed._sqled_owner()') IS NOT NULL THEN
			RAISE;
		END IF;
	END;
	IF pg_catalog.to_regprocedure('cfeed._sqled_owner()') IS NULL THEN
		-- the tables locked are the C extension's: the database moved while
		-- this sweep waited (sqled/move/), and the extension's sweeps number
		-- them under a lock of their own
		RAISE EXCEPTION 'cfeed is not the SQL edition any more'
			USING ERRCODE = '55000',
				  DETAIL = 'The database moved to the C extension while this sweep waited for its locks.',
				  HINT = 'The extension''s background sweeper sweeps it now.';
	END IF;
	-- an unlogged table would lose at a crash the numbers readers have seen
	-- (the C edition refuses ALTER TABLE ... SET UNLOGGED of its tables; SQL
	-- cannot)
	SELECT pg_catalog.min(c.relname) INTO v_unlogged FROM pg_catalog.pg_class c
	WHERE c.relnamespace = 'cfeed'::pg_catalog.regnamespace
	  AND c.relname IN ('change', 'shard_config', 'feed', 'lease', 'change_id', 'row_image',
						'failure_policy', 'failed_change', 'epoch', 'epoch_head', 'tracked_table',
						'read_grant', 'write_grant', 'stamp', 'sweep_mark', 'change_id_timeline')
	  AND c.relpersistence = 'u';
	IF v_unlogged IS NOT NULL THEN
		RAISE EXCEPTION 'cfeed cannot sweep while cfeed.% is unlogged', v_unlogged
			USING ERRCODE = '55000',
				  DETAIL = 'A crash empties an unlogged table: cfeed would lose committed changes, or the numbers readers have seen and issue them again.',
				  HINT = pg_catalog.format('ALTER TABLE cfeed.%s SET LOGGED', v_unlogged);
	END IF;
	IF pg_catalog.current_setting('synchronous_commit') IN ('off', 'local') THEN
		PERFORM pg_catalog.set_config('synchronous_commit', 'on', true);
	END IF;
	v_setting := 'cfeed_sqled.watermark_' || pg_catalog.replace(v_group::text, '-', 'm');
	SELECT pg_catalog.md5(COALESCE(pg_catalog.string_agg(s.feed_id || '.' || s.shard, ','
														 ORDER BY s.feed_id, s.shard), ''))
	INTO v_shards
	FROM cfeed.shard_config s WHERE s.sweep_group = v_group;
	v_snap := pg_catalog.pg_current_snapshot();
	v_own := pg_catalog.pg_current_xact_id_if_assigned();
	v_wm := pg_catalog.string_to_array(pg_catalog.current_setting(v_setting, true), ';');
	IF v_wm[1] = v_shards THEN
		v_wm_xmax := v_wm[2]::xid8;
		v_wm_xip := pg_catalog.string_to_array(v_wm[3], ',')::xid8[];
	END IF;

	-- 2. collect, number, write (the setting, this transaction's id, keeps
	-- the guard trigger change_stamp_guard from firing for the sweep's own
	-- numbers)
	v_now := pg_catalog.clock_timestamp();
	PERFORM pg_catalog.set_config('cfeed_sqled.stamping', pg_catalog.pg_current_xact_id()::text, true);
	WITH pending AS MATERIALIZED (
		SELECT c.ctid AS tid, c.feed_id, c.shard, c.change_id, c.writer_xid
		FROM cfeed.change c
		WHERE c.change_sequence_number IS NULL
		  AND (v_wm_xmax IS NULL OR c.writer_xid >= v_wm_xmax OR c.writer_xid = ANY (v_wm_xip))
	), found AS MATERIALIZED (
		SELECT p.* FROM pending p
		JOIN cfeed.shard_config s ON s.feed_id = p.feed_id AND s.shard = p.shard
		WHERE s.sweep_group = v_group
	), free AS MATERIALIZED (
		-- the changes locked now without waiting: one whose row another
		-- transaction has locked in any mode (its DELETE or UPDATE still
		-- running) is left for a later sweep, with the rest of its shard
		-- (src/sweep.c, the leave step)
		SELECT c.ctid AS tid, c.feed_id, c.shard, c.change_id, c.writer_xid FROM cfeed.change c
		WHERE c.ctid = ANY (ARRAY(SELECT f.tid FROM found f))
		FOR UPDATE OF c SKIP LOCKED
	), marked AS MATERIALIZED (
		-- each change found, kept when it and every change before it in its
		-- shard is free (grouped and windowed, not joined: the planner
		-- expects few pending rows, and a nested loop over thousands of
		-- them would be quadratic)
		SELECT m.*, pg_catalog.bool_and(m.free) OVER (PARTITION BY m.feed_id, m.shard
													  ORDER BY m.change_id, m.tid) AS keep
		FROM (SELECT u.tid, u.feed_id, u.shard, u.change_id, u.writer_xid,
					 pg_catalog.count(*) = 2 AS free
			  FROM (SELECT * FROM found UNION ALL SELECT * FROM free) u
			  GROUP BY u.tid, u.feed_id, u.shard, u.change_id, u.writer_xid) m
	), batch AS MATERIALIZED (
		SELECT k.tid, k.feed_id, k.shard, k.change_id FROM marked k WHERE k.keep
	), heads AS MATERIALIZED (
		-- each shard's head once, before the UPDATE adds index entries, with
		-- its stamped_at
		SELECT s.feed_id, s.shard,
			   GREATEST(x.change_sequence_number, s.deleted_head, s.start_sequence_number) AS head,
			   x.stamped_at AS head_at
		FROM (SELECT DISTINCT b.feed_id, b.shard FROM batch b) k
		JOIN cfeed.shard_config s ON s.feed_id = k.feed_id AND s.shard = k.shard
		LEFT JOIN LATERAL (
			SELECT x.change_sequence_number, x.stamped_at FROM cfeed.change x
			WHERE x.feed_id = s.feed_id AND x.shard = s.shard
			  AND x.change_sequence_number > s.start_sequence_number
			ORDER BY x.change_sequence_number DESC LIMIT 1) x ON true
	), numbered AS MATERIALIZED (
		-- a number past 2^63 - 1 fails the sweep, naming its shard
		SELECT o.tid,
			   CASE WHEN o.head <= 9223372036854775807 - o.n THEN o.head + o.n
					ELSE cfeed._sqled_out_of_numbers(o.feed_id, o.shard, v_group) END AS number,
			   o.head_at
		FROM (SELECT b.tid, b.feed_id, b.shard, h.head, h.head_at,
					 pg_catalog.row_number() OVER (PARTITION BY b.feed_id, b.shard
												   ORDER BY b.change_id, b.tid) AS n
			  FROM batch b JOIN heads h ON h.feed_id = b.feed_id AND h.shard = b.shard) o
	), stamped AS (
		-- stamped_at: the clock, or the shard's head's if later (the clock
		-- went back, a failover, a restore: a shard's stamped_at never
		-- decreases with its numbers, which cursor_at relies on; a head's
		-- that is not finite, copied in, is no clock reading)
		UPDATE cfeed.change c
		SET change_sequence_number = n.number,
			stamped_at = GREATEST(v_now, CASE WHEN pg_catalog.isfinite(n.head_at) THEN n.head_at END)
		FROM numbered n
		WHERE c.ctid = n.tid AND c.change_sequence_number IS NULL
		RETURNING c.feed_id, c.shard, c.change_sequence_number, c.written_at
	), per_shard AS (
		SELECT st.feed_id, st.shard, pg_catalog.count(*)::int AS n,
			   pg_catalog.max(st.change_sequence_number) AS last,
			   GREATEST(pg_catalog.max(EXTRACT(epoch FROM v_now - st.written_at) * 1000), 0)::bigint AS lag
		FROM stamped st GROUP BY st.feed_id, st.shard
	)
	SELECT (SELECT pg_catalog.count(*) FROM numbered), COALESCE(pg_catalog.sum(r.n), 0),
		   (SELECT pg_catalog.array_agg(DISTINCT k.writer_xid) FROM marked k WHERE NOT k.keep),
		   pg_catalog.array_agg(r.feed_id ORDER BY r.feed_id, r.shard),
		   pg_catalog.array_agg(r.shard ORDER BY r.feed_id, r.shard),
		   pg_catalog.array_agg(r.n ORDER BY r.feed_id, r.shard),
		   pg_catalog.array_agg(r.last ORDER BY r.feed_id, r.shard),
		   pg_catalog.array_agg(r.lag ORDER BY r.feed_id, r.shard),
		   pg_catalog.array_agg(s.longpoll ORDER BY r.feed_id, r.shard)
	INTO v_expected, v_stamped, v_left, v_feeds, v_shard_nos, v_counts, v_lasts, v_lags, v_notify
	FROM per_shard r
	JOIN cfeed.shard_config s ON s.feed_id = r.feed_id AND s.shard = r.shard;
	PERFORM pg_catalog.set_config('cfeed_sqled.stamping', '', true);
	IF v_stamped <> v_expected THEN
		-- the C edition's error (stamp.c): a sweep of another group, or an
		-- UPDATE or DELETE of a pending change, got there first
		RAISE EXCEPTION 'another transaction changed the changes this sweep read as pending'
			USING ERRCODE = '40001',
				  DETAIL = pg_catalog.format('Expected to update %s rows, updated %s.', v_expected, v_stamped),
				  HINT = 'Nothing was stamped by this sweep; run it again.  A sweep of another group (a shard moved between groups), or an UPDATE or DELETE of a pending change in cfeed.change, does this.';
	END IF;
	IF v_stamped > 0 THEN
		PERFORM cfeed._sqled_epoch_begin(v_feeds, v_shard_nos, v_counts);
	END IF;

	-- the next watermark: this sweep's snapshot, this transaction, and the
	-- writers of the changes left locked; none (the next sweep looks at
	-- every pending change) past 4096 of those, as the C edition falls back
	-- to a range there
	PERFORM pg_catalog.set_config(v_setting,
		CASE WHEN COALESCE(pg_catalog.array_length(v_left, 1), 0) > 4096 THEN ''
		ELSE v_shards || ';' || pg_catalog.pg_snapshot_xmax(v_snap) || ';'
			|| COALESCE(pg_catalog.array_to_string(
				   ARRAY(SELECT x FROM pg_catalog.pg_snapshot_xip(v_snap) x
						 UNION SELECT v_own WHERE v_own IS NOT NULL
						 UNION SELECT l FROM pg_catalog.unnest(v_left) l), ','), '') END,
		false);

	-- 3. announce; not while PostgreSQL's notification queue is nearly
	-- full, which would fail this commit and its stamps (src/notify.c; the
	-- heads skipped are not sent later: a LISTENer also waits with a timeout)
	v_room := pg_catalog.pg_notification_queue_usage() <= 0.9;
	IF NOT v_room AND pg_catalog.array_position(v_notify, true) IS NOT NULL THEN
		RAISE WARNING 'cfeed: PostgreSQL''s notification queue is % full: the longpoll shards swept are not notified',
			pg_catalog.round(pg_catalog.pg_notification_queue_usage()::numeric * 100) || '%'
			USING ERRCODE = '54000',
				  DETAIL = 'The changes are stamped; a reader that LISTENs is notified at the shard''s next sweep that finds room.',
				  HINT = 'A session that LISTENs and stays in a transaction holds the queue back: find it in pg_stat_activity (idle in transaction) and end its transaction.';
	END IF;
	FOR i IN 1 .. COALESCE(pg_catalog.array_length(v_feeds, 1), 0) LOOP
		IF v_notify[i] AND v_room THEN
			PERFORM pg_catalog.pg_notify('cfeed_' || v_feeds[i] || '_' || v_shard_nos[i], v_lasts[i]::text);
		END IF;
		feed_id := v_feeds[i];
		shard := v_shard_nos[i];
		change_count := v_counts[i];
		last_change_sequence_number := v_lasts[i];
		lag_ms := v_lags[i];
		RETURN NEXT;
	END LOOP;
END
$fn$;
