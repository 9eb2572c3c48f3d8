-- errors: every SQLSTATE of docs/reference.md ("Errors"), for every function; bad
-- input writes nothing.
\i test/regress_setup.sql

SELECT cfeed.create_feed('e', 2);
SELECT cfeed.publish(1, 0, 7);
SELECT feed_id, shard, change_count FROM cfeed.sweep();
SELECT cfeed.publish(1, 1, 8);

-- the state every failing call below must leave untouched
CREATE TEMP TABLE before AS
SELECT (SELECT count(*) FROM cfeed.feed) AS feeds, (SELECT count(*) FROM cfeed.shard) AS shards,
       (SELECT count(*) FROM cfeed.change) AS changes,
       (SELECT count(*) FROM cfeed.change WHERE change_sequence_number IS NULL) AS pending,
       (SELECT sum(last_change_sequence_number) FROM cfeed.shard) AS heads;

-- 42704: an unknown feed, then an unknown shard of a known feed, for every function
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$SELECT cfeed.publish(99, 0)$$),
  ($$SELECT cfeed.publish(1, 2)$$),
  ($$SELECT cfeed.publish(1, -1, 5)$$),
  ($$SELECT cfeed.shard_for(99, 'k')$$),
  ($$SELECT * FROM cfeed.reshard(99, 2)$$),
  ($$SELECT * FROM cfeed.read(99, 0)$$),
  ($$SELECT * FROM cfeed.read(1, 2)$$),
  ($$SELECT * FROM cfeed.read(1, 2, NULL, 10, 10)$$),
  ($$SELECT cfeed.wait(99, 0, 0, 0)$$),
  ($$SELECT cfeed.wait(1, 2, 0, 0)$$),
  ($$SELECT cfeed.head(99, 0)$$),
  ($$SELECT cfeed.head(1, 2)$$),
  ($$SELECT cfeed.cursor_at(99, 0, now())$$),
  ($$SELECT cfeed.cursor_at(1, 2, now())$$),
  ($$SELECT cfeed.channel(99, 0)$$),
  ($$SELECT cfeed.channel(1, 2)$$)
) AS t(cmd);

-- 22023: bad arguments
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$SELECT * FROM cfeed.read(1, 0, NULL, -1)$$),
  ($$SELECT * FROM cfeed.read(1, 0, NULL, 10, -1)$$),
  ($$SELECT * FROM cfeed.read(99, 0, NULL, -1)$$),
  ($$SELECT cfeed.wait(1, 0, 0, -1)$$),
  ($$SELECT cfeed.create_feed('bad name')$$),
  ($$SELECT cfeed.create_feed('')$$),
  ($$SELECT cfeed.create_feed('ok', 0)$$),
  ($$CALL cfeed.sweep_loop(0, -1, 0, 0, NULL, NULL, NULL)$$),
  ($$CALL cfeed.sweep_loop(0, 0, -1, 0, NULL, NULL, NULL)$$),
  ($$CALL cfeed.sweep_loop(0, 0, 0, -1, NULL, NULL, NULL)$$),
  ($$INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number) VALUES (1, 0, 9, 2000000000000002)$$),
  ($$INSERT INTO cfeed.change (feed_id, shard, change_id, stamped_at) VALUES (1, 0, 9, now())$$),
  ($$UPDATE cfeed.shard SET last_change_sequence_number = 2000000000000009$$),
  ($$SELECT * FROM cfeed.reshard(1, 3)$$),
  ($$SELECT * FROM cfeed.reshard(1, 2)$$),
  ($$SELECT * FROM cfeed.reshard(1, 4, -1)$$),
  ($$UPDATE cfeed.shard SET closed = true WHERE feed_id = 1 AND shard = 0$$)
) AS t(cmd);

-- 22004: NULL for a required argument of every non-STRICT function
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$SELECT cfeed.create_feed(NULL)$$),
  ($$SELECT cfeed.create_feed('n', NULL)$$),
  ($$SELECT cfeed.create_feed('n', sweep_group => NULL)$$),
  ($$SELECT cfeed.create_feed('n', longpoll => NULL)$$),
  ($$SELECT cfeed.publish(NULL, 0)$$),
  ($$SELECT cfeed.publish(1, NULL)$$),
  ($$SELECT cfeed.publish(1, 0, NULL)$$),
  ($$SELECT cfeed.shard_for(NULL, 'k')$$),
  ($$SELECT cfeed.shard_for(1, NULL)$$),
  ($$SELECT * FROM cfeed.sweep(NULL)$$),
  ($$CALL cfeed.sweep_loop(NULL, 0, 0, 0, NULL, NULL, NULL)$$),
  ($$CALL cfeed.sweep_loop(0, NULL, 0, 0, NULL, NULL, NULL)$$),
  ($$CALL cfeed.sweep_loop(0, 0, NULL, 0, NULL, NULL, NULL)$$),
  ($$CALL cfeed.sweep_loop(0, 0, 0, NULL, NULL, NULL, NULL)$$),
  ($$SELECT * FROM cfeed.read(NULL, 0)$$),
  ($$SELECT * FROM cfeed.read(1, NULL)$$),
  ($$SELECT * FROM cfeed.read(1, 0, NULL, NULL)$$),
  ($$SELECT * FROM cfeed.read(1, 0, NULL, 10, NULL)$$),
  ($$SELECT cfeed.wait(NULL, 0, 0)$$),
  ($$SELECT cfeed.wait(1, NULL, 0)$$),
  ($$SELECT cfeed.wait(1, 0, NULL)$$),
  ($$SELECT cfeed.wait(1, 0, 0, NULL)$$),
  ($$SELECT cfeed.head(NULL, 0)$$),
  ($$SELECT cfeed.head(1, NULL)$$),
  ($$SELECT cfeed.cursor_at(NULL, 0, now())$$),
  ($$SELECT cfeed.cursor_at(1, NULL, now())$$),
  ($$SELECT cfeed.cursor_at(1, 0, NULL)$$),
  ($$SELECT cfeed.channel(NULL, 0)$$),
  ($$SELECT cfeed.channel(1, NULL)$$)
) AS t(cmd);
-- a default feed_id past the top of int: a name in the way is named first,
-- else 54000 asks for a feed_id (1.8: a bare 22003 "integer out of range")
SELECT cfeed.create_feed('top', 1, 2147483647);
SELECT pg_temp.err($$SELECT cfeed.create_feed('top')$$) AS top_name_taken,
       pg_temp.err($$SELECT cfeed.create_feed('above_top')$$) AS above_top,
       pg_temp.err($$SELECT cfeed.create_feed('e', 1, 2147483647)$$) AS given_taken;
DELETE FROM cfeed.shard WHERE feed_id = 2147483647;
DELETE FROM cfeed.feed WHERE feed_id = 2147483647;
-- the nullable arguments are fine: feed_id and comment of create_feed, cursor of read
SELECT cfeed.create_feed('nullable', 1, NULL, 0, true, NULL);
SELECT count(*) FROM cfeed.read(1, 0, NULL);
DELETE FROM cfeed.feed WHERE name = 'nullable';

-- 25000: sweeping under REPEATABLE READ or SERIALIZABLE, waiting reads there too
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pg_temp.err($$SELECT * FROM cfeed.sweep()$$);
SELECT pg_temp.err($$SELECT * FROM cfeed.sweep(1)$$);
SELECT pg_temp.err($$SELECT * FROM cfeed.read(1, 0, NULL, 10, 1)$$);
SELECT pg_temp.err($$SELECT cfeed.wait(1, 0, 0, 1)$$);
SELECT pg_temp.err($$SELECT * FROM cfeed.reshard(1, 4)$$);
-- reading without waiting is fine there
SELECT pg_temp.err($$SELECT * FROM cfeed.read(1, 0, NULL, 10, 0)$$);
SELECT pg_temp.err($$SELECT cfeed.wait(1, 0, 0, 0)$$);
ROLLBACK;
-- READ UNCOMMITTED is READ COMMITTED: waiting is fine there, in both editions
BEGIN ISOLATION LEVEL READ UNCOMMITTED;
SELECT pg_temp.err($$SELECT cfeed.wait(1, 0, 0, 1)$$);
ROLLBACK;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT pg_temp.err($$SELECT * FROM cfeed.sweep()$$);
SELECT pg_temp.err($$SELECT * FROM cfeed.read(1, 0, NULL, 10, 1)$$);
SELECT pg_temp.err($$SELECT cfeed.wait(1, 0, 0, 1)$$);
ROLLBACK;
-- sweep_loop runs its own transactions: it refuses them at those levels too
SET default_transaction_isolation = 'repeatable read';
CALL cfeed.sweep_loop(0, 0, 0, 0, NULL, NULL, NULL);
SET default_transaction_isolation = 'serializable';
CALL cfeed.sweep_loop(0, 0, 0, 0, NULL, NULL, NULL);
RESET default_transaction_isolation;

-- other codes: duplicate feed (42710), non-contiguous shards for shard_for (55000),
-- missing feed/shard at a direct INSERT (23503)
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$SELECT cfeed.create_feed('e')$$),
  ($$SELECT cfeed.create_feed('f', feed_id => 1)$$),
  ($$INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (1, 2, 9)$$),
  ($$INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (99, 0, 9)$$)
) AS t(cmd);

-- none of the failures above wrote or stamped anything
SELECT b.feeds = a.feeds AS feeds_same, b.shards = a.shards AS shards_same,
       b.changes = a.changes AS changes_same, b.pending = a.pending AS pending_same,
       b.heads = a.heads AS heads_same
FROM before b, (SELECT (SELECT count(*) FROM cfeed.feed) AS feeds, (SELECT count(*) FROM cfeed.shard) AS shards,
       (SELECT count(*) FROM cfeed.change) AS changes,
       (SELECT count(*) FROM cfeed.change WHERE change_sequence_number IS NULL) AS pending,
       (SELECT sum(last_change_sequence_number) FROM cfeed.shard) AS heads) a;
-- and the pending change is still stamped normally afterwards
SELECT feed_id, shard, change_count, last_change_sequence_number FROM cfeed.sweep();

-- messages name the feed or shard and say what to do (detail and hint shown)
\set VERBOSITY default
SELECT cfeed.publish(99, 0, 1);
SELECT cfeed.head(1, 5);
INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number) VALUES (1, 0, 9, 2000000000000005);
INSERT INTO cfeed.change (feed_id, shard, change_id, stamped_at) VALUES (1, 0, 9, now());
UPDATE cfeed.shard SET last_change_sequence_number = 0 WHERE feed_id = 1 AND shard = 0;
SELECT cfeed.create_feed('e');
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM cfeed.sweep();
ROLLBACK;
SELECT * FROM cfeed.read(1, 0, max_count => -5);
SELECT * FROM cfeed.reshard(1, 3);
-- a write to a closed shard (55000), once the feed is resharded
SELECT count(*) FROM cfeed.reshard(1, 4);
SELECT cfeed.publish(1, 0, 1);

DROP EXTENSION cfeed;
