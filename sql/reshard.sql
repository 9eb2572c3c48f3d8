-- reshard: cfeed.reshard closes a feed's open shards and creates their
-- children; routing (shard_for, publish, the INSERT pattern, tracking) by
-- the open shards; writes to a closed shard refused; reads of an ended shard
-- return at once; errors and privileges.
\i test/regress_setup.sql

SELECT cfeed.create_feed('rs', 2);
-- keys and their shards before: fnv1a mod 2
CREATE TEMP TABLE rs_keys AS
	SELECT k, cfeed.shard_for(1, k) AS before FROM (VALUES ('a'), ('b'), ('c'), ('d'), ('e'), ('f'), ('g'), ('h')) v(k);
SELECT k, before FROM rs_keys ORDER BY k;
-- changes on the parents, one of them left unstamped
SELECT cfeed.publish(1, 0, 11), cfeed.publish(1, 1, 12);
SELECT count(*) FROM cfeed.sweep();
SELECT cfeed.publish(1, 1, 13);

-- reshard 2 -> 4: shards 0 and 1 close, children 2..5 continue 0,1,0,1
SELECT * FROM cfeed.reshard(1, 4);
SELECT shard, parent, closed, ended, last_change_sequence_number
FROM cfeed.shard WHERE feed_id = 1 ORDER BY shard;
-- shard_for after: 2 + fnv1a mod 4, and every key's child continues its parent
SELECT k, before, cfeed.shard_for(1, k) AS after, s.parent = before AS continues
FROM rs_keys r JOIN cfeed.shard s ON s.feed_id = 1 AND s.shard = cfeed.shard_for(1, r.k)
ORDER BY k;

-- writes to a closed shard: 55000, by publish, the INSERT pattern and COPY-like bulk inserts
SELECT pg_temp.err($$SELECT cfeed.publish(1, 0)$$) AS publish_closed;
SELECT pg_temp.err($$INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (1, 1, nextval('cfeed.change_id'))$$) AS insert_closed;
SELECT pg_temp.err($$INSERT INTO cfeed.change (feed_id, shard, change_id) SELECT 1, s, nextval('cfeed.change_id') FROM generate_series(1, 2) s$$) AS insert_mixed;
-- open shards take them; the seed's INSERT pattern routes by the new layout
SELECT cfeed.publish(1, 5, 21) AS publish_child;
INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (1, cfeed.shard_for(1, 'a'), 22);
SELECT shard FROM cfeed.change WHERE change_id = 22;

-- a tracked table routes by the new layout too
CREATE TABLE public.rs_t (id text PRIMARY KEY, v int);
SELECT cfeed.track('public.rs_t', 1);
INSERT INTO public.rs_t SELECT k, 1 FROM rs_keys;
SELECT t.id, c.shard, c.shard = cfeed.shard_for(1, t.id) AS routed
FROM public.rs_t t JOIN cfeed.change c ON c.feed_id = 1 AND c."row" ->> 'id' = t.id ORDER BY t.id;

-- ended: shard 1 still has change 13 unstamped; after a sweep both parents end
SELECT shard, closed, ended FROM cfeed.shard WHERE feed_id = 1 AND shard < 2 ORDER BY shard;
SELECT feed_id, shard, change_count FROM cfeed.sweep() WHERE shard < 2 ORDER BY shard;
SELECT shard, closed, ended, last_change_sequence_number FROM cfeed.shard WHERE feed_id = 1 AND shard < 2 ORDER BY shard;
-- reads of an ended shard at its head return at once (a long wait_ms is not waited)
SELECT clock_timestamp() AS t0 \gset
SELECT count(*) AS read_at_head FROM cfeed.read(1, 0, 2000000000000001, 10, 20000);
SELECT count(*) AS rows_at_head FROM cfeed.read_rows(1, 1, 2000000000000002, 10, 20000);
SELECT cfeed.wait(1, 1, 2000000000000002, 20000) AS wait_head;
SELECT clock_timestamp() - :'t0'::timestamptz < interval '5 s' AS returned_at_once;
-- the head as ever; reading an ended shard from the start gives its changes
SELECT cfeed.head(1, 0) AS head0, cfeed.head(1, 1) AS head1;
SELECT change_sequence_number, change_id FROM cfeed.read(1, 1) ORDER BY 1;
-- a closed shard that is not yet ended waits as before (wait_ms 300 with nothing to come)
SELECT cfeed.publish(1, 2, 31);
BEGIN;
SELECT * FROM cfeed.reshard(1, 8);
-- within the resharding transaction, the closed shards refuse too
SELECT pg_temp.err($$SELECT cfeed.publish(1, 3)$$) AS publish_closed_same_xact;
COMMIT;
SELECT shard, parent FROM cfeed.shard WHERE feed_id = 1 AND shard >= 6 ORDER BY shard;
SELECT shard, closed, ended FROM cfeed.shard WHERE feed_id = 1 AND shard = 2;
SELECT cfeed.head(1, 2) AS head2, clock_timestamp() AS t0 \gset
SELECT cfeed.wait(1, 2, :head2, 300) = :head2 AS wait_not_ended;
SELECT clock_timestamp() - :'t0'::timestamptz >= interval '250 ms' AS waited;
-- once swept, it has ended: a read at its head returns at once
SELECT count(*) FROM cfeed.sweep() WHERE shard = 2;
SELECT cfeed.head(1, 2) AS head2, clock_timestamp() AS t0 \gset
SELECT count(*) AS read_at_head FROM cfeed.read(1, 2, :head2, 10, 20000);
SELECT clock_timestamp() - :'t0'::timestamptz < interval '5 s' AS returned_at_once;

-- errors: null arguments, bad counts (22023), unknown feed (42704), isolation (25000)
SELECT pg_temp.err($$SELECT * FROM cfeed.reshard(NULL, 4)$$) AS null_feed;
SELECT pg_temp.err($$SELECT * FROM cfeed.reshard(1, NULL)$$) AS null_shards;
SELECT pg_temp.err($$SELECT * FROM cfeed.reshard(1, 8)$$) AS too_few;
SELECT pg_temp.err($$SELECT * FROM cfeed.reshard(1, 12)$$) AS not_a_multiple;
SELECT pg_temp.err($$SELECT * FROM cfeed.reshard(1, 0)$$) AS zero;
SELECT pg_temp.err($$SELECT * FROM cfeed.reshard(1, 16, -1)$$) AS negative_wait;
SELECT pg_temp.err($$SELECT * FROM cfeed.reshard(1, 65536)$$) AS too_many;
SELECT pg_temp.err($$SELECT * FROM cfeed.reshard(99, 4)$$) AS unknown_feed;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pg_temp.err($$SELECT * FROM cfeed.reshard(1, 16)$$) AS repeatable_read;
ROLLBACK;
BEGIN READ ONLY;
SELECT pg_temp.err($$SELECT * FROM cfeed.reshard(1, 16)$$) AS read_only;
ROLLBACK;
-- the view's writes leave the layout to cfeed.reshard
SELECT pg_temp.err($$UPDATE cfeed.shard SET closed = false WHERE feed_id = 1 AND shard = 0$$) AS reopen_by_view;
SELECT pg_temp.err($$INSERT INTO cfeed.shard (feed_id, shard, parent) VALUES (1, 14, 5)$$) AS insert_child_by_view;
-- a layout shard_for cannot route by: 55000 (a closed shard above an open one)
BEGIN;
UPDATE cfeed.shard_config SET closed = false WHERE feed_id = 1 AND shard = 0;
SELECT pg_temp.err($$SELECT cfeed.shard_for(1, 'a')$$) AS open_below_closed;
SELECT pg_temp.err($$SELECT * FROM cfeed.reshard(1, 16)$$) AS reshard_unroutable;
ROLLBACK;

-- the lock: a transaction that wrote to the feed holds the feed's shards lock
-- in share mode until it ends (reshard.spec races writers and reshards)
SELECT cfeed.create_feed('rs_two', 1);
BEGIN;
SELECT cfeed.publish(2, 0) > 0 AS wrote;
SELECT locktype, mode, granted FROM pg_locks
WHERE locktype = 'advisory' AND objsubid = 25448 AND classid = 2 AND pid = pg_backend_pid();
ROLLBACK;
-- shard_for in a transaction that can write takes the lock; read-only, it does not
BEGIN;
SELECT cfeed.shard_for(2, 'x');
SELECT count(*) AS shard_for_locks FROM pg_locks
WHERE locktype = 'advisory' AND objsubid = 25448 AND classid = 2 AND pid = pg_backend_pid();
ROLLBACK;
BEGIN READ ONLY;
SELECT cfeed.shard_for(2, 'x');
SELECT count(*) AS read_only_locks FROM pg_locks
WHERE locktype = 'advisory' AND objsubid = 25448 AND classid = 2 AND pid = pg_backend_pid();
ROLLBACK;

-- privileges, with real roles: only the extension's owner and superusers reshard
CREATE ROLE regress_rs_user;
CREATE ROLE regress_rs_granted;
GRANT EXECUTE ON FUNCTION cfeed.reshard(int, int, int) TO regress_rs_granted;
GRANT SELECT ON cfeed.shard TO regress_rs_user, regress_rs_granted;
SET ROLE regress_rs_user;
SELECT pg_temp.err($$SELECT * FROM cfeed.reshard(2, 2)$$) AS no_execute;
RESET ROLE;
SET ROLE regress_rs_granted;
SELECT pg_temp.err($$SELECT * FROM cfeed.reshard(2, 2)$$) AS granted_execute;
RESET ROLE;
SELECT count(*) AS rs_two_shards FROM cfeed.shard WHERE feed_id = 2;
-- a role with the owner's privileges may
CREATE ROLE regress_rs_admin;
GRANT regress_rs_user TO regress_rs_admin;
SELECT extowner::regrole::text AS owner FROM pg_extension WHERE extname = 'cfeed' \gset
GRANT :"owner" TO regress_rs_admin;
SET ROLE regress_rs_admin;
SELECT * FROM cfeed.reshard(2, 3);
RESET ROLE;
SELECT shard, parent, closed FROM cfeed.shard WHERE feed_id = 2 ORDER BY shard;


-- a role without a write grant on a feed takes no lock of it: shard_for
-- answers a reader without locking (such a role cannot keep the feed from
-- being resharded), refuses a role with no grant (42501), while a writer of
-- the feed locks it
CREATE ROLE regress_rs_writer;
GRANT INSERT ON cfeed.change TO regress_rs_writer;
SELECT cfeed.grant_write(2, 'regress_rs_writer');
CREATE ROLE regress_rs_reader;
SELECT cfeed.grant_read(2, 'regress_rs_reader');
BEGIN;
SET LOCAL ROLE regress_rs_reader;
SELECT cfeed.shard_for(2, 'x') AS reader_shard;
SELECT count(*) AS reader_locks FROM pg_locks
WHERE locktype = 'advisory' AND objsubid = 25448 AND classid = 2 AND pid = pg_backend_pid();
ROLLBACK;
BEGIN;
SET LOCAL ROLE regress_rs_user;
SELECT pg_temp.err($$SELECT cfeed.shard_for(2, 'x')$$) AS no_grant_shard;
SELECT count(*) AS no_grant_locks FROM pg_locks
WHERE locktype = 'advisory' AND objsubid = 25448 AND classid = 2 AND pid = pg_backend_pid();
ROLLBACK;
BEGIN;
SET LOCAL ROLE regress_rs_writer;
SELECT cfeed.shard_for(2, 'x') AS writer_shard;
SELECT count(*) AS writer_locks FROM pg_locks
WHERE locktype = 'advisory' AND objsubid = 25448 AND classid = 2 AND pid = pg_backend_pid();
ROLLBACK;
-- a writer of feed 2 learns nothing of feed 1's shards: the same 42501 for
-- a closed, an open and a missing shard, a missing feed, and history rows
-- (as cfeed.publish's); on its own feed, a closed shard is refused (55000)
SET ROLE regress_rs_writer;
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (1, 0, 1)$$),
  ($$INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (1, 13, 1)$$),
  ($$INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (1, 99, 1)$$),
  ($$INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (99, 0, 1)$$),
  ($$INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number) VALUES (1, 0, 1, 1)$$),
  ($$SELECT cfeed.publish(1, 0, 1)$$),
  ($$INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (2, 0, 1)$$),
  ($$INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (2, 99, 1)$$),
  ($$INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (2, cfeed.shard_for(2, 'x'), 1)$$)
) AS t(cmd);
RESET ROLE;
DELETE FROM cfeed.change WHERE feed_id = 2;

DROP TABLE public.rs_t;
SELECT cfeed.revoke_write(2, 'regress_rs_writer');
REVOKE INSERT ON cfeed.change FROM regress_rs_writer;
DROP ROLE regress_rs_writer;
SELECT cfeed.revoke_read(2, 'regress_rs_reader');
DROP ROLE regress_rs_reader;
REVOKE :"owner" FROM regress_rs_admin;
DROP ROLE regress_rs_admin;
REVOKE SELECT ON cfeed.shard FROM regress_rs_user, regress_rs_granted;
REVOKE EXECUTE ON FUNCTION cfeed.reshard(int, int, int) FROM regress_rs_granted;
DROP ROLE regress_rs_user;
DROP ROLE regress_rs_granted;
