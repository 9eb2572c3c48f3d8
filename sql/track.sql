-- track: cfeed.track/untrack row triggers, row images through read_rows,
-- tombstones, partitions, TRUNCATE, and backfill into the migration range.
\i test/regress_setup.sql

-- rows(feed): read_rows of every shard from the beginning; numbers relative
-- to the shard's start, the row without its change_id column, and whether
-- the row's change_id column holds the change's change_id
CREATE FUNCTION pg_temp.rows(f int)
RETURNS TABLE (shard int, n bigint, op text, tbl regclass, "row" jsonb, id_in_row bool)
LANGUAGE sql AS $$
	SELECT s.shard, r.change_sequence_number - s.start_sequence_number, r.op, r.tbl,
		   r."row" - 'change_id', (r."row" ->> 'change_id')::bigint = r.change_id
	FROM cfeed.shard s, cfeed.read_rows(s.feed_id, s.shard) r
	WHERE s.feed_id = f ORDER BY 1, 2
$$;

SELECT cfeed.create_feed('track-a', 4, feed_id => 601);

-- insert (multi-row), update, delete and COPY of a table with a change_id column
CREATE TABLE t_acct (id int PRIMARY KEY, name text, change_id bigint);
SELECT cfeed.track('t_acct', 601);
INSERT INTO t_acct (id, name) VALUES (1, 'ann'), (2, 'bob'), (3, 'cy');
UPDATE t_acct SET name = 'ann2' WHERE id = 1;
DELETE FROM t_acct WHERE id = 2;
COPY t_acct (id, name) FROM stdin;
4	dee
5	eve
\.
-- after a sweep: every change, each with its row as of the change
SELECT count(*) >= 0 AS swept FROM cfeed.sweep();
SELECT * FROM pg_temp.rows(601);
-- shards follow shard_for(feed, primary key's text form)
SELECT bool_and(shard = cfeed.shard_for(601, "row" ->> 'id')) AS pk_sharded FROM pg_temp.rows(601);
-- the change_id column holds the change_id of the row's latest change
SELECT t.id, t.change_id = (SELECT max(i.change_id) FROM cfeed.change i
							WHERE cfeed._tracked_table(i.tbl) = 't_acct'::regclass AND i."row" ->> 'id' = t.id::text) AS latest
FROM t_acct t ORDER BY t.id;

-- an UPDATE that changes the key: tombstone of the old key first, then the new row
UPDATE t_acct SET id = 30 WHERE id = 3;
SELECT count(*) >= 0 AS swept FROM cfeed.sweep();
SELECT i.op, i."row" ->> 'id' AS id, cfeed.shard_for(601, i."row" ->> 'id') AS shard
FROM cfeed.change i WHERE i.feed_id = 601
ORDER BY i.change_id DESC LIMIT 2;

-- a plain publish to a feed reads with null tbl, op and row
SELECT cfeed.publish(601, 0) > 0 AS published;
SELECT count(*) >= 0 AS swept FROM cfeed.sweep();
SELECT n, op, tbl, "row" FROM pg_temp.rows(601) WHERE shard = 0 ORDER BY n DESC LIMIT 1;

-- TRUNCATE of a tracked table is refused; after untrack it works and nothing is published
SELECT pg_temp.err('TRUNCATE t_acct');
SELECT cfeed.untrack('t_acct');
SELECT count(*) AS images_before FROM cfeed.change WHERE feed_id = 601 AND "row" IS NOT NULL;
INSERT INTO t_acct (id, name) VALUES (6, 'fay');
TRUNCATE t_acct;
SELECT count(*) AS images_after FROM cfeed.change WHERE feed_id = 601 AND "row" IS NOT NULL;
SELECT tgname FROM pg_trigger WHERE tgrelid = 't_acct'::regclass;

-- a custom key, and a multi-column key ('|'-joined text forms); no change_id column
SELECT cfeed.create_feed('track-b', 3, feed_id => 602);
CREATE TABLE t_evt (id int PRIMARY KEY, account text, payload text);
SELECT cfeed.track('t_evt', 602, key => 'account');
INSERT INTO t_evt SELECT g, 'acct-' || (g % 5), 'p' FROM generate_series(1, 20) g;
CREATE TABLE t_evt2 (id int, account text, payload text);
SELECT cfeed.track('t_evt2', 602, key => 'account, ID');
INSERT INTO t_evt2 SELECT g, 'acct-' || (g % 5), 'p' FROM generate_series(1, 20) g;
SELECT count(*) >= 0 AS swept FROM cfeed.sweep();
SELECT tbl, count(*) AS changes,
	   bool_and(shard = cfeed.shard_for(602, CASE WHEN tbl = 't_evt'::regclass
							THEN "row" ->> 'account'
							ELSE ("row" ->> 'account') || '|' || ("row" ->> 'id') END)) AS key_sharded,
	   count(DISTINCT shard) AS shards_used, bool_and(id_in_row IS NULL) AS no_id_column
FROM pg_temp.rows(602) GROUP BY tbl ORDER BY tbl;
SELECT cfeed.untrack('t_evt2');

-- a table without a primary key is refused unless a key is given
CREATE TABLE t_nopk (a int, b text);
SELECT pg_temp.err($$SELECT cfeed.track('t_nopk', 602)$$);
SELECT pg_temp.err($$SELECT cfeed.track('t_nopk', 602, key => 'a')$$);
SELECT cfeed.untrack('t_nopk');

-- partitioned tables: rows in partitions (also ones created later) publish under the parent;
-- moving a row to another partition is a delete then an insert
SELECT cfeed.create_feed('track-p', 2, feed_id => 603);
CREATE TABLE t_part (id int, region text, v text, change_id bigint, PRIMARY KEY (id, region))
	PARTITION BY LIST (region);
CREATE TABLE t_part_eu PARTITION OF t_part FOR VALUES IN ('eu');
CREATE TABLE t_part_us PARTITION OF t_part FOR VALUES IN ('us');
SELECT cfeed.track('t_part', 603);
INSERT INTO t_part (id, region, v) VALUES (1, 'eu', 'a'), (2, 'us', 'b');
INSERT INTO t_part_eu (id, region, v) VALUES (3, 'eu', 'c');
CREATE TABLE t_part_ap PARTITION OF t_part FOR VALUES IN ('ap');
INSERT INTO t_part (id, region, v) VALUES (4, 'ap', 'd');
UPDATE t_part SET region = 'us' WHERE id = 1;
SELECT count(*) >= 0 AS swept FROM cfeed.sweep();
SELECT shard, n, op, tbl, "row", id_in_row FROM pg_temp.rows(603);
SELECT bool_and(shard = cfeed.shard_for(603, ("row" ->> 'id') || '|' || ("row" ->> 'region'))) AS pk_sharded
FROM pg_temp.rows(603);
SELECT id, region, change_id IS NOT NULL AS has_change_id FROM t_part ORDER BY id;
SELECT pg_temp.err('TRUNCATE t_part');
SELECT pg_temp.err('TRUNCATE t_part_eu');
SELECT cfeed.untrack('t_part');
SELECT pg_temp.err('TRUNCATE t_part_eu');

-- errors, with their SQLSTATEs
CREATE VIEW v_acct AS SELECT * FROM t_acct;
CREATE TABLE t_badcid (id int PRIMARY KEY, change_id int);
SELECT pg_temp.err($$SELECT cfeed.track(NULL, 601)$$);
SELECT pg_temp.err($$SELECT cfeed.track('t_acct', NULL)$$);
SELECT pg_temp.err($$SELECT cfeed.track('t_acct', 699)$$);
SELECT pg_temp.err($$SELECT cfeed.track('t_evt', 601)$$);
SELECT pg_temp.err($$SELECT cfeed.track('t_acct', 601, key => 'nope')$$);
SELECT pg_temp.err($$SELECT cfeed.track('t_acct', 601, key => '')$$);
SELECT pg_temp.err($$SELECT cfeed.track('t_badcid', 601)$$);
SELECT pg_temp.err($$SELECT cfeed.track('v_acct', 601)$$);
-- a temporary table is dropped without the event trigger that forgets a
-- tracked table, and its OID may later name another table: refused
CREATE TEMP TABLE t_temp (id int PRIMARY KEY);
SELECT pg_temp.err($$SELECT cfeed.track('t_temp', 601)$$);
DROP TABLE t_temp;
SELECT pg_temp.err($$SELECT cfeed.untrack('t_acct')$$);
SELECT pg_temp.err($$SELECT cfeed.untrack(NULL)$$);
SELECT pg_temp.err($$SELECT * FROM cfeed.read_rows(NULL, 0)$$);
SELECT pg_temp.err($$SELECT * FROM cfeed.read_rows(601, 0, max_count => -1)$$);
SELECT pg_temp.err($$SELECT * FROM cfeed.read_rows(601, 9)$$);
SELECT pg_temp.err($$SELECT * FROM cfeed.read_rows(699, 0)$$);
-- only the table's owner may track, untrack or backfill it
CREATE ROLE track_stranger;
GRANT USAGE ON SCHEMA public TO track_stranger;
SET ROLE track_stranger;
SELECT pg_temp.err($$SELECT cfeed.track('t_acct', 601)$$);
SELECT pg_temp.err($$SELECT cfeed.untrack('t_evt')$$);
SELECT pg_temp.err($$SELECT cfeed.backfill('t_evt', 602)$$);
RESET ROLE;

-- backfill: history numbered start-k+1 .. start per shard, contiguous with the live numbers
SELECT cfeed.create_feed('track-h', 2, feed_id => 604);
CREATE TABLE t_hist (id int PRIMARY KEY, v text, change_id bigint);
INSERT INTO t_hist SELECT g, 'v' || g FROM generate_series(1, 10) g;
BEGIN;
SELECT cfeed.track('t_hist', 604);
SELECT cfeed.backfill('t_hist', 604, order_by => 'v DESC');
COMMIT;
INSERT INTO t_hist VALUES (11, 'v11'), (12, 'v12');
UPDATE t_hist SET v = 'v1b' WHERE id = 1;
SELECT count(*) >= 0 AS swept FROM cfeed.sweep();
SELECT * FROM pg_temp.rows(604);
-- per shard: history <= 0 then live > 0, no gap, no duplicate
SELECT shard, min(n) AS first, max(n) AS last, count(*) = max(n) - min(n) + 1 AS gapless
FROM pg_temp.rows(604) GROUP BY shard ORDER BY shard;
-- the rows' change_id is their latest change's, history included
SELECT bool_and(t.change_id = (SELECT max(i.change_id) FROM cfeed.change i
							   WHERE cfeed._tracked_table(i.tbl) = 't_hist'::regclass AND i."row" ->> 'id' = t.id::text)) AS latest
FROM t_hist t;
-- a second backfill fails and changes nothing
SELECT count(*) AS changes_before FROM cfeed.change WHERE feed_id = 604;
SELECT pg_temp.err($$SELECT cfeed.backfill('t_hist', 604)$$);
SELECT count(*) AS changes_after FROM cfeed.change WHERE feed_id = 604;

-- not enough room: a shard created with start value 3 holds 3 history rows
INSERT INTO cfeed.feed (feed_id, name) VALUES (605, 'track-small');
INSERT INTO cfeed.shard (feed_id, shard, last_change_sequence_number) VALUES (605, 0, 3);
CREATE TABLE t_small (id int PRIMARY KEY, change_id bigint);
INSERT INTO t_small SELECT g FROM generate_series(1, 4) g;
SELECT cfeed.track('t_small', 605);
SELECT pg_temp.err($$SELECT cfeed.backfill('t_small', 605)$$);
SELECT count(*) AS changes, (SELECT count(*) FROM t_small WHERE change_id IS NOT NULL) AS ids_set
FROM cfeed.change WHERE feed_id = 605;
DELETE FROM t_small WHERE id = 4;
-- three rows fit exactly: numbers 1 .. 3
SELECT cfeed.backfill('t_small', 605);
SELECT count(*) >= 0 AS swept FROM cfeed.sweep();
SELECT shard, n, op, "row", id_in_row FROM pg_temp.rows(605);

-- backfill argument checks
SELECT pg_temp.err($$SELECT cfeed.backfill('t_evt', 602, order_by => 'id; DROP TABLE t_evt')$$);
SELECT pg_temp.err($$SELECT cfeed.backfill('t_evt', 602, order_by => 'id DESC NULLS')$$);
SELECT pg_temp.err($$SELECT cfeed.backfill('t_evt', 602, order_by => 'lower(account)')$$);
SELECT pg_temp.err($$SELECT cfeed.backfill('t_evt', 602, order_by => 'nope')$$);
-- order_by is a sort list of column names as SQL parses it, and nothing else:
-- calls, subqueries, a second statement, comments, USING, LIMIT, parentheses
-- and Unicode escapes are refused (22023), or 42703 when the item starts with
-- a word that is no column; quoted names are taken as written, an item's first
-- word is a name even when it is a keyword (desc)
SELECT s, pg_temp.err(format('SELECT cfeed.backfill(%L, 602, order_by => %L)', 't_evt', s))
FROM (VALUES ('id(1)'), ('abs(id)'), ('(SELECT 1)'), ('id, (SELECT max(id) FROM t_evt)'),
             ('1; DROP TABLE t_evt'), ('id -- comment'), ('id /* c */ DESC'), ('id USING <'),
             ('id LIMIT 1'), ('(id)'), ('t_evt.id'), ('U&"id"'), ('"ID"'), ('"id'), ('""'),
             ('id DESC, "Account"'), ('desc'), ('id,')) AS t(s);
BEGIN;
SELECT pg_temp.err($$SELECT cfeed.backfill('t_evt', 602, order_by => ' "account"  Desc nulls FIRST ,ID')$$);
ROLLBACK;
-- column names that are SQL keywords need no quotes (the first word of an
-- item is a name); an item left incomplete still names its column first;
-- what the parser refuses as not supported is a bad order_by too
SELECT cfeed.create_feed('track-kw', 2, feed_id => 606);
CREATE TABLE t_kw (id int PRIMARY KEY, "end" timestamptz, "user" text, "order" int,
				   "limit" int, "default" int, "left" int, "verbose" int, "binary" int,
				   "current_date" date, "desc" int);
INSERT INTO t_kw (id, "end") VALUES (1, '2024-01-01'), (2, '2024-01-02');
SELECT cfeed.track('t_kw', 606);
-- ob(s): backfill t_kw in order s, undone: "SQLSTATE: message", or "ok"
CREATE FUNCTION pg_temp.ob(s text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	r text;
BEGIN
	r := pg_temp.err(format('SELECT cfeed.backfill(%L, 606, order_by => %L)', 't_kw', s));
	RAISE SQLSTATE 'U0001';
EXCEPTION WHEN SQLSTATE 'U0001' THEN
	RETURN r;
END $$;
SELECT s, pg_temp.ob(s)
FROM (VALUES ('end DESC'), ('END'), ('user, "order" DESC NULLS LAST, limit ASC'),
             ('default, left DESC, verbose, binary NULLS FIRST, current_date, desc DESC'),
             ('end DESC, lower(id)'), ('id, order(1)'), ('unique (select 1)'),
             ('unique'), ('end"x"'), ('check'), ('nope,'), ('nope DESC NULLS'),
             ('id, nope DESC NULLS'), ('id DESC NULLS, nope'), ('end,'),
             ('id, lower(id'), ('(nope)'), ('id, /* c */ nope'), ('cast(nope AS int)'),
             ('id LIMIT 1, 2'), ('id, (unique (select 1))'), ('nope LIMIT 1, 2'),
             ('id FOR UPDATE OF a, b c')) AS t(s);
-- change ids drawn in "end" order, latest first
SELECT cfeed.backfill('t_kw', 606, order_by => 'end DESC');
SELECT "row" ->> 'id' AS id FROM cfeed.change WHERE feed_id = 606 ORDER BY change_id;
SELECT pg_temp.err($$SELECT cfeed.backfill('t_evt', 601)$$);
SELECT pg_temp.err($$SELECT cfeed.backfill(NULL, 601)$$);
SELECT pg_temp.err($$SELECT cfeed.backfill('t_evt', NULL)$$);
SELECT cfeed.backfill('t_evt', 602, order_by => 'account DESC NULLS LAST, "id" asc') AS evt_rows;

-- images written before 1.3 are in cfeed.row_image: read_rows reads them for
-- a change without an image of its own, and deleting the changes (retention)
-- deletes them
INSERT INTO cfeed.row_image (change_id, feed_id, tbl, op, "row")
SELECT change_id, feed_id, tbl, 'update', "row" || '{"old": true}' FROM cfeed.change WHERE feed_id = 605;
UPDATE cfeed.change SET tbl = NULL, op = NULL, "row" = NULL WHERE feed_id = 605 AND "row" ->> 'id' = '1';
SELECT shard, n, op, "row" ->> 'id' AS id, "row" ? 'old' AS from_row_image FROM pg_temp.rows(605);
DELETE FROM cfeed.change WHERE feed_id = 605;
SELECT count(*) AS images_left FROM cfeed.row_image WHERE feed_id = 605;

-- a dropped tracked table's number keeps its name and loses its table
-- (DROP TABLE, DROP SCHEMA ... CASCADE): it never names a table that later
-- gets the OID, nor one that gets the name
CREATE TABLE t_gone (id int PRIMARY KEY);
CREATE SCHEMA s_gone;
CREATE TABLE s_gone.t_gone (id int PRIMARY KEY);
SELECT cfeed.track('t_gone', 601), cfeed.track('s_gone.t_gone', 601);
INSERT INTO t_gone VALUES (1);
INSERT INTO s_gone.t_gone VALUES (1);
CREATE TEMP TABLE gone AS
SELECT table_no, name FROM cfeed.tracked_table WHERE name IN ('public.t_gone', 's_gone.t_gone');
DROP TABLE t_gone;
DROP SCHEMA s_gone CASCADE;
CREATE TABLE t_gone (id int PRIMARY KEY);
UPDATE cfeed.tracked_table SET name = name WHERE table_no IN (SELECT table_no FROM gone);
SELECT g.name, t.tbl, cfeed._tracked_table(g.table_no) AS resolved,
       (SELECT count(*) FROM cfeed.change c WHERE c.tbl = g.table_no) AS changes
FROM gone g JOIN cfeed.tracked_table t USING (table_no) ORDER BY 1;
DROP TABLE t_gone;

-- nor may a trigger attached to a temporary table by hand publish its rows
CREATE TEMP TABLE t_temp (id int PRIMARY KEY);
CREATE TRIGGER cfeed_track AFTER INSERT ON t_temp
	FOR EACH ROW EXECUTE FUNCTION cfeed._track_row('601', '');
SELECT pg_temp.err($$INSERT INTO t_temp VALUES (1)$$);
DROP TABLE t_temp;

-- backfill's UPDATE of change_id fires the table's other triggers: a row that
-- a BEFORE UPDATE trigger rewrites is history as it was written
SELECT cfeed.create_feed('track-trig', 2, feed_id => 607);
CREATE TABLE t_trig (id int PRIMARY KEY, v text, touched bool NOT NULL DEFAULT false, change_id bigint);
INSERT INTO t_trig (id, v) VALUES (1, 'a'), (2, 'b');
CREATE FUNCTION t_trig_touch() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
	NEW.touched := true;
	RETURN NEW;
END
$fn$;
CREATE TRIGGER t_trig_touch BEFORE UPDATE ON t_trig FOR EACH ROW EXECUTE FUNCTION t_trig_touch();
BEGIN;
SELECT cfeed.track('t_trig', 607);
SELECT cfeed.backfill('t_trig', 607) AS history_rows;
COMMIT;
INSERT INTO t_trig (id, v) VALUES (3, 'c');
SELECT count(*) >= 0 AS swept FROM cfeed.sweep();
SELECT shard, n <= 0 AS history, op, "row", id_in_row FROM pg_temp.rows(607);
-- every row of the table is the image of its latest change
SELECT t.id, (SELECT r."row" FROM pg_temp.rows(607) r
			  WHERE r."row" ->> 'id' = t.id::text ORDER BY r.n DESC LIMIT 1) = to_jsonb(t) - 'change_id' AS image_is_row
FROM t_trig t ORDER BY t.id;
-- a row that a trigger writes meanwhile is published live (the SQL edition
-- refuses it: its tracking triggers are off while backfill runs); either way
-- no row of the table names a change that does not exist
SELECT cfeed.create_feed('track-write', 2, feed_id => 611);
CREATE TABLE t_write (id int PRIMARY KEY, v text, change_id bigint);
INSERT INTO t_write (id, v) VALUES (1, 'a'), (2, 'b');
CREATE FUNCTION t_write_more() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
	IF NEW.id = 1 AND NOT EXISTS (SELECT FROM public.t_write WHERE id = 100) THEN
		INSERT INTO public.t_write (id, v) VALUES (100, 'from a trigger');
	END IF;
	RETURN NEW;
END
$fn$;
CREATE TRIGGER t_write_more BEFORE UPDATE ON t_write FOR EACH ROW EXECUTE FUNCTION t_write_more();
SELECT cfeed.track('t_write', 611);
SELECT pg_temp.err($$SELECT cfeed.backfill('t_write', 611)$$);
SELECT count(*) >= 0 AS swept FROM cfeed.sweep();
SELECT count(*) AS unpublished FROM t_write t
WHERE t.change_id IS NOT NULL AND NOT EXISTS (SELECT FROM cfeed.change c WHERE c.change_id = t.change_id);
SELECT count(*) AS changes_of_row_100 FROM cfeed.change c
WHERE c.feed_id = 611 AND c."row" ->> 'id' = '100' AND c.change_id = (SELECT change_id FROM t_write WHERE id = 100);
-- a trigger that skips backfill's UPDATE of a row, or sets another
-- change_id, fails it (55000)
SELECT cfeed.create_feed('track-skip', 1, feed_id => 608);
CREATE TABLE t_skip (id int PRIMARY KEY, change_id bigint);
INSERT INTO t_skip VALUES (1), (2);
CREATE FUNCTION t_skip_two() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
	IF OLD.id = 2 THEN
		RETURN NULL;
	END IF;
	RETURN NEW;
END
$fn$;
CREATE TRIGGER t_skip_two BEFORE UPDATE ON t_skip FOR EACH ROW EXECUTE FUNCTION t_skip_two();
BEGIN;
SELECT cfeed.track('t_skip', 608);
SELECT pg_temp.err($$SELECT cfeed.backfill('t_skip', 608)$$);
ROLLBACK;
DROP TRIGGER t_skip_two ON t_skip;
CREATE FUNCTION t_skip_cid() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
	NEW.change_id := OLD.change_id;
	RETURN NEW;
END
$fn$;
CREATE TRIGGER t_skip_cid BEFORE UPDATE ON t_skip FOR EACH ROW EXECUTE FUNCTION t_skip_cid();
BEGIN;
SELECT cfeed.track('t_skip', 608);
SELECT pg_temp.err($$SELECT cfeed.backfill('t_skip', 608)$$);
ROLLBACK;
-- a backfill run by a trigger of another backfill's table leaves that
-- backfill's rows silenced: each of them is published once, as history
SELECT cfeed.create_feed('track-outer', 1, feed_id => 612);
SELECT cfeed.create_feed('track-inner', 1, feed_id => 613);
CREATE TABLE t_outer (id int PRIMARY KEY, change_id bigint);
CREATE TABLE t_inner (id int PRIMARY KEY, change_id bigint);
INSERT INTO t_outer VALUES (1), (2);
INSERT INTO t_inner VALUES (1);
CREATE FUNCTION t_outer_inner() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
	IF NOT EXISTS (SELECT FROM cfeed.change c WHERE c.feed_id = 613) THEN
		PERFORM cfeed.backfill('public.t_inner', 613);
	END IF;
	RETURN NEW;
END
$fn$;
CREATE TRIGGER t_outer_inner BEFORE UPDATE ON t_outer FOR EACH ROW EXECUTE FUNCTION t_outer_inner();
BEGIN;
SELECT cfeed.track('t_outer', 612), cfeed.track('t_inner', 613);
SELECT cfeed.backfill('t_outer', 612) AS history_rows;
COMMIT;
SELECT feed_id, op, count(*) FROM cfeed.change WHERE feed_id IN (612, 613) GROUP BY 1, 2 ORDER BY 1, 2;
SELECT cfeed.untrack('t_trig'), cfeed.untrack('t_write'), cfeed.untrack('t_outer'), cfeed.untrack('t_inner');
DROP TABLE t_trig, t_write, t_skip, t_outer, t_inner;
DROP FUNCTION t_trig_touch(), t_write_more(), t_skip_two(), t_skip_cid(), t_outer_inner();

-- backfill as a role the table's own row-level security applies to would
-- number only the rows it may see: refused (42501)
CREATE ROLE track_rls_owner;
GRANT USAGE ON SCHEMA public TO track_rls_owner;
GRANT INSERT ON cfeed.change TO track_rls_owner;
GRANT USAGE ON SEQUENCE cfeed.change_id TO track_rls_owner;
SELECT cfeed.create_feed('track-rls', 1, feed_id => 614);
SELECT cfeed.grant_write(614, 'track_rls_owner');
CREATE TABLE t_rls (id int PRIMARY KEY, change_id bigint);
INSERT INTO t_rls VALUES (1), (2);
ALTER TABLE t_rls OWNER TO track_rls_owner;
ALTER TABLE t_rls ENABLE ROW LEVEL SECURITY;
ALTER TABLE t_rls FORCE ROW LEVEL SECURITY;
CREATE POLICY t_rls_one ON t_rls USING (id = 1);
SET ROLE track_rls_owner;
BEGIN;
SELECT cfeed.track('public.t_rls', 614);
SELECT pg_temp.err($$SELECT cfeed.backfill('public.t_rls', 614)$$);
ROLLBACK;
RESET ROLE;
DROP TABLE t_rls;
SELECT cfeed.revoke_write(614, 'track_rls_owner');
REVOKE INSERT ON cfeed.change FROM track_rls_owner;
REVOKE USAGE ON SEQUENCE cfeed.change_id FROM track_rls_owner;
REVOKE USAGE ON SCHEMA public FROM track_rls_owner;
DROP ROLE track_rls_owner;

-- an inheritance parent's backfill is of its own rows: its triggers do not
-- fire for its children's
SELECT cfeed.create_feed('track-inh', 1, feed_id => 609);
CREATE TABLE t_inh (id int PRIMARY KEY, v text, change_id bigint);
CREATE TABLE t_inh_child () INHERITS (t_inh);
INSERT INTO t_inh (id, v) VALUES (1, 'parent');
INSERT INTO t_inh_child (id, v) VALUES (2, 'child');
BEGIN;
SELECT cfeed.track('t_inh', 609);
SELECT cfeed.backfill('t_inh', 609) AS history_rows;
COMMIT;
SELECT shard, n, op, "row" FROM pg_temp.rows(609);
SELECT id, change_id IS NOT NULL AS numbered FROM t_inh ORDER BY id;
DROP TABLE t_inh_child, t_inh;
-- a partition of a tracked table, partitioned itself, backfilled by itself:
-- its leaves' tracking triggers are silenced for backfill's rows too
SELECT cfeed.create_feed('track-part', 1, feed_id => 615);
CREATE TABLE t_sub (id int, r text, change_id bigint, PRIMARY KEY (id, r)) PARTITION BY LIST (r);
CREATE TABLE t_sub_a PARTITION OF t_sub FOR VALUES IN ('a') PARTITION BY RANGE (id);
CREATE TABLE t_sub_a1 PARTITION OF t_sub_a FOR VALUES FROM (0) TO (100);
INSERT INTO t_sub VALUES (1, 'a'), (2, 'a');
BEGIN;
SELECT cfeed.track('t_sub', 615);
SELECT cfeed.backfill('t_sub_a', 615) AS history_rows;
COMMIT;
SELECT shard, n, op, "row" FROM pg_temp.rows(615);
SELECT cfeed.untrack('t_sub');
DROP TABLE t_sub;

-- an image holds the columns its table had then: once a column is dropped,
-- column grants no longer show the table's images (older ones hold the
-- dropped column's values, which no grant of today tells who could read); a
-- grant of the table does
SELECT cfeed.create_feed('track-drop', 1, feed_id => 610);
CREATE TABLE t_drop (id int PRIMARY KEY, name text, secret text);
SELECT cfeed.track('t_drop', 610);
INSERT INTO t_drop VALUES (1, 'a', 's1');
SELECT count(*) >= 0 AS swept FROM cfeed.sweep();
SELECT cfeed.grant_read(610, 'track_stranger');
GRANT SELECT ON cfeed.change, cfeed.shard, cfeed.row_image TO track_stranger;
GRANT SELECT (id, name) ON t_drop TO track_stranger;
SET ROLE track_stranger;
SELECT count(*) AS images_shown FROM cfeed.read_rows(610, 0) WHERE "row" IS NOT NULL;
RESET ROLE;
GRANT SELECT (secret) ON t_drop TO track_stranger;
SET ROLE track_stranger;
SELECT count(*) AS images_shown FROM cfeed.read_rows(610, 0) WHERE "row" IS NOT NULL;
RESET ROLE;
REVOKE SELECT (secret) ON t_drop FROM track_stranger;
ALTER TABLE t_drop DROP COLUMN secret;
SET ROLE track_stranger;
SELECT count(*) AS images_shown FROM cfeed.read_rows(610, 0) WHERE "row" IS NOT NULL;
RESET ROLE;
GRANT SELECT ON t_drop TO track_stranger;
SET ROLE track_stranger;
SELECT "row" FROM cfeed.read_rows(610, 0);
RESET ROLE;
SELECT cfeed.untrack('t_drop');
DROP TABLE t_drop;
SELECT cfeed.revoke_read(610, 'track_stranger');
REVOKE SELECT ON cfeed.change, cfeed.shard, cfeed.row_image FROM track_stranger;

REVOKE USAGE ON SCHEMA public FROM track_stranger;
DROP ROLE track_stranger;
