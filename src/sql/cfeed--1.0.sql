/* src/sql/cfeed--1.0.sql */

\echo Use "CREATE EXTENSION cfeed" to load this file. \quit

CREATE SCHEMA cfeed;
COMMENT ON SCHEMA cfeed IS 'cfeed: race-safe change feeds with gapless per-shard sequence numbers';
GRANT USAGE ON SCHEMA cfeed TO PUBLIC;

/*
 * Catalogs.
 */

CREATE TABLE cfeed.feed (
	feed_id int PRIMARY KEY,
	name text NOT NULL UNIQUE
		CONSTRAINT feed_name_check CHECK (name OPERATOR(pg_catalog.~) '^[A-Za-z0-9_-]+$'),
	comment text,
	retention interval
		CONSTRAINT feed_retention_check CHECK (retention OPERATOR(pg_catalog.>) interval '0')
);
COMMENT ON TABLE cfeed.feed IS 'one row per feed; feed_id is chosen by the application';

CREATE TABLE cfeed.shard_config (
	feed_id int NOT NULL REFERENCES cfeed.feed ON DELETE CASCADE,
	shard int NOT NULL CONSTRAINT shard_shard_check CHECK (shard OPERATOR(pg_catalog.>=) 0),
	sweep_group int NOT NULL DEFAULT 0,
	longpoll bool NOT NULL DEFAULT true,
	start_sequence_number bigint NOT NULL DEFAULT 2000000000000000,
	PRIMARY KEY (feed_id, shard)
);
COMMENT ON TABLE cfeed.shard_config IS 'storage of cfeed.shard: what is set when a shard is created (no sweep ever updates it)';

CREATE SEQUENCE cfeed.change_id START WITH 1000000000000000 CACHE 1;
COMMENT ON SEQUENCE cfeed.change_id IS 'global change ids; CACHE 1 so that ids grow with time across backends';

CREATE FUNCTION cfeed._writer_xid() RETURNS xid8
	LANGUAGE c VOLATILE PARALLEL UNSAFE
	AS 'MODULE_PATHNAME', 'cfeed_writer_xid';
COMMENT ON FUNCTION cfeed._writer_xid() IS 'internal: the writing transaction''s top-level xid (default of cfeed.change.writer_xid)';

CREATE TABLE cfeed.change (
	feed_id int NOT NULL,
	shard int NOT NULL,
	change_id bigint NOT NULL,
	change_sequence_number bigint,
	stamped_at timestamptz,
	written_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	writer_xid xid8 NOT NULL DEFAULT cfeed._writer_xid(),
	CONSTRAINT change_shard_fkey FOREIGN KEY (feed_id, shard) REFERENCES cfeed.shard_config
) WITH (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_insert_scale_factor = 0.05,
		autovacuum_analyze_scale_factor = 0.05);
COMMENT ON TABLE cfeed.change IS 'changes: writers insert (feed_id, shard, change_id); the sweeper stamps change_sequence_number after commit';
COMMENT ON COLUMN cfeed.change.written_at IS 'start of the writing transaction';
COMMENT ON COLUMN cfeed.change.writer_xid IS 'internal: top-level xid of the writing transaction, used by the sweeper to find new changes';

-- Readers: "everything after my cursor" is a range scan of this index.
CREATE UNIQUE INDEX change_sequence_idx ON cfeed.change
	(feed_id, shard, change_sequence_number) WHERE change_sequence_number IS NOT NULL;
-- The sweeper: changes not yet stamped, by writing transaction.
CREATE INDEX change_pending_idx ON cfeed.change (writer_xid) WHERE change_sequence_number IS NULL;

/*
 * cfeed.shard: the shard's configuration plus its head.  The head is not
 * stored: last_change_sequence_number is the highest stamped number (one
 * backward probe of change_sequence_idx), so it equals it in every snapshot
 * by construction (SPEC §3 guarantee 5), and no sweep updates a row that
 * writers' foreign-key checks lock (a row updated per sweep grows a version
 * chain that cannot be pruned while the xmin horizon is held).
 */
CREATE VIEW cfeed.shard AS
	SELECT s.feed_id, s.shard, s.sweep_group, s.longpoll,
		   COALESCE(h.change_sequence_number, s.start_sequence_number) AS last_change_sequence_number,
		   h.stamped_at AS last_sweep_time,
		   s.start_sequence_number
	FROM cfeed.shard_config s
	LEFT JOIN LATERAL (
		SELECT c.change_sequence_number, c.stamped_at
		FROM cfeed.change c
		WHERE c.feed_id OPERATOR(pg_catalog.=) s.feed_id
		  AND c.shard OPERATOR(pg_catalog.=) s.shard
		  AND c.change_sequence_number OPERATOR(pg_catalog.>) s.start_sequence_number
		ORDER BY c.change_sequence_number DESC
		LIMIT 1) h ON true;
ALTER VIEW cfeed.shard ALTER COLUMN sweep_group SET DEFAULT 0;
ALTER VIEW cfeed.shard ALTER COLUMN longpoll SET DEFAULT true;
ALTER VIEW cfeed.shard ALTER COLUMN last_change_sequence_number SET DEFAULT 2000000000000000;
COMMENT ON VIEW cfeed.shard IS 'each (feed_id, shard) is an independent, gapless, ordered log; insert, update (sweep_group, longpoll) and delete shards here';
COMMENT ON COLUMN cfeed.shard.last_change_sequence_number IS 'highest stamped number of the shard (its start value before the first stamp)';
COMMENT ON COLUMN cfeed.shard.last_sweep_time IS 'when the shard''s last change was stamped';
COMMENT ON COLUMN cfeed.shard.start_sequence_number IS 'last_change_sequence_number the shard was created with: numbers at or below it form the migration range';

SELECT pg_catalog.pg_extension_config_dump('cfeed.feed', '');
SELECT pg_catalog.pg_extension_config_dump('cfeed.shard_config', '');
SELECT pg_catalog.pg_extension_config_dump('cfeed.change', '');
SELECT pg_catalog.pg_extension_config_dump('cfeed.change_id', '');

/*
 * Guards: keep the numbering in the sweeper's hands.
 */

CREATE FUNCTION cfeed._change_guard() RETURNS trigger
	LANGUAGE c AS 'MODULE_PATHNAME', 'cfeed_change_guard';
COMMENT ON FUNCTION cfeed._change_guard() IS 'internal: refuses writer-chosen sequence numbers outside the migration range';

CREATE TRIGGER change_guard BEFORE INSERT ON cfeed.change FOR EACH ROW
	WHEN (NEW.change_sequence_number IS NOT NULL OR NEW.stamped_at IS NOT NULL
		  OR NEW.writer_xid OPERATOR(pg_catalog.<>) pg_catalog.pg_current_xact_id())
	EXECUTE FUNCTION cfeed._change_guard();

CREATE FUNCTION cfeed._shard_write() RETURNS trigger
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	IF TG_OP = 'INSERT' THEN
		NEW.last_change_sequence_number := COALESCE(NEW.last_change_sequence_number, 2000000000000000);
		IF NEW.start_sequence_number IS DISTINCT FROM NEW.last_change_sequence_number
		   AND NEW.start_sequence_number IS NOT NULL OR NEW.last_sweep_time IS NOT NULL THEN
			RAISE EXCEPTION 'a new shard % of feed % must start at its last_change_sequence_number', NEW.shard, NEW.feed_id
				USING ERRCODE = '22023',
					  HINT = 'Set only last_change_sequence_number (the start value), or leave it to its default.';
		END IF;
		INSERT INTO cfeed.shard_config (feed_id, shard, sweep_group, longpoll, start_sequence_number)
		VALUES (NEW.feed_id, NEW.shard, COALESCE(NEW.sweep_group, 0), COALESCE(NEW.longpoll, true),
				NEW.last_change_sequence_number);
		NEW.sweep_group := COALESCE(NEW.sweep_group, 0);
		NEW.longpoll := COALESCE(NEW.longpoll, true);
		NEW.start_sequence_number := NEW.last_change_sequence_number;
		RETURN NEW;
	ELSIF TG_OP = 'UPDATE' THEN
		IF NEW.feed_id IS DISTINCT FROM OLD.feed_id OR NEW.shard IS DISTINCT FROM OLD.shard
		   OR NEW.last_change_sequence_number IS DISTINCT FROM OLD.last_change_sequence_number
		   OR NEW.start_sequence_number IS DISTINCT FROM OLD.start_sequence_number
		   OR NEW.last_sweep_time IS DISTINCT FROM OLD.last_sweep_time THEN
			RAISE EXCEPTION 'the numbering of shard % of feed % cannot be changed', OLD.shard, OLD.feed_id
				USING ERRCODE = '22023',
					  DETAIL = 'last_change_sequence_number and last_sweep_time follow the stamped changes, and start_sequence_number is fixed when the shard is created.',
					  HINT = 'Update only sweep_group or longpoll of a shard.';
		END IF;
		UPDATE cfeed.shard_config SET sweep_group = NEW.sweep_group, longpoll = NEW.longpoll
		WHERE feed_id = OLD.feed_id AND shard = OLD.shard;
		RETURN NEW;
	END IF;
	DELETE FROM cfeed.shard_config WHERE feed_id = OLD.feed_id AND shard = OLD.shard;
	RETURN OLD;
END
$$;
COMMENT ON FUNCTION cfeed._shard_write() IS 'internal: INSERT, UPDATE and DELETE on the cfeed.shard view';
-- Triggers fire whatever the caller's EXECUTE; only privileges on the view count.
REVOKE ALL ON FUNCTION cfeed._shard_write() FROM PUBLIC;

CREATE TRIGGER shard_write INSTEAD OF INSERT OR UPDATE OR DELETE ON cfeed.shard
	FOR EACH ROW EXECUTE FUNCTION cfeed._shard_write();

/*
 * Writing.
 */

CREATE FUNCTION cfeed.create_feed(name text, shards int DEFAULT 1, feed_id int DEFAULT NULL,
								  sweep_group int DEFAULT 0, longpoll bool DEFAULT true,
								  comment text DEFAULT NULL)
	RETURNS int
	LANGUAGE c VOLATILE PARALLEL UNSAFE
	AS 'MODULE_PATHNAME', 'cfeed_create_feed';
COMMENT ON FUNCTION cfeed.create_feed(text, int, int, int, bool, text) IS 'creates a feed with shards 0..shards-1 and returns its feed_id';

CREATE FUNCTION cfeed.publish(feed_id int, shard int,
							  change_id bigint DEFAULT pg_catalog.nextval('cfeed.change_id'))
	RETURNS bigint
	LANGUAGE c VOLATILE PARALLEL UNSAFE
	AS 'MODULE_PATHNAME', 'cfeed_publish';
COMMENT ON FUNCTION cfeed.publish(int, int, bigint) IS 'records a change in the caller''s transaction and returns its change_id';

CREATE FUNCTION cfeed.shard_for(feed_id int, key text) RETURNS int
	LANGUAGE c STABLE PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'cfeed_shard_for';
COMMENT ON FUNCTION cfeed.shard_for(int, text) IS 'the shard of a partition key: FNV-1a 32-bit of the key''s UTF-8 bytes modulo the feed''s shard count';

/*
 * Sweeping.
 */

CREATE FUNCTION cfeed.sweep(sweep_group int DEFAULT 0)
	RETURNS TABLE (feed_id int, shard int, change_count int,
				   last_change_sequence_number bigint, lag_ms bigint)
	LANGUAGE c VOLATILE PARALLEL UNSAFE
	AS 'MODULE_PATHNAME', 'cfeed_sweep';
COMMENT ON FUNCTION cfeed.sweep(int) IS 'stamps the committed changes of a sweep group now; one row per shard that got changes';

CREATE PROCEDURE cfeed.sweep_loop(sweep_group int, wait_ms int, duration_ms int, sleep_ms int,
								  OUT change_count int, OUT max_lag_ms bigint, OUT iterations int)
	LANGUAGE c
	AS 'MODULE_PATHNAME', 'cfeed_sweep_loop';
COMMENT ON PROCEDURE cfeed.sweep_loop(int, int, int, int, int, bigint, int) IS 'sweeps a group repeatedly for duration_ms, committing each sweep';

REVOKE ALL ON FUNCTION cfeed.sweep(int) FROM PUBLIC;
REVOKE ALL ON PROCEDURE cfeed.sweep_loop(int, int, int, int, int, bigint, int) FROM PUBLIC;

/*
 * Reading.
 */

CREATE FUNCTION cfeed.read(feed_id int, shard int, cursor bigint DEFAULT NULL,
						   max_count int DEFAULT 1000, wait_ms int DEFAULT 0)
	RETURNS TABLE (change_sequence_number bigint, change_id bigint, stamped_at timestamptz)
	LANGUAGE c VOLATILE PARALLEL UNSAFE ROWS 1000
	AS 'MODULE_PATHNAME', 'cfeed_read';
COMMENT ON FUNCTION cfeed.read(int, int, bigint, int, int) IS 'stamped changes after the cursor, ascending; waits up to wait_ms when there are none';

CREATE FUNCTION cfeed.wait(feed_id int, shard int, cursor bigint, timeout_ms int DEFAULT 30000)
	RETURNS bigint
	LANGUAGE c VOLATILE PARALLEL UNSAFE
	AS 'MODULE_PATHNAME', 'cfeed_wait';
COMMENT ON FUNCTION cfeed.wait(int, int, bigint, int) IS 'blocks until the shard''s head passes the cursor or the timeout ends; returns the head';

CREATE FUNCTION cfeed.head(feed_id int, shard int) RETURNS bigint
	LANGUAGE c STABLE PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'cfeed_head';
COMMENT ON FUNCTION cfeed.head(int, int) IS 'the shard''s last stamped number (its start value before the first stamp)';

CREATE FUNCTION cfeed.cursor_at(feed_id int, shard int, at timestamptz) RETURNS bigint
	LANGUAGE c STABLE PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'cfeed_cursor_at';
COMMENT ON FUNCTION cfeed.cursor_at(int, int, timestamptz) IS 'the cursor from which reading returns the changes stamped at or after a time';

CREATE FUNCTION cfeed.channel(feed_id int, shard int) RETURNS text
	LANGUAGE c STABLE PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'cfeed_channel';
COMMENT ON FUNCTION cfeed.channel(int, int) IS 'the LISTEN channel on which the sweeper announces a shard''s new head';

/*
 * Operations.
 */

CREATE FUNCTION cfeed._sweepers()
	RETURNS TABLE (pid int, datname name, sweep_group int, sweeps bigint,
				   changes_stamped bigint, last_sweep_time timestamptz, last_error text)
	LANGUAGE c VOLATILE PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'cfeed_sweepers';
COMMENT ON FUNCTION cfeed._sweepers() IS 'internal: the background sweepers'' shared-memory counters';
REVOKE ALL ON FUNCTION cfeed._sweepers() FROM PUBLIC;

CREATE VIEW cfeed.sweepers AS
	SELECT pid, datname, sweep_group, sweeps, changes_stamped, last_sweep_time, last_error
	FROM cfeed._sweepers();
COMMENT ON VIEW cfeed.sweepers IS 'the running background sweepers of all databases';

-- Placeholder: the real body is in the "Consumer groups" section (it reads cfeed.lease).
CREATE FUNCTION cfeed._retention_held_by(feed_id int, shard int) RETURNS text
	LANGUAGE sql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $$ SELECT NULL::text $$;

CREATE VIEW cfeed.stats AS
	SELECT s.feed_id, f.name AS feed_name, s.shard, s.sweep_group,
		   s.last_change_sequence_number AS head, s.last_sweep_time,
		   COALESCE(p.pending, 0) AS pending,
		   pg_catalog.now() OPERATOR(pg_catalog.-) p.oldest_written_at AS oldest_pending_age,
		   cfeed._retention_held_by(s.feed_id, s.shard) AS retention_held_by
	FROM cfeed.shard s
	JOIN cfeed.feed f ON f.feed_id OPERATOR(pg_catalog.=) s.feed_id
	LEFT JOIN (SELECT c.feed_id, c.shard, pg_catalog.count(*) AS pending,
					  pg_catalog.min(c.written_at) AS oldest_written_at
			   FROM cfeed.change c
			   WHERE c.change_sequence_number IS NULL
			   GROUP BY c.feed_id, c.shard) p
		   ON p.feed_id OPERATOR(pg_catalog.=) s.feed_id AND p.shard OPERATOR(pg_catalog.=) s.shard;
COMMENT ON VIEW cfeed.stats IS 'one row per shard: head, last sweep, committed changes waiting for a stamp';

/*
 * Consumer groups (SPEC §5) and retention (SPEC §6).
 *
 * A group is a name; its members ("owners") share the shards of a feed
 * through one lease row per (group, feed, shard).  owner IS NULL means the
 * lease is free (released, or never taken); a lease whose expires_at has
 * passed is free for anyone else, yet still its owner's until someone takes
 * it.  Every change of owner, and every seek, bumps epoch; checkpoint is
 * fenced by (owner, epoch), so a consumer that lost a lease cannot move its
 * cursor.
 *
 * Locking protocol: every function that changes leases locks the rows it
 * changes in shard order (acquire locks all of the group's rows of the feed
 * with SELECT ... FOR UPDATE ORDER BY shard before deciding anything), so
 * concurrent acquires serialize per (group, feed) and see each other's
 * results, and a checkpoint waits for, or is fenced by, a steal.
 */

CREATE TABLE cfeed.lease (
	group_name text NOT NULL
		CONSTRAINT lease_group_name_check CHECK (group_name OPERATOR(pg_catalog.<>) ''),
	feed_id int NOT NULL,
	shard int NOT NULL,
	owner text
		CONSTRAINT lease_owner_check CHECK (owner OPERATOR(pg_catalog.<>) ''),
	cursor bigint NOT NULL,
	epoch bigint NOT NULL DEFAULT 0,
	expires_at timestamptz,
	updated_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	PRIMARY KEY (group_name, feed_id, shard),
	CONSTRAINT lease_shard_fkey FOREIGN KEY (feed_id, shard) REFERENCES cfeed.shard_config ON DELETE CASCADE
);
-- Retention's "lowest cursor of a shard" and the foreign key's cascade.
CREATE INDEX lease_shard_idx ON cfeed.lease (feed_id, shard, cursor);
COMMENT ON TABLE cfeed.lease IS 'consumer groups: one lease per (group, feed, shard) with its owner, cursor and fencing epoch';
COMMENT ON COLUMN cfeed.lease.owner IS 'the consumer holding the lease; null when free';
COMMENT ON COLUMN cfeed.lease.cursor IS 'number of the last change the group processed on this shard (checkpointed)';
COMMENT ON COLUMN cfeed.lease.epoch IS 'bumped on every change of owner and every seek; checkpoint must quote it';
COMMENT ON COLUMN cfeed.lease.expires_at IS 'after this time anyone may take the lease; renewed by acquire';
REVOKE ALL ON cfeed.lease FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('cfeed.lease', '');

/*
 * cfeed._null_arg: raise 22004 for a required argument that is null.
 */
CREATE FUNCTION cfeed._null_arg(argname text) RETURNS void
	LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	RAISE EXCEPTION 'argument "%" must not be null', argname USING ERRCODE = '22004';
END
$fn$;
COMMENT ON FUNCTION cfeed._null_arg(text) IS 'internal: raises 22004 for a null argument';

/*
 * cfeed._check_feed: raise 42704 for an unknown feed.
 */
CREATE FUNCTION cfeed._check_feed(feed_id int) RETURNS void
	LANGUAGE plpgsql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF NOT EXISTS (SELECT FROM cfeed.feed f WHERE f.feed_id = _check_feed.feed_id) THEN
		RAISE EXCEPTION 'feed % does not exist', feed_id
			USING ERRCODE = '42704', HINT = 'Create it with cfeed.create_feed().';
	END IF;
END
$fn$;
COMMENT ON FUNCTION cfeed._check_feed(int) IS 'internal: raises 42704 for an unknown feed';

/*
 * cfeed.acquire: create, renew, take and steal leases (see the section
 * header for the locking protocol).  Balancing: the live owners are those
 * holding an unexpired lease, plus the caller.  With S shards and N live
 * owners each owner's target is floor(S/N), and the S mod N owners holding
 * the most (ties by name) get one more, so settled owners keep their
 * shards.  The caller takes free and expired leases first (lowest shard
 * first), then steals round-robin from the owners above their target
 * (highest shard first).  It never gives up shards itself: owners above
 * their share lose them to the others' acquire calls.
 */
CREATE FUNCTION cfeed.acquire(group_name text, feed_id int, owner text,
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
	v_target int;
	v_need int;
	v_names text[];
	v_targets int[];
	v_helds int[];
	v_taken int;
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
				COALESCE((SELECT c.change_sequence_number - 1 FROM cfeed.change c
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

	-- Targets of the live owners (the caller included).
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
								ORDER BY r.rk),
		   pg_catalog.array_agg(r.n ORDER BY r.rk)
	INTO v_names, v_targets, v_helds
	FROM ranked r;

	v_target := v_targets[pg_catalog.array_position(v_names, v_owner)];
	v_need := v_target - v_have;

	IF v_need > 0 THEN
		-- Free and expired leases first.
		UPDATE cfeed.lease l
		SET owner = v_owner, epoch = l.epoch + 1, expires_at = v_expires, updated_at = v_now
		WHERE l.group_name = v_group AND l.feed_id = v_feed
		  AND l.shard IN (SELECT x.shard FROM cfeed.lease x
						  WHERE x.group_name = v_group AND x.feed_id = v_feed
							AND (x.owner IS NULL OR x.expires_at IS NULL OR x.expires_at <= v_now)
						  ORDER BY x.shard LIMIT v_need);
		GET DIAGNOSTICS v_taken = ROW_COUNT;
		v_need := v_need - v_taken;
	END IF;

	IF v_need > 0 THEN
		-- Then steal from owners above their target, round-robin.
		WITH victim AS (
			SELECT t.o, t.n - t.target AS excess
			FROM ROWS FROM (pg_catalog.unnest(v_names), pg_catalog.unnest(v_targets),
							pg_catalog.unnest(v_helds)) AS t(o, target, n)
			WHERE t.o <> v_owner AND t.n > t.target
		), candidate AS (
			SELECT x.shard, v.o, v.excess,
				   pg_catalog.row_number() OVER (PARTITION BY x.owner ORDER BY x.shard DESC) AS k
			FROM cfeed.lease x JOIN victim v ON x.owner = v.o
			WHERE x.group_name = v_group AND x.feed_id = v_feed AND x.expires_at > v_now
		)
		UPDATE cfeed.lease l
		SET owner = v_owner, epoch = l.epoch + 1, expires_at = v_expires, updated_at = v_now
		WHERE l.group_name = v_group AND l.feed_id = v_feed
		  AND l.shard IN (SELECT c.shard FROM candidate c WHERE c.k <= c.excess
						  ORDER BY c.k, c.excess DESC, c.o LIMIT v_need);
	END IF;

	RETURN QUERY
		SELECT l.shard, l.cursor, l.epoch, l.expires_at FROM cfeed.lease l
		WHERE l.group_name = v_group AND l.feed_id = v_feed AND l.owner = v_owner
		ORDER BY l.shard;
END
$fn$;
COMMENT ON FUNCTION cfeed.acquire(text, int, text, int, timestamptz) IS 'joins a consumer group: creates missing leases, renews the owner''s, takes free and expired ones and steals toward a fair share; returns what the owner holds';

/*
 * cfeed.checkpoint: store a lease's cursor, fenced by owner and epoch.
 */
CREATE FUNCTION cfeed.checkpoint(group_name text, feed_id int, shard int, owner text,
								 epoch bigint, cursor bigint)
	RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
#variable_conflict use_column
DECLARE
	v_group text := checkpoint.group_name;
	v_feed int := checkpoint.feed_id;
	v_shard int := checkpoint.shard;
	v_owner text := checkpoint.owner;
	v_epoch bigint := checkpoint.epoch;
	v_cursor bigint := checkpoint.cursor;
	v_lease text;
	v_head bigint;
	l record;
BEGIN
	IF v_group IS NULL THEN PERFORM cfeed._null_arg('group_name'); END IF;
	IF v_feed IS NULL THEN PERFORM cfeed._null_arg('feed_id'); END IF;
	IF v_shard IS NULL THEN PERFORM cfeed._null_arg('shard'); END IF;
	IF v_owner IS NULL THEN PERFORM cfeed._null_arg('owner'); END IF;
	IF v_epoch IS NULL THEN PERFORM cfeed._null_arg('epoch'); END IF;
	IF v_cursor IS NULL THEN PERFORM cfeed._null_arg('cursor'); END IF;
	v_lease := pg_catalog.format('lease of group "%s" on shard %s of feed %s', v_group, v_shard, v_feed);

	SELECT x.owner, x.epoch, x.cursor, x.expires_at INTO l
	FROM cfeed.lease x
	WHERE x.group_name = v_group AND x.feed_id = v_feed AND x.shard = v_shard
	FOR UPDATE;
	IF NOT FOUND THEN
		v_head := cfeed.head(v_feed, v_shard);	-- 42704 for an unknown feed or shard
		RAISE EXCEPTION '% does not exist', v_lease
			USING ERRCODE = '42704',
				  HINT = 'Call cfeed.acquire() to create the group''s leases and learn which shards you hold.';
	END IF;
	IF l.owner IS DISTINCT FROM v_owner OR l.epoch <> v_epoch THEN
		RAISE EXCEPTION '% is %, not by "%" at epoch %', v_lease,
			CASE WHEN l.owner IS NULL THEN pg_catalog.format('free at epoch %s', l.epoch)
				 ELSE pg_catalog.format('held by "%s" at epoch %s', l.owner, l.epoch) END,
			v_owner, v_epoch
			USING ERRCODE = '55000',
				  DETAIL = 'The lease changed hands (or an operator moved its cursor) after you acquired it; its cursor stays at ' || l.cursor || '.',
				  HINT = 'Roll back this transaction and call cfeed.acquire() to learn which shards you hold now.';
	END IF;
	IF l.expires_at IS NULL OR l.expires_at <= pg_catalog.clock_timestamp() THEN
		RAISE EXCEPTION '% held by "%" at epoch % has expired', v_lease, v_owner, v_epoch
			USING ERRCODE = '55000',
				  DETAIL = 'It expired at ' || l.expires_at || '.',
				  HINT = 'Roll back, renew with cfeed.acquire() (the lease is still yours if nobody took it) and resume from the cursor it returns.';
	END IF;
	IF v_cursor < l.cursor THEN
		RAISE EXCEPTION 'checkpoint would move the cursor of the % backwards from % to %',
			v_lease, l.cursor, v_cursor
			USING ERRCODE = '55000',
				  HINT = 'Checkpoint the number of the last change you processed; to replay, an operator can use cfeed.seek().';
	END IF;
	SELECT s.last_change_sequence_number INTO v_head FROM cfeed.shard s
	WHERE s.feed_id = v_feed AND s.shard = v_shard;
	IF v_cursor > v_head THEN
		RAISE EXCEPTION 'cursor % is beyond the head % of shard % of feed %',
			v_cursor, v_head, v_shard, v_feed
			USING ERRCODE = '22023',
				  HINT = 'Checkpoint the change_sequence_number of the last change you processed.';
	END IF;

	UPDATE cfeed.lease x SET cursor = v_cursor, updated_at = pg_catalog.clock_timestamp()
	WHERE x.group_name = v_group AND x.feed_id = v_feed AND x.shard = v_shard;
END
$fn$;
COMMENT ON FUNCTION cfeed.checkpoint(text, int, int, text, bigint, bigint) IS 'stores a lease''s cursor; refused (55000) unless the owner holds the lease at that epoch, unexpired, and the cursor does not move back';

/*
 * cfeed.release: give an owner's leases up, keeping cursor and epoch.
 */
CREATE FUNCTION cfeed.release(group_name text, feed_id int, owner text)
	RETURNS int
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
#variable_conflict use_column
DECLARE
	v_count int;
BEGIN
	IF release.group_name IS NULL THEN PERFORM cfeed._null_arg('group_name'); END IF;
	IF release.feed_id IS NULL THEN PERFORM cfeed._null_arg('feed_id'); END IF;
	IF release.owner IS NULL THEN PERFORM cfeed._null_arg('owner'); END IF;
	PERFORM cfeed._check_feed(release.feed_id);

	PERFORM FROM cfeed.lease l
	WHERE l.group_name = release.group_name AND l.feed_id = release.feed_id
	  AND l.owner = release.owner
	ORDER BY l.shard
	FOR UPDATE;
	UPDATE cfeed.lease l
	SET owner = NULL, expires_at = NULL, updated_at = pg_catalog.clock_timestamp()
	WHERE l.group_name = release.group_name AND l.feed_id = release.feed_id
	  AND l.owner = release.owner;
	GET DIAGNOSTICS v_count = ROW_COUNT;
	RETURN v_count;
END
$fn$;
COMMENT ON FUNCTION cfeed.release(text, int, text) IS 'gives up the owner''s leases of a group on a feed (cursors kept); returns how many';

/*
 * cfeed.seek: an operator moves a group's cursor on one shard (replay or
 * skip).  Bumps epoch so the holder's next checkpoint is refused; the holder
 * keeps the lease and learns the new cursor and epoch from acquire.  Creates
 * the lease (free) when the group has none on the shard yet, which is how
 * to start a group at a chosen position.  Returns the new epoch.
 */
CREATE FUNCTION cfeed.seek(group_name text, feed_id int, shard int, cursor bigint)
	RETURNS bigint
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
#variable_conflict use_column
DECLARE
	v_head bigint;
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
COMMENT ON FUNCTION cfeed.seek(text, int, int, bigint) IS 'moves a group''s cursor on a shard (replay or skip) and bumps the epoch, fencing the holder; returns the new epoch';

/*
 * cfeed.drop_group: delete a group's leases on a feed.
 */
CREATE FUNCTION cfeed.drop_group(group_name text, feed_id int)
	RETURNS int
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
#variable_conflict use_column
DECLARE
	v_count int;
BEGIN
	IF drop_group.group_name IS NULL THEN PERFORM cfeed._null_arg('group_name'); END IF;
	IF drop_group.feed_id IS NULL THEN PERFORM cfeed._null_arg('feed_id'); END IF;
	PERFORM cfeed._check_feed(drop_group.feed_id);

	PERFORM FROM cfeed.lease l
	WHERE l.group_name = drop_group.group_name AND l.feed_id = drop_group.feed_id
	ORDER BY l.shard
	FOR UPDATE;
	DELETE FROM cfeed.lease l
	WHERE l.group_name = drop_group.group_name AND l.feed_id = drop_group.feed_id;
	GET DIAGNOSTICS v_count = ROW_COUNT;
	RETURN v_count;
END
$fn$;
COMMENT ON FUNCTION cfeed.drop_group(text, int) IS 'deletes a consumer group''s leases on a feed (its members are fenced, retention is no longer held); returns how many';

CREATE VIEW cfeed.consumer_lag AS
	SELECT l.group_name, l.feed_id, l.shard, l.owner, l.epoch, l.cursor,
		   s.last_change_sequence_number AS head,
		   s.last_change_sequence_number OPERATOR(pg_catalog.-) l.cursor AS behind,
		   CASE WHEN u.stamped_at IS NOT NULL
				THEN GREATEST(pg_catalog.now() OPERATOR(pg_catalog.-) u.stamped_at, interval '0')
		   END AS oldest_unread_age,
		   l.expires_at
	FROM cfeed.lease l
	JOIN cfeed.shard s
	  ON s.feed_id OPERATOR(pg_catalog.=) l.feed_id AND s.shard OPERATOR(pg_catalog.=) l.shard
	LEFT JOIN LATERAL (
		SELECT COALESCE(c.stamped_at, c.written_at) AS stamped_at
		FROM cfeed.change c
		WHERE c.feed_id OPERATOR(pg_catalog.=) l.feed_id AND c.shard OPERATOR(pg_catalog.=) l.shard
		  AND c.change_sequence_number OPERATOR(pg_catalog.>) l.cursor
		ORDER BY c.change_sequence_number
		LIMIT 1) u ON true;
COMMENT ON VIEW cfeed.consumer_lag IS 'per lease: head, cursor, changes behind (head - cursor) and the age of the oldest unread change';

CREATE VIEW cfeed.groups AS
	SELECT l.group_name, l.feed_id,
		   pg_catalog.count(*) AS shards,
		   pg_catalog.count(*) FILTER (WHERE l.expires_at OPERATOR(pg_catalog.>) pg_catalog.now()) AS held,
		   COALESCE(pg_catalog.array_agg(DISTINCT l.owner ORDER BY l.owner)
					FILTER (WHERE l.expires_at OPERATOR(pg_catalog.>) pg_catalog.now()),
					'{}') AS owners,
		   pg_catalog.min(l.cursor) AS min_cursor,
		   pg_catalog.sum(s.last_change_sequence_number OPERATOR(pg_catalog.-) l.cursor)::bigint AS behind,
		   pg_catalog.max(l.updated_at) AS updated_at
	FROM cfeed.lease l
	JOIN cfeed.shard s
	  ON s.feed_id OPERATOR(pg_catalog.=) l.feed_id AND s.shard OPERATOR(pg_catalog.=) l.shard
	GROUP BY l.group_name, l.feed_id;
COMMENT ON VIEW cfeed.groups IS 'one row per consumer group and feed: leases, leases held unexpired, live owners, lowest cursor, total changes behind';

/*
 * cfeed._retention_held_by: the group whose lease keeps retention from
 * deleting changes on a shard: the lease with the lowest cursor (ties by
 * group name), when the first change after it is older than the feed's
 * retention and is not the head row.  Used by cfeed.stats.
 */
CREATE OR REPLACE FUNCTION cfeed._retention_held_by(feed_id int, shard int) RETURNS text
	LANGUAGE sql STABLE PARALLEL SAFE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
	SELECT l.group_name
	FROM (SELECT x.group_name, x.cursor FROM cfeed.lease x
		  WHERE x.feed_id = $1 AND x.shard = $2
		  ORDER BY x.cursor, x.group_name LIMIT 1) l,
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
COMMENT ON FUNCTION cfeed._retention_held_by(int, int) IS 'internal: the consumer group whose unread changes keep retention from deleting on a shard (cfeed.stats)';
REVOKE ALL ON FUNCTION cfeed._retention_held_by(int, int) FROM PUBLIC;

/*
 * cfeed._apply_retention: delete stamped changes older than their feed's
 * retention, at most max_rows in all, lowest numbers first.  Never deletes
 * a shard's head row, nor (unless ignore_leases) a change that some lease
 * of any group has not read yet (number > cursor).  Cheap when there is
 * nothing to do: one index probe per shard of a feed with retention.
 * Called by the background sweeper; returns the number of rows deleted.
 */
CREATE FUNCTION cfeed._apply_retention(max_rows int DEFAULT 10000, ignore_leases bool DEFAULT false)
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
		v_limit := LEAST(v_limit, v_first + (max_rows - v_deleted) - 1);
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
COMMENT ON FUNCTION cfeed._apply_retention(int, bool) IS 'internal: one bounded retention pass (called by the background sweeper); returns rows deleted';
REVOKE ALL ON FUNCTION cfeed._apply_retention(int, bool) FROM PUBLIC;

/*
 * cfeed.apply_retention: retention now, in batches, until nothing is due.
 * With ignore_leases => true it also deletes changes that consumer groups
 * have not read yet (an operator's decision for an abandoned group).
 */
CREATE FUNCTION cfeed.apply_retention(ignore_leases bool DEFAULT false)
	RETURNS bigint
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_total bigint := 0;
	v_batch bigint;
BEGIN
	IF ignore_leases IS NULL THEN PERFORM cfeed._null_arg('ignore_leases'); END IF;
	LOOP
		v_batch := cfeed._apply_retention(10000, ignore_leases);
		v_total := v_total + v_batch;
		EXIT WHEN v_batch < 10000;
	END LOOP;
	RETURN v_total;
END
$fn$;
COMMENT ON FUNCTION cfeed.apply_retention(bool) IS 'deletes every stamped change older than its feed''s retention now (the sweeper does it in the background); returns rows deleted';
REVOKE ALL ON FUNCTION cfeed.apply_retention(bool) FROM PUBLIC;

/*
 * ======================================================================
 * Tracking tables (src/track.c, docs/track.md)
 * ======================================================================
 */

CREATE TABLE cfeed.row_image (
	change_id bigint NOT NULL,
	feed_id int NOT NULL,
	tbl regclass NOT NULL,
	op text NOT NULL,	-- 'insert', 'update' or 'delete' (no CHECK: it costs a parse per trigger call)
	"row" jsonb NOT NULL,
	PRIMARY KEY (change_id, feed_id)
);
COMMENT ON TABLE cfeed.row_image IS 'row images of tracked tables'' changes: the row as of the change (new row for insert/update, old row for delete); one jsonb copy per change, deleted with its change';
COMMENT ON COLUMN cfeed.row_image.tbl IS 'the tracked table (for a partitioned table, the table that was tracked, not the partition)';
COMMENT ON COLUMN cfeed.row_image.op IS 'insert, update or delete';
COMMENT ON COLUMN cfeed.row_image."row" IS 'the row as of the change, as to_jsonb(row)';
SELECT pg_catalog.pg_extension_config_dump('cfeed.row_image', '');

-- Retention: images follow their changes.  A statement trigger with a
-- transition table deletes them in one set operation per DELETE on
-- cfeed.change, whoever deletes (hence SECURITY DEFINER: it only removes the
-- images of the changes the caller has just deleted).
CREATE FUNCTION cfeed._row_image_cleanup() RETURNS trigger
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	DELETE FROM cfeed.row_image i
	USING deleted_changes d
	WHERE i.change_id OPERATOR(pg_catalog.=) d.change_id
	  AND i.feed_id OPERATOR(pg_catalog.=) d.feed_id;
	RETURN NULL;
END
$$;
COMMENT ON FUNCTION cfeed._row_image_cleanup() IS 'internal: deletes the row images of deleted changes';
REVOKE ALL ON FUNCTION cfeed._row_image_cleanup() FROM PUBLIC;

CREATE TRIGGER change_row_image_cleanup AFTER DELETE ON cfeed.change
	REFERENCING OLD TABLE AS deleted_changes
	FOR EACH STATEMENT EXECUTE FUNCTION cfeed._row_image_cleanup();

CREATE FUNCTION cfeed._track_row() RETURNS trigger
	LANGUAGE c AS 'MODULE_PATHNAME', 'cfeed_track_row';
COMMENT ON FUNCTION cfeed._track_row() IS 'internal: AFTER ROW trigger of a tracked table; publishes the change and its row image';

CREATE FUNCTION cfeed._track_change_id() RETURNS trigger
	LANGUAGE c AS 'MODULE_PATHNAME', 'cfeed_track_change_id';
COMMENT ON FUNCTION cfeed._track_change_id() IS 'internal: BEFORE ROW trigger of a tracked table; sets its change_id column';

CREATE FUNCTION cfeed._track_truncate() RETURNS trigger
	LANGUAGE c AS 'MODULE_PATHNAME', 'cfeed_track_truncate';
COMMENT ON FUNCTION cfeed._track_truncate() IS 'internal: BEFORE TRUNCATE trigger of a tracked table; refuses TRUNCATE';

CREATE FUNCTION cfeed._track_key(tbl regclass, r record) RETURNS text
	LANGUAGE c STABLE PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'cfeed_track_key';
COMMENT ON FUNCTION cfeed._track_key(regclass, record) IS 'internal: the key text form of a row of a tracked table, as the triggers shard it';

CREATE FUNCTION cfeed.track(tbl regclass, feed_id int, key text DEFAULT NULL) RETURNS void
	LANGUAGE c VOLATILE PARALLEL UNSAFE
	AS 'MODULE_PATHNAME', 'cfeed_track';
COMMENT ON FUNCTION cfeed.track(regclass, int, text) IS 'publishes every INSERT, UPDATE and DELETE of a table to a feed, with row images, sharded by the key (primary key when null); caller must own the table';

CREATE FUNCTION cfeed.untrack(tbl regclass) RETURNS void
	LANGUAGE c VOLATILE PARALLEL UNSAFE
	AS 'MODULE_PATHNAME', 'cfeed_untrack';
COMMENT ON FUNCTION cfeed.untrack(regclass) IS 'stops publishing a tracked table''s changes; published changes stay';

CREATE FUNCTION cfeed.backfill(tbl regclass, feed_id int, order_by text DEFAULT NULL) RETURNS bigint
	LANGUAGE c VOLATILE PARALLEL UNSAFE
	AS 'MODULE_PATHNAME', 'cfeed_backfill';
COMMENT ON FUNCTION cfeed.backfill(regclass, int, text) IS 'numbers a tracked table''s existing rows into the migration range just below each shard''s start, as history before the live changes; once per feed';

CREATE FUNCTION cfeed.read_rows(feed_id int, shard int, cursor bigint DEFAULT NULL,
								max_count int DEFAULT 1000, wait_ms int DEFAULT 0)
	RETURNS TABLE (change_sequence_number bigint, change_id bigint, stamped_at timestamptz,
				   tbl regclass, op text, "row" jsonb)
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE ROWS 1000
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	v_numbers bigint[];
	v_ids bigint[];
	v_times timestamptz[];
BEGIN
	-- cfeed.read checks the arguments, reads and waits; the images are read
	-- by a second statement, whose newer snapshot sees the images of every
	-- change the first one returned (written by transactions that committed
	-- before the sweep that stamped them).
	SELECT pg_catalog.array_agg(r.change_sequence_number ORDER BY r.change_sequence_number),
		   pg_catalog.array_agg(r.change_id ORDER BY r.change_sequence_number),
		   pg_catalog.array_agg(r.stamped_at ORDER BY r.change_sequence_number)
	  INTO v_numbers, v_ids, v_times
	  FROM cfeed.read(read_rows.feed_id, read_rows.shard, read_rows.cursor,
					  read_rows.max_count, read_rows.wait_ms) r;
	IF v_numbers IS NULL THEN
		RETURN;
	END IF;
	RETURN QUERY
		SELECT u.n, u.id, u.t, i.tbl, i.op, i."row"
		FROM ROWS FROM (pg_catalog.unnest(v_numbers), pg_catalog.unnest(v_ids),
						pg_catalog.unnest(v_times)) AS u(n, id, t)
		LEFT JOIN cfeed.row_image i
			   ON i.change_id OPERATOR(pg_catalog.=) u.id
			  AND i.feed_id OPERATOR(pg_catalog.=) read_rows.feed_id
		ORDER BY u.n;
END
$$;
COMMENT ON FUNCTION cfeed.read_rows(int, int, bigint, int, int) IS 'like cfeed.read, with each change''s table, operation and row as of the change (null for changes published without a row image)';
