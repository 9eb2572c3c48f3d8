-- groups_reshard: consumer groups across splits (cfeed.reshard): a child
-- shard is handed to an owner only once the group has consumed its parent
-- (ended, and the group's cursor at its last number); a consumed shard
-- holds no lease and leaves the fair shares; a seek back on a consumed
-- parent parks its children again; start positions of children's leases.
\i test/regress_setup.sql

-- stamped(): sweeps now (the suite runs without the background sweeper) and
-- tells whether every committed change is stamped (cfeed.stats: whatever
-- the shards' storage; the range pass runs this file too)
CREATE FUNCTION pg_temp.stamped() RETURNS bool LANGUAGE plpgsql AS $$
BEGIN
	PERFORM count(*) FROM cfeed.sweep();
	RETURN NOT EXISTS (SELECT FROM cfeed.stats WHERE pending > 0);
END $$;

-- holdings(group): owner -> shards, live leases only
CREATE FUNCTION pg_temp.holdings(g text)
RETURNS TABLE (owner text, shards int[]) LANGUAGE sql AS $$
	SELECT l.owner, array_agg(l.shard ORDER BY l.shard)
	FROM cfeed.lease l
	WHERE l.group_name = g AND l.feed_id = 1 AND l.owner IS NOT NULL AND l.expires_at > clock_timestamp()
	GROUP BY l.owner ORDER BY l.owner $$;

-- leases(group): every lease of the group, its cursor as an offset from the
-- shard's start value
CREATE FUNCTION pg_temp.leases(g text)
RETURNS TABLE (shard int, owner text, epoch bigint, at bigint) LANGUAGE sql AS $$
	SELECT l.shard, l.owner, l.epoch, l.cursor - s.start_sequence_number
	FROM cfeed.lease l JOIN cfeed.shard s USING (feed_id, shard)
	WHERE l.group_name = g AND l.feed_id = 1 ORDER BY l.shard $$;

-- last(shard): the shard's last number
CREATE FUNCTION pg_temp.last(sh int) RETURNS bigint LANGUAGE sql AS $$
	SELECT last_change_sequence_number FROM cfeed.shard WHERE feed_id = 1 AND shard = sh $$;



-- a feed of 2 shards, 3 changes on each
SELECT cfeed.create_feed('split', 2);
SELECT count(cfeed.publish(1, s)) FROM generate_series(0, 1) s, generate_series(1, 3);
SELECT pg_temp.stamped();

-- group g: a and b share the two shards; a processes 2 changes of shard 0.
-- Group e exists before the split too (z holds everything).
SELECT array_agg(shard ORDER BY shard) AS a FROM cfeed.acquire('g', 1, 'a');
SELECT array_agg(shard ORDER BY shard) AS b FROM cfeed.acquire('g', 1, 'b');
SELECT cfeed.checkpoint('g', 1, 0, 'a', 1, 2000000000000002);
SELECT array_agg(shard ORDER BY shard) AS z FROM cfeed.acquire('e', 1, 'z');

-- the split: 0 and 1 closed; children 2 and 4 continue 0, 3 and 5 continue 1;
-- 2 changes on each child
SELECT * FROM cfeed.reshard(1, 4) ORDER BY shard;
SELECT count(cfeed.publish(1, s)) FROM generate_series(2, 5) s, generate_series(1, 2);
SELECT pg_temp.stamped();
SELECT shard, parent, closed, ended FROM cfeed.shard WHERE feed_id = 1 ORDER BY shard;

-- the children are not handed out while their parents are not consumed:
-- a and b keep their parents; the children's leases are free, at their start
SELECT array_agg(shard ORDER BY shard) AS a FROM cfeed.acquire('g', 1, 'a');
SELECT array_agg(shard ORDER BY shard) AS b FROM cfeed.acquire('g', 1, 'b');
SELECT * FROM pg_temp.leases('g');
-- c joins: only the 2 parents are shared (1/1/0), c gets nothing
SELECT array_agg(shard ORDER BY shard) AS c FROM cfeed.acquire('g', 1, 'c');
SELECT * FROM pg_temp.holdings('g');

-- group e's children leases start at the children's start, whatever start_at:
-- e read the parents before the split
SELECT array_agg(shard ORDER BY shard) AS z FROM cfeed.acquire('e', 1, 'z', start_at => now());
SELECT * FROM pg_temp.leases('e');
-- a group created after the split with start_at = now: the parents at their
-- last numbers (consumed), so the children are handed out at once, at now
SELECT shard, cursor - 2000000000000000 AS at FROM cfeed.acquire('n', 1, 'x', start_at => now());

-- a reads shard 0 to its end: not yet consumed at 2000000000000002 (a keeps
-- it), consumed at its last number
SELECT array_agg(shard ORDER BY shard) AS a FROM cfeed.acquire('g', 1, 'a');
SELECT cfeed.checkpoint('g', 1, 0, 'a', 1, pg_temp.last(0));
-- a's next acquire frees shard 0 and shares 1, 2 and 4 (1/1/1): a takes 2
-- and 4 (c, holding nothing, is not a live owner yet: 2 shards for a and b,
-- the extra share to a by name, as b holds no more than its floor), c then
-- takes 4 from a (epoch 2), each from its start
SELECT shard, cursor - 2000000000000000 AS at, epoch FROM cfeed.acquire('g', 1, 'a');
SELECT shard, cursor - 2000000000000000 AS at, epoch FROM cfeed.acquire('g', 1, 'c');
SELECT array_agg(shard ORDER BY shard) AS b FROM cfeed.acquire('g', 1, 'b');
SELECT * FROM pg_temp.holdings('g');
-- the consumed shard 0 holds no lease: a checkpoint on it is refused
SELECT pg_temp.err(format($$SELECT cfeed.checkpoint('g', 1, 0, 'a', 1, %s)$$, pg_temp.last(0)));
SELECT * FROM pg_temp.leases('g') WHERE shard = 0;

-- b consumes shard 1: 2, 3, 4, 5 are shared (2/1/1 after everyone's call)
SELECT cfeed.checkpoint('g', 1, 1, 'b', 2, pg_temp.last(1));
SELECT array_agg(shard ORDER BY shard) AS b FROM cfeed.acquire('g', 1, 'b');
SELECT array_agg(shard ORDER BY shard) AS a FROM cfeed.acquire('g', 1, 'a');
SELECT array_agg(shard ORDER BY shard) AS c FROM cfeed.acquire('g', 1, 'c');
SELECT * FROM pg_temp.holdings('g');
SELECT shard, owner, behind FROM cfeed.consumer_lag WHERE group_name = 'g' ORDER BY shard;
SELECT shards, held, owners, behind FROM cfeed.groups WHERE group_name = 'g';

-- a seek back on the consumed parent 0 (a replay) parks its children 2 and 4
-- again at once: their holders' checkpoints and fails are refused (since
-- 1.9: before, until a member's next acquire); shard 0 is shared again and
-- taken at the next acquire
SELECT * FROM pg_temp.holdings('g');
SELECT epoch AS e2 FROM cfeed.lease WHERE group_name = 'g' AND feed_id = 1 AND shard = 2 \gset
SELECT cfeed.seek('g', 1, 0, 2000000000000001);
SELECT pg_temp.err(format($$SELECT cfeed.checkpoint('g', 1, 2, 'a', %s, 2000000000000001)$$, :e2));
SELECT pg_temp.err(format($$SELECT * FROM cfeed.fail('g', 1, 4, 'c', %s, 2000000000000001, 'x')$$,
	(SELECT l.epoch FROM cfeed.lease l WHERE l.group_name = 'g' AND l.feed_id = 1 AND l.shard = 4)));
SELECT * FROM pg_temp.holdings('g');
SELECT array_agg(shard ORDER BY shard) AS b FROM cfeed.acquire('g', 1, 'b');
SELECT array_agg(shard ORDER BY shard) AS a FROM cfeed.acquire('g', 1, 'a');
SELECT array_agg(shard ORDER BY shard) AS c FROM cfeed.acquire('g', 1, 'c');
SELECT * FROM pg_temp.holdings('g');
-- consumed again: the children come back, cursors kept, and after one call
-- each every one of them is held (2/1/1; before 1.9, 1/1/1 and shard 4 free)
SELECT cfeed.checkpoint('g', 1, 0, l.owner, l.epoch, pg_temp.last(0))
FROM cfeed.lease l WHERE l.group_name = 'g' AND l.feed_id = 1 AND l.shard = 0;
SELECT count(*) FROM cfeed.acquire('g', 1, 'a');
SELECT count(*) FROM cfeed.acquire('g', 1, 'b');
SELECT count(*) FROM cfeed.acquire('g', 1, 'c');
SELECT * FROM pg_temp.holdings('g');
SELECT * FROM pg_temp.leases('g');

-- a second split: 2-5 closed, children 6-13 (6 and 10 continue 2, ...);
-- nothing of them is handed out until 2-5 are consumed, then all of them
SELECT count(*) FROM cfeed.reshard(1, 8);
SELECT pg_temp.stamped();
SELECT count(*) FROM cfeed.acquire('g', 1, 'a');
SELECT count(*) FROM cfeed.acquire('g', 1, 'b');
SELECT count(*) FROM cfeed.acquire('g', 1, 'c');
SELECT * FROM pg_temp.holdings('g');
SELECT cfeed.checkpoint('g', 1, l.shard, l.owner, l.epoch, pg_temp.last(l.shard))
FROM cfeed.lease l WHERE l.group_name = 'g' AND l.feed_id = 1 AND l.shard BETWEEN 2 AND 5
ORDER BY l.shard;
SELECT count(*) FROM cfeed.acquire('g', 1, 'a');
SELECT count(*) FROM cfeed.acquire('g', 1, 'b');
SELECT count(*) FROM cfeed.acquire('g', 1, 'c');
SELECT count(*) FROM cfeed.acquire('g', 1, 'a');
SELECT * FROM pg_temp.holdings('g');
SELECT count(*) FILTER (WHERE owner IS NULL) AS free, count(*) AS leases FROM cfeed.lease
WHERE group_name = 'g' AND feed_id = 1;

-- a parent whose last change was deleted (its head a number nobody can read
-- or checkpoint) is consumed once no change is left after the cursor
SELECT cfeed.create_feed('cut', 1);
SELECT count(cfeed.publish(2, 0)) FROM generate_series(1, 3);
SELECT pg_temp.stamped();
SELECT shard, cursor - 2000000000000000 AS at FROM cfeed.acquire('h', 2, 'x');
SELECT count(*) FROM cfeed.reshard(2, 2);
DELETE FROM cfeed.change c USING cfeed.read(2, 0) r
WHERE c.feed_id = 2 AND c.shard = 0 AND c.change_id = r.change_id
  AND r.change_sequence_number = 2000000000000003;
SELECT cfeed.head(2, 0) - 2000000000000000 AS head;
SELECT cfeed.checkpoint('h', 2, 0, 'x', 1, 2000000000000002);
SELECT shard, cursor - 2000000000000000 AS at FROM cfeed.acquire('h', 2, 'x');


-- two splits between two calls of a member that passes start_at (as cfeed
-- tail --group --from does on every call): reshard gave the group leases on
-- the children, and on theirs, at their starts, so no change is skipped
SELECT cfeed.create_feed('twice', 1);
SELECT count(cfeed.publish(3, 0)) FROM generate_series(1, 3);
SELECT pg_temp.stamped();
SELECT array_agg(shard ORDER BY shard) AS a FROM cfeed.acquire('t', 3, 'a');
SELECT count(*) FROM cfeed.reshard(3, 2);
SELECT count(cfeed.publish(3, s)) FROM generate_series(1, 2) s, generate_series(1, 2);
SELECT pg_temp.stamped();
SELECT count(*) FROM cfeed.reshard(3, 4);
SELECT count(cfeed.publish(3, s)) FROM generate_series(3, 6) s, generate_series(1, 2);
SELECT pg_temp.stamped();
SELECT l.shard, l.owner, l.epoch, l.cursor - s.start_sequence_number AS at
FROM cfeed.lease l JOIN cfeed.shard s USING (feed_id, shard)
WHERE l.group_name = 't' AND l.feed_id = 3 ORDER BY l.shard;
SELECT array_agg(shard ORDER BY shard) AS a
FROM cfeed.acquire('t', 3, 'a', start_at => clock_timestamp());
SELECT l.shard, l.cursor - s.start_sequence_number AS at
FROM cfeed.lease l JOIN cfeed.shard s USING (feed_id, shard)
WHERE l.group_name = 't' AND l.feed_id = 3 ORDER BY l.shard;

-- retention keeps a child's changes for the groups that read its parent,
-- before any member called acquire after the split: r has 2 changes of
-- shard 0 and the 3 of each child to read; also when the group has no lease
-- on the child (as a split that committed while the group's first leases
-- had not leaves it: isolation spec acquire_new_group_split; here deleted by
-- hand), which its next acquire makes at the child's start
SELECT cfeed.create_feed('kept', 1);
-- (one sweep each: retention deletes a range shard's stamp whole)
SELECT cfeed.publish(4, 0) IS NOT NULL AS published;
SELECT pg_temp.stamped();
SELECT cfeed.publish(4, 0) IS NOT NULL AS published;
SELECT pg_temp.stamped();
SELECT cfeed.publish(4, 0) IS NOT NULL AS published;
SELECT pg_temp.stamped();
SELECT array_agg(shard ORDER BY shard) AS a FROM cfeed.acquire('r', 4, 'a');
SELECT cfeed.checkpoint('r', 4, 0, 'a', 1, 2000000000000001);
SELECT count(*) FROM cfeed.reshard(4, 2);
DELETE FROM cfeed.lease WHERE group_name = 'r' AND feed_id = 4 AND shard = 2;
SELECT count(cfeed.publish(4, s)) FROM generate_series(1, 2) s, generate_series(1, 3);
SELECT pg_temp.stamped();
UPDATE cfeed.feed SET retention = interval '10 milliseconds' WHERE feed_id = 4;
SELECT pg_sleep(0.05);
SELECT cfeed._apply_retention() AS deleted;
SELECT shard, count(*) AS left FROM cfeed.change WHERE feed_id = 4 GROUP BY shard ORDER BY shard;
SELECT l.shard, l.cursor - s.start_sequence_number AS at
FROM cfeed.lease l JOIN cfeed.shard s USING (feed_id, shard)
WHERE l.group_name = 'r' AND l.feed_id = 4 ORDER BY l.shard;
-- a second split: the children of 2 (4 and 6) get no lease of r either
-- (it has none on 2), and are kept for r all the same (it leases 0)
SELECT count(*) FROM cfeed.reshard(4, 4);
SELECT count(cfeed.publish(4, s)) FROM generate_series(3, 6) s, generate_series(1, 2);
SELECT pg_temp.stamped();
SELECT pg_sleep(0.05);
SELECT cfeed._apply_retention() AS deleted;
SELECT shard, count(*) AS left FROM cfeed.change WHERE feed_id = 4 AND shard > 2 GROUP BY shard ORDER BY shard;
SELECT count(*) FROM cfeed.acquire('r', 4, 'a', start_at => now());
SELECT l.shard, l.cursor - s.start_sequence_number AS at
FROM cfeed.lease l JOIN cfeed.shard s USING (feed_id, shard)
WHERE l.group_name = 'r' AND l.feed_id = 4 ORDER BY l.shard;

-- a member that may not read some changes of a parent (the read policy
-- hides the changes of a table it may not SELECT) does not decide that its
-- group consumed it: the children stay parked until the group's cursor is
-- past every change of the parent
SELECT cfeed.create_feed('hidden', 1);
CREATE TABLE public.gr_secret (id int PRIMARY KEY, v text);
SELECT cfeed.track('public.gr_secret', 5);
SELECT count(cfeed.publish(5, 0)) FROM generate_series(1, 2);
INSERT INTO public.gr_secret VALUES (1, 'x');
SELECT pg_temp.stamped();
CREATE ROLE regress_gr_member;
GRANT SELECT ON cfeed.change, cfeed.row_image, cfeed.shard, cfeed.feed TO regress_gr_member;
GRANT SELECT, INSERT, UPDATE, DELETE ON cfeed.lease TO regress_gr_member;
SELECT cfeed.grant_read(5, 'regress_gr_member');
SET ROLE regress_gr_member;
SELECT count(*) AS seen FROM cfeed.change WHERE feed_id = 5;
SELECT array_agg(shard ORDER BY shard) AS m FROM cfeed.acquire('s', 5, 'm');
SELECT cfeed.checkpoint('s', 5, 0, 'm', 1, 2000000000000002);
RESET ROLE;
SELECT count(*) FROM cfeed.reshard(5, 2);
SET ROLE regress_gr_member;
SELECT cfeed._read_to_end(5, 0, 2000000000000002) AS read_to_end,
	   cfeed._read_to_end(5, 0, 2000000000000003) AS read_to_end_3,
	   cfeed._read_to_end(1, 0, 2000000000000003) AS other_feed;
SELECT array_agg(shard ORDER BY shard) AS m FROM cfeed.acquire('s', 5, 'm');
RESET ROLE;
DROP TABLE public.gr_secret;
DROP OWNED BY regress_gr_member;
DROP ROLE regress_gr_member;

-- children inserted by hand (a logical subscriber's step 1, docs/replication.md)
-- get the groups' leases too, at their start; a shard without a parent none
SELECT cfeed.create_feed('byhand', 1);
SELECT count(cfeed.publish(6, 0)) FROM generate_series(1, 2);
SELECT array_agg(shard ORDER BY shard) AS a FROM cfeed.acquire('h', 6, 'a');
INSERT INTO cfeed.shard_config (feed_id, shard, sweep_group, longpoll, parent)
VALUES (6, 1, 0, true, 0), (6, 2, 0, true, 0);
INSERT INTO cfeed.shard (feed_id, shard) VALUES (6, 3);
SELECT shard, owner, epoch, cursor - 2000000000000000 AS at FROM cfeed.lease
WHERE group_name = 'h' AND feed_id = 6 ORDER BY shard;

-- a new lease starts just before the shard's first stored change, whether
-- the member that creates it may read that change's row image or not:
-- before 1.9 a member that could not see the first changes started its
-- group after them, and every member then skipped them
SELECT cfeed.create_feed('first_hidden', 1, 40);
CREATE TABLE public.gr_first_secret (id int PRIMARY KEY);
CREATE TABLE public.gr_first_open (id int PRIMARY KEY);
SELECT cfeed.track('public.gr_first_secret', 40), cfeed.track('public.gr_first_open', 40);
INSERT INTO public.gr_first_secret VALUES (1);
INSERT INTO public.gr_first_open VALUES (1);
SELECT pg_temp.stamped();
CREATE ROLE regress_gr_partial;
GRANT SELECT ON cfeed.change, cfeed.row_image, cfeed.shard, cfeed.feed, public.gr_first_open TO regress_gr_partial;
GRANT SELECT, INSERT, UPDATE, DELETE ON cfeed.lease TO regress_gr_partial;
SELECT cfeed.grant_read(40, 'regress_gr_partial');
SELECT start_sequence_number AS s40 FROM cfeed.shard WHERE feed_id = 40 AND shard = 0 \gset
SET ROLE regress_gr_partial;
SELECT change_sequence_number - :s40 AS sees FROM cfeed.read(40, 0);
SELECT shard, cursor - :s40 AS at FROM cfeed.acquire('first', 40, 'partial');
SELECT cfeed._lease_start(40, 0) - :s40 AS lease_start, cfeed._lease_start(1, 0) AS other_feed;
RESET ROLE;
SELECT cfeed.release('first', 40, 'partial');
SELECT shard, cursor - :s40 AS at FROM cfeed.acquire('first', 40, 'full');
SELECT change_sequence_number - :s40 AS n FROM cfeed.read(40, 0, (SELECT cursor FROM cfeed.lease
	WHERE group_name = 'first' AND feed_id = 40 AND shard = 0));
SELECT cfeed.drop_group('first', 40);
DROP TABLE public.gr_first_secret, public.gr_first_open;
DROP OWNED BY regress_gr_partial;
DROP ROLE regress_gr_partial;
