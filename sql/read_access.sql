-- read_access: a role reads the feeds it is granted
-- (cfeed.grant_read), through every read path, and sees a change's row
-- image only if it may SELECT all of the image's table, which that table's
-- row-level security must not restrict; writers are not affected.
\i test/regress_setup.sql
GRANT EXECUTE ON FUNCTION pg_temp.err(text) TO PUBLIC;
-- sequence numbers relative to the start value
CREATE FUNCTION pg_temp.n(bigint) RETURNS bigint LANGUAGE sql AS $$ SELECT $1 - 2000000000000000 $$;
GRANT EXECUTE ON FUNCTION pg_temp.n(bigint) TO PUBLIC;

/*
 * The scenario: orders (feed 1) and secrets (feed 2), both tracked;
 * order_reader may SELECT orders and, as the README of 1.3 said a reader
 * needs, cfeed's tables.
 */
SELECT cfeed.create_feed('orders'), cfeed.create_feed('secrets'), cfeed.create_feed('plain', 2);
CREATE TABLE public.orders (id int PRIMARY KEY, item text, price int);
CREATE TABLE public.secrets (id int PRIMARY KEY, ssn text);
SELECT cfeed.track('public.orders', 1), cfeed.track('public.secrets', 2);
INSERT INTO public.orders VALUES (1, 'book', 12), (2, 'pen', 3);
INSERT INTO public.secrets VALUES (1, '123-45-6789');
SELECT cfeed.publish(2, 0, 500);		-- a change of feed 2 without an image
SELECT cfeed.publish(3, 0, 501), cfeed.publish(3, 1, 502);
SELECT feed_id, shard, change_count FROM cfeed.sweep() ORDER BY 1, 2;
CREATE ROLE regress_ra_order_reader;
GRANT SELECT ON public.orders TO regress_ra_order_reader;
GRANT SELECT ON cfeed.change, cfeed.row_image, cfeed.shard, cfeed.stats, cfeed.consumer_lag,
	cfeed.groups, cfeed.feed TO regress_ra_order_reader;
GRANT SELECT, INSERT, UPDATE, DELETE ON cfeed.lease TO regress_ra_order_reader;
GRANT EXECUTE ON FUNCTION cfeed._retention_held_by(int, int) TO regress_ra_order_reader;
-- the leak of 1.3: order_reader read secrets' rows through read_rows; now
-- it reads nothing without a grant (42501 from the functions, no rows from
-- the tables and views)
SET ROLE regress_ra_order_reader;
SELECT pg_temp.err($$SELECT tbl, op, "row" FROM cfeed.read_rows(2, 0)$$) AS read_rows_2;
SELECT pg_temp.err($$SELECT tbl, op, "row" FROM cfeed.read_rows(1, 0)$$) AS read_rows_1;
SELECT count(*) AS changes_seen FROM cfeed.change;
RESET ROLE;
-- granted feed 1: it reads feed 1, with images of orders
SELECT cfeed.grant_read(1, 'regress_ra_order_reader');
SET ROLE regress_ra_order_reader;
SELECT pg_temp.n(change_sequence_number) AS n, tbl, op, "row" FROM cfeed.read_rows(1, 0) ORDER BY 1;

-- every read path refuses feed 2 (42501), whether or not the shard exists
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$SELECT * FROM cfeed.read(2, 0)$$),
  ($$SELECT * FROM cfeed.read(2, 0, NULL, 10, 200)$$),
  ($$SELECT * FROM cfeed.read_rows(2, 0)$$),
  ($$SELECT * FROM cfeed.read_rows(2, 0, NULL, 10, 200)$$),
  ($$SELECT cfeed.wait(2, 0, 0, 0)$$),
  ($$SELECT cfeed.wait(2, 0, 0, 200)$$),
  ($$SELECT cfeed.head(2, 0)$$),
  ($$SELECT cfeed.cursor_at(2, 0, now())$$),
  ($$SELECT cfeed.head(2, 7)$$),
  ($$SELECT cfeed.head(99, 0)$$),
  ($$SELECT * FROM cfeed.acquire('g2', 2, 'intruder')$$),
  ($$SELECT cfeed.checkpoint('g2', 2, 0, 'owner', 1, 2000000000000001)$$),
  ($$SELECT cfeed.release('g2', 2, 'owner')$$),
  ($$SELECT cfeed.seek('g2', 2, 0, 2000000000000000)$$),
  ($$SELECT cfeed.drop_group('g2', 2)$$)
) AS t(cmd);
-- ... while feed 1 reads on
SELECT pg_temp.n(cfeed.head(1, 0)) AS head, pg_temp.n(cfeed.wait(1, 0, 0, 0)) AS waited,
       pg_temp.n(cfeed.cursor_at(1, 0, now() + interval '1 day')) AS cursor_at;
SELECT count(*) AS read FROM cfeed.read(1, 0, NULL, 10, 200);
RESET ROLE;

-- the read policy does not change a granted reader's plans (1.7): the
-- planner takes every row to pass it, so a reader's estimates are the
-- owner's (a third of them before, which near a shard's head turned the
-- seed's join into a scan of the whole range and a sort)
CREATE FUNCTION pg_temp.plan_rows(q text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
	p json;
BEGIN
	EXECUTE 'EXPLAIN (FORMAT JSON) ' || q INTO p;
	RETURN (p -> 0 -> 'Plan' ->> 'Plan Rows')::float8;
END $$;
GRANT EXECUTE ON FUNCTION pg_temp.plan_rows(text) TO PUBLIC;
CREATE TEMP TABLE owner_rows AS
SELECT pg_temp.plan_rows($$SELECT * FROM cfeed.change$$) AS change,
       pg_temp.plan_rows($$SELECT * FROM cfeed.row_image$$) AS row_image,
       pg_temp.plan_rows($$SELECT * FROM cfeed.lease$$) AS lease;
GRANT SELECT ON owner_rows TO PUBLIC;
SET ROLE regress_ra_order_reader;
SELECT o.change > 0 AS estimated,
       pg_temp.plan_rows($$SELECT * FROM cfeed.change$$) = o.change AS change_as_owner,
       pg_temp.plan_rows($$SELECT * FROM cfeed.row_image$$) = o.row_image AS row_image_as_owner,
       pg_temp.plan_rows($$SELECT * FROM cfeed.lease$$) = o.lease AS lease_as_owner
FROM owner_rows o;
RESET ROLE;
DROP TABLE owner_rows;

-- the tables and views show feed 1 only: cfeed.change (the join
-- pattern), cfeed.row_image, cfeed.shard, cfeed.stats, cfeed.lease,
-- cfeed.consumer_lag, cfeed.groups
SELECT count(*) FROM cfeed.acquire('g1', 1, 'owner', 600000);
SELECT count(*) FROM cfeed.acquire('g2', 2, 'owner', 600000);
INSERT INTO cfeed.row_image (change_id, feed_id, tbl, op, "row")
VALUES (500, 2, 'public.secrets', 'insert', '{"id": 0, "ssn": "legacy"}');
CREATE TABLE public.myevent (change_id bigint PRIMARY KEY, body text);
INSERT INTO public.myevent SELECT change_id, 'event of feed ' || feed_id FROM cfeed.change;
GRANT SELECT ON public.myevent TO regress_ra_order_reader;
SET ROLE regress_ra_order_reader;
SELECT e.body, c.feed_id, pg_temp.n(c.change_sequence_number) AS n
FROM public.myevent e JOIN cfeed.change c USING (change_id)
WHERE c.feed_id = 2 AND c.shard = 0 AND c.change_sequence_number > 0
ORDER BY c.change_sequence_number LIMIT 100;
SELECT e.body, c.feed_id, pg_temp.n(c.change_sequence_number) AS n
FROM public.myevent e JOIN cfeed.change c USING (change_id)
WHERE c.feed_id = 1 AND c.shard = 0 AND c.change_sequence_number > 0
ORDER BY c.change_sequence_number LIMIT 100;
SELECT feed_id, count(*) FROM cfeed.change GROUP BY 1 ORDER BY 1;
SELECT count(*) AS images FROM cfeed.row_image;
SELECT feed_id, shard FROM cfeed.shard ORDER BY 1, 2;
SELECT feed_id, feed_name, shard, pg_temp.n(head) AS head, pending FROM cfeed.stats ORDER BY 1, 3;
SELECT group_name, feed_id, shard FROM cfeed.lease ORDER BY 1, 2, 3;
SELECT group_name, feed_id, shard, behind FROM cfeed.consumer_lag ORDER BY 1, 2, 3;
SELECT group_name, feed_id, shards FROM cfeed.groups ORDER BY 1, 2;
-- nor can it write another feed's leases
UPDATE cfeed.lease SET cursor = 0 WHERE feed_id = 2;
DELETE FROM cfeed.lease WHERE feed_id = 2;
SELECT pg_temp.err($$INSERT INTO cfeed.lease (group_name, feed_id, shard, cursor) VALUES ('x', 2, 0, 0)$$);
-- a caller's own condition in a view sees no hidden row (security barriers)
CREATE FUNCTION pg_temp.peek(int, text) RETURNS bool LANGUAGE plpgsql COST 0.0001 AS $$
BEGIN
	RAISE NOTICE 'peeked at feed % (%)', $1, $2;
	RETURN true;
END $$;
SELECT count(*) FROM cfeed.shard WHERE pg_temp.peek(feed_id, 'shard');
SELECT count(*) FROM cfeed.stats WHERE pg_temp.peek(feed_id, feed_name);
SELECT count(*) FROM cfeed.consumer_lag WHERE pg_temp.peek(feed_id, group_name);
SELECT count(*) FROM cfeed.groups WHERE pg_temp.peek(feed_id, group_name);
DROP FUNCTION pg_temp.peek(int, text);
RESET ROLE;
-- the owner sees it all
SELECT feed_id, count(*) FROM cfeed.change GROUP BY 1 ORDER BY 1;
SELECT count(*) AS owner_stats_rows FROM cfeed.stats;
-- cfeed._pending(), which any role may call (cfeed.stats's pending),
-- counts the pending changes of the feeds the caller may read only
BEGIN;
SELECT count(cfeed.publish(f, 0, 900 + f)) FROM generate_series(1, 2) f;
SELECT feed_id, shard, pending FROM cfeed._pending() ORDER BY 1, 2;
SET LOCAL ROLE regress_ra_order_reader;
SELECT feed_id, shard, pending FROM cfeed._pending() ORDER BY 1, 2;
ROLLBACK;

-- granted feed 2 too, it reads feed 2, but not secrets' images (no SELECT
-- on secrets): the tracked change is not in its feed, the change published
-- without an image is, and the image of 1.2 (cfeed.row_image) is left out
SELECT cfeed.grant_read(2, 'regress_ra_order_reader');
SET ROLE regress_ra_order_reader;
SELECT pg_temp.n(change_sequence_number) AS n, change_id, tbl, op, "row" FROM cfeed.read_rows(2, 0);
SELECT pg_temp.n(change_sequence_number) AS n, change_id FROM cfeed.read(2, 0);
SELECT feed_id, change_id, tbl, "row" FROM cfeed.change WHERE feed_id = 2;
SELECT pg_temp.n(cfeed.head(2, 0)) AS head;
RESET ROLE;
-- once it may SELECT secrets, it sees them
GRANT SELECT ON public.secrets TO regress_ra_order_reader;
SET ROLE regress_ra_order_reader;
SELECT pg_temp.n(change_sequence_number) AS n, change_id, tbl, op, "row" FROM cfeed.read_rows(2, 0) ORDER BY 1;
RESET ROLE;
REVOKE SELECT ON public.secrets FROM regress_ra_order_reader;
-- a read policy of the operator's beside cfeed's own holds for read() as
-- for a query of the table: a restrictive one hides more, a permissive one
-- may show more (here the tracked change of secrets, to a reader without
-- SELECT on secrets)
BEGIN;
CREATE POLICY ra_restrictive ON cfeed.change AS RESTRICTIVE FOR SELECT USING (change_id <> 500);
SET ROLE regress_ra_order_reader;
SELECT 'restrictive' AS policy, pg_temp.n(change_sequence_number) AS n, change_id FROM cfeed.read(2, 0);
ROLLBACK;
BEGIN;
CREATE POLICY ra_permissive ON cfeed.change FOR SELECT USING (feed_id = 2);
SET ROLE regress_ra_order_reader;
SELECT 'permissive' AS policy, pg_temp.n(change_sequence_number) AS n, change_id FROM cfeed.read(2, 0);
ROLLBACK;

/*
 * Column privileges: an image holds every column, so it is shown only to a
 * role that may SELECT every column (refused, not trimmed).
 */
CREATE ROLE regress_ra_columns;
GRANT SELECT ON cfeed.change, cfeed.row_image TO regress_ra_columns;
SELECT cfeed.grant_read(1, 'regress_ra_columns');
GRANT SELECT (id, item) ON public.orders TO regress_ra_columns;
SET ROLE regress_ra_columns;
SELECT 'some columns' AS grant, count(*) AS images,
	   (SELECT count(*) FROM cfeed.read(1, 0)) AS read FROM cfeed.read_rows(1, 0);
RESET ROLE;
GRANT SELECT (price) ON public.orders TO regress_ra_columns;
SET ROLE regress_ra_columns;
SELECT 'every column' AS grant, count(*) AS images,
	   (SELECT count(*) FROM cfeed.read(1, 0)) AS read FROM cfeed.read_rows(1, 0);
RESET ROLE;
-- a column added later is not granted: hidden again
ALTER TABLE public.orders ADD COLUMN note text;
SET ROLE regress_ra_columns;
SELECT 'a new column' AS grant, count(*) AS images,
	   (SELECT count(*) FROM cfeed.read(1, 0)) AS read FROM cfeed.read_rows(1, 0);
RESET ROLE;
ALTER TABLE public.orders DROP COLUMN note;

/*
 * A tracked table with row-level security: its images are shown only to
 * roles its policies do not apply to (its owner, superusers, BYPASSRLS),
 * whatever the policies say; track() says so.  Enabling it later hides them
 * too.
 */
CREATE TABLE public.notes (id int PRIMARY KEY, body text);
ALTER TABLE public.notes ENABLE ROW LEVEL SECURITY;
CREATE POLICY notes_all ON public.notes USING (true);
GRANT SELECT ON public.notes TO regress_ra_order_reader;
SELECT cfeed.create_feed('notes', feed_id => 4);
SELECT cfeed.track('public.notes', 4);
INSERT INTO public.notes VALUES (1, 'private');
SELECT cfeed.grant_read(4, 'regress_ra_order_reader');
SELECT count(*) > 0 AS swept FROM cfeed.sweep();
SET ROLE regress_ra_order_reader;
SELECT count(*) AS rows_in_notes FROM public.notes;
SELECT count(*) AS images FROM cfeed.read_rows(4, 0);
RESET ROLE;
SELECT count(*) AS owner_images FROM cfeed.read_rows(4, 0);
ALTER TABLE public.notes DISABLE ROW LEVEL SECURITY;
SET ROLE regress_ra_order_reader;
SELECT count(*) AS images_without_rls FROM cfeed.read_rows(4, 0);
RESET ROLE;
ALTER TABLE public.orders ENABLE ROW LEVEL SECURITY;
CREATE POLICY orders_all ON public.orders USING (true);
SET ROLE regress_ra_order_reader;
SELECT count(*) AS orders_images_after_rls FROM cfeed.read_rows(1, 0);
RESET ROLE;
DROP POLICY orders_all ON public.orders;
ALTER TABLE public.orders DISABLE ROW LEVEL SECURITY;

/*
 * A revoke takes effect for the next call, whether of the grant or of the
 * membership that carried it; a role that can still read is warned about.
 */
SELECT cfeed.revoke_read(2, 'regress_ra_order_reader');
SET ROLE regress_ra_order_reader;
SELECT pg_temp.err($$SELECT * FROM cfeed.read(2, 0)$$) AS after_revoke;
RESET ROLE;
CREATE ROLE regress_ra_team;
CREATE ROLE regress_ra_member;
GRANT regress_ra_team TO regress_ra_member;
GRANT SELECT ON cfeed.change, cfeed.shard TO regress_ra_member;
SELECT cfeed.grant_read(3, 'regress_ra_team');
SET ROLE regress_ra_member;
SELECT count(*) AS member_reads FROM cfeed.read(3, 1);
RESET ROLE;
REVOKE regress_ra_team FROM regress_ra_member;
SET ROLE regress_ra_member;
SELECT pg_temp.err($$SELECT count(*) FROM cfeed.read(3, 1)$$) AS after_membership_revoked;
RESET ROLE;
GRANT regress_ra_team TO regress_ra_member;
SELECT cfeed.revoke_read(3, 'regress_ra_member');	-- warns: it reads through regress_ra_team
SELECT cfeed.grant_read_all('regress_ra_member');
SELECT cfeed.revoke_read(1, 'regress_ra_member');	-- warns: every feed
SET ROLE regress_ra_member;
SELECT f AS feed, pg_temp.err(format('SELECT cfeed.head(%s, 0)', f)) FROM generate_series(1, 3) f ORDER BY 1;
RESET ROLE;
SELECT cfeed.revoke_read_all('regress_ra_member');
SELECT cfeed.revoke_read_all(0);
SELECT cfeed.revoke_read(1, 'postgres');		-- warns: a superuser
-- PUBLIC (0) may be granted a feed: every role with the table privileges reads it
SELECT cfeed.grant_read(3, 0);
CREATE ROLE regress_ra_anyone;
GRANT SELECT ON cfeed.change, cfeed.shard TO regress_ra_anyone;
SET ROLE regress_ra_anyone;
SELECT f AS feed, pg_temp.err(format('SELECT cfeed.head(%s, 0)', f)) FROM generate_series(2, 3) f ORDER BY 1;
RESET ROLE;
SELECT cfeed.revoke_read(3, 0);
SELECT grantee, feed_id FROM cfeed.read_grant ORDER BY grantee::text, feed_id;

/*
 * Grants: only who may write cfeed.read_grant (the owner) grants, with the
 * errors of docs/reference.md; a dropped role's grants are forgotten, and a
 * deleted feed's go with it.
 */
SET ROLE regress_ra_order_reader;
SELECT pg_temp.err($$SELECT cfeed.grant_read(2, 'regress_ra_order_reader')$$) AS self_grant;
SELECT pg_temp.err($$SELECT cfeed.grant_read_all('regress_ra_order_reader')$$) AS self_grant_all;
SELECT pg_temp.err($$SELECT count(*) FROM cfeed.read_grant$$) AS see_grants;
RESET ROLE;
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$SELECT cfeed.grant_read(NULL, 'regress_ra_member')$$),
  ($$SELECT cfeed.grant_read(1, NULL)$$),
  ($$SELECT cfeed.revoke_read(NULL, 'regress_ra_member')$$),
  ($$SELECT cfeed.revoke_read(1, NULL)$$),
  ($$SELECT cfeed.grant_read_all(NULL)$$),
  ($$SELECT cfeed.revoke_read_all(NULL)$$),
  ($$SELECT cfeed.grant_read(99, 'regress_ra_member')$$),
  ($$SELECT cfeed.grant_read(1, 'regress_ra_nobody')$$)
) AS t(cmd);
SELECT cfeed._may_read(NULL) AS null_feed, cfeed._may_read(NULL, NULL) AS null_change;
CREATE ROLE regress_ra_gone;
SELECT cfeed.grant_read(1, 'regress_ra_gone'), cfeed.grant_read(3, 'regress_ra_gone');
DROP ROLE regress_ra_gone;
SELECT count(*) AS dangling FROM cfeed.read_grant WHERE grantee::oid NOT IN (SELECT oid FROM pg_roles);
SELECT cfeed.grant_read(3, 'regress_ra_member');
SELECT count(*) AS dangling FROM cfeed.read_grant WHERE grantee::oid NOT IN (SELECT oid FROM pg_roles);
SELECT cfeed.untrack('public.notes');
DELETE FROM cfeed.change WHERE feed_id = 4;
DELETE FROM cfeed.shard WHERE feed_id = 4;
DELETE FROM cfeed.feed WHERE feed_id = 4;
SELECT grantee, feed_id FROM cfeed.read_grant ORDER BY grantee::text, feed_id;

/*
 * Writers pay nothing: with per-feed access in force a writer's changes
 * and tracked rows are still written directly (holding the feed's shards
 * lock, sql/publish.sql), with no read grant; a restrictive policy of the
 * DBA's sends them through SQL, which applies it (and whose shard check,
 * change_guard, takes the same lock: its calls tell the paths apart).
 */
CREATE ROLE regress_ra_writer;
GRANT INSERT ON cfeed.change TO regress_ra_writer;
SELECT cfeed.grant_write_all('regress_ra_writer');
GRANT USAGE ON SEQUENCE cfeed.change_id TO regress_ra_writer;
GRANT INSERT ON public.orders TO regress_ra_writer;
CREATE TEMP VIEW shards_locks AS
SELECT classid AS feed_id, mode FROM pg_locks
WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND objsubid = 25448;
GRANT SELECT ON shards_locks TO regress_ra_writer;
SET track_functions = 'all';
CREATE FUNCTION pg_temp.guard_calls() RETURNS bigint LANGUAGE sql AS $$
SELECT COALESCE(sum(calls), 0) FROM pg_stat_xact_user_functions
WHERE schemaname = 'cfeed' AND funcname = '_change_guard' $$;
SET ROLE regress_ra_writer;
BEGIN;
SELECT pg_temp.guard_calls() AS calls_before \gset
SELECT cfeed.publish(3, 0, 600);
INSERT INTO public.orders VALUES (3, 'ink', 5);
SELECT *, pg_temp.guard_calls() - :calls_before AS sql_inserts FROM shards_locks ORDER BY 1;
COMMIT;
RESET ROLE;
CREATE POLICY dba_no_feed_1 ON cfeed.change AS RESTRICTIVE FOR INSERT TO regress_ra_writer
	WITH CHECK (feed_id <> 1);
SET ROLE regress_ra_writer;
BEGIN;
SELECT pg_temp.guard_calls() AS calls_before \gset
SELECT cfeed.publish(3, 0, 601);
SELECT *, pg_temp.guard_calls() - :calls_before AS sql_inserts FROM shards_locks ORDER BY 1;
SELECT pg_temp.err($$INSERT INTO public.orders VALUES (4, 'refused', 1)$$) AS refused_by_policy;
COMMIT;
RESET ROLE;
DROP POLICY dba_no_feed_1 ON cfeed.change;
SELECT change_id, feed_id, "row" ->> 'item' AS item FROM cfeed.change
WHERE change_id IN (600, 601) OR "row" ->> 'item' IN ('ink', 'refused') ORDER BY feed_id, change_id;
-- the policies of cfeed.change
SELECT polname, polcmd, polpermissive, polroles::regrole[], pg_get_expr(polqual, polrelid) AS using,
       pg_get_expr(polwithcheck, polrelid) AS with_check
FROM pg_policy WHERE polrelid IN ('cfeed.change'::regclass, 'cfeed.row_image'::regclass, 'cfeed.lease'::regclass)
ORDER BY polrelid::regclass::text, polname;
-- a dropped tracked table's changes are seen by no reader
GRANT SELECT ON public.secrets TO regress_ra_order_reader;
SELECT cfeed.grant_read(2, 'regress_ra_order_reader');
SELECT cfeed.untrack('public.secrets');
DROP TABLE public.secrets;
SET ROLE regress_ra_order_reader;
SELECT change_id, tbl IS NULL AS no_table FROM cfeed.read_rows(2, 0);
RESET ROLE;

/*
 * Updating from 1.3: every role that had SELECT on one of cfeed's readable
 * tables or views gets a grant on every feed, and reads on as before.
 */
DROP TABLE public.orders, public.notes, public.myevent;
DROP VIEW shards_locks;
-- (1.3 predates cfeed.change's replica identity: no publication of all tables)
DROP PUBLICATION cfeed_regress_all;
DROP EXTENSION cfeed;
CREATE EXTENSION cfeed VERSION '1.3';
SELECT cfeed.create_feed('a'), cfeed.create_feed('b');
SELECT cfeed.publish(1, 0, 1), cfeed.publish(2, 0, 2);
SELECT count(*) FROM cfeed.sweep();
CREATE ROLE regress_ra_old_operator;
GRANT SELECT ON cfeed.change, cfeed.shard TO regress_ra_order_reader;
GRANT SELECT (feed_id, shard) ON cfeed.change TO regress_ra_columns;
GRANT SELECT ON cfeed.stats TO regress_ra_old_operator;
ALTER EXTENSION cfeed UPDATE;
SELECT grantee, feed_id FROM cfeed.read_grant ORDER BY grantee::text;
SELECT relname, relrowsecurity FROM pg_class
WHERE relnamespace = 'cfeed'::regnamespace AND relrowsecurity ORDER BY 1;
SET ROLE regress_ra_order_reader;
SELECT f AS feed, count(*) FROM generate_series(1, 2) f, cfeed.read(f, 0) GROUP BY f ORDER BY f;
RESET ROLE;
/*
 * ... and where cfeed.change had row-level security already (the way of
 * 1.3 to restrict readers), the DBA's policies keep deciding: cfeed's read
 * policy is restrictive, and it adds no write policy.
 */
DROP EXTENSION cfeed;
CREATE EXTENSION cfeed VERSION '1.3';
SELECT cfeed.create_feed('a'), cfeed.create_feed('b');
SELECT cfeed.publish(1, 0, 1), cfeed.publish(2, 0, 2);
SELECT count(*) FROM cfeed.sweep();
GRANT SELECT ON cfeed.change, cfeed.shard TO regress_ra_order_reader;
GRANT INSERT ON cfeed.change TO regress_ra_writer;
ALTER TABLE cfeed.change ENABLE ROW LEVEL SECURITY;
CREATE POLICY dba_reads ON cfeed.change FOR SELECT TO regress_ra_order_reader USING (feed_id = 1);
CREATE POLICY dba_writes ON cfeed.change FOR INSERT TO regress_ra_writer WITH CHECK (feed_id = 2);
ALTER EXTENSION cfeed UPDATE;
SELECT grantee, feed_id FROM cfeed.read_grant ORDER BY grantee::text;
SELECT polname, polcmd, polpermissive FROM pg_policy WHERE polrelid = 'cfeed.change'::regclass ORDER BY 1;
SET ROLE regress_ra_order_reader;
SELECT feed_id, change_id FROM cfeed.change ORDER BY 1;
SELECT f AS feed, count(r.change_id) AS changes FROM generate_series(1, 2) f LEFT JOIN cfeed.read(f, 0) r ON true
GROUP BY f ORDER BY f;
RESET ROLE;
SET ROLE regress_ra_writer;
SELECT pg_temp.err($$SELECT cfeed.publish(1, 0, 3)$$) AS feed_1, pg_temp.err($$SELECT cfeed.publish(2, 0, 4)$$) AS feed_2;
RESET ROLE;

DROP EXTENSION cfeed;
DROP ROLE regress_ra_order_reader, regress_ra_columns, regress_ra_team, regress_ra_member,
	regress_ra_anyone, regress_ra_writer, regress_ra_old_operator;
