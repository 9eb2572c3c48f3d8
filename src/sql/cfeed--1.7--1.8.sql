/* src/sql/cfeed--1.7--1.8.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION cfeed UPDATE TO '1.8'" to load this file. \quit

/*
 * 1.8: trust boundaries (no role reaches past its grant).
 */

/* ---- write access: per-feed write grants, row images only from tracking ---- */

/*
 * Per-feed write access, the counterpart of read access: a role writes a
 * feed (the INSERT pattern, history rows, cfeed.publish, a tracked table,
 * cfeed.backfill, DELETE) when it is a superuser, has BYPASSRLS or the
 * privileges of the extension's owner, or has the privileges of a grantee
 * of the feed or of every feed in cfeed.write_grant; on top of the table
 * privileges, as before.  Up to 1.7 INSERT on cfeed.change wrote every
 * feed and DELETE deleted every feed's changes.
 */
CREATE TABLE cfeed.write_grant (
	grantee regrole NOT NULL,
	feed_id int REFERENCES cfeed.feed ON DELETE CASCADE,
	CONSTRAINT write_grant_feed_key UNIQUE (grantee, feed_id)
);
CREATE UNIQUE INDEX write_grant_every_feed_key ON cfeed.write_grant (grantee) WHERE feed_id IS NULL;
ALTER TABLE cfeed.write_grant REPLICA IDENTITY FULL;
COMMENT ON TABLE cfeed.write_grant IS 'per-feed write access: grantee may write feed_id (every feed when null); written by cfeed.grant_write and cfeed.revoke_write';
COMMENT ON COLUMN cfeed.write_grant.grantee IS 'the role granted (0, shown as -, for PUBLIC); members with its privileges write too';
COMMENT ON COLUMN cfeed.write_grant.feed_id IS 'the feed, or null for every feed (cfeed.grant_write_all)';
-- Grants of dropped roles are left out of dumps: their OIDs could name another role elsewhere.
SELECT pg_catalog.pg_extension_config_dump('cfeed.write_grant',
	'WHERE grantee::pg_catalog.oid OPERATOR(pg_catalog.=) 0 OR grantee::pg_catalog.oid IN (SELECT r.oid FROM pg_catalog.pg_roles r)');
-- every change to the grants makes every backend drop its cached decisions
CREATE TRIGGER write_grant_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON cfeed.write_grant
	FOR EACH STATEMENT EXECUTE FUNCTION cfeed._read_grant_changed();
ALTER TABLE cfeed.write_grant ENABLE ALWAYS TRIGGER write_grant_changed;
COMMENT ON FUNCTION cfeed._read_grant_changed() IS 'internal: makes every backend forget its access decisions when cfeed.read_grant or cfeed.write_grant changes';

CREATE FUNCTION cfeed._may_write(feed_id int) RETURNS bool
	LANGUAGE c STABLE PARALLEL SAFE SUPPORT cfeed._may_read_support
	AS 'MODULE_PATHNAME', 'cfeed_may_write';
COMMENT ON FUNCTION cfeed._may_write(int) IS 'internal: whether the current user may write the feed (false for null)';

/*
 * The grant and revoke functions of both kinds share two helpers, which
 * write the grants table named (as the caller: only the extension's owner
 * has INSERT and DELETE on them).  Both check the role (42704 for an OID
 * that names none) and forget the grants of roles dropped since.
 */
CREATE FUNCTION cfeed._grant_access(grants regclass, feed_id int, role regrole) RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	PERFORM cfeed._check_role(_grant_access.role);
	IF _grant_access.feed_id IS NOT NULL THEN
		IF NOT EXISTS (SELECT FROM cfeed.feed f WHERE f.feed_id = _grant_access.feed_id) THEN
			RAISE EXCEPTION 'feed % does not exist', _grant_access.feed_id
				USING ERRCODE = '42704', HINT = 'Create it with cfeed.create_feed().';
		END IF;
	END IF;
	EXECUTE format('DELETE FROM %s g WHERE g.grantee <> 0 AND g.grantee::oid NOT IN (SELECT r.oid FROM pg_roles r)',
				   _grant_access.grants);
	EXECUTE format('INSERT INTO %s (grantee, feed_id) VALUES ($1, $2) ON CONFLICT DO NOTHING', _grant_access.grants)
		USING _grant_access.role, _grant_access.feed_id;
END
$fn$;
COMMENT ON FUNCTION cfeed._grant_access(regclass, int, regrole) IS 'internal: adds a grant of feed_id (every feed when null) to role in cfeed.read_grant or cfeed.write_grant';

CREATE FUNCTION cfeed._revoke_access(grants regclass, feed_id int, role regrole) RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	PERFORM cfeed._check_role(_revoke_access.role);
	EXECUTE format('DELETE FROM %s g WHERE (g.grantee = $1 AND g.feed_id IS NOT DISTINCT FROM $2)'
				   ' OR (g.grantee <> 0 AND g.grantee::oid NOT IN (SELECT r.oid FROM pg_roles r))',
				   _revoke_access.grants)
		USING _revoke_access.role, _revoke_access.feed_id;
END
$fn$;
COMMENT ON FUNCTION cfeed._revoke_access(regclass, int, regrole) IS 'internal: removes the grant of feed_id (every feed when null) to role from cfeed.read_grant or cfeed.write_grant';

CREATE FUNCTION cfeed.grant_write(feed_id int, role regrole) RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF grant_write.feed_id IS NULL THEN PERFORM cfeed._null_arg('feed_id'); END IF;
	IF grant_write.role IS NULL THEN PERFORM cfeed._null_arg('role'); END IF;
	PERFORM cfeed._grant_access('cfeed.write_grant', grant_write.feed_id, grant_write.role);
END
$fn$;
COMMENT ON FUNCTION cfeed.grant_write(int, regrole) IS 'lets the role (0: PUBLIC) and its members write the feed';

CREATE FUNCTION cfeed.revoke_write(feed_id int, role regrole) RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF revoke_write.feed_id IS NULL THEN PERFORM cfeed._null_arg('feed_id'); END IF;
	IF revoke_write.role IS NULL THEN PERFORM cfeed._null_arg('role'); END IF;
	PERFORM cfeed._revoke_access('cfeed.write_grant', revoke_write.feed_id, revoke_write.role);
END
$fn$;
COMMENT ON FUNCTION cfeed.revoke_write(int, regrole) IS 'takes back cfeed.grant_write of the feed to the role';

CREATE FUNCTION cfeed.grant_write_all(role regrole) RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF grant_write_all.role IS NULL THEN PERFORM cfeed._null_arg('role'); END IF;
	PERFORM cfeed._grant_access('cfeed.write_grant', NULL, grant_write_all.role);
END
$fn$;
COMMENT ON FUNCTION cfeed.grant_write_all(regrole) IS 'lets the role (0: PUBLIC) and its members write every feed, present and future';

CREATE FUNCTION cfeed.revoke_write_all(role regrole) RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF revoke_write_all.role IS NULL THEN PERFORM cfeed._null_arg('role'); END IF;
	PERFORM cfeed._revoke_access('cfeed.write_grant', NULL, revoke_write_all.role);
END
$fn$;
COMMENT ON FUNCTION cfeed.revoke_write_all(regrole) IS 'takes back cfeed.grant_write_all of the role (its grants of single feeds stay)';

/*
 * Existing writers keep writing: every role that holds INSERT or DELETE on
 * cfeed.change (PUBLIC included) gets a grant on every feed.  Take it back
 * with cfeed.revoke_write_all and grant single feeds (docs/security.md).
 */
INSERT INTO cfeed.write_grant (grantee, feed_id)
SELECT DISTINCT a.grantee::pg_catalog.regrole, NULL::int
FROM pg_catalog.pg_class c CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) a
WHERE c.oid OPERATOR(pg_catalog.=) 'cfeed.change'::pg_catalog.regclass
  AND a.privilege_type OPERATOR(pg_catalog.=) ANY ('{INSERT,DELETE}')
  AND a.grantee OPERATOR(pg_catalog.<>) c.relowner;

/*
 * The policies check the grant: change_write for INSERT (the direct path
 * of cfeed.publish and tracked rows makes the same check in C and stays
 * direct), change_delete for DELETE.  A database whose cfeed.change had
 * row-level security before 1.4 got neither: it gets them as restrictive
 * policies, on top of its own.
 */
DO $do$
BEGIN
	IF EXISTS (SELECT FROM pg_catalog.pg_policy p
			   WHERE p.polrelid OPERATOR(pg_catalog.=) 'cfeed.change'::pg_catalog.regclass
				 AND p.polname OPERATOR(pg_catalog.=) 'change_write') THEN
		ALTER POLICY change_write ON cfeed.change WITH CHECK (cfeed._may_write(feed_id));
	ELSE
		CREATE POLICY change_write ON cfeed.change AS RESTRICTIVE FOR INSERT
			WITH CHECK (cfeed._may_write(feed_id));
	END IF;
	IF EXISTS (SELECT FROM pg_catalog.pg_policy p
			   WHERE p.polrelid OPERATOR(pg_catalog.=) 'cfeed.change'::pg_catalog.regclass
				 AND p.polname OPERATOR(pg_catalog.=) 'change_delete') THEN
		ALTER POLICY change_delete ON cfeed.change USING (cfeed._may_write(feed_id));
	ELSE
		CREATE POLICY change_delete ON cfeed.change AS RESTRICTIVE FOR DELETE
			USING (cfeed._may_write(feed_id));
	END IF;
END
$do$;
COMMENT ON POLICY change_write ON cfeed.change IS 'a change is inserted by who may write its feed (cfeed.grant_write)';
COMMENT ON POLICY change_delete ON cfeed.change IS 'a change is deleted by who may write its feed (cfeed.grant_write); a DELETE with a condition sees only what it may read';

/*
 * Row images come only from cfeed's tracking (guard.c): change_guard
 * refuses an INSERT that sets tbl, op or row, and change_image_guard an
 * UPDATE that sets them, unless cfeed's own statement, logical
 * replication's apply or a role with the owner's privileges writes them.
 */
CREATE FUNCTION cfeed._change_image_guard() RETURNS trigger
	LANGUAGE c AS 'MODULE_PATHNAME', 'cfeed_change_image_guard';
COMMENT ON FUNCTION cfeed._change_image_guard() IS 'internal: refuses an UPDATE that writes a row image (tbl, op, row) of cfeed.change';
REVOKE ALL ON FUNCTION cfeed._change_image_guard() FROM PUBLIC;
-- for every UPDATE (a column list or WHEN clause naming tbl, op or row
-- would refuse a rewriting ALTER TABLE of them); the sweep's direct UPDATE
-- of the numbers stands in for it (direct.c)
CREATE TRIGGER change_image_guard BEFORE UPDATE ON cfeed.change
	FOR EACH ROW EXECUTE FUNCTION cfeed._change_image_guard();
ALTER TABLE cfeed.change ENABLE ALWAYS TRIGGER change_image_guard;



/* ---- numbers: range checks, overflow-safe arithmetic, linear consumer groups ---- */

/*
 * cfeed._lowest_cursor: the lowest cursor a group may seek to on a shard
 * whose start value is start: 0, below every number (history is numbered
 * from 1, shards start at 0 or above); a shard created with a negative
 * start before 1.8 reaches down to its start.
 */
CREATE FUNCTION cfeed._lowest_cursor(start bigint) RETURNS bigint
	LANGUAGE sql IMMUTABLE PARALLEL SAFE
	AS $fn$ SELECT LEAST(0, $1) $fn$;
COMMENT ON FUNCTION cfeed._lowest_cursor(bigint) IS 'internal: the lowest cursor of a shard with this start value (cfeed.seek''s range)';

/*
 * cfeed._behind: head - cursor without overflow (saturating at the limits
 * of bigint), for the views: a lease's cursor is whatever a consumer with
 * UPDATE on cfeed.lease wrote, and a view must not fail for every reader
 * because of one row.
 */
CREATE FUNCTION cfeed._behind(head bigint, cursor bigint) RETURNS bigint
	LANGUAGE sql IMMUTABLE PARALLEL SAFE
	AS $fn$
	SELECT GREATEST(LEAST($1::pg_catalog.numeric OPERATOR(pg_catalog.-) $2,
						  9223372036854775807), -9223372036854775808)::pg_catalog.int8
$fn$;
COMMENT ON FUNCTION cfeed._behind(bigint, bigint) IS 'internal: head - cursor, saturating instead of overflowing (cfeed.consumer_lag, cfeed.groups)';

/*
 * cfeed.acquire: the same contract, linear in the feed's shards.  Up to
 * 1.7 the first acquire of a new group was quadratic: the leases it had
 * just inserted have no statistics, the planner took their scans for one
 * row each and chose nested loops over them (15-18 s at 10,000 shards).
 * Now every statement is a scan of the group's leases (or of the feed's
 * shards) with no join between lease scans: the free leases to take are
 * those up to a cut-off shard, and the leases to steal are picked by one
 * scan (the owners ranked by window functions) into a constant array the
 * update looks shards up in by hashing.  The new leases' cursors ("lowest number -
 * 1") saturate rather than overflow on a history row at -2^63 (refused
 * since 1.8, possibly stored before).
 */
CREATE OR REPLACE FUNCTION cfeed.acquire(group_name text, feed_id int, owner text,
										 ttl_ms int DEFAULT 30000, start_at timestamptz DEFAULT NULL)
	RETURNS TABLE (shard int, cursor bigint, epoch bigint, expires_at timestamptz)
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
#variable_conflict use_column
DECLARE
	v_group text := acquire.group_name;
	v_feed int := acquire.feed_id;
	v_owner text := acquire.owner;
	v_now timestamptz := pg_catalog.clock_timestamp();
	v_expires timestamptz;
	v_shards int;
	v_have int;
	v_owners int;
	v_target int;
	v_need int;
	v_names text[];
	v_targets int[];
	v_taken int;
	v_cut int;
	v_take int[];
BEGIN
	IF v_group IS NULL THEN PERFORM cfeed._null_arg('group_name'); END IF;
	IF v_feed IS NULL THEN PERFORM cfeed._null_arg('feed_id'); END IF;
	IF v_owner IS NULL THEN PERFORM cfeed._null_arg('owner'); END IF;
	IF acquire.ttl_ms IS NULL THEN PERFORM cfeed._null_arg('ttl_ms'); END IF;
	IF v_group = '' OR v_owner = '' THEN
		RAISE EXCEPTION 'group_name and owner must not be empty'
			USING ERRCODE = '22023';
	END IF;
	IF acquire.ttl_ms <= 0 THEN
		RAISE EXCEPTION 'argument "ttl_ms" must be positive, got %', acquire.ttl_ms
			USING ERRCODE = '22023';
	END IF;
	PERFORM cfeed._check_feed(v_feed);
	v_expires := v_now + pg_catalog.make_interval(secs => acquire.ttl_ms / 1000.0);

	-- Missing leases: free, positioned just before the first change to read.
	INSERT INTO cfeed.lease AS l (group_name, feed_id, shard, owner, cursor, epoch,
								  expires_at, updated_at)
	SELECT v_group, s.feed_id, s.shard, NULL,
		   CASE WHEN acquire.start_at IS NULL THEN
				COALESCE((SELECT GREATEST(c.change_sequence_number, -9223372036854775807) - 1
						  FROM cfeed.change c
						  WHERE c.feed_id = s.feed_id AND c.shard = s.shard
							AND c.change_sequence_number IS NOT NULL
						  ORDER BY c.change_sequence_number LIMIT 1),
						 s.last_change_sequence_number)
		   ELSE cfeed.cursor_at(s.feed_id, s.shard, acquire.start_at) END,
		   0, NULL, v_now
	FROM cfeed.shard s
	WHERE s.feed_id = v_feed
	  AND NOT EXISTS (SELECT FROM cfeed.lease x
					  WHERE x.group_name = v_group AND x.feed_id = s.feed_id
						AND x.shard = s.shard)
	ORDER BY s.shard
	ON CONFLICT DO NOTHING;

	-- Serialize with every other acquire of this (group, feed).
	PERFORM FROM cfeed.lease l
	WHERE l.group_name = v_group AND l.feed_id = v_feed
	ORDER BY l.shard
	FOR UPDATE;

	-- Renew: still ours, expired or not, as long as nobody took it.
	UPDATE cfeed.lease l SET expires_at = v_expires, updated_at = v_now
	WHERE l.group_name = v_group AND l.feed_id = v_feed AND l.owner = v_owner;
	GET DIAGNOSTICS v_have = ROW_COUNT;

	-- Targets of the live owners (the caller included): see the 1.0 script.
	SELECT pg_catalog.count(*) INTO v_shards FROM cfeed.lease l
	WHERE l.group_name = v_group AND l.feed_id = v_feed;

	WITH held AS (
		SELECT l.owner AS o, pg_catalog.count(*)::int AS n
		FROM cfeed.lease l
		WHERE l.group_name = v_group AND l.feed_id = v_feed
		  AND l.owner IS NOT NULL AND l.expires_at > v_now
		GROUP BY l.owner
		UNION ALL
		SELECT v_owner, 0 WHERE v_have = 0
	), ranked AS (
		SELECT h.o, h.n,
			   pg_catalog.row_number() OVER (ORDER BY h.n DESC, h.o) AS rk,
			   pg_catalog.count(*) OVER () AS owners
		FROM held h
	)
	SELECT pg_catalog.array_agg(r.o ORDER BY r.rk),
		   pg_catalog.array_agg((v_shards / r.owners
								 + CASE WHEN r.rk <= v_shards % r.owners THEN 1 ELSE 0 END)::int
								ORDER BY r.rk)
	INTO v_names, v_targets
	FROM ranked r;

	v_owners := pg_catalog.cardinality(v_names);
	v_target := v_targets[pg_catalog.array_position(v_names, v_owner)];
	v_need := v_target - v_have;

	IF v_need > 0 THEN
		-- Free and expired leases first, lowest shards first: those up to
		-- the v_need-th (all of them when there are fewer).
		SELECT x.shard INTO v_cut FROM cfeed.lease x
		WHERE x.group_name = v_group AND x.feed_id = v_feed
		  AND (x.owner IS NULL OR x.expires_at IS NULL OR x.expires_at <= v_now)
		ORDER BY x.shard OFFSET v_need - 1 LIMIT 1;
		UPDATE cfeed.lease l
		SET owner = v_owner, epoch = l.epoch + 1, expires_at = v_expires, updated_at = v_now
		WHERE l.group_name = v_group AND l.feed_id = v_feed
		  AND (l.owner IS NULL OR l.expires_at IS NULL OR l.expires_at <= v_now)
		  AND (v_cut IS NULL OR l.shard <= v_cut);
		GET DIAGNOSTICS v_taken = ROW_COUNT;
		v_need := v_need - v_taken;
	END IF;

	IF v_need > 0 THEN
		-- Then steal from owners above their target, round-robin, each
		-- losing its highest shards.  An owner's rank (hence its target) is
		-- its place among the live owners by leases held before this call,
		-- the caller's v_have included; taking free leases changed only the
		-- caller's count, so the others are ranked among themselves and the
		-- caller's place is added back.  The update names the shards as a
		-- constant array, which PostgreSQL looks rows up in by hashing
		-- (a parameter's array would be searched linearly per row).
		v_take := ARRAY(
				SELECT r.shard
				FROM (SELECT h.shard, h.o, h.k,
							 h.n - (v_shards / v_owners
									+ CASE WHEN pg_catalog.dense_rank() OVER (ORDER BY h.n DESC, h.o)
												+ CASE WHEN v_have > h.n OR (v_have = h.n AND v_owner < h.o)
													   THEN 1 ELSE 0 END
												<= v_shards % v_owners
										   THEN 1 ELSE 0 END) AS excess
					  FROM (SELECT x.shard, x.owner AS o,
								   pg_catalog.count(*) OVER (PARTITION BY x.owner) AS n,
								   pg_catalog.row_number() OVER (PARTITION BY x.owner ORDER BY x.shard DESC) AS k
							FROM cfeed.lease x
							WHERE x.group_name = v_group AND x.feed_id = v_feed
							  AND x.owner IS NOT NULL AND x.owner <> v_owner
							  AND x.expires_at > v_now) h) r
				WHERE r.k <= r.excess
				ORDER BY r.k, r.excess DESC, r.o LIMIT v_need);
		EXECUTE pg_catalog.format(
			'UPDATE cfeed.lease l SET owner = $1, epoch = l.epoch + 1, expires_at = $2, updated_at = $3 '
			'WHERE l.group_name = $4 AND l.feed_id = $5 AND l.shard = ANY (%L::pg_catalog.int4[])', v_take)
		USING v_owner, v_expires, v_now, v_group, v_feed;
	END IF;

	RETURN QUERY
		SELECT l.shard, l.cursor, l.epoch, l.expires_at FROM cfeed.lease l
		WHERE l.group_name = v_group AND l.feed_id = v_feed AND l.owner = v_owner
		ORDER BY l.shard;
END
$fn$;

/*
 * cfeed.release: the owner's leases are locked (in shard order) and freed
 * by two scans of the group's leases, never by a join a planner without
 * statistics could make a nested loop of (1.1 joined a CTE of them).
 * Otherwise as in 1.1.
 */
CREATE OR REPLACE FUNCTION cfeed.release(group_name text, feed_id int, owner text)
	RETURNS int
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
#variable_conflict use_column
DECLARE
	v_released int;
BEGIN
	PERFORM cfeed._null_arg(a.name)
	FROM (VALUES (1, 'group_name', release.group_name IS NULL), (2, 'feed_id', release.feed_id IS NULL),
				 (3, 'owner', release.owner IS NULL)) AS a(pos, name, missing)
	WHERE a.missing ORDER BY a.pos LIMIT 1;
	PERFORM cfeed._check_feed(release.feed_id);
	IF NOT EXISTS (SELECT FROM cfeed.lease l
				   WHERE l.group_name = release.group_name AND l.feed_id = release.feed_id) THEN
		RAISE EXCEPTION 'group "%" has no leases on feed %', release.group_name, release.feed_id
			USING ERRCODE = '42704',
				  HINT = 'A group''s leases are created by cfeed.acquire(); cfeed.groups lists the groups.';
	END IF;

	-- Lock the owner's leases in shard order (the locking protocol of 1.0).
	PERFORM FROM cfeed.lease l
	WHERE l.group_name = release.group_name AND l.feed_id = release.feed_id
	  AND l.owner = release.owner
	ORDER BY l.shard
	FOR UPDATE;
	UPDATE cfeed.lease l
	SET owner = NULL, expires_at = NULL, updated_at = pg_catalog.clock_timestamp()
	WHERE l.group_name = release.group_name AND l.feed_id = release.feed_id
	  AND l.owner = release.owner;
	GET DIAGNOSTICS v_released = ROW_COUNT;
	RETURN v_released;
END
$fn$;

/*
 * cfeed.seek: the cursor must lie on the shard, from its lowest cursor
 * (cfeed._lowest_cursor: 0) to its head, 22023 otherwise; up to 1.7 any
 * bigint below the head was taken, down to -2^63, which then overflowed
 * cfeed.consumer_lag and cfeed.groups for everyone.
 */
CREATE OR REPLACE FUNCTION cfeed.seek(group_name text, feed_id int, shard int, cursor bigint)
	RETURNS bigint
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
#variable_conflict use_column
DECLARE
	v_head bigint;
	v_lowest bigint;
	v_epoch bigint;
BEGIN
	IF seek.group_name IS NULL THEN PERFORM cfeed._null_arg('group_name'); END IF;
	IF seek.feed_id IS NULL THEN PERFORM cfeed._null_arg('feed_id'); END IF;
	IF seek.shard IS NULL THEN PERFORM cfeed._null_arg('shard'); END IF;
	IF seek.cursor IS NULL THEN PERFORM cfeed._null_arg('cursor'); END IF;
	IF seek.group_name = '' THEN
		RAISE EXCEPTION 'group_name must not be empty' USING ERRCODE = '22023';
	END IF;
	v_head := cfeed.head(seek.feed_id, seek.shard);	-- 42704 for an unknown feed or shard
	IF seek.cursor > v_head THEN
		RAISE EXCEPTION 'cursor % is beyond the head % of shard % of feed %',
			seek.cursor, v_head, seek.shard, seek.feed_id
			USING ERRCODE = '22023',
				  HINT = 'To skip everything written so far, seek to cfeed.head().';
	END IF;
	SELECT cfeed._lowest_cursor(s.start_sequence_number) INTO v_lowest
	FROM cfeed.shard s WHERE s.feed_id = seek.feed_id AND s.shard = seek.shard;
	IF seek.cursor < v_lowest THEN
		RAISE EXCEPTION 'cursor % is below the lowest cursor % of shard % of feed %',
			seek.cursor, v_lowest, seek.shard, seek.feed_id
			USING ERRCODE = '22023',
				  HINT = pg_catalog.format('To replay everything the shard still has, seek to %s.', v_lowest);
	END IF;

	INSERT INTO cfeed.lease AS l (group_name, feed_id, shard, owner, cursor, epoch, expires_at,
								  updated_at)
	VALUES (seek.group_name, seek.feed_id, seek.shard, NULL, seek.cursor, 0, NULL,
			pg_catalog.clock_timestamp())
	ON CONFLICT ON CONSTRAINT lease_pkey DO UPDATE
		SET cursor = EXCLUDED.cursor, epoch = l.epoch + 1, updated_at = EXCLUDED.updated_at
	RETURNING l.epoch INTO v_epoch;
	RETURN v_epoch;
END
$fn$;

/*
 * cfeed.consumer_lag and cfeed.groups: linear in leases whatever the
 * statistics, and never 22003.  Up to 1.7 they joined cfeed.lease to the
 * cfeed.shard view: without statistics on cfeed.lease (a new group) the
 * planner took a group's leases for one row and ran the whole view (a head
 * probe per shard) once per lease, 57 s for a group of 10,000 shards.  Now
 * each shard of the view looks its leases up (a LATERAL scan of the
 * primary key or lease_shard_idx; feed_id and shard are the view's, so
 * that a condition on the feed reaches its shards), and head - cursor saturates
 * (cfeed._behind): a cursor written directly into cfeed.lease can be any
 * bigint.
 */
CREATE OR REPLACE VIEW cfeed.consumer_lag AS
	SELECT l.group_name, s.feed_id, s.shard, l.owner, l.epoch, l.cursor,
		   s.last_change_sequence_number AS head,
		   cfeed._behind(s.last_change_sequence_number, l.cursor) AS behind,
		   CASE WHEN u.stamped_at IS NOT NULL
				THEN GREATEST(pg_catalog.now() OPERATOR(pg_catalog.-) u.stamped_at, interval '0')
		   END AS oldest_unread_age,
		   l.expires_at
	FROM cfeed.shard s
	CROSS JOIN LATERAL (
		SELECT x.group_name, x.owner, x.epoch, x.cursor, x.expires_at
		FROM cfeed.lease x
		WHERE x.feed_id OPERATOR(pg_catalog.=) s.feed_id AND x.shard OPERATOR(pg_catalog.=) s.shard
		OFFSET 0) l	-- not pulled up: the view's shards stay the outer side
	LEFT JOIN LATERAL (
		SELECT COALESCE(c.stamped_at, c.written_at) AS stamped_at
		FROM cfeed.change c
		WHERE c.feed_id OPERATOR(pg_catalog.=) s.feed_id AND c.shard OPERATOR(pg_catalog.=) s.shard
		  AND c.change_sequence_number OPERATOR(pg_catalog.>) l.cursor
		ORDER BY c.change_sequence_number
		LIMIT 1) u ON true;
ALTER VIEW cfeed.consumer_lag SET (security_barrier = true);

CREATE OR REPLACE VIEW cfeed.groups AS
	SELECT l.group_name, s.feed_id,
		   pg_catalog.count(*) AS shards,
		   pg_catalog.count(*) FILTER (WHERE l.expires_at OPERATOR(pg_catalog.>) pg_catalog.now()) AS held,
		   COALESCE(pg_catalog.array_agg(DISTINCT l.owner ORDER BY l.owner)
					FILTER (WHERE l.expires_at OPERATOR(pg_catalog.>) pg_catalog.now()),
					'{}') AS owners,
		   pg_catalog.min(l.cursor) AS min_cursor,
		   GREATEST(LEAST(pg_catalog.sum(cfeed._behind(s.last_change_sequence_number, l.cursor)),
						  9223372036854775807), -9223372036854775808)::pg_catalog.int8 AS behind,
		   pg_catalog.max(l.updated_at) AS updated_at
	FROM cfeed.shard s
	CROSS JOIN LATERAL (
		SELECT x.group_name, x.cursor, x.owner, x.expires_at, x.updated_at
		FROM cfeed.lease x
		WHERE x.feed_id OPERATOR(pg_catalog.=) s.feed_id AND x.shard OPERATOR(pg_catalog.=) s.shard
		OFFSET 0) l	-- not pulled up: the view's shards stay the outer side
	GROUP BY l.group_name, s.feed_id;
ALTER VIEW cfeed.groups SET (security_barrier = true);

/*
 * Role arguments: cfeed.grant_read(1, 987654321::oid::regrole) stored a
 * grant for a role that does not exist (a regrole cast from an oid is not
 * checked).  cfeed._check_role raises 42704 for one; 0 is PUBLIC.  The
 * four functions are as in 1.4, with the check first.
 */
CREATE FUNCTION cfeed._check_role(role regrole) RETURNS void
	LANGUAGE plpgsql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF _check_role.role <> 0
	   AND NOT EXISTS (SELECT FROM pg_roles r WHERE r.oid = _check_role.role) THEN
		RAISE EXCEPTION 'role with OID % does not exist', _check_role.role::oid
			USING ERRCODE = '42704',
				  HINT = 'Name the role (''name''::regrole), or 0 for PUBLIC.';
	END IF;
END
$fn$;
COMMENT ON FUNCTION cfeed._check_role(regrole) IS 'internal: raises 42704 for a role that does not exist (0 is PUBLIC)';

CREATE OR REPLACE FUNCTION cfeed.grant_read(feed_id int, role regrole) RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF grant_read.feed_id IS NULL THEN PERFORM cfeed._null_arg('feed_id'); END IF;
	IF grant_read.role IS NULL THEN PERFORM cfeed._null_arg('role'); END IF;
	PERFORM cfeed._grant_access('cfeed.read_grant', grant_read.feed_id, grant_read.role);
END
$fn$;

CREATE OR REPLACE FUNCTION cfeed.revoke_read(feed_id int, role regrole) RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF revoke_read.feed_id IS NULL THEN PERFORM cfeed._null_arg('feed_id'); END IF;
	IF revoke_read.role IS NULL THEN PERFORM cfeed._null_arg('role'); END IF;
	PERFORM cfeed._revoke_access('cfeed.read_grant', revoke_read.feed_id, revoke_read.role);
	PERFORM cfeed._still_reads(revoke_read.role, revoke_read.feed_id);
END
$fn$;

CREATE OR REPLACE FUNCTION cfeed.grant_read_all(role regrole) RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF grant_read_all.role IS NULL THEN PERFORM cfeed._null_arg('role'); END IF;
	PERFORM cfeed._grant_access('cfeed.read_grant', NULL, grant_read_all.role);
END
$fn$;

CREATE OR REPLACE FUNCTION cfeed.revoke_read_all(role regrole) RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF revoke_read_all.role IS NULL THEN PERFORM cfeed._null_arg('role'); END IF;
	PERFORM cfeed._revoke_access('cfeed.read_grant', NULL, revoke_read_all.role);
	PERFORM cfeed._still_reads(revoke_read_all.role, NULL);
END
$fn$;

/*
 * cfeed._apply_retention: as in 1.0, with the batch bound computed without
 * overflow (the first number + max_rows passed 2^63 - 1 on a shard near
 * the end of its numbers, and the retention pass of every feed failed).
 * And a dead letter of any group is kept (with every change after it),
 * ignore_leases or not, until it is resolved or its group dropped (see
 * "dead letters" below).
 */
CREATE OR REPLACE FUNCTION cfeed._apply_retention(max_rows int DEFAULT 10000, ignore_leases bool DEFAULT false)
	RETURNS bigint
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	r record;
	v_deleted bigint := 0;
	v_count bigint;
	v_cutoff timestamptz;
	v_first bigint;
	v_first_at timestamptz;
	v_limit bigint;
BEGIN
	IF max_rows IS NULL THEN PERFORM cfeed._null_arg('max_rows'); END IF;
	IF ignore_leases IS NULL THEN PERFORM cfeed._null_arg('ignore_leases'); END IF;
	IF max_rows <= 0 THEN
		RAISE EXCEPTION 'argument "max_rows" must be positive, got %', max_rows USING ERRCODE = '22023';
	END IF;

	FOR r IN
		SELECT s.feed_id, s.shard, s.last_change_sequence_number AS head, f.retention,
			   (SELECT pg_catalog.min(l.cursor) FROM cfeed.lease l
				WHERE l.feed_id = s.feed_id AND l.shard = s.shard) AS held,
			   (SELECT GREATEST(d.change_sequence_number, -9223372036854775807) - 1
				FROM cfeed.failed_change d
				WHERE d.feed_id = s.feed_id AND d.shard = s.shard AND d.dead_lettered_at IS NOT NULL
				ORDER BY d.change_sequence_number LIMIT 1) AS dead
		FROM cfeed.feed f JOIN cfeed.shard s ON s.feed_id = f.feed_id
		WHERE f.retention IS NOT NULL
		ORDER BY s.feed_id, s.shard
	LOOP
		EXIT WHEN v_deleted >= max_rows;
		v_cutoff := pg_catalog.now() - r.retention;

		-- The oldest change left: anything to do at all?
		SELECT c.change_sequence_number, COALESCE(c.stamped_at, c.written_at)
		INTO v_first, v_first_at
		FROM cfeed.change c
		WHERE c.feed_id = r.feed_id AND c.shard = r.shard AND c.change_sequence_number IS NOT NULL
		ORDER BY c.change_sequence_number LIMIT 1;
		CONTINUE WHEN v_first IS NULL OR v_first_at >= v_cutoff OR v_first >= r.head
			OR (NOT ignore_leases AND v_first > r.held) OR v_first > r.dead;

		v_limit := LEAST(cfeed.cursor_at(r.feed_id, r.shard, v_cutoff), r.head - 1,
						 CASE WHEN ignore_leases THEN NULL ELSE r.held END, r.dead);
		-- Numbers above the start value are gapless, so this range bounds the batch;
		-- the age test keeps young backfilled rows of the migration range.
		v_limit := LEAST(v_limit::pg_catalog.numeric,
						 v_first::pg_catalog.numeric + (max_rows - v_deleted) - 1)::bigint;
		DELETE FROM cfeed.change c
		WHERE c.feed_id = r.feed_id AND c.shard = r.shard
		  AND c.change_sequence_number BETWEEN v_first AND v_limit
		  AND COALESCE(c.stamped_at, c.written_at) < v_cutoff;
		GET DIAGNOSTICS v_count = ROW_COUNT;
		v_deleted := v_deleted + v_count;
	END LOOP;
	RETURN v_deleted;
END
$fn$;

/*
 * History rows numbered below 1 (accepted up to 1.7, down to -2^63;
 * refused from 1.8, see src/guard.c): a warning names the shards that have
 * some, one index probe per shard.  They keep working (every computation
 * on them saturates) but lie outside the cursors cfeed.seek accepts.
 */
DO $do$
DECLARE
	v_shards text;
BEGIN
	SELECT pg_catalog.string_agg(pg_catalog.format('shard %s of feed %s', s.shard, s.feed_id), ', '
								 ORDER BY s.feed_id, s.shard)
	INTO v_shards
	FROM cfeed.shard_config s
	WHERE (SELECT c.change_sequence_number FROM cfeed.change c
		   WHERE c.feed_id OPERATOR(pg_catalog.=) s.feed_id AND c.shard OPERATOR(pg_catalog.=) s.shard
			 AND c.change_sequence_number IS NOT NULL
		   ORDER BY c.change_sequence_number LIMIT 1) OPERATOR(pg_catalog.<) 1;
	IF v_shards IS NOT NULL THEN
		RAISE WARNING 'cfeed.change has history rows numbered below 1: %', v_shards
			USING DETAIL = 'History is numbered from 1 up to the shard''s start value; cfeed 1.8 refuses lower numbers.',
				  HINT = 'Renumber or delete them (UPDATE or DELETE FROM cfeed.change WHERE change_sequence_number < 1).';
	END IF;
END
$do$;



/* ---- change ids across failovers ---- */

/*
 * The timeline on which cfeed.change_id was last secured (change_id.c): on
 * another timeline (a promoted standby, a point-in-time recovery) cfeed
 * moves cfeed.change_id up by 2^40 before any statement draws from it, so
 * that no id the lost primary issued is issued again.  Set to this server's
 * timeline now (pg_walfile_name names the current timeline).  Not dumped: a
 * restored database continues from the dump's ids, as a new one.
 */
CREATE SEQUENCE cfeed.change_id_timeline AS integer MINVALUE 1 NO CYCLE;
COMMENT ON SEQUENCE cfeed.change_id_timeline IS
	'the server timeline on which cfeed.change_id was last moved past the previous one''s ids';
SELECT pg_catalog.setval('cfeed.change_id_timeline',
	('x' || pg_catalog.substr(pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_lsn()), 1, 8))::bit(32)::integer);

/* ---- publications: every table has a replica identity ---- */

/*
 * A publication FOR ALL TABLES publishes cfeed's tables too, and PostgreSQL
 * then refuses an UPDATE or DELETE of a table without a replica identity
 * (55000), replicated or not: cfeed.read_grant had none (its feed_id is null
 * for a grant of every feed, so no unique index can serve), and grant_read
 * and revoke_read failed.  Its rows are small: the whole row identifies it.
 */
ALTER TABLE cfeed.read_grant REPLICA IDENTITY FULL;



/* ---- dead letters ---- */

/*
 * A change whose processing always fails no longer blocks its shard for
 * ever, silently (docs/consumer-groups.md, "Failures and dead letters").
 * A member reports a failure with cfeed.fail (in the failed transaction
 * after ROLLBACK TO SAVEPOINT, or in a new one after ROLLBACK), fenced by
 * owner and epoch like cfeed.checkpoint; cfeed counts the attempts per
 * (group, change) in cfeed.failed_change.  The group's policy
 * (cfeed.failure_policy, set by cfeed.set_failure_policy) gives the
 * backoff between attempts and what happens after the last one: retry for
 * ever (the default) or set the change aside as a dead letter, which moves
 * the lease's cursor past it in the same statement, so that a change is
 * either processed (a checkpoint passed it) or a dead letter, never both,
 * never neither.  cfeed.read_group is cfeed.read for a member: it leaves
 * out the group's dead letters, and delivers a failed change only at the
 * head of a page once its backoff has passed (the shard's later changes
 * wait meanwhile: per-key order is kept).  An operator replays dead
 * letters in order with cfeed.read_dead_letters and cfeed.resolve_dead_letter.
 *
 * A failed_change row is either a failure (dead_lettered_at null: the
 * change is after the lease's cursor and is being retried) or a dead letter
 * (at or before the cursor, unless a seek moved the cursor back over it).
 * Failures the cursor has passed (the change succeeded, or an operator's
 * seek skipped it) are deleted by the trigger lease_passed.  Rows belong to
 * their lease: drop_group, and deleting a shard or feed, delete them.
 */
CREATE TABLE cfeed.failure_policy (
	group_name text NOT NULL,
	feed_id int NOT NULL REFERENCES cfeed.feed ON DELETE CASCADE,
	max_attempts int NOT NULL CHECK (max_attempts >= 1),
	backoff_ms int NOT NULL CHECK (backoff_ms >= 0),
	max_backoff_ms int NOT NULL CHECK (max_backoff_ms >= backoff_ms),
	dead_letter bool NOT NULL,
	updated_at timestamptz NOT NULL,
	CONSTRAINT failure_policy_pkey PRIMARY KEY (group_name, feed_id)
);
COMMENT ON TABLE cfeed.failure_policy IS 'per consumer group and feed: attempts, backoff and what follows the last attempt (cfeed.set_failure_policy); a group without a row retries for ever without backoff';
COMMENT ON COLUMN cfeed.failure_policy.max_attempts IS 'attempts of a change before it becomes a dead letter (when dead_letter)';
COMMENT ON COLUMN cfeed.failure_policy.backoff_ms IS 'wait after the first failed attempt, doubled after each further one';
COMMENT ON COLUMN cfeed.failure_policy.max_backoff_ms IS 'the longest wait between attempts';
COMMENT ON COLUMN cfeed.failure_policy.dead_letter IS 'after max_attempts: true sets the change aside as a dead letter, false retries it for ever';
REVOKE ALL ON cfeed.failure_policy FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('cfeed.failure_policy', '');
ALTER TABLE cfeed.failure_policy ENABLE ROW LEVEL SECURITY;
CREATE POLICY failure_policy_access ON cfeed.failure_policy
	USING (cfeed._may_read(feed_id)) WITH CHECK (cfeed._may_read(feed_id));
COMMENT ON POLICY failure_policy_access ON cfeed.failure_policy IS 'a group''s policy on a feed is seen and written by the feed''s readers';

CREATE TABLE cfeed.failed_change (
	group_name text NOT NULL,
	feed_id int NOT NULL,
	shard int NOT NULL,
	change_sequence_number bigint NOT NULL,
	change_id bigint NOT NULL,
	attempts int NOT NULL CHECK (attempts >= 1),
	last_error text NOT NULL,
	first_failed_at timestamptz NOT NULL,
	failed_at timestamptz NOT NULL,
	retry_at timestamptz,
	dead_lettered_at timestamptz,
	CONSTRAINT failed_change_pkey PRIMARY KEY (group_name, feed_id, shard, change_sequence_number),
	CONSTRAINT failed_change_lease_fkey FOREIGN KEY (group_name, feed_id, shard)
		REFERENCES cfeed.lease ON DELETE CASCADE
);
-- retention's "lowest dead letter of a shard"
CREATE INDEX failed_change_dead_idx ON cfeed.failed_change (feed_id, shard, change_sequence_number)
	WHERE dead_lettered_at IS NOT NULL;
COMMENT ON TABLE cfeed.failed_change IS 'per consumer group: changes whose processing failed (attempts, last error, next retry) and dead letters (dead_lettered_at set)';
COMMENT ON COLUMN cfeed.failed_change.attempts IS 'failed attempts reported with cfeed.fail';
COMMENT ON COLUMN cfeed.failed_change.last_error IS 'the error text of the last failed attempt';
COMMENT ON COLUMN cfeed.failed_change.retry_at IS 'cfeed.read_group delivers the change again from this time on (null for a dead letter)';
COMMENT ON COLUMN cfeed.failed_change.dead_lettered_at IS 'when the change was set aside as a dead letter; null while it is retried';
REVOKE ALL ON cfeed.failed_change FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('cfeed.failed_change', '');
ALTER TABLE cfeed.failed_change ENABLE ROW LEVEL SECURITY;
CREATE POLICY failed_change_access ON cfeed.failed_change
	USING (cfeed._may_read(feed_id)) WITH CHECK (cfeed._may_read(feed_id));
COMMENT ON POLICY failed_change_access ON cfeed.failed_change IS 'a group''s failures and dead letters on a feed are seen and written by the feed''s readers';

/*
 * cfeed._held_lease: lock a lease and check that owner holds it at epoch,
 * unexpired (42704 for an unknown feed, shard or lease, 55000 otherwise);
 * returns its cursor.  The fencing of cfeed.checkpoint and cfeed.fail.
 * The caller needs UPDATE on cfeed.lease and a read grant on the feed.
 */
CREATE FUNCTION cfeed._held_lease(group_name text, feed_id int, shard int, owner text, epoch bigint)
	RETURNS bigint
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
#variable_conflict use_column
DECLARE
	v_lease text := pg_catalog.format('lease of group "%s" on shard %s of feed %s',
									  _held_lease.group_name, _held_lease.shard, _held_lease.feed_id);
	v_head bigint;
	l record;
BEGIN
	SELECT x.owner, x.epoch, x.cursor, x.expires_at INTO l
	FROM cfeed.lease x
	WHERE x.group_name = _held_lease.group_name AND x.feed_id = _held_lease.feed_id
	  AND x.shard = _held_lease.shard
	FOR UPDATE;
	IF NOT FOUND THEN
		v_head := cfeed.head(_held_lease.feed_id, _held_lease.shard);	-- 42704 for an unknown feed or shard
		RAISE EXCEPTION '% does not exist', v_lease
			USING ERRCODE = '42704',
				  HINT = 'Call cfeed.acquire() to create the group''s leases and learn which shards you hold.';
	END IF;
	IF l.owner IS DISTINCT FROM _held_lease.owner OR l.epoch <> _held_lease.epoch THEN
		RAISE EXCEPTION '% is %, not by "%" at epoch %', v_lease,
			CASE WHEN l.owner IS NULL THEN pg_catalog.format('free at epoch %s', l.epoch)
				 ELSE pg_catalog.format('held by "%s" at epoch %s', l.owner, l.epoch) END,
			_held_lease.owner, _held_lease.epoch
			USING ERRCODE = '55000',
				  DETAIL = 'The lease changed hands (or an operator moved its cursor) after you acquired it; its cursor stays at ' || l.cursor || '.',
				  HINT = 'Roll back this transaction and call cfeed.acquire() to learn which shards you hold now.';
	END IF;
	IF l.expires_at IS NULL OR l.expires_at <= pg_catalog.clock_timestamp() THEN
		RAISE EXCEPTION '% held by "%" at epoch % has expired', v_lease, _held_lease.owner, _held_lease.epoch
			USING ERRCODE = '55000',
				  DETAIL = 'It expired at ' || l.expires_at || '.',
				  HINT = 'Roll back, renew with cfeed.acquire() (the lease is still yours if nobody took it) and resume from the cursor it returns.';
	END IF;
	RETURN l.cursor;
END
$fn$;
COMMENT ON FUNCTION cfeed._held_lease(text, int, int, text, bigint) IS 'internal: locks a lease, checks that the owner holds it at the epoch, unexpired (42704, 55000); returns its cursor';

/*
 * lease_passed: a lease's cursor moving forward (checkpoint, seek, the
 * cursor move of a dead letter) deletes the lease's failures it passes:
 * the change was processed, or a seek skipped it.  Dead letters stay, and
 * a seek back forgets nothing (the failures after the new cursor keep
 * their attempts).  A trigger, as the extension's owner, so that
 * checkpoint and seek need no privileges on cfeed.failed_change.
 */
CREATE FUNCTION cfeed._lease_passed() RETURNS trigger
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	DELETE FROM cfeed.failed_change f
	WHERE f.group_name = NEW.group_name AND f.feed_id = NEW.feed_id AND f.shard = NEW.shard
	  AND f.change_sequence_number <= NEW.cursor AND f.dead_lettered_at IS NULL;
	RETURN NULL;
END
$fn$;
COMMENT ON FUNCTION cfeed._lease_passed() IS 'internal: deletes the failures of a lease that its cursor has passed (dead letters stay)';
REVOKE ALL ON FUNCTION cfeed._lease_passed() FROM PUBLIC;
CREATE TRIGGER lease_passed AFTER UPDATE OF cursor ON cfeed.lease
	FOR EACH ROW WHEN (NEW.cursor > OLD.cursor) EXECUTE FUNCTION cfeed._lease_passed();

/*
 * A lease's cursor that moves forward onto the change before a dead letter
 * of its group moves on over it (and over the dead letters right after
 * it): read_group never delivers a dead letter, so a member checkpoints
 * the change before it, and a dead letter at the end of a shard (after a
 * seek back) would otherwise stay after the cursor, unresolvable, until a
 * later change came.  Numbers are consecutive on a shard.  As the
 * extension's owner, like lease_passed.
 */
CREATE FUNCTION cfeed._lease_skip_dead_letters() RETURNS trigger
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	WHILE NEW.cursor < 9223372036854775807 AND EXISTS (
		SELECT FROM cfeed.failed_change f
		WHERE f.group_name = NEW.group_name AND f.feed_id = NEW.feed_id AND f.shard = NEW.shard
		  AND f.change_sequence_number = NEW.cursor + 1 AND f.dead_lettered_at IS NOT NULL) LOOP
		NEW.cursor := NEW.cursor + 1;
	END LOOP;
	RETURN NEW;
END
$fn$;
COMMENT ON FUNCTION cfeed._lease_skip_dead_letters() IS 'internal: moves a lease''s cursor that moves forward over the dead letters of its group right after it';
REVOKE ALL ON FUNCTION cfeed._lease_skip_dead_letters() FROM PUBLIC;
CREATE TRIGGER lease_skip_dead_letters BEFORE UPDATE OF cursor ON cfeed.lease
	FOR EACH ROW WHEN (NEW.cursor > OLD.cursor) EXECUTE FUNCTION cfeed._lease_skip_dead_letters();

/*
 * cfeed.checkpoint: as in 1.0; the fencing is cfeed._held_lease, shared
 * with cfeed.fail.
 */
CREATE OR REPLACE FUNCTION cfeed.checkpoint(group_name text, feed_id int, shard int, owner text,
											epoch bigint, cursor bigint)
	RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
#variable_conflict use_column
DECLARE
	v_old bigint;
	v_head bigint;
BEGIN
	PERFORM cfeed._null_arg(a.name)
	FROM (VALUES (1, 'group_name', checkpoint.group_name IS NULL), (2, 'feed_id', checkpoint.feed_id IS NULL),
				 (3, 'shard', checkpoint.shard IS NULL), (4, 'owner', checkpoint.owner IS NULL),
				 (5, 'epoch', checkpoint.epoch IS NULL), (6, 'cursor', checkpoint.cursor IS NULL)) AS a(pos, name, missing)
	WHERE a.missing ORDER BY a.pos LIMIT 1;
	v_old := cfeed._held_lease(checkpoint.group_name, checkpoint.feed_id, checkpoint.shard,
							   checkpoint.owner, checkpoint.epoch);
	IF checkpoint.cursor < v_old THEN
		RAISE EXCEPTION 'checkpoint would move the cursor of the lease of group "%" on shard % of feed % backwards from % to %',
			checkpoint.group_name, checkpoint.shard, checkpoint.feed_id, v_old, checkpoint.cursor
			USING ERRCODE = '55000',
				  HINT = 'Checkpoint the number of the last change you processed; to replay, an operator can use cfeed.seek().';
	END IF;
	SELECT s.last_change_sequence_number INTO v_head FROM cfeed.shard s
	WHERE s.feed_id = checkpoint.feed_id AND s.shard = checkpoint.shard;
	IF checkpoint.cursor > v_head THEN
		RAISE EXCEPTION 'cursor % is beyond the head % of shard % of feed %',
			checkpoint.cursor, v_head, checkpoint.shard, checkpoint.feed_id
			USING ERRCODE = '22023',
				  HINT = 'Checkpoint the change_sequence_number of the last change you processed.';
	END IF;

	UPDATE cfeed.lease x SET cursor = checkpoint.cursor, updated_at = pg_catalog.clock_timestamp()
	WHERE x.group_name = checkpoint.group_name AND x.feed_id = checkpoint.feed_id
	  AND x.shard = checkpoint.shard;
END
$fn$;


/*
 * cfeed.set_failure_policy: a group's failure policy on a feed (creates or
 * replaces it; called with the defaults, the group behaves as without
 * one).  Needs INSERT and UPDATE on cfeed.failure_policy.
 */
CREATE FUNCTION cfeed.set_failure_policy(group_name text, feed_id int, max_attempts int DEFAULT 5,
										 backoff_ms int DEFAULT 0, max_backoff_ms int DEFAULT 60000,
										 dead_letter bool DEFAULT false)
	RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
#variable_conflict use_column
BEGIN
	PERFORM cfeed._null_arg(a.name)
	FROM (VALUES (1, 'group_name', set_failure_policy.group_name IS NULL),
				 (2, 'feed_id', set_failure_policy.feed_id IS NULL),
				 (3, 'max_attempts', set_failure_policy.max_attempts IS NULL),
				 (4, 'backoff_ms', set_failure_policy.backoff_ms IS NULL),
				 (5, 'max_backoff_ms', set_failure_policy.max_backoff_ms IS NULL),
				 (6, 'dead_letter', set_failure_policy.dead_letter IS NULL)) AS a(pos, name, missing)
	WHERE a.missing ORDER BY a.pos LIMIT 1;
	IF set_failure_policy.group_name = '' THEN
		RAISE EXCEPTION 'group_name must not be empty' USING ERRCODE = '22023';
	END IF;
	IF set_failure_policy.max_attempts < 1 THEN
		RAISE EXCEPTION 'argument "max_attempts" must be positive, got %', set_failure_policy.max_attempts
			USING ERRCODE = '22023';
	END IF;
	IF set_failure_policy.backoff_ms < 0 THEN
		RAISE EXCEPTION 'argument "backoff_ms" must not be negative, got %', set_failure_policy.backoff_ms
			USING ERRCODE = '22023';
	END IF;
	IF set_failure_policy.max_backoff_ms < set_failure_policy.backoff_ms THEN
		RAISE EXCEPTION 'argument "max_backoff_ms" (%) must not be below "backoff_ms" (%)',
			set_failure_policy.max_backoff_ms, set_failure_policy.backoff_ms
			USING ERRCODE = '22023';
	END IF;
	PERFORM cfeed._check_feed(set_failure_policy.feed_id);

	INSERT INTO cfeed.failure_policy AS p (group_name, feed_id, max_attempts, backoff_ms, max_backoff_ms,
										   dead_letter, updated_at)
	VALUES (set_failure_policy.group_name, set_failure_policy.feed_id, set_failure_policy.max_attempts,
			set_failure_policy.backoff_ms, set_failure_policy.max_backoff_ms, set_failure_policy.dead_letter,
			pg_catalog.clock_timestamp())
	ON CONFLICT ON CONSTRAINT failure_policy_pkey DO UPDATE
		SET max_attempts = EXCLUDED.max_attempts, backoff_ms = EXCLUDED.backoff_ms,
			max_backoff_ms = EXCLUDED.max_backoff_ms, dead_letter = EXCLUDED.dead_letter,
			updated_at = EXCLUDED.updated_at;
END
$fn$;
COMMENT ON FUNCTION cfeed.set_failure_policy(text, int, int, int, int, bool) IS 'sets a consumer group''s failure policy on a feed: attempts, backoff (doubling up to max_backoff_ms), and whether a change becomes a dead letter after its last attempt (else it is retried for ever)';

/*
 * cfeed._fail: a member reports that processing a change failed.  Fenced
 * like checkpoint (cfeed._held_lease); the change must be after the
 * lease's cursor.  Counts the attempt and sets the next retry (backoff_ms
 * doubled per attempt, at most max_backoff_ms; max_backoff_ms after the
 * last attempt, unless backoff_ms is 0).  At the last attempt under
 * a dead-letter policy, the change is set aside and the cursor moves to it,
 * in this transaction, when it is the next change to process (every change
 * between the cursor and it is a dead letter); a change after unprocessed
 * ones (the member rolled back a whole page) is set aside on its next
 * failure, once cfeed.read_group has delivered the changes before it.
 * Returns the attempts so far, the retry time (null for a dead letter) and
 * whether the change is now a dead letter.  Runs as the extension's
 * owner, called by cfeed.fail (below) after the caller's checks.
 */
CREATE FUNCTION cfeed._fail(group_name text, feed_id int, shard int, owner text, epoch bigint,
							change_sequence_number bigint, error text)
	RETURNS TABLE (attempts int, retry_at timestamptz, dead_letter bool)
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
#variable_conflict use_column
DECLARE
	v_group text := _fail.group_name;
	v_feed int := _fail.feed_id;
	v_shard int := _fail.shard;
	v_number bigint := _fail.change_sequence_number;
	v_now timestamptz := pg_catalog.clock_timestamp();
	v_cursor bigint;
	v_head bigint;
	v_change_id bigint;
	v_attempts int;
	v_retry timestamptz;
	v_dead bigint;
	v_next bigint;
	p record;
BEGIN
	PERFORM cfeed._null_arg(a.name)
	FROM (VALUES (1, 'group_name', v_group IS NULL), (2, 'feed_id', v_feed IS NULL),
				 (3, 'shard', v_shard IS NULL), (4, 'owner', _fail.owner IS NULL),
				 (5, 'epoch', _fail.epoch IS NULL), (6, 'change_sequence_number', v_number IS NULL),
				 (7, 'error', _fail.error IS NULL)) AS a(pos, name, missing)
	WHERE a.missing ORDER BY a.pos LIMIT 1;
	v_cursor := cfeed._held_lease(v_group, v_feed, v_shard, _fail.owner, _fail.epoch);
	IF v_number <= v_cursor THEN
		RAISE EXCEPTION 'change % of shard % of feed % is at or before the cursor % of group "%"',
			v_number, v_shard, v_feed, v_cursor, v_group
			USING ERRCODE = '55000',
				  DETAIL = 'The group has processed it, or set it aside as a dead letter.',
				  HINT = 'Report failures of changes after the cursor cfeed.acquire() returns.';
	END IF;
	SELECT r.change_id INTO v_change_id FROM cfeed.read(v_feed, v_shard, v_number - 1, 1) r
	WHERE r.change_sequence_number = v_number;
	IF NOT FOUND THEN
		SELECT s.last_change_sequence_number INTO v_head FROM cfeed.shard s
		WHERE s.feed_id = v_feed AND s.shard = v_shard;
		IF v_number > v_head THEN
			RAISE EXCEPTION 'change_sequence_number % is beyond the head % of shard % of feed %',
				v_number, v_head, v_shard, v_feed
				USING ERRCODE = '22023',
					  HINT = 'Report the change_sequence_number of the change whose processing failed.';
		END IF;
		RAISE EXCEPTION 'change % of shard % of feed % does not exist', v_number, v_shard, v_feed
			USING ERRCODE = '42704',
				  HINT = 'Report the change_sequence_number of a change cfeed.read_group() returned.';
	END IF;
	IF EXISTS (SELECT FROM cfeed.failed_change d
			   WHERE d.group_name = v_group AND d.feed_id = v_feed AND d.shard = v_shard
				 AND d.change_sequence_number = v_number AND d.dead_lettered_at IS NOT NULL) THEN
		RAISE EXCEPTION 'change % of shard % of feed % is a dead letter of group "%"',
			v_number, v_shard, v_feed, v_group
			USING ERRCODE = '55000',
				  HINT = 'cfeed.read_group() leaves dead letters out; an operator replays them with cfeed.read_dead_letters() and cfeed.resolve_dead_letter().';
	END IF;

	SELECT x.max_attempts, x.backoff_ms, x.max_backoff_ms, x.dead_letter INTO p
	FROM cfeed.failure_policy x WHERE x.group_name = v_group AND x.feed_id = v_feed;
	IF NOT FOUND THEN
		SELECT 5 AS max_attempts, 0 AS backoff_ms, 60000 AS max_backoff_ms, false AS dead_letter INTO p;
	END IF;

	INSERT INTO cfeed.failed_change AS f (group_name, feed_id, shard, change_sequence_number, change_id,
										  attempts, last_error, first_failed_at, failed_at)
	VALUES (v_group, v_feed, v_shard, v_number, v_change_id, 1, _fail.error, v_now, v_now)
	ON CONFLICT ON CONSTRAINT failed_change_pkey DO UPDATE
		SET attempts = LEAST(f.attempts::bigint + 1, 2147483647)::int,
			last_error = EXCLUDED.last_error, failed_at = EXCLUDED.failed_at
	RETURNING f.attempts INTO v_attempts;

	IF p.dead_letter AND v_attempts >= p.max_attempts THEN
		-- The next change to process?  Those between the cursor and it must be dead letters.
		SELECT pg_catalog.count(*) INTO v_dead FROM cfeed.failed_change d
		WHERE d.group_name = v_group AND d.feed_id = v_feed AND d.shard = v_shard
		  AND d.change_sequence_number > v_cursor AND d.change_sequence_number < v_number
		  AND d.dead_lettered_at IS NOT NULL;
		SELECT pg_catalog.max(r.change_sequence_number) INTO v_next
		FROM cfeed.read(v_feed, v_shard, v_cursor, LEAST(v_dead + 1, 2147483647)::int) r;
		IF v_next = v_number THEN
			UPDATE cfeed.failed_change f SET dead_lettered_at = v_now, retry_at = NULL
			WHERE f.group_name = v_group AND f.feed_id = v_feed AND f.shard = v_shard
			  AND f.change_sequence_number = v_number;
			UPDATE cfeed.lease l SET cursor = v_number, updated_at = v_now
			WHERE l.group_name = v_group AND l.feed_id = v_feed AND l.shard = v_shard;
			RETURN QUERY SELECT v_attempts, NULL::timestamptz, true;
			RETURN;
		END IF;
	END IF;

	-- After the last attempt (retried for ever): the longest backoff, none
	-- when backoff_ms is 0 (the defaults behave as no policy).
	v_retry := v_now + pg_catalog.make_interval(secs =>
		CASE WHEN v_attempts >= p.max_attempts AND p.backoff_ms > 0
			 THEN p.max_backoff_ms::pg_catalog.numeric
			 ELSE LEAST(p.max_backoff_ms::pg_catalog.numeric,
						p.backoff_ms * pg_catalog.power(2::pg_catalog.numeric, LEAST(v_attempts - 1, 40)))
		END / 1000);
	UPDATE cfeed.failed_change f SET retry_at = v_retry
	WHERE f.group_name = v_group AND f.feed_id = v_feed AND f.shard = v_shard
	  AND f.change_sequence_number = v_number;
	RETURN QUERY SELECT v_attempts, v_retry, false;
END
$fn$;
COMMENT ON FUNCTION cfeed._fail(text, int, int, text, bigint, bigint, text) IS 'internal: cfeed.fail as the extension''s owner, after the caller''s checks: reports that processing a change failed (fenced like checkpoint): counts the attempt, sets the retry time, and after the last attempt of a dead-letter policy sets the change aside and moves the cursor past it';
REVOKE ALL ON FUNCTION cfeed._fail(text, int, int, text, bigint, bigint, text) FROM PUBLIC;

/*
 * cfeed.fail: checks the caller's read grant on the feed and UPDATE on
 * cfeed.lease (as checkpoint), then runs cfeed._fail as the extension's
 * owner: a member needs no privilege on cfeed.failed_change, so it cannot
 * write it directly (clear a dead letter, forge one, push a retry away).
 */
CREATE FUNCTION cfeed.fail(group_name text, feed_id int, shard int, owner text, epoch bigint,
						   change_sequence_number bigint, error text)
	RETURNS TABLE (attempts int, retry_at timestamptz, dead_letter bool)
	LANGUAGE c VOLATILE PARALLEL UNSAFE
	AS 'MODULE_PATHNAME', 'cfeed_fail';
COMMENT ON FUNCTION cfeed.fail(text, int, int, text, bigint, bigint, text) IS 'reports that processing a change failed (fenced like checkpoint): counts the attempt, sets the retry time, and after the last attempt of a dead-letter policy sets the change aside and moves the cursor past it';

/*
 * cfeed.read_group: cfeed.read for a member of a group (cursor null: the
 * lease's).  Leaves out the group's dead letters; a change that failed is
 * delivered only first in a page and only once its retry time has come,
 * and a page ends before any other: while a failed change backs off, the
 * read returns nothing (consumer_lag.retry_at says until when).  The
 * column attempts counts the failures reported so far.  Needs SELECT on
 * cfeed.lease and cfeed.failed_change, and a read grant on the feed.
 */
CREATE FUNCTION cfeed.read_group(group_name text, feed_id int, shard int, cursor bigint DEFAULT NULL,
								 max_count int DEFAULT 1000)
	RETURNS TABLE (change_sequence_number bigint, change_id bigint, stamped_at timestamptz, attempts int)
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
#variable_conflict use_column
DECLARE
	v_group text := read_group.group_name;
	v_feed int := read_group.feed_id;
	v_shard int := read_group.shard;
	v_cursor bigint;
	v_head bigint;
	v_dead bigint;
BEGIN
	PERFORM cfeed._null_arg(a.name)
	FROM (VALUES (1, 'group_name', v_group IS NULL), (2, 'feed_id', v_feed IS NULL),
				 (3, 'shard', v_shard IS NULL), (5, 'max_count', read_group.max_count IS NULL)) AS a(pos, name, missing)
	WHERE a.missing ORDER BY a.pos LIMIT 1;
	IF read_group.max_count < 0 THEN
		RAISE EXCEPTION 'argument "max_count" must not be negative, got %', read_group.max_count
			USING ERRCODE = '22023';
	END IF;
	SELECT x.cursor INTO v_cursor FROM cfeed.lease x
	WHERE x.group_name = v_group AND x.feed_id = v_feed AND x.shard = v_shard;
	IF NOT FOUND THEN
		v_head := cfeed.head(v_feed, v_shard);	-- 42501 or 42704 for the feed or shard
		RAISE EXCEPTION 'lease of group "%" on shard % of feed % does not exist', v_group, v_shard, v_feed
			USING ERRCODE = '42704',
				  HINT = 'Call cfeed.acquire() to create the group''s leases and learn which shards you hold.';
	END IF;
	v_cursor := COALESCE(read_group.cursor, v_cursor);
	SELECT pg_catalog.count(*) INTO v_dead FROM cfeed.failed_change d
	WHERE d.group_name = v_group AND d.feed_id = v_feed AND d.shard = v_shard
	  AND d.change_sequence_number > v_cursor AND d.dead_lettered_at IS NOT NULL;

	RETURN QUERY
	WITH page AS (
		SELECT r.change_sequence_number AS n, r.change_id AS id, r.stamped_at AS at,
			   f.attempts AS tries, f.retry_at AS due,
			   pg_catalog.row_number() OVER (ORDER BY r.change_sequence_number) AS k
		FROM cfeed.read(v_feed, v_shard, v_cursor,
						LEAST(read_group.max_count::bigint + v_dead, 2147483647)::int) r
		LEFT JOIN cfeed.failed_change f
		  ON f.group_name = v_group AND f.feed_id = v_feed AND f.shard = v_shard
		 AND f.change_sequence_number = r.change_sequence_number
		WHERE f.dead_lettered_at IS NULL)
	SELECT p.n, p.id, p.at, COALESCE(p.tries, 0)
	FROM page p
	WHERE p.k <= read_group.max_count
	  AND p.k < COALESCE((SELECT pg_catalog.min(q.k) FROM page q
						  WHERE q.tries IS NOT NULL
							AND (q.k > 1 OR q.due > pg_catalog.clock_timestamp())), 9223372036854775807)
	ORDER BY p.n;
END
$fn$;
COMMENT ON FUNCTION cfeed.read_group(text, int, int, bigint, int) IS 'cfeed.read for a consumer group member: without the group''s dead letters, a failed change only first in a page once its backoff has passed (nothing while it backs off)';

/*
 * cfeed.dead_letters: the dead letters of the groups on the feeds the
 * caller may read (as cfeed.shard: the view runs as its owner).
 */
CREATE VIEW cfeed.dead_letters AS
	SELECT d.group_name, d.feed_id, d.shard, d.change_sequence_number, d.change_id, d.attempts,
		   d.last_error, d.first_failed_at, d.dead_lettered_at
	FROM cfeed.failed_change d
	WHERE d.dead_lettered_at IS NOT NULL AND cfeed._may_read(d.feed_id);
ALTER VIEW cfeed.dead_letters SET (security_barrier = true);
COMMENT ON VIEW cfeed.dead_letters IS 'changes a consumer group set aside after their last failed attempt, to be replayed with cfeed.read_dead_letters and cfeed.resolve_dead_letter';
REVOKE ALL ON cfeed.dead_letters FROM PUBLIC;

/*
 * cfeed.read_dead_letters: an operator's replay, in order (by shard, then
 * number): every dead letter of the group on the feed, those of one shard,
 * or those of a shard in [first_number, last_number].  Needs SELECT on
 * cfeed.failed_change.
 */
CREATE FUNCTION cfeed.read_dead_letters(group_name text, feed_id int, shard int DEFAULT NULL,
										first_number bigint DEFAULT NULL, last_number bigint DEFAULT NULL,
										max_count int DEFAULT 1000)
	RETURNS SETOF cfeed.dead_letters
	LANGUAGE plpgsql STABLE PARALLEL RESTRICTED
	SET search_path = pg_catalog, pg_temp
	AS $fn$
#variable_conflict use_column
DECLARE
	v_head bigint;
BEGIN
	PERFORM cfeed._null_arg(a.name)
	FROM (VALUES (1, 'group_name', read_dead_letters.group_name IS NULL),
				 (2, 'feed_id', read_dead_letters.feed_id IS NULL),
				 (6, 'max_count', read_dead_letters.max_count IS NULL)) AS a(pos, name, missing)
	WHERE a.missing ORDER BY a.pos LIMIT 1;
	IF read_dead_letters.max_count < 0 THEN
		RAISE EXCEPTION 'argument "max_count" must not be negative, got %', read_dead_letters.max_count
			USING ERRCODE = '22023';
	END IF;
	IF read_dead_letters.shard IS NULL
	   AND (read_dead_letters.first_number IS NOT NULL OR read_dead_letters.last_number IS NOT NULL) THEN
		RAISE EXCEPTION 'a range of numbers needs a shard'
			USING ERRCODE = '22023',
				  HINT = 'Numbers are per shard: pass the shard of first_number and last_number.';
	END IF;
	IF read_dead_letters.first_number > read_dead_letters.last_number THEN
		RAISE EXCEPTION 'first_number % is above last_number %',
			read_dead_letters.first_number, read_dead_letters.last_number
			USING ERRCODE = '22023';
	END IF;
	PERFORM cfeed._check_feed(read_dead_letters.feed_id);
	IF read_dead_letters.shard IS NOT NULL THEN
		v_head := cfeed.head(read_dead_letters.feed_id, read_dead_letters.shard);	-- 42704 for an unknown shard
	END IF;
	IF NOT EXISTS (SELECT FROM cfeed.lease l
				   WHERE l.group_name = read_dead_letters.group_name AND l.feed_id = read_dead_letters.feed_id) THEN
		RAISE EXCEPTION 'group "%" has no leases on feed %', read_dead_letters.group_name, read_dead_letters.feed_id
			USING ERRCODE = '42704',
				  HINT = 'A group''s leases are created by cfeed.acquire(); cfeed.groups lists the groups.';
	END IF;

	RETURN QUERY
	SELECT d.group_name, d.feed_id, d.shard, d.change_sequence_number, d.change_id, d.attempts,
		   d.last_error, d.first_failed_at, d.dead_lettered_at
	FROM cfeed.failed_change d
	WHERE d.group_name = read_dead_letters.group_name AND d.feed_id = read_dead_letters.feed_id
	  AND (read_dead_letters.shard IS NULL OR d.shard = read_dead_letters.shard)
	  AND (read_dead_letters.first_number IS NULL OR d.change_sequence_number >= read_dead_letters.first_number)
	  AND (read_dead_letters.last_number IS NULL OR d.change_sequence_number <= read_dead_letters.last_number)
	  AND d.dead_lettered_at IS NOT NULL
	ORDER BY d.shard, d.change_sequence_number
	LIMIT read_dead_letters.max_count;
END
$fn$;
COMMENT ON FUNCTION cfeed.read_dead_letters(text, int, int, bigint, bigint, int) IS 'a consumer group''s dead letters on a feed in order (all, one shard''s, or a range of a shard''s), for an operator''s replay';

/*
 * cfeed._not_a_dead_letter: raise 42704 for a change that is not (or no
 * longer: resolved concurrently) a dead letter of the group.
 */
CREATE FUNCTION cfeed._not_a_dead_letter(group_name text, feed_id int, shard int, change_sequence_number bigint)
	RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	RAISE EXCEPTION 'change % of shard % of feed % is not a dead letter of group "%"',
		change_sequence_number, shard, feed_id, group_name
		USING ERRCODE = '42704',
			  HINT = 'cfeed.read_dead_letters() returns the group''s dead letters (one resolved by someone else is gone).';
END
$fn$;
COMMENT ON FUNCTION cfeed._not_a_dead_letter(text, int, int, bigint) IS 'internal: raises 42704 for a change that is not a dead letter of the group';

/*
 * cfeed._resolve_dead_letter: an operator has replayed a dead letter (in
 * the same transaction, for exactly once) or gives it up: it is deleted.
 * Only the oldest of its shard (replays keep the shard's order), and only
 * once the lease's cursor is at or past it (after a seek back over it,
 * the group's cursor has to come back first); locks the lease for that.
 * Runs as the extension's owner, called by cfeed.resolve_dead_letter
 * (below) after the caller's checks.
 */
CREATE FUNCTION cfeed._resolve_dead_letter(group_name text, feed_id int, shard int, change_sequence_number bigint)
	RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
#variable_conflict use_column
DECLARE
	v_group text := _resolve_dead_letter.group_name;
	v_feed int := _resolve_dead_letter.feed_id;
	v_shard int := _resolve_dead_letter.shard;
	v_number bigint := _resolve_dead_letter.change_sequence_number;
	v_head bigint;
	v_older bigint;
	v_cursor bigint;
BEGIN
	PERFORM cfeed._null_arg(a.name)
	FROM (VALUES (1, 'group_name', v_group IS NULL), (2, 'feed_id', v_feed IS NULL),
				 (3, 'shard', v_shard IS NULL), (4, 'change_sequence_number', v_number IS NULL)) AS a(pos, name, missing)
	WHERE a.missing ORDER BY a.pos LIMIT 1;
	v_head := cfeed.head(v_feed, v_shard);	-- 42501 or 42704 for the feed or shard
	-- The lease first (then the dead letter, as fail, seek and checkpoint):
	-- a seek back committed before the lock is seen below, and none commits
	-- until this transaction ends.
	SELECT l.cursor INTO v_cursor FROM cfeed.lease l
	WHERE l.group_name = v_group AND l.feed_id = v_feed AND l.shard = v_shard
	FOR UPDATE;
	IF NOT FOUND OR NOT EXISTS (SELECT FROM cfeed.failed_change d
				   WHERE d.group_name = v_group AND d.feed_id = v_feed AND d.shard = v_shard
					 AND d.change_sequence_number = v_number AND d.dead_lettered_at IS NOT NULL) THEN
		PERFORM cfeed._not_a_dead_letter(v_group, v_feed, v_shard, v_number);
	END IF;
	SELECT pg_catalog.min(d.change_sequence_number) INTO v_older FROM cfeed.failed_change d
	WHERE d.group_name = v_group AND d.feed_id = v_feed AND d.shard = v_shard
	  AND d.change_sequence_number < v_number AND d.dead_lettered_at IS NOT NULL;
	IF v_older IS NOT NULL THEN
		RAISE EXCEPTION 'dead letter % of group "%" on shard % of feed % follows dead letter %, which is not resolved',
			v_number, v_group, v_shard, v_feed, v_older
			USING ERRCODE = '55000',
				  HINT = 'Replay and resolve the dead letters of a shard in order, as cfeed.read_dead_letters() returns them.';
	END IF;
	IF v_number > v_cursor THEN
		RAISE EXCEPTION 'dead letter % of group "%" on shard % of feed % is after the group''s cursor %',
			v_number, v_group, v_shard, v_feed, v_cursor
			USING ERRCODE = '55000',
				  DETAIL = 'An operator moved the cursor back over it (cfeed.seek); the group has not passed it again.',
				  HINT = 'Resolve it once cfeed.consumer_lag shows the cursor at or past it.';
	END IF;
	-- A concurrent resolver waited at the lease, then finds it gone.
	DELETE FROM cfeed.failed_change d
	WHERE d.group_name = v_group AND d.feed_id = v_feed AND d.shard = v_shard
	  AND d.change_sequence_number = v_number AND d.dead_lettered_at IS NOT NULL;
	IF NOT FOUND THEN
		PERFORM cfeed._not_a_dead_letter(v_group, v_feed, v_shard, v_number);
	END IF;
END
$fn$;
COMMENT ON FUNCTION cfeed._resolve_dead_letter(text, int, int, bigint) IS 'internal: cfeed.resolve_dead_letter as the extension''s owner, after the caller''s checks: deletes a replayed (or given up) dead letter, the oldest of its shard, in the operator''s transaction';
REVOKE ALL ON FUNCTION cfeed._resolve_dead_letter(text, int, int, bigint) FROM PUBLIC;

/*
 * cfeed.resolve_dead_letter: checks the caller's read grant on the feed and
 * DELETE on cfeed.failed_change, then runs cfeed._resolve_dead_letter as the
 * extension's owner (it locks the lease, which the operator need not be
 * able to).
 */
CREATE FUNCTION cfeed.resolve_dead_letter(group_name text, feed_id int, shard int, change_sequence_number bigint)
	RETURNS void
	LANGUAGE c VOLATILE PARALLEL UNSAFE
	AS 'MODULE_PATHNAME', 'cfeed_resolve_dead_letter';
COMMENT ON FUNCTION cfeed.resolve_dead_letter(text, int, int, bigint) IS 'deletes a replayed (or given up) dead letter, the oldest of its shard, in the operator''s transaction';

/*
 * Monitoring: cfeed.consumer_lag gets the failed change a lease is
 * retrying (failing, attempts, last_error, retry_at) and its dead letters;
 * cfeed.groups the shards retrying a change and the dead letters.  The
 * definitions above, wrapped (columns added at the end).
 */
DO $do$
BEGIN
	EXECUTE pg_catalog.format($v$
		CREATE OR REPLACE VIEW cfeed.consumer_lag AS
		SELECT v.*, f.change_sequence_number AS failing, f.attempts, f.last_error, f.retry_at,
			   (SELECT pg_catalog.count(*) FROM cfeed.failed_change d
				WHERE d.group_name OPERATOR(pg_catalog.=) v.group_name
				  AND d.feed_id OPERATOR(pg_catalog.=) v.feed_id AND d.shard OPERATOR(pg_catalog.=) v.shard
				  AND d.dead_lettered_at IS NOT NULL) AS dead_letters
		FROM (%s) v
		LEFT JOIN LATERAL (
			SELECT x.change_sequence_number, x.attempts, x.last_error, x.retry_at
			FROM cfeed.failed_change x
			WHERE x.group_name OPERATOR(pg_catalog.=) v.group_name
			  AND x.feed_id OPERATOR(pg_catalog.=) v.feed_id AND x.shard OPERATOR(pg_catalog.=) v.shard
			  AND x.change_sequence_number OPERATOR(pg_catalog.>) v.cursor AND x.dead_lettered_at IS NULL
			ORDER BY x.change_sequence_number
			LIMIT 1) f ON true$v$,
		pg_catalog.regexp_replace(pg_catalog.pg_get_viewdef('cfeed.consumer_lag'::pg_catalog.regclass),
								  ';\s*$', ''));
	EXECUTE pg_catalog.format($v$
		CREATE OR REPLACE VIEW cfeed.groups AS
		SELECT v.*, COALESCE(d.failing, 0) AS failing, COALESCE(d.dead_letters, 0) AS dead_letters
		FROM (%s) v
		LEFT JOIN LATERAL (
			SELECT pg_catalog.count(DISTINCT x.shard) FILTER (WHERE x.dead_lettered_at IS NULL) AS failing,
				   pg_catalog.count(*) FILTER (WHERE x.dead_lettered_at IS NOT NULL) AS dead_letters
			FROM cfeed.failed_change x
			WHERE x.group_name OPERATOR(pg_catalog.=) v.group_name
			  AND x.feed_id OPERATOR(pg_catalog.=) v.feed_id) d ON true$v$,
		pg_catalog.regexp_replace(pg_catalog.pg_get_viewdef('cfeed.groups'::pg_catalog.regclass),
								  ';\s*$', ''));
END
$do$;
ALTER VIEW cfeed.consumer_lag SET (security_barrier = true);
ALTER VIEW cfeed.groups SET (security_barrier = true);

/*
 * cfeed._retention_held_by: as in 1.0, with dead letters: a group holds
 * retention from its lowest cursor or the change before its lowest dead
 * letter, whichever is lower (cfeed._apply_retention keeps dead letters
 * even when told to ignore leases).
 */
CREATE OR REPLACE FUNCTION cfeed._retention_held_by(feed_id int, shard int) RETURNS text
	LANGUAGE sql STABLE PARALLEL SAFE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
	SELECT l.group_name
	FROM (SELECT h.group_name, h.cursor
		  FROM ((SELECT x.group_name, x.cursor FROM cfeed.lease x
				 WHERE x.feed_id = $1 AND x.shard = $2
				 ORDER BY x.cursor, x.group_name LIMIT 1)
				UNION ALL
				(SELECT d.group_name, GREATEST(d.change_sequence_number, -9223372036854775807) - 1
				 FROM cfeed.failed_change d
				 WHERE d.feed_id = $1 AND d.shard = $2 AND d.dead_lettered_at IS NOT NULL
				 ORDER BY d.change_sequence_number, d.group_name LIMIT 1)) h
		  ORDER BY h.cursor, h.group_name LIMIT 1) l,
		 cfeed.shard s, cfeed.feed f,
		 LATERAL (SELECT c.change_sequence_number AS number,
						 COALESCE(c.stamped_at, c.written_at) AS stamped_at
				  FROM cfeed.change c
				  WHERE c.feed_id = $1 AND c.shard = $2
					AND c.change_sequence_number > l.cursor
				  ORDER BY c.change_sequence_number LIMIT 1) u
	WHERE s.feed_id = $1 AND s.shard = $2 AND f.feed_id = $1
	  AND f.retention IS NOT NULL
	  AND u.number < s.last_change_sequence_number
	  AND u.stamped_at < now() - f.retention
$fn$;



/* ---- tracked tables by number: a change's table survives replication ---- */

/*
 * Up to 1.7 cfeed.change.tbl was a regclass: logical replication sends it
 * by name, and a subscriber without the tracked table failed to apply the
 * change ("relation ... does not exist"), holding back every later change
 * of every feed, the initial copy of a new subscription too.  Since 1.8 a
 * change names its table by a number (four bytes, as the regclass), and
 * cfeed.tracked_table maps the number to the table (a regclass: it follows
 * renames and dumps by name) and to its qualified name, which a subscriber
 * without the table still has (src/table_numbers.c).
 */
CREATE TABLE cfeed.tracked_table (
	table_no int PRIMARY KEY,
	tbl regclass,
	name text
);
CREATE INDEX tracked_table_tbl_idx ON cfeed.tracked_table (tbl);
COMMENT ON TABLE cfeed.tracked_table IS 'the numbers of tracked tables, which cfeed.change.tbl holds: written by cfeed.track (and a tracked table''s first change), copied to subscribers';
COMMENT ON COLUMN cfeed.tracked_table.table_no IS 'the number a change of the table carries in cfeed.change.tbl';
COMMENT ON COLUMN cfeed.tracked_table.tbl IS 'the table; null where there is no such table (a subscriber without it, a table dropped before 1.8)';
COMMENT ON COLUMN cfeed.tracked_table.name IS 'the table''s schema-qualified name when it was numbered or last tracked; null for a table dropped before 1.8';
SELECT pg_catalog.pg_extension_config_dump('cfeed.tracked_table', '');

/*
 * On a subscriber the publisher's numbers arrive with their names only (the
 * publication's column list leaves tbl out): tbl becomes the subscriber's
 * table of that name, if it has one.  A number the subscriber has already
 * (one it was given under the same name before) is kept as it is; one it
 * has under another name is a collision of two clusters' numbers, refused.
 */
CREATE FUNCTION cfeed._tracked_table_resolve() RETURNS trigger
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF TG_OP = 'INSERT' THEN
		IF EXISTS (SELECT FROM cfeed.tracked_table t
				   WHERE t.table_no = NEW.table_no AND t.name IS NOT DISTINCT FROM NEW.name) THEN
			RETURN NULL;
		END IF;
		IF EXISTS (SELECT FROM cfeed.tracked_table t WHERE t.table_no = NEW.table_no) THEN
			RAISE EXCEPTION 'tracked table number % is % here, not %', NEW.table_no,
				(SELECT t.name FROM cfeed.tracked_table t WHERE t.table_no = NEW.table_no), NEW.name
				USING ERRCODE = '23505',
					  DETAIL = 'Two clusters gave one number to different tables; their changes cannot share cfeed.change.',
					  HINT = 'On the cluster where that table has no changes yet, delete its row of cfeed.tracked_table and run cfeed.track on it again (a new number).';
		END IF;
	END IF;
	IF NEW.tbl IS NULL AND NEW.name IS NOT NULL THEN
		NEW.tbl := pg_catalog.to_regclass(NEW.name);
	END IF;
	RETURN NEW;
END
$fn$;
COMMENT ON FUNCTION cfeed._tracked_table_resolve() IS 'internal: BEFORE INSERT OR UPDATE on cfeed.tracked_table: a number copied in with its name only gets the table of that name, if there is one';
REVOKE ALL ON FUNCTION cfeed._tracked_table_resolve() FROM PUBLIC;
CREATE TRIGGER tracked_table_resolve BEFORE INSERT OR UPDATE ON cfeed.tracked_table
	FOR EACH ROW EXECUTE FUNCTION cfeed._tracked_table_resolve();
ALTER TABLE cfeed.tracked_table ENABLE ALWAYS TRIGGER tracked_table_resolve;

/*
 * The tables of existing images and the tracked tables keep their OIDs as
 * their numbers: the column is relabelled in place (regclass -> oid -> int4
 * are binary coercible: no rewrite of cfeed.change, no new row values).
 */
INSERT INTO cfeed.tracked_table (table_no, tbl, name)
SELECT r.o::pg_catalog.int4,
	   CASE WHEN c.oid IS NOT NULL THEN r.o::pg_catalog.regclass END,
	   CASE WHEN c.oid IS NOT NULL THEN pg_catalog.format('%I.%I', n.nspname, c.relname) END
FROM (SELECT DISTINCT x.tbl::pg_catalog.oid AS o FROM cfeed.change x WHERE x.tbl IS NOT NULL
	  UNION
	  SELECT g.tgrelid FROM pg_catalog.pg_trigger g
	  WHERE g.tgfoid OPERATOR(pg_catalog.=) 'cfeed._track_row()'::pg_catalog.regprocedure
		AND g.tgparentid OPERATOR(pg_catalog.=) 0) r
LEFT JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) r.o
LEFT JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace;

CREATE FUNCTION cfeed._tracked_table(tbl int) RETURNS regclass
	LANGUAGE c STABLE STRICT PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'cfeed_tracked_table';
COMMENT ON FUNCTION cfeed._tracked_table(int) IS 'internal: the table of a tracked table''s number (cfeed.change.tbl), null where there is none';

CREATE FUNCTION cfeed._may_read_image(feed_id int, tbl int) RETURNS bool
	LANGUAGE c STABLE PARALLEL SAFE SUPPORT cfeed._may_read_support
	AS 'MODULE_PATHNAME', 'cfeed_may_read_image';
COMMENT ON FUNCTION cfeed._may_read_image(int, int) IS 'internal: whether the current user may read a change of the feed with a row image of the table numbered tbl (none when null; a number without a table here: no)';

-- the policy names the column: off it while the column changes type
ALTER POLICY change_read ON cfeed.change USING (cfeed._may_read(feed_id));
ALTER TABLE cfeed.change ALTER COLUMN tbl TYPE int USING tbl::pg_catalog.oid::pg_catalog.int4;
ALTER POLICY change_read ON cfeed.change USING (cfeed._may_read_image(feed_id, tbl));
COMMENT ON COLUMN cfeed.change.tbl IS 'for a change of a tracked table: the table''s number in cfeed.tracked_table (the tracked table, not a partition; a regclass before 1.8)';



/* ---- end ---- */
