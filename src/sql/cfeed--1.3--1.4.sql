/* src/sql/cfeed--1.3--1.4.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION cfeed UPDATE TO '1.4'" to load this file. \quit

/*
 * ======================================================================
 * 1.4: the guarantees hold against what operators do to cfeed's tables
 * ======================================================================
 */

/*
 * A number is never issued twice, even when its change is deleted.
 *
 * A shard's head is the highest stamped number found in change_sequence_idx
 * (see cfeed.shard in the 1.0 script).  Up to 1.3, deleting the head row (a
 * DELETE by hand, a TRUNCATE) made the next sweep issue that number again to
 * another change, which a consumer whose cursor had passed it never saw.
 * From 1.4 the shard remembers the highest number whose change was deleted
 * while it was the shard's highest: the head is the greater of that and the
 * highest stamped row.  Retention never deletes the head row, so it never
 * writes here; a DELETE of the head, or TRUNCATE, does, once per statement
 * and shard.
 */
ALTER TABLE cfeed.shard_config ADD COLUMN deleted_head bigint;
COMMENT ON COLUMN cfeed.shard_config.deleted_head IS 'the highest number issued on the shard whose change has been deleted (DELETE of the head row, TRUNCATE); numbering goes on above it';

CREATE OR REPLACE VIEW cfeed.shard AS
	SELECT s.feed_id, s.shard, s.sweep_group, s.longpoll,
		   GREATEST(h.change_sequence_number, s.deleted_head, s.start_sequence_number)
			   AS last_change_sequence_number,
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
COMMENT ON COLUMN cfeed.shard.last_change_sequence_number IS 'highest number issued on the shard: its highest stamped change, or a higher one whose change was deleted (its start value before the first stamp)';

/*
 * cfeed._change_deleted: after a DELETE on cfeed.change, for each shard
 * whose highest stamped row the statement deleted, remember that number.
 * A statement trigger with the deleted rows as a transition table: one
 * update per statement and shard, none for retention (it keeps the head
 * row).  Enabled always, so deletes made with session_replication_role =
 * replica count too.  (Logical replication's apply fires no statement
 * triggers: a subscriber gets deleted_head with cfeed.shard_config, which a
 * publication of cfeed.change must then carry too.)
 */
CREATE FUNCTION cfeed._change_deleted() RETURNS trigger
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	UPDATE cfeed.shard_config s
	SET deleted_head = GREATEST(s.deleted_head, d.top)
	FROM (SELECT o.feed_id, o.shard, max(o.change_sequence_number) AS top
		  FROM cfeed_deleted_changes o
		  WHERE o.change_sequence_number IS NOT NULL
		  GROUP BY o.feed_id, o.shard) d
	WHERE s.feed_id = d.feed_id AND s.shard = d.shard
	  AND d.top > GREATEST(s.start_sequence_number, s.deleted_head)
	  AND NOT EXISTS (SELECT FROM cfeed.change c
					  WHERE c.feed_id = d.feed_id AND c.shard = d.shard
						AND c.change_sequence_number > d.top);
	RETURN NULL;
END
$fn$;
COMMENT ON FUNCTION cfeed._change_deleted() IS 'internal: remembers the number of a deleted head row, so that it is never issued again';
REVOKE ALL ON FUNCTION cfeed._change_deleted() FROM PUBLIC;

CREATE TRIGGER change_deleted AFTER DELETE ON cfeed.change
	REFERENCING OLD TABLE AS cfeed_deleted_changes
	FOR EACH STATEMENT EXECUTE FUNCTION cfeed._change_deleted();
ALTER TABLE cfeed.change ENABLE ALWAYS TRIGGER change_deleted;

/*
 * cfeed._change_truncated: before TRUNCATE of cfeed.change, remember every
 * shard's head.  TRUNCATE has locked the table by then (no sweep runs), and
 * in READ COMMITTED this trigger's statement sees every stamp committed
 * before the lock; a transaction snapshot could be older, so TRUNCATE is
 * refused (25000) in REPEATABLE READ and SERIALIZABLE.
 */
CREATE FUNCTION cfeed._change_truncated() RETURNS trigger
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF current_setting('transaction_isolation') <> 'read committed' THEN
		RAISE EXCEPTION 'cfeed.change can only be truncated in a READ COMMITTED transaction'
			USING ERRCODE = '25000',
				  DETAIL = 'TRUNCATE records each shard''s head, so that no number is issued again; a transaction snapshot can miss the latest stamps.',
				  HINT = 'Run TRUNCATE in its own READ COMMITTED transaction.';
	END IF;
	UPDATE cfeed.shard_config s
	SET deleted_head = h.last_change_sequence_number
	FROM cfeed.shard h
	WHERE h.feed_id = s.feed_id AND h.shard = s.shard
	  AND h.last_change_sequence_number > GREATEST(s.start_sequence_number, s.deleted_head);
	RETURN NULL;
END
$fn$;
COMMENT ON FUNCTION cfeed._change_truncated() IS 'internal: remembers every shard''s head before TRUNCATE of cfeed.change, so that no number is issued again';
REVOKE ALL ON FUNCTION cfeed._change_truncated() FROM PUBLIC;

CREATE TRIGGER change_truncated BEFORE TRUNCATE ON cfeed.change
	FOR EACH STATEMENT EXECUTE FUNCTION cfeed._change_truncated();
ALTER TABLE cfeed.change ENABLE ALWAYS TRIGGER change_truncated;

/*
 * A stamped change keeps its number where it was stamped: an UPDATE of
 * feed_id, shard, change_sequence_number or stamped_at of a row the sweeper
 * numbered is refused (22023); moving it to another shard would let its old
 * shard issue the number again and collide with what the new one issues.
 * Backfilled history may be edited within the migration range.  The WHEN
 * clause keeps the sweep's own updates (of unnumbered rows) from firing it,
 * and the direct stamping path stands in for it (src/direct.c).
 */
CREATE FUNCTION cfeed._change_stamp_guard() RETURNS trigger
	LANGUAGE c AS 'MODULE_PATHNAME', 'cfeed_change_stamp_guard';
COMMENT ON FUNCTION cfeed._change_stamp_guard() IS 'internal: refuses renumbering or moving a change the sweeper stamped';

CREATE TRIGGER change_stamp_guard
	BEFORE UPDATE OF feed_id, shard, change_sequence_number, stamped_at ON cfeed.change
	FOR EACH ROW WHEN (OLD.change_sequence_number IS NOT NULL)
	EXECUTE FUNCTION cfeed._change_stamp_guard();
ALTER TABLE cfeed.change ENABLE ALWAYS TRIGGER change_stamp_guard;

/*
 * Moving a shard to another sweep group waits for the sweeps of both groups
 * and makes every sweeper look at all pending changes again (the guard
 * trigger, now also for UPDATE OF sweep_group: src/track_insert.c).  Up to
 * 1.3 the group the shard joined had already passed over its pending
 * changes, and left them unstamped.
 */
DROP TRIGGER shard_config_guard ON cfeed.shard_config;
CREATE TRIGGER shard_config_guard BEFORE INSERT OR DELETE OR UPDATE OF feed_id, shard, sweep_group
	ON cfeed.shard_config FOR EACH ROW EXECUTE FUNCTION cfeed._shard_config_guard();
ALTER TABLE cfeed.shard_config ENABLE ALWAYS TRIGGER shard_config_guard;

/*
 * Publications: a sweep updates its changes, and a publication that
 * replicates UPDATEs (FOR ALL TABLES, say) refuses updates of a table
 * without a replica identity, which stopped every sweep up to 1.3.  No
 * column set identifies a change (one change_id may be published several
 * times), so the identity is the whole row.  It costs nothing unless
 * wal_level is logical; then each stamp and each deleted change logs its
 * old row too.
 */
ALTER TABLE cfeed.change REPLICA IDENTITY FULL;

/*
 * ======================================================================
 * 1.4: per-feed read access
 * ======================================================================
 */

/*
 * Who may read which feed (src/read_access.c).  Up to 1.3 SELECT on
 * cfeed.change read every feed, and cfeed.read_rows returned the row images
 * of tables the reader could not SELECT.  From 1.4 a role reads a feed when
 * granted it here (cfeed.grant_read), or every feed (cfeed.grant_read_all),
 * directly or through a role it has the privileges of; superusers, roles
 * with BYPASSRLS and the extension's owner read everything.  The table
 * privileges of earlier versions are still needed besides (SELECT on
 * cfeed.change, cfeed.shard, ...).  And a change that carries a row image
 * is shown only to a role that may SELECT every column of its table and
 * that the table's own row-level security does not apply to.
 *
 * Enforced by row-level security on cfeed.change, cfeed.row_image and
 * cfeed.lease, by the cfeed.shard view (cfeed.stats, cfeed.consumer_lag and
 * cfeed.groups join on it) and by the C read functions (42501).  The owner
 * of these tables, who sweeps, bypasses their row-level security.
 */
CREATE TABLE cfeed.read_grant (
	grantee regrole NOT NULL,
	feed_id int REFERENCES cfeed.feed ON DELETE CASCADE,
	CONSTRAINT read_grant_feed_key UNIQUE (grantee, feed_id)
);
CREATE UNIQUE INDEX read_grant_every_feed_key ON cfeed.read_grant (grantee) WHERE feed_id IS NULL;
COMMENT ON TABLE cfeed.read_grant IS 'per-feed read access: grantee may read feed_id (every feed when null); written by cfeed.grant_read and cfeed.revoke_read';
COMMENT ON COLUMN cfeed.read_grant.grantee IS 'the role granted (0, shown as -, for PUBLIC); members with its privileges read too';
COMMENT ON COLUMN cfeed.read_grant.feed_id IS 'the feed, or null for every feed (cfeed.grant_read_all)';
-- Grants of dropped roles are left out of dumps: their OIDs could name another role elsewhere.
SELECT pg_catalog.pg_extension_config_dump('cfeed.read_grant',
	'WHERE grantee::pg_catalog.oid OPERATOR(pg_catalog.=) 0 OR grantee::pg_catalog.oid IN (SELECT r.oid FROM pg_catalog.pg_roles r)');

/*
 * Every change to the grants makes every backend drop its cached decisions
 * when the transaction commits (a relcache invalidation of the table).
 */
CREATE FUNCTION cfeed._read_grant_changed() RETURNS trigger
	LANGUAGE c AS 'MODULE_PATHNAME', 'cfeed_read_grant_changed';
COMMENT ON FUNCTION cfeed._read_grant_changed() IS 'internal: makes every backend forget its read access decisions when cfeed.read_grant changes';
REVOKE ALL ON FUNCTION cfeed._read_grant_changed() FROM PUBLIC;
CREATE TRIGGER read_grant_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON cfeed.read_grant
	FOR EACH STATEMENT EXECUTE FUNCTION cfeed._read_grant_changed();
ALTER TABLE cfeed.read_grant ENABLE ALWAYS TRIGGER read_grant_changed;

/*
 * The checks.  Every role executes them (row-level security runs them as
 * the reader); they answer only about the caller.
 */
CREATE FUNCTION cfeed._may_read(feed_id int) RETURNS bool
	LANGUAGE c STABLE PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'cfeed_may_read';
COMMENT ON FUNCTION cfeed._may_read(int) IS 'internal: whether the current user may read the feed (false for null)';

CREATE FUNCTION cfeed._may_read(feed_id int, tbl regclass) RETURNS bool
	LANGUAGE c STABLE PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'cfeed_may_read_change';
COMMENT ON FUNCTION cfeed._may_read(int, regclass) IS 'internal: whether the current user may read a change of the feed with a row image of tbl (none when null)';

/*
 * cfeed.grant_read, cfeed.revoke_read, cfeed.grant_read_all,
 * cfeed.revoke_read_all: SECURITY INVOKER, so that the caller needs INSERT
 * or DELETE on cfeed.read_grant (the extension's owner has them).  Granting
 * twice, or revoking what was not granted, does nothing.  A revoke warns
 * when the role can still read the feed another way.  Both forget the
 * grants of roles dropped since.
 */
CREATE FUNCTION cfeed._still_reads(role regrole, feed_id int) RETURNS void
	LANGUAGE plpgsql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_how text;
BEGIN
	SELECT CASE WHEN r.rolsuper THEN 'it is a superuser'
				WHEN r.rolbypassrls THEN 'it has BYPASSRLS'
				WHEN pg_has_role(_still_reads.role, e.extowner, 'USAGE') THEN 'it has the privileges of the extension''s owner'
		   END
	INTO v_how
	FROM pg_roles r, pg_extension e
	WHERE r.oid = _still_reads.role AND e.extname = 'cfeed';
	IF v_how IS NULL THEN
		SELECT format('%s a grant on %s',
					  CASE WHEN g.grantee = _still_reads.role THEN 'it holds'
						   WHEN g.grantee = 0 THEN 'PUBLIC holds'
						   ELSE format('it has the privileges of %s, which holds', g.grantee) END,
					  CASE WHEN g.feed_id IS NULL THEN 'every feed' ELSE 'feed ' || g.feed_id END)
		INTO v_how
		FROM cfeed.read_grant g
		WHERE (g.feed_id IS NULL OR g.feed_id = _still_reads.feed_id)
		  AND (g.grantee = 0 OR pg_has_role(_still_reads.role, g.grantee, 'USAGE'))
		ORDER BY g.feed_id NULLS FIRST, g.grantee::text
		LIMIT 1;
	END IF;
	IF v_how IS NOT NULL THEN
		RAISE WARNING 'role % can still read %', role,
			CASE WHEN feed_id IS NULL THEN 'every feed' ELSE 'feed ' || feed_id END
			USING DETAIL = format('It may read it because %s.', v_how);
	END IF;
END
$fn$;
COMMENT ON FUNCTION cfeed._still_reads(regrole, int) IS 'internal: warns when a role can still read a feed (every feed for null) after a revoke';

CREATE FUNCTION cfeed.grant_read(feed_id int, role regrole) RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF grant_read.feed_id IS NULL THEN PERFORM cfeed._null_arg('feed_id'); END IF;
	IF grant_read.role IS NULL THEN PERFORM cfeed._null_arg('role'); END IF;
	IF NOT EXISTS (SELECT FROM cfeed.feed f WHERE f.feed_id = grant_read.feed_id) THEN
		RAISE EXCEPTION 'feed % does not exist', grant_read.feed_id
			USING ERRCODE = '42704', HINT = 'Create it with cfeed.create_feed().';
	END IF;
	DELETE FROM cfeed.read_grant g
	WHERE g.grantee <> 0 AND g.grantee::oid NOT IN (SELECT r.oid FROM pg_roles r);
	INSERT INTO cfeed.read_grant (grantee, feed_id) VALUES (grant_read.role, grant_read.feed_id)
	ON CONFLICT DO NOTHING;
END
$fn$;
COMMENT ON FUNCTION cfeed.grant_read(int, regrole) IS 'lets a role (and the roles with its privileges) read a feed; 0 stands for PUBLIC';

CREATE FUNCTION cfeed.revoke_read(feed_id int, role regrole) RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF revoke_read.feed_id IS NULL THEN PERFORM cfeed._null_arg('feed_id'); END IF;
	IF revoke_read.role IS NULL THEN PERFORM cfeed._null_arg('role'); END IF;
	DELETE FROM cfeed.read_grant g
	WHERE (g.grantee = revoke_read.role AND g.feed_id = revoke_read.feed_id)
	   OR (g.grantee <> 0 AND g.grantee::oid NOT IN (SELECT r.oid FROM pg_roles r));
	PERFORM cfeed._still_reads(revoke_read.role, revoke_read.feed_id);
END
$fn$;
COMMENT ON FUNCTION cfeed.revoke_read(int, regrole) IS 'takes back a role''s grant to read a feed (effective from readers'' next transaction); warns if it can still read it';

CREATE FUNCTION cfeed.grant_read_all(role regrole) RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF grant_read_all.role IS NULL THEN PERFORM cfeed._null_arg('role'); END IF;
	DELETE FROM cfeed.read_grant g
	WHERE g.grantee <> 0 AND g.grantee::oid NOT IN (SELECT r.oid FROM pg_roles r);
	INSERT INTO cfeed.read_grant (grantee, feed_id) VALUES (grant_read_all.role, NULL)
	ON CONFLICT DO NOTHING;
END
$fn$;
COMMENT ON FUNCTION cfeed.grant_read_all(regrole) IS 'lets a role (and the roles with its privileges) read every feed, present and future; 0 stands for PUBLIC';

CREATE FUNCTION cfeed.revoke_read_all(role regrole) RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF revoke_read_all.role IS NULL THEN PERFORM cfeed._null_arg('role'); END IF;
	DELETE FROM cfeed.read_grant g
	WHERE (g.grantee = revoke_read_all.role AND g.feed_id IS NULL)
	   OR (g.grantee <> 0 AND g.grantee::oid NOT IN (SELECT r.oid FROM pg_roles r));
	PERFORM cfeed._still_reads(revoke_read_all.role, NULL);
END
$fn$;
COMMENT ON FUNCTION cfeed.revoke_read_all(regrole) IS 'takes back a role''s grant to read every feed (its grants of single feeds stay); warns if it can still read every feed';

/*
 * A feed the caller may not read is 42501 for the consumer-group functions
 * too: acquire, release and drop_group check here (checkpoint and seek call
 * cfeed.head), before telling whether the feed exists.
 */
CREATE OR REPLACE FUNCTION cfeed._check_feed(feed_id int) RETURNS void
	LANGUAGE plpgsql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF _check_feed.feed_id IS NOT NULL AND NOT cfeed._may_read(_check_feed.feed_id) THEN
		RAISE EXCEPTION 'permission denied for feed %', feed_id
			USING ERRCODE = '42501',
				  HINT = format('The extension''s owner grants it with cfeed.grant_read(%s, role).', feed_id);
	END IF;
	IF NOT EXISTS (SELECT FROM cfeed.feed f WHERE f.feed_id = _check_feed.feed_id) THEN
		RAISE EXCEPTION 'feed % does not exist', feed_id
			USING ERRCODE = '42704', HINT = 'Create it with cfeed.create_feed().';
	END IF;
END
$fn$;
COMMENT ON FUNCTION cfeed._check_feed(int) IS 'internal: raises 42501 for a feed the caller may not read, 42704 for an unknown feed';

/*
 * The views run as their owner: cfeed.shard shows only the shards of feeds
 * the caller may read, and cfeed.stats, cfeed.consumer_lag and cfeed.groups,
 * which join on it, only theirs.  The definition is the one above, wrapped.
 * Security barriers keep a caller's own conditions (a function that logs
 * its arguments, say) from seeing the rows left out.
 */
DO $do$
BEGIN
	EXECUTE pg_catalog.format(
		'CREATE OR REPLACE VIEW cfeed.shard AS SELECT * FROM (%s) s WHERE cfeed._may_read(s.feed_id)',
		pg_catalog.regexp_replace(pg_catalog.pg_get_viewdef('cfeed.shard'::pg_catalog.regclass),
								  ';\s*$', ''));
END
$do$;
ALTER VIEW cfeed.shard SET (security_barrier = true);
ALTER VIEW cfeed.stats SET (security_barrier = true);
ALTER VIEW cfeed.consumer_lag SET (security_barrier = true);
ALTER VIEW cfeed.groups SET (security_barrier = true);

/*
 * Row-level security.  cfeed.change: reading by grant (and image), writing
 * as before (the INSERT policy lets through what the table privileges
 * allow; direct writes see that it does and stay direct), deleting what
 * one may read.  No UPDATE policy: only the owner stamps.  cfeed.row_image:
 * read as cfeed.change; written only by the owner.  cfeed.lease: a group's
 * leases of a feed are seen and written by the feed's readers.
 *
 * Updating from 1.3: a role with SELECT on any of cfeed's readable tables
 * and views read every feed, and keeps doing so: it gets a grant on every
 * feed.  Where cfeed.change had row-level security already, its policies
 * were the DBA's way to restrict readers to some feeds (the README of 1.3
 * showed how): they stay in force, and so that nothing widens what they
 * allow, cfeed's read policy is then restrictive (it only adds the image
 * rule) and cfeed adds no write policy (a permissive one would undo the
 * DBA's).  The same for cfeed.row_image; cfeed.lease with policies of the
 * DBA's is left as it is.  A fresh install has no grants: readers are
 * granted feeds explicitly.
 */
DO $do$
DECLARE
	v_change_rls bool;
	v_image_rls bool;
	v_lease_rls bool;
BEGIN
	SELECT c.relrowsecurity INTO v_change_rls FROM pg_catalog.pg_class c
	WHERE c.oid OPERATOR(pg_catalog.=) 'cfeed.change'::pg_catalog.regclass;
	SELECT c.relrowsecurity INTO v_image_rls FROM pg_catalog.pg_class c
	WHERE c.oid OPERATOR(pg_catalog.=) 'cfeed.row_image'::pg_catalog.regclass;
	SELECT c.relrowsecurity INTO v_lease_rls FROM pg_catalog.pg_class c
	WHERE c.oid OPERATOR(pg_catalog.=) 'cfeed.lease'::pg_catalog.regclass;

	INSERT INTO cfeed.read_grant (grantee, feed_id)
	SELECT DISTINCT a.grantee::pg_catalog.regrole, NULL::int
	FROM pg_catalog.pg_class c
	LEFT JOIN pg_catalog.pg_attribute att
		   ON att.attrelid OPERATOR(pg_catalog.=) c.oid AND att.attnum OPERATOR(pg_catalog.>) 0
	CROSS JOIN LATERAL (SELECT * FROM pg_catalog.aclexplode(c.relacl)
						UNION ALL SELECT * FROM pg_catalog.aclexplode(att.attacl)) a
	WHERE c.relnamespace OPERATOR(pg_catalog.=) 'cfeed'::pg_catalog.regnamespace
	  AND c.relname OPERATOR(pg_catalog.=) ANY ('{change,row_image,shard,stats,consumer_lag,groups,lease}')
	  AND a.privilege_type OPERATOR(pg_catalog.=) 'SELECT'
	  AND a.grantee OPERATOR(pg_catalog.<>) c.relowner;

	IF NOT v_change_rls THEN
		CREATE POLICY change_read ON cfeed.change FOR SELECT USING (cfeed._may_read(feed_id, tbl));
		CREATE POLICY change_write ON cfeed.change FOR INSERT WITH CHECK (true);
		CREATE POLICY change_delete ON cfeed.change FOR DELETE USING (true);
		ALTER TABLE cfeed.change ENABLE ROW LEVEL SECURITY;
	ELSE
		CREATE POLICY change_read ON cfeed.change AS RESTRICTIVE FOR SELECT
			USING (cfeed._may_read(feed_id, tbl));
		RAISE WARNING 'cfeed.change has row-level security already: its policies keep deciding which feeds its readers see'
			USING DETAIL = 'Up to 1.3 that was the way to restrict readers to some feeds.  cfeed added a restrictive read policy (row images only to who may SELECT their table), no write policy, and a grant on every feed to each role that had SELECT on its tables, so that cfeed.read, head and wait work as before.',
				  HINT = 'To restrict cfeed.read, head, wait and the views as well, grant feeds with cfeed.grant_read, revoke the grants on every feed and drop your read policies (README, "Security").';
	END IF;
	IF NOT v_image_rls THEN
		CREATE POLICY row_image_read ON cfeed.row_image FOR SELECT USING (cfeed._may_read(feed_id, tbl));
		ALTER TABLE cfeed.row_image ENABLE ROW LEVEL SECURITY;
	ELSE
		CREATE POLICY row_image_read ON cfeed.row_image AS RESTRICTIVE FOR SELECT
			USING (cfeed._may_read(feed_id, tbl));
	END IF;
	IF NOT v_lease_rls THEN
		CREATE POLICY lease_access ON cfeed.lease
			USING (cfeed._may_read(feed_id)) WITH CHECK (cfeed._may_read(feed_id));
		ALTER TABLE cfeed.lease ENABLE ROW LEVEL SECURITY;
		COMMENT ON POLICY lease_access ON cfeed.lease IS 'a feed''s leases are seen and written by its readers';
	END IF;
	IF NOT v_change_rls THEN
		COMMENT ON POLICY change_write ON cfeed.change IS 'writers insert as their table privileges allow (direct writes stay direct); a restrictive policy of your own can keep a writer to some feeds';
		COMMENT ON POLICY change_delete ON cfeed.change IS 'who may DELETE deletes the changes it may read';
	END IF;
END
$do$;
COMMENT ON POLICY change_read ON cfeed.change IS 'a change is read by who may read its feed and, for a change with a row image, may SELECT all of its table unrestricted by the table''s row-level security (cfeed.grant_read)';
COMMENT ON POLICY row_image_read ON cfeed.row_image IS 'an image written before 1.3 is read as its change would be';
