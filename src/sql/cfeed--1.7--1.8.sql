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
				WHERE l.feed_id = s.feed_id AND l.shard = s.shard) AS held
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
			OR (NOT ignore_leases AND v_first > r.held);

		v_limit := LEAST(cfeed.cursor_at(r.feed_id, r.shard, v_cutoff), r.head - 1,
						 CASE WHEN ignore_leases THEN NULL ELSE r.held END);
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



/* ---- end ---- */
