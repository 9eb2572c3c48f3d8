/*
 * ======================================================================
 * The SQL edition's own objects (sqled/functions/epilogue.sql)
 * ======================================================================
 *
 * Advisory locks: the C extension tags its locks in a way SQL cannot;
 * the SQL edition takes the two-key advisory locks (classid = the first
 * key, objid = the second), in transaction scope:
 *
 *   (1667655012 'cfed', sweep_group)  the sweep lock: one sweep of a group at
 *                                    a time, taken before the sweep's snapshot;
 *                                    a shard moving between groups takes both
 *   (1667655013, feed_id)            the feed's shards lock: shared by every
 *                                    writer of a change (and by shard_for where
 *                                    the transaction can write), exclusive for
 *                                    a shard that goes away (instead of a
 *                                    foreign key), is closed or opened, and for
 *                                    cfeed.reshard
 *   (1667655014, sweep_group)        the sweep_loop leader lock (session)
 *   (1667655015, table OID)          numbering a tracked table (tracking.sql)
 *
 * An application that uses two-key advisory locks itself must keep away
 * from these first keys.
 */

/*
 * cfeed._sqled_owner: whether the current user has the privileges of the
 * owner of cfeed's tables (the extension's owner in the C edition).
 */
CREATE FUNCTION cfeed._sqled_owner() RETURNS bool
	LANGUAGE sql STABLE PARALLEL SAFE
	AS $fn$
	SELECT pg_catalog.pg_has_role(c.relowner, 'USAGE')
	FROM pg_catalog.pg_class c
	WHERE c.oid OPERATOR(pg_catalog.=) 'cfeed.change'::pg_catalog.regclass
$fn$;
COMMENT ON FUNCTION cfeed._sqled_owner() IS 'internal (SQL edition): whether the current user has the privileges of the owner of cfeed''s tables';

/*
 * cfeed._sqled_may_reshard: cfeed.reshard's and cfeed.set_storage's checks
 * of the caller, as src/reshard.c's check_may_reshard: 42501 unless it has
 * the privileges of the owner of cfeed's tables (denied says what it may
 * not do to the feed), 25000 in REPEATABLE READ or SERIALIZABLE, 25006 in
 * a read-only transaction.
 */
CREATE FUNCTION cfeed._sqled_may_reshard(feed_id int, fn text, denied text) RETURNS void
	LANGUAGE plpgsql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF NOT cfeed._sqled_owner() THEN
		RAISE EXCEPTION 'permission denied to % feed %', _sqled_may_reshard.denied, _sqled_may_reshard.feed_id
			USING ERRCODE = '42501',
				  DETAIL = 'Only superusers and roles with the privileges of the extension''s owner change a feed''s shards.';
	END IF;
	IF pg_catalog.current_setting('transaction_isolation') IN ('repeatable read', 'serializable') THEN
		RAISE EXCEPTION '% cannot run in a REPEATABLE READ or SERIALIZABLE transaction', _sqled_may_reshard.fn
			USING ERRCODE = '25000',
				  DETAIL = 'It waits for the feed''s writers and then reads the feed''s shards as they committed.',
				  HINT = 'Run it in a READ COMMITTED transaction.';
	END IF;
	IF pg_catalog.current_setting('transaction_read_only') = 'on' THEN
		RAISE EXCEPTION 'cannot execute % in a read-only transaction', _sqled_may_reshard.fn
			USING ERRCODE = '25006';
	END IF;
END
$fn$;
COMMENT ON FUNCTION cfeed._sqled_may_reshard(int, text, text) IS 'internal (SQL edition): the caller checks of cfeed.reshard and cfeed.set_storage (42501, 25000, 25006)';

/*
 * cfeed._sqled_shard_start: a writer's check of its change's shard, the
 * foreign key of cfeed.change: takes the feed's shards lock in share mode
 * until the transaction ends (a shard that goes away takes it in exclusive
 * mode, so it waits for this writer and then sees its change), then looks
 * the shard up with a new snapshot; 23503 when it does not exist, 55000
 * when it is closed (cfeed.reshard, which holds the lock in exclusive mode
 * until it commits: a change placed by the layout before is committed
 * before the shard closes, and one placed after sees it closed).  In
 * REPEATABLE READ and SERIALIZABLE the snapshot may predate the close, so
 * the shard's row is locked FOR SHARE first (cfeed._sqled_shard_current):
 * 40001 when it changed since the snapshot.  Returns the shard's start
 * value.  As the caller, through cfeed._sqled_shard_starts
 * (the shards of the feeds it may write): the guard asks only for a feed
 * the writer may write (else the write policy refuses the row).
 */
CREATE FUNCTION cfeed._sqled_shard_start(feed_id int, shard int) RETURNS bigint
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_start bigint;
	v_closed bool;
BEGIN
	PERFORM pg_catalog.pg_advisory_xact_lock_shared(1667655013, _sqled_shard_start.feed_id);
	IF pg_catalog.current_setting('transaction_isolation') IN ('repeatable read', 'serializable') THEN
		PERFORM cfeed._sqled_shard_current(_sqled_shard_start.feed_id, _sqled_shard_start.shard);
	END IF;
	SELECT s.start_sequence_number, s.closed INTO v_start, v_closed
	FROM cfeed._sqled_shard_starts s
	WHERE s.feed_id = _sqled_shard_start.feed_id AND s.shard = _sqled_shard_start.shard;
	IF NOT FOUND THEN
		IF NOT cfeed._sqled_feed_exists(_sqled_shard_start.feed_id) THEN
			RAISE EXCEPTION 'feed % does not exist', _sqled_shard_start.feed_id
				USING ERRCODE = '23503',
					  DETAIL = 'Every change of cfeed.change belongs to a shard of cfeed.shard_config.',
					  HINT = 'Create it with cfeed.create_feed().';
		END IF;
		RAISE EXCEPTION 'shard % of feed % does not exist', _sqled_shard_start.shard, _sqled_shard_start.feed_id
			USING ERRCODE = '23503',
				  DETAIL = 'Every change of cfeed.change belongs to a shard of cfeed.shard_config.',
				  HINT = 'Shards are numbered from 0; add one by inserting into cfeed.shard.';
	END IF;
	IF v_closed THEN
		PERFORM cfeed._sqled_shard_closed(_sqled_shard_start.feed_id, _sqled_shard_start.shard);
	END IF;
	RETURN v_start;
END
$fn$;
COMMENT ON FUNCTION cfeed._sqled_shard_start(int, int) IS 'internal (SQL edition): checks that a written change''s shard exists (23503) and is open (55000), holding its feed''s shards lock; returns the shard''s start value';

/*
 * cfeed._sqled_shard_current: in REPEATABLE READ or SERIALIZABLE, 40001
 * when a shard's row was changed (closed by cfeed.reshard, deleted) by a
 * transaction the snapshot does not see: the row is locked FOR SHARE
 * until the transaction ends, which PostgreSQL refuses for a row updated
 * after the snapshot (and waits for an update in progress).  SECURITY
 * DEFINER: writers have no privilege on cfeed.shard_config; called by the
 * writers' check for feeds they may write (any role may also hold the
 * feed's shards lock, an advisory lock, see above).
 */
CREATE FUNCTION cfeed._sqled_shard_current(feed_id int, shard int) RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	PERFORM FROM cfeed.shard_config s
	WHERE s.feed_id = _sqled_shard_current.feed_id AND s.shard = _sqled_shard_current.shard
	FOR SHARE;
END
$fn$;
COMMENT ON FUNCTION cfeed._sqled_shard_current(int, int) IS 'internal (SQL edition): locks a shard''s row FOR SHARE: 40001 in REPEATABLE READ or SERIALIZABLE when it changed after the snapshot';

/*
 * cfeed._sqled_shard_closed: 55000 for a write to a closed shard, as
 * src/shards.c words it.
 */
CREATE FUNCTION cfeed._sqled_shard_closed(feed_id int, shard int) RETURNS void
	LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	RAISE EXCEPTION 'shard % of feed % is closed', shard, feed_id
		USING ERRCODE = '55000',
			  DETAIL = 'cfeed.reshard() closed it: its changes go on in its children.',
			  HINT = pg_catalog.format('Place the change with cfeed.shard_for(%s, key).', feed_id);
END
$fn$;
COMMENT ON FUNCTION cfeed._sqled_shard_closed(int, int) IS 'internal (SQL edition): raises 55000 for a write to a closed shard';

/*
 * cfeed._sqled_out_of_numbers: 22003 for a sweep whose shard's next number
 * would pass 2^63 - 1 (cfeed.sweep), naming the shard as src/sweep.c does
 * for a shard stored in ranges: the SQL edition fails the group's sweep.
 */
CREATE FUNCTION cfeed._sqled_out_of_numbers(feed_id int, shard int, sweep_group int) RETURNS bigint
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	RAISE EXCEPTION 'shard % of feed % has run out of sequence numbers', shard, feed_id
		USING ERRCODE = '22003',
			  DETAIL = 'Its next number would pass 9223372036854775807.',
			  HINT = pg_catalog.format('Delete its pending changes (DELETE FROM cfeed.change WHERE feed_id = %s AND shard = %s AND change_sequence_number IS NULL); sweep group %s cannot be swept until then.',
									   feed_id, shard, sweep_group);
END
$fn$;
COMMENT ON FUNCTION cfeed._sqled_out_of_numbers(int, int, int) IS 'internal (SQL edition): raises 22003 for a shard out of sequence numbers';
REVOKE ALL ON FUNCTION cfeed._sqled_out_of_numbers(int, int, int) FROM PUBLIC;

/*
 * cfeed._sqled_layout: a feed's layout as src/shards.c reads it, with a new
 * snapshot (VOLATILE, also when called from a STABLE function): its shard
 * count, highest shard, lowest open shard and highest closed one (null
 * when there is none); with lock, first the feed's shards lock in share
 * mode until the transaction ends, so that the layout read is the one the
 * transaction's writes are checked against (cfeed.shard_for where the
 * transaction can write and the caller may write the feed).  For
 * cfeed.shard_for, cfeed.reshard, set_storage, track and backfill, as the
 * caller, of a feed it may read or write (cfeed._sqled_known_shards: any
 * other feed does not exist, as the C functions tell no more of it).
 */
CREATE FUNCTION cfeed._sqled_layout(feed_id int, lock bool,
									OUT shard_count int, OUT max_shard int, OUT first_open int, OUT max_closed int)
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF _sqled_layout.lock THEN
		PERFORM pg_catalog.pg_advisory_xact_lock_shared(1667655013, _sqled_layout.feed_id);
	END IF;
	SELECT pg_catalog.count(*)::int, pg_catalog.max(s.shard),
		   pg_catalog.min(s.shard) FILTER (WHERE NOT s.closed),
		   pg_catalog.max(s.shard) FILTER (WHERE s.closed)
	INTO shard_count, max_shard, first_open, max_closed
	FROM cfeed._sqled_known_shards s WHERE s.feed_id = _sqled_layout.feed_id;
	IF shard_count = 0 THEN
		RAISE EXCEPTION USING ERRCODE = '42704', HINT = 'Create it with cfeed.create_feed().',
			MESSAGE = pg_catalog.format(CASE WHEN cfeed._sqled_feed_exists(_sqled_layout.feed_id)
											 THEN 'feed %s has no shards' ELSE 'feed %s does not exist' END,
										_sqled_layout.feed_id);
	END IF;
	IF max_shard <> shard_count - 1 THEN
		RAISE EXCEPTION 'shards of feed % are not numbered 0..%', _sqled_layout.feed_id, shard_count - 1
			USING ERRCODE = '55000',
				  DETAIL = pg_catalog.format('The feed has %s shards, the highest being %s.', shard_count, max_shard),
				  HINT = 'cfeed.shard_for() needs contiguous shard numbers starting at 0.';
	END IF;
	IF first_open IS NULL THEN
		RAISE EXCEPTION 'feed % has no open shard', _sqled_layout.feed_id
			USING ERRCODE = '55000',
				  DETAIL = pg_catalog.format('All of its %s shards are closed.', shard_count),
				  HINT = 'Open its highest shards again (cfeed.shard_config.closed), or create new ones.';
	END IF;
	IF max_closed > first_open THEN
		RAISE EXCEPTION 'the open shards of feed % are not its highest', _sqled_layout.feed_id
			USING ERRCODE = '55000',
				  DETAIL = pg_catalog.format('Shard %s is closed and shard %s is open.', max_closed, first_open),
				  HINT = 'cfeed.shard_for() routes keys to the highest shards, those above the closed ones.';
	END IF;
END
$fn$;
COMMENT ON FUNCTION cfeed._sqled_layout(int, bool) IS 'internal (SQL edition): a feed''s layout with a new snapshot, optionally under its shards lock in share mode; the errors of a layout cfeed.shard_for cannot route by';
GRANT EXECUTE ON FUNCTION cfeed._sqled_layout(int, bool) TO PUBLIC;

/*
 * The caller's own read and write grants.  Views run with their owner's
 * privileges while current_user stays the caller's: a role sees only the
 * grants it holds or has the privileges of, and needs no privilege on the
 * grants tables (cfeed._may_read and cfeed._may_write read these).
 * Every view of the SQL edition that any role may read filters rows for
 * the caller, so each is a security barrier: else a condition of the
 * caller's own, a cheap function, would run before the filter and see
 * every row (other roles' grants, every feed's shards and start values).
 */
CREATE VIEW cfeed._sqled_read_grants WITH (security_barrier = true) AS
	SELECT g.feed_id FROM cfeed.read_grant g
	WHERE g.grantee::pg_catalog.oid OPERATOR(pg_catalog.=) 0
	   OR pg_catalog.pg_has_role(CURRENT_USER, g.grantee::pg_catalog.oid, 'USAGE');
COMMENT ON VIEW cfeed._sqled_read_grants IS 'internal (SQL edition): the feeds the current user holds a read grant of (null: every feed)';
GRANT SELECT ON cfeed._sqled_read_grants TO PUBLIC;

CREATE VIEW cfeed._sqled_write_grants WITH (security_barrier = true) AS
	SELECT g.feed_id FROM cfeed.write_grant g
	WHERE g.grantee::pg_catalog.oid OPERATOR(pg_catalog.=) 0
	   OR pg_catalog.pg_has_role(CURRENT_USER, g.grantee::pg_catalog.oid, 'USAGE');
COMMENT ON VIEW cfeed._sqled_write_grants IS 'internal (SQL edition): the feeds the current user holds a write grant of (null: every feed)';
GRANT SELECT ON cfeed._sqled_write_grants TO PUBLIC;

/*
 * cfeed._sqled_privileged: superuser, BYPASSRLS or the privileges of the
 * owner of cfeed's tables: reads and writes every feed.
 */
CREATE FUNCTION cfeed._sqled_privileged() RETURNS bool
	LANGUAGE sql STABLE PARALLEL SAFE
	AS $fn$
	SELECT COALESCE((SELECT r.rolsuper OR r.rolbypassrls FROM pg_catalog.pg_roles r
					 WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER), false)
		OR cfeed._sqled_owner()
$fn$;
COMMENT ON FUNCTION cfeed._sqled_privileged() IS 'internal (SQL edition): whether the current user reads and writes every feed (superuser, BYPASSRLS, the owner''s privileges)';

/*
 * Which feeds the current user may read, and which it may write: all of
 * them (all_feeds), or those of feed_ids.  The views below that any role
 * may read are each a UNION ALL of a branch for a role that may see every
 * feed, run only for such a role (an InitPlan's one-time filter), and one
 * whose scan has the condition feed_id = ANY (feed_ids), as the C
 * edition's planner support function gives the read checks' index scans:
 * a caller's own condition (such as feed_id = 2, leakproof, so pushed
 * below the security barrier) then fetches no row of a feed it may not
 * see, and EXPLAIN ANALYZE counts none ("Rows Removed by Filter" told a
 * role with nothing but LOGIN which feeds and shards exist, and other
 * feeds' pending changes).  A role that sees every feed builds no array
 * of them.
 */
CREATE VIEW cfeed._sqled_readable_feeds WITH (security_barrier = true) AS
	SELECT a.all_feeds,
		   CASE WHEN a.all_feeds THEN '{}'::int[]
				ELSE ARRAY(SELECT g.feed_id FROM cfeed._sqled_read_grants g) END AS feed_ids
	FROM (SELECT cfeed._sqled_privileged()
				 OR EXISTS (SELECT FROM cfeed._sqled_read_grants g WHERE g.feed_id IS NULL) AS all_feeds) a;
COMMENT ON VIEW cfeed._sqled_readable_feeds IS 'internal (SQL edition): whether the current user may read every feed, else the feeds it may read';
GRANT SELECT ON cfeed._sqled_readable_feeds TO PUBLIC;

CREATE VIEW cfeed._sqled_writable_feeds WITH (security_barrier = true) AS
	SELECT a.all_feeds,
		   CASE WHEN a.all_feeds THEN '{}'::int[]
				ELSE ARRAY(SELECT g.feed_id FROM cfeed._sqled_write_grants g) END AS feed_ids
	FROM (SELECT cfeed._sqled_privileged()
				 OR EXISTS (SELECT FROM cfeed._sqled_write_grants g WHERE g.feed_id IS NULL) AS all_feeds) a;
COMMENT ON VIEW cfeed._sqled_writable_feeds IS 'internal (SQL edition): whether the current user may write every feed, else the feeds it may write';
GRANT SELECT ON cfeed._sqled_writable_feeds TO PUBLIC;

CREATE VIEW cfeed._sqled_knowable_feeds WITH (security_barrier = true) AS
	SELECT r.all_feeds OR w.all_feeds AS all_feeds,
		   CASE WHEN r.all_feeds OR w.all_feeds THEN '{}'::int[]
				ELSE r.feed_ids OPERATOR(pg_catalog.||) w.feed_ids END AS feed_ids
	FROM cfeed._sqled_readable_feeds r, cfeed._sqled_writable_feeds w;
COMMENT ON VIEW cfeed._sqled_knowable_feeds IS 'internal (SQL edition): whether the current user may read or write every feed, else the feeds it may read or write';
GRANT SELECT ON cfeed._sqled_knowable_feeds TO PUBLIC;

/*
 * The shards of the feeds the current user may read, and of those it may
 * write, by the branches above.
 */
CREATE VIEW cfeed._sqled_readable_shards WITH (security_barrier = true) AS
	SELECT s.feed_id, s.shard, s.start_sequence_number, s.closed
	FROM cfeed._sqled_readable_feeds a
	CROSS JOIN LATERAL (
		SELECT s.feed_id, s.shard, s.start_sequence_number, s.closed FROM cfeed.shard_config s WHERE a.all_feeds
		UNION ALL
		SELECT s.feed_id, s.shard, s.start_sequence_number, s.closed FROM cfeed.shard_config s WHERE s.feed_id OPERATOR(pg_catalog.=) ANY (a.feed_ids)) s;
COMMENT ON VIEW cfeed._sqled_readable_shards IS 'internal (SQL edition): the shards of the feeds the current user may read';
GRANT SELECT ON cfeed._sqled_readable_shards TO PUBLIC;

CREATE VIEW cfeed._sqled_writable_shards WITH (security_barrier = true) AS
	SELECT s.feed_id, s.shard, s.start_sequence_number, s.closed
	FROM cfeed._sqled_writable_feeds a
	CROSS JOIN LATERAL (
		SELECT s.feed_id, s.shard, s.start_sequence_number, s.closed FROM cfeed.shard_config s WHERE a.all_feeds
		UNION ALL
		SELECT s.feed_id, s.shard, s.start_sequence_number, s.closed FROM cfeed.shard_config s WHERE s.feed_id OPERATOR(pg_catalog.=) ANY (a.feed_ids)) s;
COMMENT ON VIEW cfeed._sqled_writable_shards IS 'internal (SQL edition): the shards of the feeds the current user may write';
GRANT SELECT ON cfeed._sqled_writable_shards TO PUBLIC;

/*
 * cfeed._sqled_shard_history: of the shards of the feeds the current user
 * may write, whether each has history: a change numbered at or below its
 * start value, looked up below the read policy (the view reads
 * cfeed.change as its owner: backfill's caller may write the feed, not
 * read it).  Before 1.9's fix a SECURITY DEFINER function answered any
 * role of any shard and number.
 */
CREATE VIEW cfeed._sqled_shard_history WITH (security_barrier = true) AS
	SELECT s.feed_id, s.shard,
		   EXISTS (SELECT FROM cfeed.change c
				   WHERE c.feed_id OPERATOR(pg_catalog.=) s.feed_id AND c.shard OPERATOR(pg_catalog.=) s.shard
					 AND c.change_sequence_number OPERATOR(pg_catalog.<=) s.start_sequence_number) AS history
	FROM cfeed._sqled_writable_shards s;
COMMENT ON VIEW cfeed._sqled_shard_history IS 'internal (SQL edition): of the shards of the feeds the current user may write, whether each has a change numbered at or below its start value, whoever may see it';
GRANT SELECT ON cfeed._sqled_shard_history TO PUBLIC;

/*
 * cfeed._sqled_shard_ends: of the shards of the feeds the current user may
 * read, whether each is closed, its highest stamped number and whether a
 * change of it is left to stamp, looked up below the read policy (the view
 * reads cfeed.change as its owner): cfeed._read_to_end's answer, which a
 * member that does not see a parent's last changes must not get wrong.
 * Tells a reader of a feed only what cfeed.head and cfeed.stats tell it
 * (before 1.9's fix a SECURITY DEFINER function answered any role of any
 * feed).
 */
CREATE VIEW cfeed._sqled_shard_ends WITH (security_barrier = true) AS
	SELECT s.feed_id, s.shard, s.closed,
		   (SELECT pg_catalog.max(c.change_sequence_number) FROM cfeed.change c
			WHERE c.feed_id OPERATOR(pg_catalog.=) s.feed_id AND c.shard OPERATOR(pg_catalog.=) s.shard
			  AND c.change_sequence_number IS NOT NULL) AS last_number,
		   EXISTS (SELECT FROM cfeed.change c
				   WHERE c.feed_id OPERATOR(pg_catalog.=) s.feed_id AND c.shard OPERATOR(pg_catalog.=) s.shard
					 AND c.change_sequence_number IS NULL) AS pending
	FROM cfeed._sqled_readable_shards s;
COMMENT ON VIEW cfeed._sqled_shard_ends IS 'internal (SQL edition): of the shards of the feeds the current user may read, whether closed, the highest stamped number and whether a change is left to stamp, whoever may see the changes';
GRANT SELECT ON cfeed._sqled_shard_ends TO PUBLIC;

/*
 * cfeed._sqled_check_shard: 42704 for an unknown feed or shard, as the
 * caller, of the feeds it may read or write (the functions that call it
 * refuse the others first, 42501).
 */
CREATE FUNCTION cfeed._sqled_check_shard(feed_id int, shard int) RETURNS void
	LANGUAGE plpgsql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF EXISTS (SELECT FROM cfeed._sqled_known_shards s
			   WHERE s.feed_id = _sqled_check_shard.feed_id AND s.shard = _sqled_check_shard.shard) THEN
		RETURN;
	END IF;
	IF NOT cfeed._sqled_feed_exists(_sqled_check_shard.feed_id) THEN
		RAISE EXCEPTION 'feed % does not exist', feed_id
			USING ERRCODE = '42704', HINT = 'Create it with cfeed.create_feed().';
	END IF;
	RAISE EXCEPTION 'shard % of feed % does not exist', shard, feed_id
		USING ERRCODE = '42704', HINT = 'Shards are numbered from 0; add one by inserting into cfeed.shard.';
END
$fn$;
COMMENT ON FUNCTION cfeed._sqled_check_shard(int, int) IS 'internal (SQL edition): raises 42704 for an unknown feed or shard';

/*
 * cfeed._sqled_check_read: what the C read functions check first: SELECT
 * on a table of cfeed (42501, as for a query of it; none for a null
 * relname), and a read grant of the feed (42501), as the caller.
 */
CREATE FUNCTION cfeed._sqled_check_read(feed_id int, relname text) RETURNS void
	LANGUAGE plpgsql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF relname IS NOT NULL AND NOT pg_catalog.has_table_privilege(pg_catalog.format('cfeed.%I', relname), 'SELECT') THEN
		RAISE EXCEPTION 'permission denied for table %', relname USING ERRCODE = '42501';
	END IF;
	IF NOT cfeed._may_read(feed_id) THEN
		RAISE EXCEPTION 'permission denied for feed %', feed_id
			USING ERRCODE = '42501',
				  DETAIL = pg_catalog.format('Role "%s" has no read grant on feed %s.', CURRENT_USER, feed_id),
				  HINT = pg_catalog.format('The extension''s owner grants it with cfeed.grant_read(%s, role).', feed_id);
	END IF;
END
$fn$;
COMMENT ON FUNCTION cfeed._sqled_check_read(int, text) IS 'internal (SQL edition): 42501 unless the current user may SELECT the table of cfeed and read the feed';

/*
 * cfeed._sqled_check_wait(fn, ms, argname): the wait argument of cfeed.read
 * and cfeed.wait, as src/spi.c (cfeed_check_wait): 22023 when negative,
 * 25000 when it would wait in a REPEATABLE READ or SERIALIZABLE transaction.
 */
CREATE FUNCTION cfeed._sqled_check_wait(fn text, ms int, argname text) RETURNS void
	LANGUAGE plpgsql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF ms < 0 THEN
		RAISE EXCEPTION 'argument "%" must not be negative, got %', argname, ms
			USING ERRCODE = '22023', HINT = pg_catalog.format('Pass %s => 0 or more.', argname);
	END IF;
	IF ms > 0 AND pg_catalog.current_setting('transaction_isolation') IN ('repeatable read', 'serializable') THEN
		RAISE EXCEPTION '% cannot wait in a REPEATABLE READ or SERIALIZABLE transaction', fn
			USING ERRCODE = '25000',
				  DETAIL = 'The transaction''s snapshot would never show the changes it waits for.',
				  HINT = pg_catalog.format('Pass %s => 0, or wait in a READ COMMITTED transaction.', argname);
	END IF;
END
$fn$;
COMMENT ON FUNCTION cfeed._sqled_check_wait(text, int, text) IS 'internal (SQL edition): 22023 for a negative wait, 25000 for one under REPEATABLE READ or SERIALIZABLE';

/*
 * cfeed._sqled_check_write: cfeed.publish's 42501 unless the current user
 * may write the feed (src/read_access.c, cfeed_check_write).
 */
CREATE FUNCTION cfeed._sqled_check_write(feed_id int) RETURNS void
	LANGUAGE plpgsql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF NOT cfeed._may_write(feed_id) THEN
		RAISE EXCEPTION 'permission denied to write feed %', feed_id
			USING ERRCODE = '42501',
				  DETAIL = pg_catalog.format('Role "%s" has no write grant on feed %s.', CURRENT_USER, feed_id),
				  HINT = pg_catalog.format('The extension''s owner grants it with cfeed.grant_write(%s, role).', feed_id);
	END IF;
END
$fn$;
COMMENT ON FUNCTION cfeed._sqled_check_write(int) IS 'internal (SQL edition): 42501 unless the current user may write the feed';

/*
 * cfeed._sqled_check_known: 42501 (cfeed._sqled_check_read's) unless the
 * current user may read or write the feed (src/feed.c, check_known).
 */
CREATE FUNCTION cfeed._sqled_check_known(feed_id int) RETURNS void
	LANGUAGE plpgsql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF NOT cfeed._may_write(feed_id) THEN
		PERFORM cfeed._sqled_check_read(feed_id, NULL);
	END IF;
END
$fn$;
COMMENT ON FUNCTION cfeed._sqled_check_known(int) IS 'internal (SQL edition): 42501 unless the current user may read or write the feed';

/*
 * cfeed._sqled_head: a shard's head as of a new snapshot (the statement's
 * own in a function called from a STABLE one), through cfeed.shard (the
 * caller's privileges and read grants apply); null for a shard that is
 * not there.
 */
CREATE FUNCTION cfeed._sqled_head(feed_id int, shard int) RETURNS bigint
	LANGUAGE sql VOLATILE PARALLEL SAFE
	AS $fn$
	SELECT s.last_change_sequence_number FROM cfeed.shard s
	WHERE s.feed_id OPERATOR(pg_catalog.=) $1 AND s.shard OPERATOR(pg_catalog.=) $2
$fn$;
COMMENT ON FUNCTION cfeed._sqled_head(int, int) IS 'internal (SQL edition): a shard''s head as of a new snapshot';

/*
 * cfeed._sqled_wait_for_head: sleep until a shard's head passes cursor or
 * timeout_ms elapses, or the shard has ended (closed, nothing left to
 * stamp: no change will come, src/wait.c), re-reading it with a new
 * snapshot (the head and ended in one) every
 * cfeed.poll_interval (milliseconds, or with a unit; default 10 ms; the
 * SQL edition has no shared memory to sleep on); returns the last head seen.  Refused in
 * REPEATABLE READ and SERIALIZABLE, whose snapshot would never show it.
 */
CREATE FUNCTION cfeed._sqled_wait_for_head(feed_id int, shard int, cursor bigint, timeout_ms int)
	RETURNS bigint
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_end timestamptz := pg_catalog.clock_timestamp()
		+ pg_catalog.make_interval(secs => timeout_ms / 1000.0);
	v_setting text := NULLIF(pg_catalog.current_setting('cfeed.poll_interval', true), '');
	v_poll double precision;
	v_head bigint;
	v_ended bool;
	v_left double precision;
BEGIN
	-- milliseconds, or with a unit ('10ms', '0.5s'), from 1 to 10000 ms: as
	-- the C edition's setting (the SQL edition's is a placeholder, which
	-- PostgreSQL does not check when it is set)
	IF v_setting IS NULL THEN
		v_poll := 10;
	ELSIF v_setting ~ '^\s*[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?\s*$' THEN
		v_poll := v_setting::double precision;
	ELSE
		BEGIN
			v_poll := EXTRACT(epoch FROM v_setting::interval) * 1000;
		EXCEPTION WHEN data_exception THEN
			v_poll := NULL;
		END;
	END IF;
	IF v_poll IS NULL OR v_poll < 1 OR v_poll > 10000 THEN
		RAISE EXCEPTION 'invalid value for parameter "cfeed.poll_interval": "%"', v_setting
			USING ERRCODE = '22023',
				  HINT = 'Set it from 1 to 10000 milliseconds, or with a unit (''10ms'', ''0.5s''), as the C edition''s setting.';
	END IF;
	v_poll := v_poll / 1000.0;
	LOOP
		SELECT s.last_change_sequence_number, s.ended INTO v_head, v_ended
		FROM cfeed.shard s
		WHERE s.feed_id = _sqled_wait_for_head.feed_id AND s.shard = _sqled_wait_for_head.shard;
		IF NOT FOUND THEN
			RAISE EXCEPTION 'shard % of feed % was dropped while waiting', shard, feed_id
				USING ERRCODE = '42704';
		END IF;
		v_left := EXTRACT(epoch FROM v_end - pg_catalog.clock_timestamp());
		EXIT WHEN v_head > cursor OR v_ended OR v_left <= 0;
		PERFORM pg_catalog.pg_sleep(LEAST(v_poll, v_left));
	END LOOP;
	RETURN v_head;
END
$fn$;
COMMENT ON FUNCTION cfeed._sqled_wait_for_head(int, int, bigint, int) IS 'internal (SQL edition): polls a shard''s head until it passes the cursor, the shard has ended or the time is up';

/*
 * cfeed._sqled_check_number: a writer-set change_sequence_number (history,
 * as src/guard.c): at or below the shard's start value and from 1 (22023
 * otherwise), except the owner's restored rows.  Nothing to check for a
 * missing shard (reported before, or not checked: replica mode).
 */
CREATE FUNCTION cfeed._sqled_check_number(feed_id int, shard int, number bigint, restored bool)
	RETURNS void
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_start bigint;
BEGIN
	IF restored AND cfeed._sqled_owner() THEN
		RETURN;
	END IF;
	SELECT s.start_sequence_number INTO v_start FROM cfeed._sqled_shard_starts s
	WHERE s.feed_id = _sqled_check_number.feed_id AND s.shard = _sqled_check_number.shard;
	IF NOT FOUND THEN
		RETURN;
	END IF;
	IF number > v_start THEN
		RAISE EXCEPTION 'change_sequence_number % is outside the migration range of shard % of feed %',
			number, shard, feed_id
			USING ERRCODE = '22023',
				  DETAIL = pg_catalog.format('Numbers above the shard''s start value %s are assigned by the sweeper.', v_start),
				  HINT = pg_catalog.format('Leave change_sequence_number null, or backfill history at numbers at or below %s.', v_start);
	END IF;
	IF number < 1 THEN
		RAISE EXCEPTION 'change_sequence_number % is below the migration range of shard % of feed %',
			number, shard, feed_id
			USING ERRCODE = '22023',
				  DETAIL = 'History is numbered from 1 up to the shard''s start value.',
				  HINT = 'Number history rows from 1, or leave change_sequence_number null.';
	END IF;
END
$fn$;
COMMENT ON FUNCTION cfeed._sqled_check_number(int, int, bigint, bool) IS 'internal (SQL edition): refuses (22023) a writer-set number outside its shard''s migration range';

/*
 * The start values of the shards the current user may write (for the
 * guards' number checks), whatever its privileges on cfeed.shard_config.
 */
CREATE VIEW cfeed._sqled_shard_starts WITH (security_barrier = true) AS
	SELECT s.feed_id, s.shard, s.start_sequence_number, s.closed FROM cfeed._sqled_writable_shards s;
COMMENT ON VIEW cfeed._sqled_shard_starts IS 'internal (SQL edition): the start values of the shards the current user may write, and whether they are closed';
GRANT SELECT ON cfeed._sqled_shard_starts TO PUBLIC;

/*
 * The feeds and shards the caller may know of: those of the feeds it may
 * read or write, as the C functions that name a feed tell them (42501 for
 * the others, whose existence and layout they do not tell).  The shards'
 * view tests each feed once, not each shard.
 */
CREATE VIEW cfeed._sqled_known_feeds WITH (security_barrier = true) AS
	SELECT f.feed_id, f.name
	FROM cfeed._sqled_knowable_feeds a
	CROSS JOIN LATERAL (
		SELECT f.feed_id, f.name FROM cfeed.feed f WHERE a.all_feeds
		UNION ALL
		SELECT f.feed_id, f.name FROM cfeed.feed f WHERE f.feed_id OPERATOR(pg_catalog.=) ANY (a.feed_ids)) f;
COMMENT ON VIEW cfeed._sqled_known_feeds IS 'internal (SQL edition): the feeds the current user may read or write, with their names';
GRANT SELECT ON cfeed._sqled_known_feeds TO PUBLIC;

CREATE VIEW cfeed._sqled_known_shards WITH (security_barrier = true) AS
	SELECT s.feed_id, s.shard, s.closed
	FROM cfeed._sqled_knowable_feeds a
	CROSS JOIN LATERAL (
		SELECT s.feed_id, s.shard, s.closed FROM cfeed.shard_config s WHERE a.all_feeds
		UNION ALL
		SELECT s.feed_id, s.shard, s.closed FROM cfeed.shard_config s WHERE s.feed_id OPERATOR(pg_catalog.=) ANY (a.feed_ids)) s;
COMMENT ON VIEW cfeed._sqled_known_shards IS 'internal (SQL edition): the shards of the feeds the current user may read or write, and whether they are closed';
GRANT SELECT ON cfeed._sqled_known_shards TO PUBLIC;

/*
 * cfeed._sqled_feed_exists: whether a feed exists, for a writer's missing
 * shard (as src/catalog.c reads it: "feed %d does not exist" or "shard %d
 * of feed %d does not exist"), of the feeds the caller may know of.
 */
CREATE FUNCTION cfeed._sqled_feed_exists(feed_id int) RETURNS bool
	LANGUAGE sql STABLE PARALLEL SAFE
	AS $fn$
	SELECT EXISTS (SELECT FROM cfeed._sqled_known_feeds f WHERE f.feed_id OPERATOR(pg_catalog.=) $1)
$fn$;
COMMENT ON FUNCTION cfeed._sqled_feed_exists(int) IS 'internal (SQL edition): whether a feed the current user may read or write exists';

/*
 * Where a group's new lease of each shard of the feeds the current user
 * may read starts (cfeed._lease_start): just before the shard's first
 * stored change, found below the read policy (the view's owner reads
 * cfeed.change), so that a member that may not read some tables' row
 * images does not start its group after their changes.  A security
 * barrier: a caller's own condition sees no other feed's shards.
 */
CREATE VIEW cfeed._sqled_lease_starts WITH (security_barrier = true) AS
	SELECT s.feed_id, s.shard,
		   (SELECT GREATEST(c.change_sequence_number, -9223372036854775807) OPERATOR(pg_catalog.-) 1
			FROM cfeed.change c
			WHERE c.feed_id OPERATOR(pg_catalog.=) s.feed_id AND c.shard OPERATOR(pg_catalog.=) s.shard
			  AND c.change_sequence_number IS NOT NULL
			ORDER BY c.change_sequence_number LIMIT 1) AS lease_start
	FROM cfeed._sqled_readable_shards s;
COMMENT ON VIEW cfeed._sqled_lease_starts IS 'internal (SQL edition): where a group''s new lease of each shard of the feeds the current user may read starts (cfeed._lease_start)';
GRANT SELECT ON cfeed._sqled_lease_starts TO PUBLIC;

/*
 * The pending changes of each shard of the feeds the current user may
 * read, counted below the read policy (a change whose row image the caller
 * may not read counts too, as in the C extension), for cfeed._pending
 * (cfeed.stats): every shard of the SQL edition is stored in rows.  A
 * security barrier: a caller's own condition sees no other feed's counts.
 */
CREATE VIEW cfeed._sqled_unstamped WITH (security_barrier = true) AS
	SELECT p.feed_id, p.shard, p.pending, p.oldest_written_at
	FROM (SELECT c.feed_id, c.shard, pg_catalog.count(*) AS pending,
				 pg_catalog.min(c.written_at) AS oldest_written_at
		  FROM cfeed._sqled_readable_feeds a
		  CROSS JOIN LATERAL (
			SELECT c.feed_id, c.shard, c.written_at FROM cfeed.change c
			WHERE a.all_feeds AND c.change_sequence_number IS NULL
			UNION ALL
			SELECT c.feed_id, c.shard, c.written_at FROM cfeed.change c
			WHERE c.feed_id OPERATOR(pg_catalog.=) ANY (a.feed_ids) AND c.change_sequence_number IS NULL) c
		  GROUP BY c.feed_id, c.shard) p;
COMMENT ON VIEW cfeed._sqled_unstamped IS 'internal (SQL edition): each shard''s changes not stamped yet and the oldest one''s written_at, of the feeds the current user may read';
GRANT SELECT ON cfeed._sqled_unstamped TO PUBLIC;

/*
 * Calls as the owner, checked as the caller: cfeed.fail and
 * cfeed.resolve_dead_letter (src/dead_letters.c) check what the caller may
 * do (a read grant on the feed and a privilege on a table of cfeed), then
 * run cfeed._fail or cfeed._resolve_dead_letter as the owner of cfeed's
 * tables.  A SECURITY DEFINER function cannot check its caller (inside it
 * the current user is the owner), and one that any role may call would let
 * every role do the work unchecked.  So each call is an INSERT into a view
 * (cfeed._sqled_fail, cfeed._sqled_resolve_dead_letter) whose INSTEAD OF
 * triggers fire in the order of their names: the first runs as the caller
 * and checks it, the second is SECURITY DEFINER and does the work, putting
 * its result into the row that RETURNING shows.  A trigger function can be
 * called only by its triggers, which only the owner makes (making one needs
 * EXECUTE on it, revoked from PUBLIC), and an INSERT into the view fires
 * both: whoever inserts into the view directly is checked as cfeed.fail's
 * caller is.  The views hold no rows.  As in the C edition, a null argument
 * skips the checks: the internal function then raises 22004 first.
 */

/*
 * cfeed._sqled_replica_role: 55000 for a call whose view's triggers did not
 * fire: under session_replication_role = replica the triggers enabled
 * for the origin (the default) do not fire, and a view's triggers cannot be
 * made ENABLE ALWAYS.
 */
CREATE FUNCTION cfeed._sqled_replica_role(fn text) RETURNS void
	LANGUAGE plpgsql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	RAISE EXCEPTION '% cannot run while session_replication_role is "%"', fn,
		pg_catalog.current_setting('session_replication_role')
		USING ERRCODE = '55000',
			  DETAIL = 'The SQL edition runs it through the triggers of a view, which do not fire then.',
			  HINT = 'Call it with session_replication_role = origin.';
END
$fn$;
COMMENT ON FUNCTION cfeed._sqled_replica_role(text) IS 'internal (SQL edition): raises 55000 for a call made through a view whose triggers did not fire (session_replication_role = replica)';

/*
 * cfeed._sqled_check_call: 42501 unless the current user may read the feed
 * and has the privilege on the table of cfeed, checked in that order
 * (src/dead_letters.c).
 */
CREATE FUNCTION cfeed._sqled_check_call(feed_id int, relname text, privilege text) RETURNS void
	LANGUAGE plpgsql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	PERFORM cfeed._sqled_check_read(_sqled_check_call.feed_id, NULL);
	IF NOT pg_catalog.has_table_privilege(pg_catalog.format('cfeed.%I', relname), privilege) THEN
		RAISE EXCEPTION 'permission denied for table %', relname USING ERRCODE = '42501';
	END IF;
END
$fn$;
COMMENT ON FUNCTION cfeed._sqled_check_call(int, text, text) IS 'internal (SQL edition): 42501 unless the current user may read the feed and has the privilege on the table of cfeed';

CREATE VIEW cfeed._sqled_fail AS
	SELECT NULL::text AS group_name, NULL::int AS feed_id, NULL::int AS shard, NULL::text AS owner,
		   NULL::bigint AS epoch, NULL::bigint AS change_sequence_number, NULL::text AS error,
		   NULL::int AS attempts, NULL::timestamptz AS retry_at, NULL::bool AS dead_letter,
		   NULL::oid AS reader
	WHERE false;
COMMENT ON VIEW cfeed._sqled_fail IS 'internal (SQL edition): cfeed.fail''s call: an INSERT of its arguments checks the caller, then runs cfeed._fail as the owner with the caller as its reader; RETURNING shows the result';
REVOKE ALL ON cfeed._sqled_fail FROM PUBLIC;
GRANT SELECT, INSERT ON cfeed._sqled_fail TO PUBLIC;

CREATE FUNCTION cfeed._sqled_fail_check() RETURNS trigger
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF pg_catalog.num_nulls(NEW.group_name, NEW.feed_id, NEW.shard, NEW.owner, NEW.epoch,
							NEW.change_sequence_number, NEW.error) = 0 THEN
		PERFORM cfeed._sqled_check_call(NEW.feed_id, 'lease', 'UPDATE');
	END IF;
	NEW.reader := pg_catalog.to_regrole(pg_catalog.quote_ident(CURRENT_USER))::pg_catalog.oid;
	RETURN NEW;
END
$fn$;
COMMENT ON FUNCTION cfeed._sqled_fail_check() IS 'internal (SQL edition): cfeed.fail''s checks, as the caller: a read grant on the feed and UPDATE on cfeed.lease; the caller becomes cfeed._fail''s reader';
REVOKE ALL ON FUNCTION cfeed._sqled_fail_check() FROM PUBLIC;

CREATE FUNCTION cfeed._sqled_fail_run() RETURNS trigger
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	SELECT f.attempts, f.retry_at, f.dead_letter INTO NEW.attempts, NEW.retry_at, NEW.dead_letter
	FROM cfeed._fail(NEW.group_name, NEW.feed_id, NEW.shard, NEW.owner, NEW.epoch,
					 NEW.change_sequence_number, NEW.error, NEW.reader) f;
	RETURN NEW;
END
$fn$;
COMMENT ON FUNCTION cfeed._sqled_fail_run() IS 'internal (SQL edition): cfeed.fail''s work, as the owner, after cfeed._sqled_fail_check';
REVOKE ALL ON FUNCTION cfeed._sqled_fail_run() FROM PUBLIC;

-- after the run, as the caller: a change whose row image the caller may
-- not read (cfeed.read leaves it out) is answered as one that does not
-- exist (42704), which undoes the failure recorded (src/dead_letters.c,
-- check_visible)
CREATE FUNCTION cfeed._sqled_fail_visible() RETURNS trigger
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF NOT EXISTS (SELECT FROM cfeed.read(NEW.feed_id, NEW.shard, NEW.change_sequence_number - 1, 1) r
				   WHERE r.change_sequence_number = NEW.change_sequence_number) THEN
		RAISE EXCEPTION 'change % of shard % of feed % does not exist', NEW.change_sequence_number, NEW.shard, NEW.feed_id
			USING ERRCODE = '42704',
				  HINT = 'Report the change_sequence_number of a change cfeed.read_group() returned.';
	END IF;
	RETURN NEW;
END
$fn$;
COMMENT ON FUNCTION cfeed._sqled_fail_visible() IS 'internal (SQL edition): cfeed.fail''s last check, as the caller: the change is one cfeed.read gives the caller (42704 otherwise, as for a change that does not exist)';
REVOKE ALL ON FUNCTION cfeed._sqled_fail_visible() FROM PUBLIC;

CREATE TRIGGER fail_1_check INSTEAD OF INSERT ON cfeed._sqled_fail
	FOR EACH ROW EXECUTE FUNCTION cfeed._sqled_fail_check();
CREATE TRIGGER fail_2_run INSTEAD OF INSERT ON cfeed._sqled_fail
	FOR EACH ROW EXECUTE FUNCTION cfeed._sqled_fail_run();
CREATE TRIGGER fail_3_visible INSTEAD OF INSERT ON cfeed._sqled_fail
	FOR EACH ROW EXECUTE FUNCTION cfeed._sqled_fail_visible();

CREATE VIEW cfeed._sqled_resolve_dead_letter AS
	SELECT NULL::text AS group_name, NULL::int AS feed_id, NULL::int AS shard,
		   NULL::bigint AS change_sequence_number, NULL::bool AS resolved
	WHERE false;
COMMENT ON VIEW cfeed._sqled_resolve_dead_letter IS 'internal (SQL edition): cfeed.resolve_dead_letter''s call: an INSERT of its arguments checks the caller, then runs cfeed._resolve_dead_letter as the owner; RETURNING shows resolved';
REVOKE ALL ON cfeed._sqled_resolve_dead_letter FROM PUBLIC;
GRANT SELECT, INSERT ON cfeed._sqled_resolve_dead_letter TO PUBLIC;

CREATE FUNCTION cfeed._sqled_resolve_dead_letter_check() RETURNS trigger
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF pg_catalog.num_nulls(NEW.group_name, NEW.feed_id, NEW.shard, NEW.change_sequence_number) = 0 THEN
		PERFORM cfeed._sqled_check_call(NEW.feed_id, 'failed_change', 'DELETE');
	END IF;
	RETURN NEW;
END
$fn$;
COMMENT ON FUNCTION cfeed._sqled_resolve_dead_letter_check() IS 'internal (SQL edition): cfeed.resolve_dead_letter''s checks, as the caller: a read grant on the feed and DELETE on cfeed.failed_change';
REVOKE ALL ON FUNCTION cfeed._sqled_resolve_dead_letter_check() FROM PUBLIC;

CREATE FUNCTION cfeed._sqled_resolve_dead_letter_run() RETURNS trigger
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	PERFORM cfeed._resolve_dead_letter(NEW.group_name, NEW.feed_id, NEW.shard, NEW.change_sequence_number);
	NEW.resolved := true;
	RETURN NEW;
END
$fn$;
COMMENT ON FUNCTION cfeed._sqled_resolve_dead_letter_run() IS 'internal (SQL edition): cfeed.resolve_dead_letter''s work, as the owner, after cfeed._sqled_resolve_dead_letter_check';
REVOKE ALL ON FUNCTION cfeed._sqled_resolve_dead_letter_run() FROM PUBLIC;

CREATE TRIGGER resolve_1_check INSTEAD OF INSERT ON cfeed._sqled_resolve_dead_letter
	FOR EACH ROW EXECUTE FUNCTION cfeed._sqled_resolve_dead_letter_check();
CREATE TRIGGER resolve_2_run INSTEAD OF INSERT ON cfeed._sqled_resolve_dead_letter
	FOR EACH ROW EXECUTE FUNCTION cfeed._sqled_resolve_dead_letter_run();

/*
 * Feed epochs (src/epoch.c, docs/replication.md): the first sweep that
 * stamps on a new (cluster, timeline, server start, database) records a
 * row of cfeed.epoch and every shard's head in cfeed.epoch_head, with the
 * C edition's key, read through SQL:
 *
 *   system identifier  pg_control_system() (0 where a service refuses it)
 *   timeline           the WAL insertion timeline: the first 8 hex digits
 *                      of pg_walfile_name(pg_current_wal_lsn()) (0 where
 *                      the WAL functions are refused)
 *   server start       pg_postmaster_start_time()
 *   database           the current database's oid
 *
 * Without the timeline, a promotion still begins an epoch: the promoted
 * standby's server started at another time than the old primary's.
 */

/*
 * cfeed._sqled_epoch_begin: called by cfeed.sweep (as the owner) after it
 * stamped the shards feeds[i]/shards[i] with counts[i] changes, in its
 * transaction: when this session has not yet seen this key's epoch
 * committed, look it up (and remember it, in the session setting
 * cfeed_sqled.epoch, undone by a rollback); without one, record one with
 * every shard's head before this sweep (the stamped shards' heads less
 * their counts: the numbers go on gaplessly from the head).  A sweep of
 * another group that records the same key at once waits for the first one's
 * row (the unique key) and records nothing; either one's heads are from
 * before the other's stamps, which were not committed when it read them.
 */
CREATE FUNCTION cfeed._sqled_epoch_begin(feeds int[], shards int[], counts int[]) RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_system bigint;
	v_timeline int;
	v_start timestamptz := pg_catalog.pg_postmaster_start_time();
	v_database oid;
	v_key text;
BEGIN
	BEGIN
		SELECT c.system_identifier INTO v_system FROM pg_catalog.pg_control_system() c;
	EXCEPTION WHEN insufficient_privilege OR undefined_function THEN
		v_system := 0;
	END;
	BEGIN
		v_timeline := ('x' || pg_catalog.substr(pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_lsn()), 1, 8))
			::pg_catalog.bit(32)::int;
	EXCEPTION WHEN insufficient_privilege OR undefined_function OR feature_not_supported THEN
		v_timeline := 0;
	END;
	SELECT d.oid INTO v_database FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database();
	v_key := pg_catalog.concat_ws('/', v_system, v_timeline, v_start, v_database);
	IF pg_catalog.current_setting('cfeed_sqled.epoch', true) = v_key THEN
		RETURN;
	END IF;
	IF EXISTS (SELECT FROM cfeed.epoch e
			   WHERE e.system_identifier = v_system AND e.timeline = v_timeline
				 AND e.server_start = v_start AND e.database = v_database) THEN
		PERFORM pg_catalog.set_config('cfeed_sqled.epoch', v_key, false);
		RETURN;
	END IF;
	WITH e AS (
		INSERT INTO cfeed.epoch (epoch, system_identifier, timeline, server_start, database)
		SELECT GREATEST(pg_catalog.max(x.epoch) + 1,
						(pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) * 1000000)::bigint),
			   v_system, v_timeline, v_start, v_database
		FROM cfeed.epoch x
		ON CONFLICT DO NOTHING
		RETURNING epoch)
	INSERT INTO cfeed.epoch_head (epoch, feed_id, shard, head)
	SELECT e.epoch, s.feed_id, s.shard, s.last_change_sequence_number - COALESCE(n.count, 0)
	FROM e, cfeed.shard s
	LEFT JOIN ROWS FROM (pg_catalog.unnest(feeds), pg_catalog.unnest(shards), pg_catalog.unnest(counts))
		AS n(feed_id, shard, count)
		ON n.feed_id = s.feed_id AND n.shard = s.shard;
END
$fn$;
COMMENT ON FUNCTION cfeed._sqled_epoch_begin(int[], int[], int[]) IS 'internal (SQL edition): after a sweep''s stamps, records a new feed epoch with every shard''s head before them, the first time on a (cluster, timeline, server start, database)';
REVOKE ALL ON FUNCTION cfeed._sqled_epoch_begin(int[], int[], int[]) FROM PUBLIC;

/*
 * cfeed.resume_cursor reads the epochs as the caller: the heads of the
 * feeds it may read (the view runs as its owner, cfeed._may_read as the
 * caller), and whether an epoch number is known (no feed's data).
 */
CREATE INDEX epoch_head_feed_idx ON cfeed.epoch_head (feed_id, shard);
COMMENT ON INDEX cfeed.epoch_head_feed_idx IS 'internal (SQL edition): the scan of cfeed._sqled_epoch_heads by the caller''s feeds (feed_id = ANY), which fetches no other feed''s heads';
CREATE VIEW cfeed._sqled_epoch_heads AS
	SELECT h.epoch, h.feed_id, h.shard, h.head
	FROM cfeed._sqled_readable_feeds a
	CROSS JOIN LATERAL (
		SELECT h.epoch, h.feed_id, h.shard, h.head FROM cfeed.epoch_head h WHERE a.all_feeds
		UNION ALL
		SELECT h.epoch, h.feed_id, h.shard, h.head FROM cfeed.epoch_head h WHERE h.feed_id OPERATOR(pg_catalog.=) ANY (a.feed_ids)) h;
ALTER VIEW cfeed._sqled_epoch_heads SET (security_barrier = true);
COMMENT ON VIEW cfeed._sqled_epoch_heads IS 'internal (SQL edition): the epoch heads of the feeds the current user may read';
GRANT SELECT ON cfeed._sqled_epoch_heads TO PUBLIC;

CREATE FUNCTION cfeed._sqled_epoch_known(epoch bigint) RETURNS bool
	LANGUAGE sql STABLE PARALLEL SAFE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
	SELECT EXISTS (SELECT FROM cfeed.epoch e WHERE e.epoch OPERATOR(pg_catalog.=) $1)
$fn$;
COMMENT ON FUNCTION cfeed._sqled_epoch_known(bigint) IS 'internal (SQL edition): whether this database has recorded the feed epoch';

/*
 * Sweep hints: a commit that wrote changes can wake `cfeed sweep` (and
 * cfeed.sweep_loop's waits) at once with a NOTIFY on channel cfeed_sweep,
 * one per INSERT statement (PostgreSQL folds a transaction's equal
 * notifications into one).  Off by default: every notifying commit takes
 * PostgreSQL's notification lock, which serializes the commits of all
 * notifying transactions of the cluster; without hints a sweeper polls.
 * Turn on with ALTER TABLE cfeed.change ENABLE TRIGGER change_sweep_hint.
 */
CREATE FUNCTION cfeed._sqled_sweep_hint() RETURNS trigger
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	-- not while the notification queue is nearly full, which would fail
	-- the writer's commit (the sweeper polls meanwhile)
	IF pg_catalog.pg_notification_queue_usage() <= 0.9 THEN
		PERFORM pg_catalog.pg_notify('cfeed_sweep', '');
	END IF;
	RETURN NULL;
END
$fn$;
COMMENT ON FUNCTION cfeed._sqled_sweep_hint() IS 'internal (SQL edition): NOTIFY cfeed_sweep after an INSERT into cfeed.change (trigger change_sweep_hint, off by default)';
REVOKE ALL ON FUNCTION cfeed._sqled_sweep_hint() FROM PUBLIC;
CREATE TRIGGER change_sweep_hint AFTER INSERT ON cfeed.change
	FOR EACH STATEMENT EXECUTE FUNCTION cfeed._sqled_sweep_hint();
ALTER TABLE cfeed.change DISABLE TRIGGER change_sweep_hint;

/*
 * Every shard of the SQL edition is stored in rows: its sweep numbers a
 * change by updating its row, and its reads read the rows.  Storage in
 * ranges (cfeed.stamp, the sweep groups' marks) is the C edition's
 * (docs/design.md): the setting cfeed.default_storage, a placeholder
 * here, is not looked at, and a shard stored in ranges is refused (23514).
 */
ALTER TABLE cfeed.shard_config ALTER COLUMN storage SET DEFAULT 'rows';
ALTER TABLE cfeed.shard_config ADD CONSTRAINT shard_config_sqled_rows_only
	CHECK (storage OPERATOR(pg_catalog.=) 'rows');

COMMIT;
