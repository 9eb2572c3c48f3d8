-- write_access: per-feed write grants (cfeed.grant_write), and row images
-- only from cfeed's tracking (docs/security.md).
\i test/regress_setup.sql
GRANT EXECUTE ON FUNCTION pg_temp.err(text) TO PUBLIC;

SELECT cfeed.create_feed('wa_one', 1), cfeed.create_feed('wa_two', 1);
CREATE TABLE public.wa_secrets (id int PRIMARY KEY, ssn text);
SELECT cfeed.track('public.wa_secrets', 2);
-- its number, which cfeed.change.tbl holds (1.8)
SELECT table_no AS wa_secrets_no FROM cfeed.tracked_table WHERE tbl = 'public.wa_secrets'::regclass \gset
CREATE TABLE public.wa_mine (id int PRIMARY KEY, v text, change_id bigint);
SELECT cfeed.track('public.wa_mine', 2);

-- writer: the documented writer's table grants, and a write grant on feed 1 only
CREATE ROLE regress_wa_writer;
GRANT INSERT, DELETE ON cfeed.change TO regress_wa_writer;
GRANT USAGE ON SEQUENCE cfeed.change_id TO regress_wa_writer;
GRANT INSERT, UPDATE, DELETE ON public.wa_mine TO regress_wa_writer;
SELECT cfeed.grant_write(1, 'regress_wa_writer');
-- reader1: reads both feeds (to count what a deleter left)
CREATE ROLE regress_wa_reader;
GRANT SELECT ON cfeed.change TO regress_wa_reader;
SELECT cfeed.grant_read_all('regress_wa_reader');

SET ROLE regress_wa_writer;
-- the INSERT pattern, publish and history rows to feed 1: allowed
SELECT pg_temp.err($$INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (1, 0, nextval('cfeed.change_id'))$$) AS insert_feed1,
       pg_temp.err($$SELECT cfeed.publish(1, 0)$$) AS publish_feed1,
       pg_temp.err($$INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number) VALUES (1, 0, 7, 5)$$) AS history_feed1;
-- the same to feed 2: 42501, before anything is written
SELECT pg_temp.err($$INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (2, 0, nextval('cfeed.change_id'))$$) AS insert_feed2;
SELECT pg_temp.err($$SELECT cfeed.publish(2, 0)$$) AS publish_feed2;
SELECT pg_temp.err($$INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number) VALUES (2, 0, 8, 5)$$) AS history_feed2;
-- a tracked table of feed 2 (the writer may write the table, not the feed): 42501, nothing written
SELECT pg_temp.err($$INSERT INTO public.wa_mine (id, v) VALUES (1, 'a')$$) AS tracked_feed2;
-- a forged change of a tracked table (issue: any writer forged images of any table): 42501,
-- to its own feed too, whatever it names
SELECT pg_temp.err(format($$INSERT INTO cfeed.change (feed_id, shard, change_id, tbl, op, "row")
	VALUES (1, 0, nextval('cfeed.change_id'), %s, 'update', '{"id":1,"ssn":"FORGED"}')$$, :wa_secrets_no)) AS forged_image;
SELECT pg_temp.err($$INSERT INTO cfeed.change (feed_id, shard, change_id, "row")
	VALUES (1, 0, nextval('cfeed.change_id'), '{"id":1}')$$) AS forged_row_only;
RESET ROLE;

-- a writer's written_at is its transaction's start, whatever it gives (issue:
-- '-infinity' failed cfeed.stats for everyone while the change was pending,
-- and an old one made the pending age lie); rolled back
BEGIN;
SET LOCAL ROLE regress_wa_writer;
SELECT pg_temp.err($$INSERT INTO cfeed.change (feed_id, shard, change_id, written_at)
	VALUES (1, 0, nextval('cfeed.change_id'), '-infinity'), (1, 0, nextval('cfeed.change_id'), 'infinity'),
		   (1, 0, nextval('cfeed.change_id'), '2000-01-01'), (1, 0, nextval('cfeed.change_id'), clock_timestamp())$$) AS written_at_given;
RESET ROLE;
SELECT count(*) AS written, count(*) FILTER (WHERE written_at = transaction_timestamp()) AS at_start
FROM cfeed.change WHERE writer_xid = pg_current_xact_id();
SELECT count(*) > 0 AS stats_read FROM cfeed.stats;
ROLLBACK;

-- the owner's own tracked write, and the changes now there
INSERT INTO public.wa_secrets VALUES (1, 'real');
SELECT feed_id, count(*) AS changes, count(tbl) AS images FROM cfeed.change GROUP BY 1 ORDER BY 1;

-- an UPDATE may clear an image but not write one: a role granted UPDATE on
-- cfeed.change that bypasses its row-level security (no UPDATE policy lets
-- anyone else update a change) but has not the owner's privileges
CREATE ROLE regress_wa_editor BYPASSRLS;
GRANT SELECT, UPDATE ON cfeed.change TO regress_wa_editor;
SET ROLE regress_wa_editor;
SELECT pg_temp.err(format($$UPDATE cfeed.change SET "row" = '{"id":1,"ssn":"FORGED"}' WHERE tbl = %s$$, :wa_secrets_no)) AS set_image;
SELECT pg_temp.err(format($$UPDATE cfeed.change SET tbl = %s, op = 'insert', "row" = '{}' WHERE tbl IS NULL$$, :wa_secrets_no)) AS add_image;
SELECT pg_temp.err(format($$UPDATE cfeed.change SET "row" = NULL, op = NULL, tbl = NULL WHERE tbl = %s$$, :wa_secrets_no)) AS clear_image;
-- nor a written_at (a review: '-infinity' by UPDATE failed cfeed.stats again): kept
SELECT pg_temp.err($$UPDATE cfeed.change SET written_at = '-infinity'$$) AS set_written_at;
RESET ROLE;
SELECT count(*) FILTER (WHERE NOT isfinite(written_at)) AS infinite_written_at FROM cfeed.change;
SELECT count(tbl) AS images_left, count(*) FILTER (WHERE "row" ->> 'ssn' = 'FORGED') AS forged FROM cfeed.change;

-- backfill writes images only from its own inserts: code of the writer's that
-- the backfill runs (its table's trigger, a CHECK constraint's function) may
-- not write one (issue: a trigger of the table forged an image through the
-- backfill's scope): 42501, and nothing is written
CREATE TABLE public.wa_own (id int PRIMARY KEY, v text, change_id bigint);
ALTER TABLE public.wa_own OWNER TO regress_wa_writer;
INSERT INTO public.wa_own (id, v) VALUES (1, 'one'), (2, 'two');
SELECT cfeed.create_feed('wa_history', 1, feed_id => 3);
SELECT cfeed.grant_write(3, 'regress_wa_writer');
SELECT cfeed.track('public.wa_own', 3);
-- its number, for the writer's functions (a reader of the feed sees it in tbl)
CREATE TABLE public.wa_own_no AS SELECT table_no FROM cfeed.tracked_table WHERE tbl = 'public.wa_own'::regclass;
GRANT SELECT ON public.wa_own_no TO regress_wa_writer;
GRANT CREATE ON SCHEMA public TO regress_wa_writer;
SET ROLE regress_wa_writer;
CREATE FUNCTION public.wa_forge_image() RETURNS bool LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO cfeed.change (feed_id, shard, change_id, tbl, op, "row")
	SELECT 3, 0, nextval('cfeed.change_id'), table_no, 'update', '{"id":1,"v":"FORGED"}'
	FROM public.wa_own_no;
	RETURN true;
END $$;
CREATE FUNCTION public.wa_forge_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM public.wa_forge_image();
	RETURN NEW;
END $$;
CREATE TRIGGER wa_forge BEFORE UPDATE ON public.wa_own FOR EACH ROW EXECUTE FUNCTION public.wa_forge_trigger();
SELECT pg_temp.err($$SELECT cfeed.backfill('public.wa_own', 3)$$) AS backfill_forging_trigger;
DROP TRIGGER wa_forge ON public.wa_own;
ALTER TABLE public.wa_own ADD CONSTRAINT wa_forge CHECK (public.wa_forge_image()) NOT VALID;
SELECT pg_temp.err($$SELECT cfeed.backfill('public.wa_own', 3)$$) AS backfill_forging_check;
ALTER TABLE public.wa_own DROP CONSTRAINT wa_forge;
-- without them, the backfill writes the table's two images
SELECT pg_temp.err($$SELECT cfeed.backfill('public.wa_own', 3)$$) AS backfill;
RESET ROLE;
SELECT count(*) AS own_images, count(*) FILTER (WHERE "row" ->> 'v' = 'FORGED') AS forged,
	   bool_and(c."row" = to_jsonb(o)) AS images_are_rows
FROM cfeed.change c LEFT JOIN public.wa_own o USING (change_id)
WHERE c.tbl = (SELECT table_no FROM public.wa_own_no);
SELECT cfeed.untrack('public.wa_own');
DROP TABLE public.wa_own, public.wa_own_no;
DELETE FROM cfeed.change WHERE feed_id = 3;
DELETE FROM cfeed.shard WHERE feed_id = 3;
DELETE FROM cfeed.feed WHERE feed_id = 3;
DROP FUNCTION public.wa_forge_trigger(), public.wa_forge_image();
REVOKE CREATE ON SCHEMA public FROM regress_wa_writer;

-- a deleter of feed 1 deletes feed 1's changes only (issue: USING (true) deleted every feed's)
SELECT cfeed.publish(2, 0) > 0 AS feed2_written;
SET ROLE regress_wa_writer;
SELECT pg_temp.err($$DELETE FROM cfeed.change$$) AS delete_all;
RESET ROLE;
SET ROLE regress_wa_reader;
SELECT feed_id, count(*) FROM cfeed.change GROUP BY 1 ORDER BY 1;
RESET ROLE;

-- a grant of every feed, PUBLIC, and revokes; a revoke holds at once
SELECT cfeed.revoke_write(1, 'regress_wa_writer');
SET ROLE regress_wa_writer;
SELECT pg_temp.err($$SELECT cfeed.publish(1, 0)$$) AS after_revoke;
RESET ROLE;
SELECT cfeed.grant_write_all('regress_wa_writer');
SET ROLE regress_wa_writer;
SELECT pg_temp.err($$SELECT cfeed.publish(2, 0) > 0$$) AS write_all,
       pg_temp.err($$INSERT INTO public.wa_mine (id, v) VALUES (2, 'b')$$) AS tracked_write_all;
RESET ROLE;
SELECT cfeed.revoke_write_all('regress_wa_writer');
SELECT cfeed.grant_write(1, 0);
SET ROLE regress_wa_writer;
SELECT pg_temp.err($$SELECT cfeed.publish(1, 0) > 0$$) AS public_feed1,
       pg_temp.err($$SELECT cfeed.publish(2, 0) > 0$$) AS public_not_feed2;
RESET ROLE;
SELECT cfeed.revoke_write(1, 0);
SELECT grantee, feed_id FROM cfeed.write_grant ORDER BY 1::text, 2;

-- errors: NULLs (22004), an unknown feed or role (42704, a role cast from an OID
-- that names none too), and a caller without the owner's privileges (42501)
SELECT pg_temp.err($$SELECT cfeed.grant_write(NULL, 'regress_wa_writer')$$),
       pg_temp.err($$SELECT cfeed.grant_write(1, NULL)$$),
       pg_temp.err($$SELECT cfeed.grant_write(99, 'regress_wa_writer')$$),
       pg_temp.err($$SELECT cfeed.grant_write(1, 987654321::oid::regrole)$$),
       pg_temp.err($$SELECT cfeed.grant_write_all(987654321::oid::regrole)$$);
SET ROLE regress_wa_writer;
SELECT pg_temp.err($$SELECT cfeed.grant_write(1, 'regress_wa_writer')$$) AS not_owner,
       pg_temp.err($$SELECT cfeed.grant_write_all('regress_wa_writer')$$) AS not_owner_all;
RESET ROLE;

-- the view cfeed.shard's writes take a write grant of the feed (1.9): a
-- role with what create_feed needs (SELECT, INSERT on cfeed.feed and
-- cfeed.shard) makes feeds with their shards, but adds no shard to
-- another feed (before the fix it did, as the owner: its keys moved and
-- its writers waited on the shards lock) and cannot tell an existing feed
-- or shard from a missing one; with a write grant it may
CREATE ROLE regress_wa_creator;
GRANT SELECT, INSERT ON cfeed.feed, cfeed.shard TO regress_wa_creator;
GRANT UPDATE, DELETE ON cfeed.shard TO regress_wa_creator;
SET ROLE regress_wa_creator;
SELECT cfeed.create_feed('wa_created', 2) AS created_id \gset
BEGIN;
SELECT cfeed.create_feed('wa_created_here', 1) AS here_id \gset
INSERT INTO cfeed.shard (feed_id, shard) VALUES (:here_id, 1);
ROLLBACK;
SELECT pg_temp.err($$INSERT INTO cfeed.shard (feed_id, shard) VALUES (1, 5)$$) AS other_feed_new_shard,
       pg_temp.err($$INSERT INTO cfeed.shard (feed_id, shard) VALUES (1, 0)$$) AS other_feed_existing_shard,
       pg_temp.err($$INSERT INTO cfeed.shard (feed_id, shard) VALUES (99, 0)$$) AS missing_feed,
       pg_temp.err(format($$INSERT INTO cfeed.shard (feed_id, shard) VALUES (%s, 2)$$, :created_id)) AS own_feed_later;
SELECT pg_locks_held FROM (SELECT count(*) AS pg_locks_held FROM pg_locks
	WHERE locktype = 'advisory' AND pid = pg_backend_pid()) l;
RESET ROLE;
-- a feed row this transaction only updated is not a feed it created
GRANT UPDATE (comment) ON cfeed.feed TO regress_wa_creator;
SET ROLE regress_wa_creator;
BEGIN;
UPDATE cfeed.feed SET comment = comment WHERE feed_id = 1;
SELECT pg_temp.err($$INSERT INTO cfeed.shard (feed_id, shard) VALUES (1, 5)$$) AS updated_feed;
ROLLBACK;
RESET ROLE;
REVOKE UPDATE (comment) ON cfeed.feed FROM regress_wa_creator;
SELECT count(*) AS shards_of_feed1 FROM cfeed.shard WHERE feed_id = 1;
SELECT cfeed.grant_write(:created_id, 'regress_wa_creator');
SET ROLE regress_wa_creator;
INSERT INTO cfeed.shard (feed_id, shard) VALUES (:created_id, 2);
UPDATE cfeed.shard SET longpoll = false WHERE feed_id = :created_id AND shard = 2;
DELETE FROM cfeed.shard WHERE feed_id = :created_id AND shard = 2;
RESET ROLE;
SELECT cfeed.revoke_write(:created_id, 'regress_wa_creator');
SELECT cfeed.grant_read(:created_id, 'regress_wa_creator');
SET ROLE regress_wa_creator;
-- a reader sees the feed's shards in the view, and changes none
SELECT pg_temp.err(format($$UPDATE cfeed.shard SET longpoll = false WHERE feed_id = %s$$, :created_id)) AS reader_update,
       pg_temp.err(format($$DELETE FROM cfeed.shard WHERE feed_id = %s AND shard = 1$$, :created_id)) AS reader_delete;
RESET ROLE;
SELECT cfeed.revoke_read(:created_id, 'regress_wa_creator');
DELETE FROM cfeed.shard WHERE feed_id = :created_id;
DELETE FROM cfeed.feed WHERE feed_id = :created_id;
-- a new sweep group is the owner's to start (1.9): each has a background
-- sweeper from the cluster's cfeed.max_workers (before, a feed creator in
-- one database took every slot of the cluster with feeds in new groups);
-- a group in use, and group 0, are anyone's
SET ROLE regress_wa_creator;
SELECT pg_temp.err($$SELECT cfeed.create_feed('wa_grouped', 1, sweep_group => 7)$$) AS new_group;
RESET ROLE;
SELECT cfeed.create_feed('wa_owner_grouped', 1, sweep_group => 7) > 0 AS owner_new_group;
SET ROLE regress_wa_creator;
SELECT cfeed.create_feed('wa_grouped', 1, sweep_group => 7) > 0 AS group_in_use;
RESET ROLE;
DELETE FROM cfeed.shard WHERE sweep_group = 7;
DELETE FROM cfeed.feed WHERE name IN ('wa_grouped', 'wa_owner_grouped');
-- a shard that starts near the end of the numbers is the owner's to add
-- (1.9): one that runs out of numbers stops its sweep group's sweeps (a
-- range shard's here, any shard's in the SQL edition), so a writer of one
-- feed could stop the stamping of every feed of its group
SET ROLE regress_wa_creator;
BEGIN;
SELECT cfeed.create_feed('wa_high', 1) AS high_id \gset
SELECT pg_temp.err(format($$INSERT INTO cfeed.shard (feed_id, shard, last_change_sequence_number)
						   VALUES (%s, 1, 9223372036854775806)$$, :high_id)) AS near_the_end,
	   pg_temp.err(format($$INSERT INTO cfeed.shard (feed_id, shard, last_change_sequence_number)
						   VALUES (%s, 1, 4611686018427387904)$$, :high_id)) AS above_2_62;
INSERT INTO cfeed.shard (feed_id, shard, last_change_sequence_number) VALUES (:high_id, 1, 4611686018427387903);
COMMIT;
RESET ROLE;
INSERT INTO cfeed.shard (feed_id, shard, last_change_sequence_number) VALUES (:high_id, 2, 9223372036854775806);
SELECT shard, last_change_sequence_number FROM cfeed.shard WHERE feed_id = :high_id ORDER BY shard;
DELETE FROM cfeed.shard WHERE feed_id = :high_id;
DELETE FROM cfeed.feed WHERE feed_id = :high_id;

-- a feed's write grants go with it
SELECT cfeed.grant_write(2, 'regress_wa_writer');
SELECT cfeed.untrack('public.wa_secrets'), cfeed.untrack('public.wa_mine');
DELETE FROM cfeed.change WHERE feed_id = 2;
DELETE FROM cfeed.shard WHERE feed_id = 2;
DELETE FROM cfeed.feed WHERE feed_id = 2;
SELECT count(*) AS grants_of_feed2 FROM cfeed.write_grant WHERE feed_id = 2;

DROP TABLE public.wa_secrets, public.wa_mine;
DROP OWNED BY regress_wa_writer, regress_wa_reader, regress_wa_editor, regress_wa_creator;
DROP ROLE regress_wa_writer, regress_wa_reader, regress_wa_editor, regress_wa_creator;
