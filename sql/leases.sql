-- leases: consumer groups and retention: balancing,
-- fencing, lag arithmetic, start positions, release, seek, drop_group,
-- retention holds, errors.
\i test/regress_setup.sql

-- stamped(): sweeps now (the suite runs without the background sweeper) and
-- tells whether every committed change is stamped
CREATE FUNCTION pg_temp.stamped() RETURNS bool LANGUAGE plpgsql AS $$
BEGIN
	PERFORM count(*) FROM cfeed.sweep();
	RETURN NOT EXISTS (SELECT FROM cfeed.change WHERE change_sequence_number IS NULL);
END $$;

-- holdings(group, feed): owner -> shards and epochs, live leases only
CREATE FUNCTION pg_temp.holdings(g text, f int)
RETURNS TABLE (owner text, n bigint, shards int[], epochs bigint[]) LANGUAGE sql AS $$
	SELECT l.owner, count(*), array_agg(l.shard ORDER BY l.shard), array_agg(l.epoch ORDER BY l.shard)
	FROM cfeed.lease l
	WHERE l.group_name = g AND l.feed_id = f AND l.owner IS NOT NULL AND l.expires_at > clock_timestamp()
	GROUP BY l.owner ORDER BY l.owner $$;

SELECT cfeed.create_feed('l8', 8);
SELECT cfeed.create_feed('l1', 1);

-- the lease table, its functions and views exist; none is STRICT; PUBLIC has nothing on the table
SELECT proname, proisstrict, provolatile, prosecdef FROM pg_proc
WHERE pronamespace = 'cfeed'::regnamespace
  AND proname IN ('acquire', 'checkpoint', 'release', 'seek', 'drop_group', 'apply_retention', '_apply_retention')
ORDER BY proname;
SELECT count(*) AS public_grants_on_lease
FROM pg_class c, aclexplode(COALESCE(c.relacl, acldefault('r', c.relowner))) a
WHERE c.oid = 'cfeed.lease'::regclass AND a.grantee = 0;
SELECT p.proname, has_function_privilege('public', p.oid, 'EXECUTE') AS public_execute
FROM pg_proc p WHERE p.pronamespace = 'cfeed'::regnamespace
  AND p.proname IN ('acquire', 'checkpoint', 'apply_retention', '_apply_retention', '_retention_held_by')
ORDER BY 1;
SELECT count(*) AS dumped FROM pg_extension e, unnest(e.extconfig) c
WHERE e.extname = 'cfeed' AND c = 'cfeed.lease'::regclass;

-- balancing: a takes all 8 shards of a fresh group, each at epoch 1, cursor at the start
SELECT shard, cursor, epoch FROM cfeed.acquire('g', 1, 'a');
-- b joins: steals 4 from a (epoch 2 on the stolen ones)
SELECT array_agg(shard ORDER BY shard) AS b FROM cfeed.acquire('g', 1, 'b');
-- c joins: 3/3/2, one stolen from each of a and b
SELECT array_agg(shard ORDER BY shard) AS c FROM cfeed.acquire('g', 1, 'c');
SELECT * FROM pg_temp.holdings('g', 1);
-- a second round changes nothing: renewing keeps shards and epochs
SELECT array_agg(shard ORDER BY shard) AS a FROM cfeed.acquire('g', 1, 'a');
SELECT array_agg(shard ORDER BY shard) AS b FROM cfeed.acquire('g', 1, 'b');
SELECT array_agg(shard ORDER BY shard) AS c FROM cfeed.acquire('g', 1, 'c');
SELECT * FROM pg_temp.holdings('g', 1);
-- d joins holding nothing, yet counts as live: 2/2/2/2 after each calls once more
SELECT array_agg(shard ORDER BY shard) AS d FROM cfeed.acquire('g', 1, 'd');
SELECT count(*) FROM cfeed.acquire('g', 1, 'a');
SELECT count(*) FROM cfeed.acquire('g', 1, 'b');
SELECT count(*) FROM cfeed.acquire('g', 1, 'c');
SELECT * FROM pg_temp.holdings('g', 1);

-- release: d gives up its 2 leases, which become free with cursor and epoch kept
SELECT cfeed.release('g', 1, 'd');
SELECT cfeed.release('g', 1, 'd');
SELECT shard, owner, epoch, expires_at FROM cfeed.lease WHERE group_name = 'g' AND owner IS NULL ORDER BY shard;
-- a and b take the free ones (3/3/2)
SELECT array_agg(shard ORDER BY shard) AS a FROM cfeed.acquire('g', 1, 'a');
SELECT array_agg(shard ORDER BY shard) AS b FROM cfeed.acquire('g', 1, 'b');
SELECT * FROM pg_temp.holdings('g', 1);

-- expiry: c's leases expire; c is no longer live; a and b split them (4/4), epochs bumped
SELECT count(*) FROM cfeed.acquire('g', 1, 'c', ttl_ms => 1);
SELECT pg_sleep(0.05);
SELECT array_agg(shard ORDER BY shard) AS a FROM cfeed.acquire('g', 1, 'a');
SELECT array_agg(shard ORDER BY shard) AS b FROM cfeed.acquire('g', 1, 'b');
SELECT * FROM pg_temp.holdings('g', 1);
SELECT group_name, feed_id, shards, held, owners, behind FROM cfeed.groups ORDER BY 1, 2;

-- fencing and lag on the 1-shard feed: 5 stamped changes
SELECT count(cfeed.publish(2, 0)) FROM generate_series(1, 5);
SELECT pg_temp.stamped();
SELECT shard, cursor, epoch FROM cfeed.acquire('h', 2, 'x');
-- lag before the first checkpoint: all 5 behind; the age is that of change 1
SELECT owner, epoch, cursor, head, behind,
       oldest_unread_age BETWEEN now() - (SELECT stamped_at FROM cfeed.change
                                          WHERE feed_id = 2 AND change_sequence_number = 2000000000000001)
                         AND clock_timestamp() - (SELECT stamped_at FROM cfeed.change
                                                  WHERE feed_id = 2 AND change_sequence_number = 2000000000000001) AS age_ok
FROM cfeed.consumer_lag WHERE group_name = 'h';
SELECT cfeed.checkpoint('h', 2, 0, 'x', 1, 2000000000000002);
SELECT cursor, behind,
       oldest_unread_age BETWEEN now() - (SELECT stamped_at FROM cfeed.change
                                          WHERE feed_id = 2 AND change_sequence_number = 2000000000000003)
                         AND clock_timestamp() - (SELECT stamped_at FROM cfeed.change
                                                  WHERE feed_id = 2 AND change_sequence_number = 2000000000000003) AS age_ok
FROM cfeed.consumer_lag WHERE group_name = 'h';
-- ... measured when the view is read, not when its transaction began
BEGIN;
SELECT pg_sleep(0.2);
SELECT oldest_unread_age >= now() - (SELECT stamped_at FROM cfeed.change
                                     WHERE feed_id = 2 AND change_sequence_number = 2000000000000003)
                            + interval '0.2 s' AS age_from_the_clock
FROM cfeed.consumer_lag WHERE group_name = 'h';
COMMIT;
-- the ages are measured from the statement's clock and are never negative:
-- a pending change whose writer began after this transaction (here, an
-- hour later) is 0 old, not -1 hour (1.8: measured from now())
BEGIN;
INSERT INTO cfeed.change (feed_id, shard, change_id, written_at) VALUES (2, 0, 777, now() + interval '1 hour');
SELECT pending, oldest_pending_age FROM cfeed.stats WHERE feed_id = 2;
ROLLBACK;
-- nothing pending: no age (null, as consumer_lag's with nothing unread)
SELECT pending, oldest_pending_age IS NULL AS no_age FROM cfeed.stats WHERE feed_id = 2;
-- checkpointing the same position again is fine; reading to the head leaves nothing unread
SELECT cfeed.checkpoint('h', 2, 0, 'x', 1, 2000000000000002);
SELECT cfeed.checkpoint('h', 2, 0, 'x', 1, 2000000000000005);
SELECT cursor, behind, oldest_unread_age FROM cfeed.consumer_lag WHERE group_name = 'h';
SELECT cfeed.seek('h', 2, 0, 2000000000000002);
SELECT shard, cursor, epoch FROM cfeed.acquire('h', 2, 'x');

-- refused checkpoints: wrong owner, stale epoch, backwards, beyond the head
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$SELECT cfeed.checkpoint('h', 2, 0, 'y', 2, 2000000000000003)$$),
  ($$SELECT cfeed.checkpoint('h', 2, 0, 'x', 1, 2000000000000003)$$),
  ($$SELECT cfeed.checkpoint('h', 2, 0, 'x', 2, 2000000000000001)$$),
  ($$SELECT cfeed.checkpoint('h', 2, 0, 'x', 2, 2000000000000006)$$)) v(cmd);
-- y cannot take a live lease of a 1-shard feed (x is not above its share)
SELECT count(*) FROM cfeed.acquire('h', 2, 'y');
-- x's lease expires (x's checkpoint is refused); y takes it at epoch 3 with x's cursor;
-- x is then fenced and told who holds the lease
SELECT count(*) FROM cfeed.acquire('h', 2, 'x', ttl_ms => 1);
SELECT pg_sleep(0.05);
SELECT pg_temp.err($$SELECT cfeed.checkpoint('h', 2, 0, 'x', 2, 2000000000000003)$$);
SELECT shard, cursor, epoch FROM cfeed.acquire('h', 2, 'y');
SELECT pg_temp.err($$SELECT cfeed.checkpoint('h', 2, 0, 'x', 2, 2000000000000003)$$);
-- x's acquire now returns nothing
SELECT count(*) FROM cfeed.acquire('h', 2, 'x');
-- an expired lease nobody took: checkpoint refused; renewing keeps the epoch; then it works
SELECT count(*) FROM cfeed.acquire('h', 2, 'y', ttl_ms => 1);
SELECT pg_sleep(0.05);
SELECT pg_temp.err($$SELECT cfeed.checkpoint('h', 2, 0, 'y', 3, 2000000000000003)$$);
SELECT shard, cursor, epoch FROM cfeed.acquire('h', 2, 'y');
SELECT cfeed.checkpoint('h', 2, 0, 'y', 3, 2000000000000003);

-- exactly once: a refused checkpoint rolls back the consumer's own writes with it
CREATE TABLE processed (change_id bigint PRIMARY KEY);
BEGIN;
INSERT INTO processed SELECT change_id FROM cfeed.read(2, 0, 2000000000000003);
SELECT cfeed.checkpoint('h', 2, 0, 'x', 3, 2000000000000005);
ROLLBACK;
SELECT count(*) AS processed_after_refusal FROM processed;
BEGIN;
INSERT INTO processed SELECT change_id FROM cfeed.read(2, 0, 2000000000000003);
SELECT cfeed.checkpoint('h', 2, 0, 'y', 3, 2000000000000005);
COMMIT;
SELECT count(*) AS processed FROM processed;
SELECT cursor, behind FROM cfeed.consumer_lag WHERE group_name = 'h';

-- seek: replay from 2000000000000001, bumping the epoch; y is fenced until it acquires again
SELECT cfeed.seek('h', 2, 0, 2000000000000001);
SELECT pg_temp.err($$SELECT cfeed.checkpoint('h', 2, 0, 'y', 3, 2000000000000005)$$);
SELECT shard, cursor, epoch FROM cfeed.acquire('h', 2, 'y');
SELECT cfeed.checkpoint('h', 2, 0, 'y', 4, 2000000000000002);
-- seek to a cursor beyond the head is refused; seek may create a free lease for a new group
SELECT pg_temp.err($$SELECT cfeed.seek('h', 2, 0, 2000000000000006)$$);
SELECT cfeed.seek('late', 2, 0, 2000000000000004);
SELECT owner, epoch, cursor, behind FROM cfeed.consumer_lag WHERE group_name = 'late';
SELECT shard, cursor, epoch FROM cfeed.acquire('late', 2, 'z');

-- an epoch near the top of bigint is refused where it is written, so that no
-- bump by acquire or seek overflows (issue: a consumer's INSERT of epoch
-- 2^63 - 1 made every acquire of the group fail with 22003, naming no lease)
SELECT pg_temp.err($$INSERT INTO cfeed.lease (group_name, feed_id, shard, owner, cursor, epoch, expires_at)
	VALUES ('ov', 2, 0, 'zz', 2000000000000000, 9223372036854775807, now() - interval '1 s')$$) AS epoch_max;
SELECT pg_temp.err($$INSERT INTO cfeed.lease (group_name, feed_id, shard, owner, cursor, epoch)
	VALUES ('ov', 2, 0, 'zz', 2000000000000000, -1)$$) AS epoch_negative;
-- the highest epoch allowed: its bump is refused the same way, and overflows nothing
INSERT INTO cfeed.lease (group_name, feed_id, shard, owner, cursor, epoch, expires_at)
	VALUES ('ov', 2, 0, 'zz', 2000000000000000, 4611686018427387903, now() - interval '1 s');
SELECT pg_temp.err($$SELECT cfeed.acquire('ov', 2, 'me')$$) AS acquire_past_bound;
SELECT pg_temp.err($$SELECT cfeed.seek('ov', 2, 0, 2000000000000004)$$) AS seek_past_bound;
DELETE FROM cfeed.lease WHERE group_name = 'ov';

-- start positions: start_at in the future starts at the head: nothing behind, no age
-- (the group started "now" before its first checkpoint); in the past, at the start
SELECT shard, cursor, epoch FROM cfeed.acquire('now', 2, 'n', start_at => now() + interval '1 hour');
SELECT cursor, head, behind, oldest_unread_age FROM cfeed.consumer_lag WHERE group_name = 'now';
SELECT shard, cursor FROM cfeed.acquire('past', 2, 'p', start_at => '2000-01-01');
-- a new change: the "now" group is 1 behind, with an age
SELECT cfeed.publish(2, 0) > 0;
SELECT pg_temp.stamped();
SELECT behind, oldest_unread_age IS NOT NULL AS has_age FROM cfeed.consumer_lag WHERE group_name = 'now';

-- start at the beginning includes backfilled history (migration range)
SELECT cfeed.create_feed('bf', 1);
INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number) VALUES (3, 0, 11, 5), (3, 0, 12, 6);
SELECT cfeed.publish(3, 0) > 0;
SELECT pg_temp.stamped();
SELECT shard, cursor FROM cfeed.acquire('bf', 3, 'q');
SELECT count(*) FROM cfeed.read(3, 0, (SELECT cursor FROM cfeed.lease WHERE group_name = 'bf'));

-- drop_group: removes the group's leases; its members are fenced
SELECT cfeed.drop_group('late', 2);
SELECT cfeed.drop_group('late', 2);
SELECT pg_temp.err($$SELECT cfeed.checkpoint('late', 2, 0, 'z', 1, 2000000000000004)$$);
SELECT group_name, feed_id, shards, held, owners, min_cursor, behind FROM cfeed.groups ORDER BY 1, 2;

-- errors: null arguments (22004), unknown feed/shard/lease (42704), bad values (22023)
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$SELECT * FROM cfeed.acquire(NULL, 1, 'a')$$),
  ($$SELECT * FROM cfeed.acquire('g', NULL, 'a')$$),
  ($$SELECT * FROM cfeed.acquire('g', 1, NULL)$$),
  ($$SELECT * FROM cfeed.acquire('g', 1, 'a', NULL)$$),
  ($$SELECT cfeed.checkpoint(NULL, 2, 0, 'y', 4, 1)$$),
  ($$SELECT cfeed.checkpoint('h', NULL, 0, 'y', 4, 1)$$),
  ($$SELECT cfeed.checkpoint('h', 2, NULL, 'y', 4, 1)$$),
  ($$SELECT cfeed.checkpoint('h', 2, 0, NULL, 4, 1)$$),
  ($$SELECT cfeed.checkpoint('h', 2, 0, 'y', NULL, 1)$$),
  ($$SELECT cfeed.checkpoint('h', 2, 0, 'y', 4, NULL)$$),
  ($$SELECT cfeed.release(NULL, 2, 'y')$$),
  ($$SELECT cfeed.release('h', NULL, 'y')$$),
  ($$SELECT cfeed.release('h', 2, NULL)$$),
  ($$SELECT cfeed.seek(NULL, 2, 0, 1)$$),
  ($$SELECT cfeed.seek('h', 2, 0, NULL)$$),
  ($$SELECT cfeed.drop_group(NULL, 2)$$),
  ($$SELECT cfeed.drop_group('h', NULL)$$),
  ($$SELECT cfeed.apply_retention(NULL)$$),
  ($$SELECT * FROM cfeed.acquire('g', 99, 'a')$$),
  ($$SELECT cfeed.checkpoint('h', 99, 0, 'y', 4, 1)$$),
  ($$SELECT cfeed.checkpoint('h', 2, 7, 'y', 4, 1)$$),
  ($$SELECT cfeed.checkpoint('nope', 2, 0, 'y', 4, 1)$$),
  ($$SELECT cfeed.release('h', 99, 'y')$$),
  ($$SELECT cfeed.release('nope', 2, 'y')$$),
  ($$SELECT cfeed.seek('h', 99, 0, 1)$$),
  ($$SELECT cfeed.seek('h', 2, 7, 1)$$),
  ($$SELECT cfeed.drop_group('h', 99)$$),
  ($$SELECT * FROM cfeed.acquire('g', 1, 'a', 0)$$),
  ($$SELECT * FROM cfeed.acquire('', 1, 'a')$$),
  ($$SELECT * FROM cfeed.acquire('g', 1, '')$$),
  ($$SELECT cfeed._apply_retention(0)$$)) v(cmd);
-- failed calls changed no lease
SELECT group_name, shard, owner, epoch, cursor FROM cfeed.lease WHERE feed_id = 2 ORDER BY 1, 2;

-- retention: 10 stamped changes older than the feed's retention; a lease at +3 holds the rest
SELECT cfeed.create_feed('ret', 2);
SELECT count(cfeed.publish(4, 0)) FROM generate_series(1, 10);
SELECT count(cfeed.publish(4, 1)) FROM generate_series(1, 3);
SELECT pg_temp.stamped();
SELECT cfeed.seek('keep', 4, 0, 2000000000000003);
UPDATE cfeed.feed SET retention = interval '10 milliseconds' WHERE feed_id = 4;
SELECT pg_sleep(0.05);
SELECT shard, head, retention_held_by FROM cfeed.stats WHERE feed_id = 4 ORDER BY shard;
SELECT cfeed.apply_retention() >= 0;
-- shard 0 keeps what "keep" has not read; shard 1 (no lease) keeps only its head row
SELECT shard, min(change_sequence_number) - 2000000000000000 AS lo,
       max(change_sequence_number) - 2000000000000000 AS hi, count(*)
FROM cfeed.change WHERE feed_id = 4 GROUP BY shard ORDER BY shard;
SELECT shard, retention_held_by FROM cfeed.stats WHERE feed_id = 4 ORDER BY shard;
-- the group reads on: retention follows; the head row always stays
SELECT cfeed.seek('keep', 4, 0, 2000000000000010);
SELECT cfeed.apply_retention() >= 0;
SELECT shard, min(change_sequence_number) - 2000000000000000 AS lo,
       max(change_sequence_number) - 2000000000000000 AS hi, count(*)
FROM cfeed.change WHERE feed_id = 4 GROUP BY shard ORDER BY shard;
SELECT shard, retention_held_by FROM cfeed.stats WHERE feed_id = 4 ORDER BY shard;
-- a lagging group holds retention; ignore_leases => true deletes anyway (not the head row)
SELECT count(cfeed.publish(4, 0)) FROM generate_series(1, 4);
SELECT pg_temp.stamped();
SELECT pg_sleep(0.05);
SELECT shard, retention_held_by FROM cfeed.stats WHERE feed_id = 4 ORDER BY shard;
SELECT cfeed.apply_retention(ignore_leases => true) >= 0;
SELECT shard, min(change_sequence_number) - 2000000000000000 AS lo,
       max(change_sequence_number) - 2000000000000000 AS hi, count(*)
FROM cfeed.change WHERE feed_id = 4 GROUP BY shard ORDER BY shard;
-- a feed without retention loses nothing
SELECT count(*) FROM cfeed.change WHERE feed_id = 2;
-- dropping a feed drops its leases
SELECT cfeed.create_feed('gone', 2);
SELECT count(*) FROM cfeed.acquire('g', 5, 'a');
DELETE FROM cfeed.feed WHERE feed_id = 5;
SELECT count(*) FROM cfeed.lease WHERE feed_id = 5;

-- one round of calls after a change in membership settles the split, also
-- while leases are free: x leaves a 5-shard feed where a and b hold one each
-- (3 free); b then a call once: every shard held, 3/2 (before 1.9's fix, 2/2
-- and shard 4 left free: each call gave the extra share to the other owner)
SELECT cfeed.create_feed('settle5', 5, 6);
SELECT count(*) FROM cfeed.acquire('s', 6, 'x');
SELECT count(*) FROM cfeed.acquire('s', 6, 'a');
SELECT count(*) FROM cfeed.acquire('s', 6, 'b');
SELECT cfeed.release('s', 6, 'a');
SELECT count(*) FROM cfeed.acquire('s', 6, 'a');
SELECT cfeed.release('s', 6, 'x');
SELECT array_agg(shard) AS b FROM cfeed.acquire('s', 6, 'b');
SELECT array_agg(shard) AS a FROM cfeed.acquire('s', 6, 'a');
SELECT count(owner) AS held, count(*) - count(owner) AS free FROM cfeed.lease WHERE group_name = 's';
-- and once settled, calls move nothing (no epoch changes)
SELECT sum(epoch) AS epochs FROM cfeed.lease WHERE group_name = 's' \gset
SELECT count(*) FROM cfeed.acquire('s', 6, 'b');
SELECT count(*) FROM cfeed.acquire('s', 6, 'a');
SELECT sum(epoch) = :epochs AS nothing_moved FROM cfeed.lease WHERE group_name = 's';
-- 11 shards: c holds 4, f 3, 4 free; f then c call once: 6/5, none free
-- (before: f's call gave c the extra share, c's gave it to f, one left free)
SELECT cfeed.create_feed('settle11', 11, 7);
SELECT count(*) FROM cfeed.acquire('t', 7, 'c', ttl_ms => 600000);
UPDATE cfeed.lease SET owner = NULL, expires_at = NULL WHERE group_name = 't' AND shard IN (4, 5, 6, 7, 8, 9, 10);
UPDATE cfeed.lease SET owner = 'f', expires_at = now() + interval '10 minutes' WHERE group_name = 't' AND shard IN (4, 5, 10);
SELECT count(*) FROM cfeed.acquire('t', 7, 'f');
SELECT count(*) FROM cfeed.acquire('t', 7, 'c');
SELECT owner, count(*) FROM cfeed.lease WHERE group_name = 't' GROUP BY owner ORDER BY owner;

-- leave the database as the next file expects it
DROP EXTENSION cfeed;
