-- ranges: shards stored in ranges (cfeed.default_storage = ranges).  A change's
-- row is written once and never updated; a sweep appends cfeed.stamp rows and
-- its group's mark.  Numbers, reads, heads, cursors and errors are the same as
-- for shards stored in rows; a transaction is stamped whole, once.
\i test/regress_setup.sql

-- numbered(f, s): a shard's changes as read() returns them, relative to their bases
CREATE FUNCTION pg_temp.numbered(f int, s int) RETURNS TABLE (id bigint, n bigint)
LANGUAGE sql AS $$
	SELECT change_id - 1000000000000000, change_sequence_number - 2000000000000000
	FROM cfeed.read(f, s, NULL, 1000, 0)
$$;
-- stamps(): the stamp rows, relative to their bases
CREATE FUNCTION pg_temp.stamps() RETURNS TABLE (feed_id int, shard int, first bigint, last bigint, ids bigint[])
LANGUAGE sql AS $$
	SELECT feed_id, shard, first_number - 2000000000000000, last_number - 2000000000000000,
		   ARRAY(SELECT first_change_id + d - 1000000000000000 FROM unnest(change_id_deltas) d)
	FROM cfeed.stamp ORDER BY feed_id, shard, last_number
$$;

-- the setting: rows by default; a shard's storage is fixed when it is created
SHOW cfeed.default_storage;
SELECT pg_temp.err($$SET cfeed.default_storage = 'heap'$$);
SET cfeed.default_storage = ranges;
SELECT cfeed.create_feed('ranged', 2);
SELECT cfeed.create_feed('ranged-other-group', 1, sweep_group => 1);
RESET cfeed.default_storage;
SELECT cfeed.create_feed('rowed', 1);
SELECT feed_id, shard, storage, last_change_sequence_number - 2000000000000000 AS head
FROM cfeed.shard ORDER BY feed_id, shard;
-- each group with a range shard has a mark, made when its first one was created
SELECT sweep_group, cardinality(running) AS running FROM cfeed.sweep_mark ORDER BY sweep_group;

-- writes: publish and the INSERT pattern; nothing is updated when stamped
SELECT count(cfeed.publish(1, 0)) FROM generate_series(1, 3);
INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (1, 1, nextval('cfeed.change_id'));
SELECT count(cfeed.publish(3, 0)) FROM generate_series(1, 2);
SELECT cfeed.publish(2, 0) - 1000000000000000 AS other_group_id;
CREATE TEMP TABLE before_sweep AS SELECT ctid AS tid, change_id FROM cfeed.change;
SELECT feed_id, shard, change_count, last_change_sequence_number - 2000000000000000 AS last
FROM cfeed.sweep() ORDER BY feed_id, shard;
SELECT * FROM pg_temp.stamps();
-- the range changes' rows are as written (same ctid, no number); the row feed's are stamped
SELECT c.feed_id, count(*) AS changes, count(*) FILTER (WHERE b.tid = c.ctid) AS untouched,
	   count(c.change_sequence_number) AS numbered
FROM cfeed.change c JOIN before_sweep b USING (change_id) GROUP BY c.feed_id ORDER BY c.feed_id;
-- reads, heads, the view
SELECT * FROM pg_temp.numbered(1, 0);
SELECT * FROM pg_temp.numbered(1, 1);
SELECT change_sequence_number - 2000000000000000 AS n FROM cfeed.read(1, 0, 2000000000000001, 10, 0);
SELECT change_sequence_number - 2000000000000000 AS n FROM cfeed.read(1, 0, 2000000000000000, 2, 0);
SELECT count(*) FROM cfeed.read(1, 0, 2000000000000003, 10, 0);
SELECT cfeed.head(1, 0) - 2000000000000000 AS head_0, cfeed.head(1, 1) - 2000000000000000 AS head_1;
SELECT feed_id, shard, last_change_sequence_number - 2000000000000000 AS head,
	   last_sweep_time = (SELECT max(stamped_at) FROM cfeed.stamp t WHERE t.feed_id = s.feed_id AND t.shard = s.shard) AS sweep_time
FROM cfeed.shard s WHERE storage = 'ranges' ORDER BY feed_id, shard;
-- group 1's change waits for group 1's sweep, which stamps it once
SELECT * FROM pg_temp.numbered(2, 0);
SELECT change_count FROM cfeed.sweep(1);
SELECT * FROM pg_temp.numbered(2, 0);
-- a second sweep finds nothing: stamped changes are not stamped again
SELECT count(*) FROM cfeed.sweep();
SELECT count(*) FROM cfeed.sweep(1);
SELECT count(*) AS stamp_rows FROM cfeed.stamp;

-- read_rows gives the same numbers; the join pattern joins against read()
SELECT change_sequence_number - 2000000000000000 AS n, op, tbl FROM cfeed.read_rows(1, 0, NULL, 10, 0);
CREATE TABLE orders (change_id bigint PRIMARY KEY, item text);
INSERT INTO orders SELECT cfeed.publish(1, 1), 'item ' || i FROM generate_series(1, 3) i;
SELECT count(*) FROM cfeed.sweep();
SELECT r.change_sequence_number - 2000000000000000 AS n, o.item
FROM cfeed.read(1, 1, 2000000000000001, 100, 0) r JOIN orders o USING (change_id)
ORDER BY r.change_sequence_number;

-- one transaction across a range shard and a row shard, with a savepoint rolled
-- back and an aborted transaction: each committed change is numbered once
BEGIN;
SELECT cfeed.publish(1, 0) IS NOT NULL AS a;
SAVEPOINT s;
SELECT cfeed.publish(1, 0) IS NOT NULL AS rolled_back;
ROLLBACK TO SAVEPOINT s;
SELECT cfeed.publish(3, 0) IS NOT NULL AS b;
SELECT cfeed.publish(1, 0) IS NOT NULL AS c;
COMMIT;
BEGIN;
SELECT cfeed.publish(1, 0) IS NOT NULL AS aborted;
ROLLBACK;
SELECT feed_id, shard, change_count FROM cfeed.sweep() ORDER BY feed_id, shard;
SELECT n FROM pg_temp.numbered(1, 0);
SELECT count(*) AS unnumbered_rows_left FROM cfeed.change c
WHERE c.feed_id = 1 AND NOT EXISTS (SELECT FROM cfeed.stamp t WHERE c.change_id - t.first_change_id = ANY (t.change_id_deltas));

-- a sweep does not stamp its own transaction's range changes: they may grow
-- after it; the next sweep stamps all of them, once
BEGIN;
SELECT cfeed.publish(1, 0) IS NOT NULL AS own_1;
SELECT count(*) AS stamped_by_own_sweep FROM cfeed.sweep();
SELECT cfeed.publish(1, 0) IS NOT NULL AS own_2;
COMMIT;
SELECT feed_id, shard, change_count FROM cfeed.sweep();
SELECT n FROM pg_temp.numbered(1, 0) WHERE n > 5;

-- a batch cut never splits a writer with range changes: the batch takes
-- the rest of its changes, and the next sweep the other writers'
SET cfeed.sweep_batch_size = 2;
BEGIN;
SELECT count(cfeed.publish(1, 1)) FROM generate_series(1, 3);
COMMIT;
SELECT count(cfeed.publish(3, 0)) FROM generate_series(1, 3);
SELECT feed_id, shard, change_count FROM cfeed.sweep() ORDER BY feed_id, shard;
SELECT feed_id, shard, change_count FROM cfeed.sweep() ORDER BY feed_id, shard;
SELECT feed_id, shard, change_count FROM cfeed.sweep() ORDER BY feed_id, shard;
RESET cfeed.sweep_batch_size;
SELECT count(*) AS changes, count(DISTINCT n) AS numbers, max(n) - min(n) + 1 AS span
FROM pg_temp.numbered(1, 1);

-- cursor_at: the last number of the last stamp before the time
SELECT cfeed.cursor_at(1, 0, '-infinity') - 2000000000000000 AS before_all,
	   cfeed.cursor_at(1, 0, 'infinity') = cfeed.head(1, 0) AS after_all;
SELECT cfeed.cursor_at(1, 0, t.stamped_at) = t.first_number - 1 AS at_a_stamp
FROM cfeed.stamp t WHERE feed_id = 1 AND shard = 0 ORDER BY last_number DESC LIMIT 1;
-- the clock going back (a failover to a server whose clock is behind): the
-- head's stamp made a day ahead of this clock; the next sweep's stamp is no
-- earlier, so stamped_at never decreases with the numbers and cursor_at still
-- finds every change stamped at or after a time
SET cfeed.default_storage = ranges;
SELECT cfeed.create_feed('clock-back', 1, feed_id => 29, sweep_group => 7);
RESET cfeed.default_storage;
SELECT count(cfeed.publish(29, 0)) FROM generate_series(1, 2);
SELECT feed_id, shard, change_count FROM cfeed.sweep(7);
UPDATE cfeed.stamp SET stamped_at = now() + interval '1 day' WHERE feed_id = 29;
SELECT count(cfeed.publish(29, 0)) FROM generate_series(1, 3);
SELECT feed_id, shard, change_count FROM cfeed.sweep(7);
SELECT count(*) AS stamps, min(stamped_at) = max(stamped_at) AS not_before_head
FROM cfeed.stamp WHERE feed_id = 29;
SELECT count(*) FROM cfeed.read(29, 0, cfeed.cursor_at(29, 0, now() + interval '12 hours'));

-- wait and read(wait_ms) return at once when there is something to read
SELECT cfeed.wait(1, 0, 2000000000000000, 10000) - 2000000000000000 AS waited;
SELECT count(*) FROM cfeed.read(1, 0, 2000000000000000, 1, 10000);

-- a reader sees only what its grant allows: the same errors as for rows
CREATE ROLE ranges_nobody LOGIN;
SET ROLE ranges_nobody;
SELECT pg_temp.err('SELECT * FROM cfeed.read(1, 0, NULL, 10, 0)');
SELECT pg_temp.err('SELECT * FROM cfeed.stamp');
SELECT pg_temp.err('SELECT * FROM cfeed.sweep_mark');
RESET ROLE;
DROP ROLE ranges_nobody;

-- what a range shard refuses: another storage, another sweep group; its
-- changes keep the guards of every change
SELECT pg_temp.err($$UPDATE cfeed.shard_config SET storage = 'rows' WHERE feed_id = 1 AND shard = 0$$);
SELECT pg_temp.err($$UPDATE cfeed.shard SET sweep_group = 1 WHERE feed_id = 1 AND shard = 0$$);
SELECT pg_temp.err($$INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (1, 7, 1)$$);
-- a change that comes numbered above the start value, as logical
-- replication's apply copies a stamped change in (portable cursors): its
-- number would be in no stamp, so no read or head would see it
SET session_replication_role = replica;
SELECT pg_temp.err($$INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number, writer_xid, stamped_at)
	VALUES (1, 0, 77, 2000000000099999, '3', now())$$);
RESET session_replication_role;
-- a shard of a row feed may still move; a row feed added by hand in storage ranges
SELECT pg_temp.err($$UPDATE cfeed.shard SET sweep_group = 1 WHERE feed_id = 3 AND shard = 0$$);
INSERT INTO cfeed.feed (feed_id, name) VALUES (9, 'by-hand');
INSERT INTO cfeed.shard_config (feed_id, shard, storage) VALUES (9, 0, 'ranges');
SELECT pg_temp.err($$INSERT INTO cfeed.shard_config (feed_id, shard, storage) VALUES (9, 1, 'heap')$$);
SELECT cfeed.publish(9, 0) IS NOT NULL AS by_hand;
SELECT feed_id, shard, change_count FROM cfeed.sweep() ORDER BY feed_id, shard;

-- a group whose mark is gone refuses to sweep rather than number twice
BEGIN;
DELETE FROM cfeed.sweep_mark WHERE sweep_group = 1;
SELECT cfeed.publish(2, 0) IS NOT NULL AS x;
SELECT pg_temp.err('SELECT * FROM cfeed.sweep(1)');
ROLLBACK;

-- retention deletes whole stamps and their changes, oldest first: never the
-- head's stamp, nor what a consumer group has not read
UPDATE cfeed.feed SET retention = '1 hour' WHERE feed_id = 1;
UPDATE cfeed.stamp SET stamped_at = stamped_at - interval '2 hours' WHERE feed_id = 1;
SELECT shard, cursor - 2000000000000000 AS cursor FROM cfeed.acquire('keep', 1, 'c') ORDER BY shard;
SELECT cfeed.checkpoint('keep', 1, 1, 'c', 1, 2000000000000004);
SELECT count(*) AS changes_before, (SELECT count(*) FROM cfeed.stamp WHERE feed_id = 1) AS stamps_before
FROM cfeed.change WHERE feed_id = 1;
SELECT shard, retention_held_by FROM cfeed.stats WHERE feed_id = 1 ORDER BY shard;
SELECT cfeed.apply_retention() AS deleted;
SELECT shard, first - 0 AS first, last FROM pg_temp.stamps() WHERE feed_id = 1 ORDER BY shard, last;
SELECT shard, count(*) AS changes FROM cfeed.change WHERE feed_id = 1 GROUP BY shard ORDER BY shard;
SELECT shard, retention_held_by FROM cfeed.stats WHERE feed_id = 1 ORDER BY shard;
SELECT n FROM pg_temp.numbered(1, 0);
SELECT n FROM pg_temp.numbered(1, 1);
SELECT cfeed.head(1, 0) - 2000000000000000 AS head_0, cfeed.head(1, 1) - 2000000000000000 AS head_1;
-- what the group still reads is kept; once it has read on, retention follows
SELECT cfeed.checkpoint('keep', 1, 1, 'c', 1, 2000000000000007);
SELECT cfeed.apply_retention() AS deleted;
SELECT shard, first - 0 AS first, last FROM pg_temp.stamps() WHERE feed_id = 1 ORDER BY shard, last;
SELECT cfeed.drop_group('keep', 1);
SELECT cfeed.apply_retention() AS deleted;
SELECT shard, first - 0 AS first, last FROM pg_temp.stamps() WHERE feed_id = 1 ORDER BY shard, last;
SELECT n FROM pg_temp.numbered(1, 0);
SELECT cfeed.head(1, 0) - 2000000000000000 AS head_0;
UPDATE cfeed.feed SET retention = NULL WHERE feed_id = 1;

-- a feed created and written in one transaction: its changes are stamped
-- once (the creating transaction's xid is at or above the first mark's
-- next_xid, and is looked at once)
BEGIN;
SET LOCAL cfeed.default_storage = ranges;
SELECT cfeed.create_feed('made-and-written', 1, feed_id => 11, sweep_group => 2);
SELECT count(cfeed.publish(11, 0)) FROM generate_series(1, 3);
COMMIT;
SELECT change_count FROM cfeed.sweep(2);
SELECT count(*) AS changes, count(DISTINCT id) AS ids FROM pg_temp.numbered(11, 0);

-- a mark made in another cluster (a restored dump, pg_upgrade) is refused
-- until cfeed.adopt_marks() makes the group's stamps and mark this
-- cluster's: the stamped changes keep their numbers, and the group's
-- pending ones, of a range shard and of a row shard, are stamped after
-- them, once (t/209_ranges_dump.pl restores a dump)
SELECT cfeed.create_feed('rows-in-group-2', 1, feed_id => 12, sweep_group => 2);
SELECT count(cfeed.publish(11, 0)) AS pending_range FROM generate_series(1, 2);
SELECT cfeed.publish(12, 0) IS NOT NULL AS pending_row;
UPDATE cfeed.sweep_mark SET system_identifier = 1 WHERE sweep_group = 2;
SELECT pg_temp.err('SELECT * FROM cfeed.sweep(2)');
-- cfeed.stats, read by every reader, does not raise: it counts by the
-- group's highest mark of any cluster
SELECT feed_id, shard, pending FROM cfeed.stats WHERE feed_id IN (11, 12) ORDER BY feed_id, shard;
SELECT sweep_group, stamps, changes, unstamped_writers > 0 AS some_unstamped FROM cfeed.adopt_marks();
SELECT * FROM cfeed.adopt_marks();
SELECT feed_id, shard, change_count FROM cfeed.sweep(2) ORDER BY feed_id, shard;
SELECT count(*) AS changes, count(DISTINCT id) AS ids, min(n), max(n) FROM pg_temp.numbered(11, 0);
SELECT count(*) FROM cfeed.sweep(2);
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pg_temp.err('SELECT * FROM cfeed.adopt_marks()');
ROLLBACK;

-- cfeed.stats counts what is still to be stamped, not every range change
SELECT cfeed.publish(1, 1) IS NOT NULL AS pending_one;
SELECT feed_id, shard, pending FROM cfeed.stats WHERE feed_id IN (1, 2) ORDER BY feed_id, shard;
SELECT count(*) FROM cfeed.sweep();
SELECT feed_id, shard, pending FROM cfeed.stats WHERE feed_id IN (1, 2) ORDER BY feed_id, shard;

-- a group's first range shard: the committed changes its row shards have
-- not had stamped yet are still stamped (the first mark points at their
-- writers), once
SELECT cfeed.create_feed('rows-first', 1, feed_id => 20, sweep_group => 5);
SELECT count(cfeed.publish(20, 0)) FROM generate_series(1, 2);
SET cfeed.default_storage = ranges;
SELECT cfeed.create_feed('ranges-later', 1, feed_id => 21, sweep_group => 5);
RESET cfeed.default_storage;
SELECT feed_id, shard, change_count FROM cfeed.sweep(5) ORDER BY feed_id, shard;
SELECT count(*) AS unstamped FROM cfeed.change WHERE feed_id = 20 AND change_sequence_number IS NULL;

-- a row shard with unstamped changes cannot move into a group with a mark:
-- the mark does not point at their writers, and may not (one of them has a
-- range change the group stamped); swept first, in the same transaction, it
-- moves, and its later changes are stamped by its new group, once
SELECT cfeed.create_feed('rows-moving', 1, feed_id => 22, sweep_group => 6);
SELECT count(cfeed.publish(22, 0)) FROM generate_series(1, 2);
BEGIN;
SELECT cfeed.publish(21, 0) IS NOT NULL AS in_group_5, cfeed.publish(22, 0) IS NOT NULL AS in_group_6;
COMMIT;
SELECT feed_id, shard, change_count FROM cfeed.sweep(5) ORDER BY feed_id, shard;
SELECT pg_temp.err($$UPDATE cfeed.shard SET sweep_group = 5 WHERE feed_id = 22$$);
BEGIN;
SELECT feed_id, shard, change_count FROM cfeed.sweep(6) ORDER BY feed_id, shard;
UPDATE cfeed.shard SET sweep_group = 5 WHERE feed_id = 22;
COMMIT;
SELECT cfeed.publish(22, 0) IS NOT NULL AS moved;
SELECT feed_id, shard, change_count FROM cfeed.sweep(5) ORDER BY feed_id, shard;
SELECT count(*) AS unstamped FROM cfeed.change WHERE feed_id = 22 AND change_sequence_number IS NULL;
SELECT count(*) AS changes, count(DISTINCT id) AS ids FROM pg_temp.numbered(21, 0);

-- a transaction that wrote to a range shard and to a row shard out of
-- numbers fails its group's sweep, rather than have its range change
-- stamped at every sweep (its xid stays in the mark)
INSERT INTO cfeed.shard (feed_id, shard, sweep_group, last_change_sequence_number)
VALUES (20, 1, 5, 9223372036854775806);
SELECT cfeed.publish(20, 1) IS NOT NULL AS last_number;
SELECT feed_id, shard, change_count FROM cfeed.sweep(5) ORDER BY feed_id, shard;
BEGIN;
SELECT cfeed.publish(20, 1) IS NOT NULL AS out_of_numbers, cfeed.publish(21, 0) IS NOT NULL AS ranged;
COMMIT;
SELECT pg_temp.err('SELECT * FROM cfeed.sweep(5)');
SELECT pg_temp.err('SELECT * FROM cfeed.sweep(5)');
SELECT count(*) AS changes, count(DISTINCT id) AS ids FROM pg_temp.numbered(21, 0);
DELETE FROM cfeed.change WHERE feed_id = 20 AND shard = 1 AND change_sequence_number IS NULL;
SELECT feed_id, shard, change_count FROM cfeed.sweep(5) ORDER BY feed_id, shard;
SELECT count(*) AS changes, count(DISTINCT id) AS ids FROM pg_temp.numbered(21, 0);

-- a consumer group of a range feed, for a member with no privilege on
-- cfeed.stamp: acquire starts at the first change it may read
CREATE ROLE ranges_member;
GRANT SELECT ON cfeed.change, cfeed.shard, cfeed.feed TO ranges_member;
GRANT SELECT, INSERT, UPDATE, DELETE ON cfeed.lease TO ranges_member;
SELECT cfeed.grant_read(21, 'ranges_member');
SET ROLE ranges_member;
SELECT shard, cursor - 2000000000000000 AS cursor FROM cfeed.acquire('m', 21, 'a');
RESET ROLE;
DROP OWNED BY ranges_member;
DROP ROLE ranges_member;

-- one change_id written twice to a shard by one transaction: two changes,
-- numbered once each, and read once each (the stamp's lookup of a change_id
-- finds both rows)
BEGIN;
SELECT cfeed.publish(21, 0, 777) AS twice, cfeed.publish(21, 0, 777) AS again;
COMMIT;
SELECT feed_id, shard, change_count FROM cfeed.sweep(5) ORDER BY feed_id, shard;
SELECT change_sequence_number - cfeed.head(21, 0) AS n, change_id FROM cfeed.read(21, 0, cfeed.head(21, 0) - 2, 10, 0);
SELECT change_sequence_number - cfeed.head(21, 0) AS n, change_id, op FROM cfeed.read_rows(21, 0, cfeed.head(21, 0) - 2, 10, 0);
SELECT count(*) AS one_row FROM cfeed.read(21, 0, cfeed.head(21, 0) - 2, 1, 0);

-- a stamp row holds each change by its offsets from the row's first change
-- (an int each): a change_id further from the row's first than an int
-- reaches begins a new row (here, the third); every change keeps its number,
-- in change_id order, and is read once.  Two writers, the later one's
-- changes first in each row: the writers' offsets are -1.
SELECT cfeed.head(21, 0) AS head_far \gset
SELECT count(cfeed.publish(21, 0, i))
FROM unnest(ARRAY[5000000000 + 2147483647, 5000000000 + 2147483648 + 2147483647]::bigint[]) i;
SELECT count(cfeed.publish(21, 0, i))
FROM unnest(ARRAY[5000000000, 5000000000 + 2147483648]::bigint[]) i;
SELECT feed_id, shard, change_count FROM cfeed.sweep(5) ORDER BY feed_id, shard;
SELECT first_number - :head_far AS first, last_number - :head_far AS last,
	   first_change_id, change_id_deltas
FROM cfeed.stamp WHERE feed_id = 21 AND shard = 0 AND last_number > :head_far ORDER BY last_number;
SELECT change_sequence_number - :head_far AS n, change_id FROM cfeed.read(21, 0, :head_far, 10, 0);
SELECT writer_xid_deltas FROM cfeed.stamp
WHERE feed_id = 21 AND shard = 0 AND last_number > :head_far ORDER BY last_number;
-- every entry of every stamp names its change by change_id and writer_xid
-- (its offsets from the row's first change_id and writer)
SELECT count(*) AS entries, count(*) FILTER (WHERE u.dx <> 0) AS other_writers,
	   count(*) FILTER (WHERE NOT EXISTS (
		   SELECT FROM cfeed.change c
		   WHERE c.feed_id = t.feed_id AND c.shard = t.shard AND c.change_id = t.first_change_id + u.dc
			 AND c.writer_xid = ((t.first_writer_xid::text)::bigint + u.dx)::text::xid8)) AS not_found
FROM cfeed.stamp t, ROWS FROM (unnest(t.change_id_deltas), unnest(t.writer_xid_deltas)) AS u(dc, dx);
-- a stamp edited by hand into something no sweep writes is refused by reads
BEGIN;
UPDATE cfeed.stamp SET change_id_deltas = ARRAY[NULL]::int[] WHERE feed_id = 21 AND last_number > :head_far;
SELECT pg_temp.err($$SELECT count(*) FROM cfeed.read(21, 0, NULL, 10000, 0)$$);
ROLLBACK;

-- stamps deleted by hand, or truncated: their numbers are never issued again
-- (the shard's floor keeps the highest, as for deleted changes)
SELECT cfeed.head(21, 0) AS head_before \gset
DELETE FROM cfeed.stamp WHERE feed_id = 21 AND last_number = :head_before;
SELECT cfeed.head(21, 0) = :head_before AS head_kept;
SELECT cfeed.publish(21, 0) IS NOT NULL AS after_delete;
SELECT feed_id, shard, change_count, last_change_sequence_number = :head_before + 1 AS next_number
FROM cfeed.sweep(5) ORDER BY feed_id, shard;
SELECT cfeed.head(21, 0) AS head_before \gset
TRUNCATE cfeed.stamp;
SELECT cfeed.head(21, 0) = :head_before AS head_kept;
SELECT cfeed.publish(21, 0) IS NOT NULL AS after_truncate;
SELECT feed_id, shard, change_count, last_change_sequence_number = :head_before + 1 AS next_number
FROM cfeed.sweep(5) ORDER BY feed_id, shard;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pg_temp.err('TRUNCATE cfeed.stamp');
ROLLBACK;

-- retention deletes a range shard's stamped changes, not another shard's
-- change with the same change_id and writer
SELECT cfeed.drop_group('m', 21);
BEGIN;
SELECT cfeed.publish(21, 0, 888) AS shared_id, cfeed.publish(1, 0, 888) AS same_id_other_feed;
COMMIT;
SELECT feed_id, shard, change_count FROM cfeed.sweep(5) ORDER BY feed_id, shard;
SELECT feed_id, shard, change_count FROM cfeed.sweep(0) ORDER BY feed_id, shard;
SELECT cfeed.publish(21, 0) IS NOT NULL AS newer;
SELECT feed_id, shard, change_count FROM cfeed.sweep(5) ORDER BY feed_id, shard;
UPDATE cfeed.feed SET retention = '1 hour' WHERE feed_id = 21;
UPDATE cfeed.stamp SET stamped_at = stamped_at - interval '2 hours' WHERE feed_id = 21 AND last_number < cfeed.head(21, 0);
SELECT cfeed.apply_retention() > 0 AS deleted;
SELECT count(*) AS feed_21_888 FROM cfeed.read(21, 0, NULL, 1000, 0) WHERE change_id = 888;
SELECT count(*) AS feed_1_888 FROM cfeed.read(1, 0, NULL, 1000, 0) WHERE change_id = 888;
UPDATE cfeed.feed SET retention = NULL WHERE feed_id = 21;

-- an unnumbered change named by a stamp or a mark keeps its keys: no move out
-- of or into a range shard, no new change_id or writer_xid, no move into
-- another group with a mark; a row change may still move within its group
SELECT cfeed.publish(21, 0, 901) AS ranged, cfeed.publish(20, 0, 902) AS rowed, cfeed.publish(3, 0, 903) AS rowed_group_0;
SELECT pg_temp.err($$UPDATE cfeed.change SET shard = 1, feed_id = 20 WHERE change_id = 901$$);
SELECT pg_temp.err($$UPDATE cfeed.change SET change_id = 904 WHERE change_id = 901$$);
SELECT pg_temp.err($$UPDATE cfeed.change SET feed_id = 21 WHERE change_id = 902$$);
SELECT pg_temp.err($$UPDATE cfeed.change SET writer_xid = '3' WHERE change_id = 902$$);
SELECT pg_temp.err($$UPDATE cfeed.change SET feed_id = 20 WHERE change_id = 903$$);
SELECT pg_temp.err($$UPDATE cfeed.change SET feed_id = 22 WHERE change_id = 902$$);
SELECT feed_id, shard, change_count FROM cfeed.sweep(5) ORDER BY feed_id, shard;

-- a transaction that swept (or moved a shard between groups) cannot be
-- prepared: it would hold the group's sweep lock until COMMIT PREPARED
BEGIN;
SELECT count(*) FROM cfeed.sweep(5);
PREPARE TRANSACTION 'swept';
ROLLBACK PREPARED 'swept';
BEGIN;
UPDATE cfeed.shard SET sweep_group = 6 WHERE feed_id = 22;
PREPARE TRANSACTION 'moved';
ROLLBACK PREPARED 'moved';

-- a reshard's children take their parent's storage, whatever the setting
SET cfeed.default_storage = ranges;
SELECT count(*) AS children FROM cfeed.reshard(3, 2);
RESET cfeed.default_storage;
SELECT shard, storage, closed FROM cfeed.shard WHERE feed_id = 3 ORDER BY shard;

-- a feed stored in ranges is resharded as one in rows (the isolation spec
-- reshard_ranges races a writer): its children are stored in ranges
-- whatever the setting; a parent has ended once a sweep stamped its last
-- changes (cfeed.stats: none pending), not before; read/wait at its head
-- then return at once, a cursor at its head has read it to its end, and
-- the key's next changes are numbered on its child, gapless
SET cfeed.default_storage = ranges;
SELECT cfeed.create_feed('ranges-split', 1, feed_id => 30);
RESET cfeed.default_storage;
SELECT count(cfeed.publish(30, 0, i)) FROM generate_series(1, 2) i;
SELECT count(*) FROM cfeed.sweep() WHERE feed_id = 30;
SELECT cfeed.publish(30, 0, 3) IS NOT NULL AS pending_at_split;
SELECT * FROM cfeed.reshard(30, 2) ORDER BY shard;
SELECT shard, parent, closed, ended, storage FROM cfeed.shard WHERE feed_id = 30 ORDER BY shard;
SELECT shard, pending FROM cfeed.stats WHERE feed_id = 30 ORDER BY shard;
SELECT cfeed._read_to_end(30, 0, cfeed.head(30, 0)) AS read_to_end;
SELECT count(*) FROM cfeed.sweep() WHERE feed_id = 30;
SELECT shard, parent, closed, ended FROM cfeed.shard WHERE feed_id = 30 ORDER BY shard;
-- while its group has a mark of another cluster (a restore not yet
-- adopted) the parent has not ended, without an error for the view's
-- readers; ended again once it is gone.  cfeed._shard_ended, any role's to
-- call, answers nothing for a feed the caller may not read
BEGIN;
INSERT INTO cfeed.sweep_mark (sweep_group, next_xid, running, system_identifier)
SELECT 0, '1'::xid8, '{}', system_identifier - 1 FROM pg_control_system();
SELECT shard, ended FROM cfeed.shard WHERE feed_id = 30 ORDER BY shard;
ROLLBACK;
SELECT shard, ended FROM cfeed.shard WHERE feed_id = 30 ORDER BY shard;
CREATE ROLE ranges_reader;
GRANT SELECT ON cfeed.shard TO ranges_reader;
SET ROLE ranges_reader;
SELECT count(*) AS shards_seen, cfeed._shard_ended(30, 0) AS no_grant
FROM cfeed.shard WHERE feed_id = 30;
RESET ROLE;
SELECT cfeed.grant_read(30, 'ranges_reader');
SET ROLE ranges_reader;
SELECT shard, ended, cfeed._shard_ended(30, shard) AS shard_ended
FROM cfeed.shard WHERE feed_id = 30 ORDER BY shard;
SELECT cfeed._shard_ended(30, 9) AS missing;
RESET ROLE;
DROP OWNED BY ranges_reader;
DROP ROLE ranges_reader;
SELECT cfeed._read_to_end(30, 0, cfeed.head(30, 0)) AS read_to_end,
	   cfeed._read_to_end(30, 0, cfeed.head(30, 0) - 1) AS read_to_end_before_head;
SELECT cfeed.head(30, 0) AS head0, clock_timestamp() AS t0 \gset
SELECT count(*) AS read_at_head FROM cfeed.read(30, 0, :head0, 10, 20000);
SELECT count(*) AS rows_at_head FROM cfeed.read_rows(30, 0, :head0, 10, 20000);
SELECT cfeed.wait(30, 0, :head0, 20000) = :head0 AS wait_head;
SELECT clock_timestamp() - :'t0'::timestamptz < interval '5 s' AS returned_at_once;
SELECT cfeed.shard_for(30, 'k') AS child \gset
SELECT count(cfeed.publish(30, :child, i)) FROM generate_series(4, 5) i;
SELECT count(*) FROM cfeed.sweep() WHERE feed_id = 30;
SELECT s.shard, r.change_sequence_number - s.start_sequence_number AS n, r.change_id
FROM cfeed.shard s CROSS JOIN LATERAL cfeed.read(30, s.shard) r
WHERE s.feed_id = 30 ORDER BY s.shard, n;
-- a closed range shard's last change deleted by hand: its stamp still
-- names it, but no reader can read it; a cursor before it has read the
-- shard to its end
DELETE FROM cfeed.change WHERE feed_id = 30 AND shard = 0 AND change_id = 3;
SELECT cfeed._read_to_end(30, 0, cfeed.head(30, 0) - 1) AS read_to_end_deleted_last;

-- a group whose mark was deleted by hand (and committed): its sweeps refuse
-- (55000, above) until cfeed.adopt_marks() makes the mark again from the
-- group's stamps: the stamped changes keep their numbers, the pending one
-- is stamped after them, once
SET cfeed.default_storage = ranges;
SELECT cfeed.create_feed('mark-lost', 1, feed_id => 40, sweep_group => 8);
RESET cfeed.default_storage;
SELECT count(cfeed.publish(40, 0)) FROM generate_series(1, 3);
SELECT change_count FROM cfeed.sweep(8);
DELETE FROM cfeed.sweep_mark WHERE sweep_group = 8;
SELECT cfeed.publish(40, 0) IS NOT NULL AS pending;
SELECT pg_temp.err('SELECT * FROM cfeed.sweep(8)');
-- meanwhile cfeed.stats counts every change of the group's range shards
-- pending, as ended does (which are stamped is unknown), not none
SELECT shard, pending FROM cfeed.stats WHERE feed_id = 40;
SELECT sweep_group, stamps, changes, unstamped_writers > 0 AS some_unstamped FROM cfeed.adopt_marks();
SELECT feed_id, shard, change_count FROM cfeed.sweep(8) ORDER BY feed_id, shard;
SELECT count(*) AS changes, count(DISTINCT id) AS ids, min(n), max(n) FROM pg_temp.numbered(40, 0);

-- read() answers from a range shard's stamps alone while none of them names
-- a deleted change and the read policy shows the reader the changes they
-- name: the same rows as looking each change up.  A stamp names the tables
-- of its changes' row images (image_tables): for a reader the read policy
-- applies to that may not SELECT one of them, that stamp's changes are
-- looked up (and those hidden left out), and so is every change while the
-- operator has a restrictive policy on cfeed.change.
-- shard_config.changes_deleted marks a range shard whose changes were
-- deleted by hand, stamped or pending (a rolled back DELETE not), or
-- cfeed.change truncated; retention takes back the mark its own deletes,
-- with their stamps, made
SET cfeed.default_storage = ranges;
SELECT cfeed.create_feed('from-stamps', 1, feed_id => 41, sweep_group => 9);
SELECT cfeed.create_feed('from-stamps-retained', 1, feed_id => 42, sweep_group => 9);
RESET cfeed.default_storage;
CREATE TABLE public.ranges_hidden (id int PRIMARY KEY);
SELECT cfeed.track('public.ranges_hidden', 41);
SELECT count(cfeed.publish(41, 0, i)) FROM generate_series(1, 3) i;
SELECT change_count FROM cfeed.sweep(9);
INSERT INTO public.ranges_hidden VALUES (1);
SELECT change_count FROM cfeed.sweep(9);
SELECT count(cfeed.publish(41, 0, i)) FROM generate_series(4, 5) i;
SELECT change_count FROM cfeed.sweep(9);
SELECT last_number - first_number + 1 AS changes,
	   image_tables = ARRAY(SELECT table_no FROM cfeed.tracked_table WHERE tbl = 'public.ranges_hidden'::regclass) AS hidden_table,
	   cardinality(image_tables) AS tables
FROM cfeed.stamp WHERE feed_id = 41 ORDER BY last_number;
CREATE ROLE ranges_stamps_reader;
GRANT SELECT ON cfeed.change TO ranges_stamps_reader;
SELECT cfeed.grant_read(41, 'ranges_stamps_reader');
SELECT count(*) AS changes, count(*) FILTER (WHERE change_id <= 5) AS published
FROM cfeed.read(41, 0);
SELECT start_sequence_number AS start41 FROM cfeed.shard WHERE feed_id = 41 \gset
SET ROLE ranges_stamps_reader;
-- the tracked row's change is hidden: numbers 1-3 and 5-6
SELECT change_sequence_number - :start41 AS n, change_id <= 5 AS published
FROM cfeed.read(41, 0) ORDER BY n;
RESET ROLE;
GRANT SELECT ON public.ranges_hidden TO ranges_stamps_reader;
SET ROLE ranges_stamps_reader;
SELECT count(*) AS with_select_on_table FROM cfeed.read(41, 0);
RESET ROLE;
-- a restrictive policy of the operator's holds
BEGIN;
CREATE POLICY ranges_odd ON cfeed.change AS RESTRICTIVE FOR SELECT
	USING (feed_id <> 41 OR change_id % 2 = 1);
SET ROLE ranges_stamps_reader;
SELECT array_agg(change_id ORDER BY change_sequence_number) AS odd_only FROM cfeed.read(41, 0)
WHERE change_id <= 5;
ROLLBACK;
-- deletes: rolled back, by hand, pending, TRUNCATE (rolled back here)
BEGIN;
DELETE FROM cfeed.change WHERE feed_id = 41 AND change_id = 1;
ROLLBACK;
SELECT feed_id, changes_deleted FROM cfeed.shard_config WHERE feed_id = 41;
DELETE FROM cfeed.change WHERE feed_id = 41 AND change_id = 2;
SELECT cfeed.publish(41, 0, 6) AS pending;
DELETE FROM cfeed.change WHERE feed_id = 41 AND change_id = 6;
SELECT change_count FROM cfeed.sweep(9);
SELECT feed_id, changes_deleted FROM cfeed.shard_config WHERE feed_id = 41;
SET ROLE ranges_stamps_reader;
SELECT array_agg(change_id ORDER BY change_sequence_number) FILTER (WHERE change_id <= 6) AS deleted_2,
	   count(*) AS changes
FROM cfeed.read(41, 0);
RESET ROLE;
BEGIN;
TRUNCATE cfeed.change;
SELECT feed_id, changes_deleted FROM cfeed.shard_config WHERE feed_id = 41;
SELECT count(*) AS after_truncate FROM cfeed.read(41, 0);
ROLLBACK;
-- retention on a marked shard leaves the mark
SELECT pg_sleep(0.01);
UPDATE cfeed.feed SET retention = '1 millisecond' WHERE feed_id = 41;
SELECT cfeed.apply_retention() > 0 AS retained;
UPDATE cfeed.feed SET retention = NULL WHERE feed_id = 41;
SELECT feed_id, changes_deleted FROM cfeed.shard_config WHERE feed_id = 41;
-- retention deletes whole stamps with their changes: no mark
SELECT count(cfeed.publish(42, 0, i)) FROM generate_series(1, 3) i;
SELECT change_count FROM cfeed.sweep(9);
SELECT cfeed.publish(42, 0, 4) AS head_change;
SELECT change_count FROM cfeed.sweep(9);
SELECT pg_sleep(0.01);
UPDATE cfeed.feed SET retention = '1 millisecond' WHERE feed_id = 42;
SELECT cfeed.apply_retention() AS deleted;
UPDATE cfeed.feed SET retention = NULL WHERE feed_id = 42;
SELECT feed_id, changes_deleted FROM cfeed.shard_config WHERE feed_id = 42;
SELECT change_id FROM cfeed.read(42, 0);
-- a policy change_read altered by the operator (its rule, or the roles it
-- applies to) is the operator's: read() follows it as a lookup would, not
-- cfeed's own rule
SELECT count(cfeed.publish(42, 0, i)) FROM generate_series(5, 7) i;
SELECT change_count FROM cfeed.sweep(9);
SELECT cfeed.grant_read(42, 'ranges_stamps_reader');
BEGIN;
ALTER POLICY change_read ON cfeed.change
	USING (cfeed._may_read_image(feed_id, tbl) AND change_id % 2 = 1);
SET ROLE ranges_stamps_reader;
SELECT array_agg(change_id ORDER BY change_sequence_number) AS odd_only FROM cfeed.read(42, 0);
ROLLBACK;
BEGIN;
CREATE ROLE ranges_policy_other;
ALTER POLICY change_read ON cfeed.change TO ranges_policy_other;
SET ROLE ranges_stamps_reader;
SELECT count(*) AS policy_not_mine FROM cfeed.read(42, 0);
ROLLBACK;
-- a range shard dropped once its changes were deleted leaves its stamps;
-- a new shard of the same feed_id and number is read with lookups, never
-- from the old shard's stamps (the dropped feed's change_ids)
SET cfeed.default_storage = ranges;
SELECT cfeed.create_feed('from-stamps-dropped', 1, feed_id => 43, sweep_group => 9);
RESET cfeed.default_storage;
SELECT count(cfeed.publish(43, 0, i)) FROM generate_series(1, 3) i;
SELECT change_count FROM cfeed.sweep(9);
DELETE FROM cfeed.change WHERE feed_id = 43;
DELETE FROM cfeed.feed WHERE feed_id = 43;
SELECT count(*) AS stamps_left FROM cfeed.stamp WHERE feed_id = 43;
SET cfeed.default_storage = ranges;
SELECT cfeed.create_feed('from-stamps-again', 1, feed_id => 43, sweep_group => 9);
RESET cfeed.default_storage;
SELECT changes_deleted AS looked_up FROM cfeed.shard_config WHERE feed_id = 43;
SELECT count(*) AS old_changes FROM cfeed.read(43, 0);
DELETE FROM cfeed.stamp WHERE feed_id = 43;
DELETE FROM cfeed.feed WHERE feed_id = 43;
-- a tracked table whose number is negative (an update from 1.7 keeps a
-- table's OID as its number, and an OID above 2^31 is a negative int):
-- its images are named in the stamp, and hidden from a reader without
-- SELECT on it
SET cfeed.default_storage = ranges;
SELECT cfeed.create_feed('from-stamps-negative', 1, feed_id => 44, sweep_group => 9);
RESET cfeed.default_storage;
CREATE TABLE public.ranges_negative (id int PRIMARY KEY);
SELECT cfeed.track('public.ranges_negative', 44);
UPDATE cfeed.tracked_table SET table_no = -7 WHERE tbl = 'public.ranges_negative'::regclass;
INSERT INTO public.ranges_negative VALUES (1);
SELECT change_count FROM cfeed.sweep(9);
SELECT image_tables FROM cfeed.stamp WHERE feed_id = 44;
SELECT cfeed.grant_read(44, 'ranges_stamps_reader');
SET ROLE ranges_stamps_reader;
SELECT count(*) AS negative_hidden FROM cfeed.read(44, 0);
RESET ROLE;
SELECT count(*) AS negative_owner FROM cfeed.read(44, 0);
SELECT cfeed.untrack('public.ranges_negative');
DROP TABLE public.ranges_negative;
SELECT cfeed.untrack('public.ranges_hidden');
DROP TABLE public.ranges_hidden;
DROP OWNED BY ranges_stamps_reader;
DROP ROLE ranges_stamps_reader;

-- cfeed.set_storage moves a feed between storages: a reshard into one child
-- per open shard, stored in the storage given.  Feed 50 is stored in rows,
-- in a group without a mark; each shard has changes stamped and one pending
-- at the move.  The children are stored in ranges and make the group's
-- first mark; every change of the parents and children is numbered once,
-- and each key keeps its order: its shard's child continues it
SELECT cfeed.create_feed('moved', 2, feed_id => 50, sweep_group => 11);
CREATE TEMP TABLE moved_keys (pos serial, k text, change_id bigint);
INSERT INTO moved_keys (k, change_id)
SELECT k, cfeed.publish(50, cfeed.shard_for(50, k)) FROM unnest(ARRAY['a', 'b', 'c', 'd']) k;
SELECT count(*) FROM cfeed.sweep(11);
INSERT INTO moved_keys (k, change_id)
SELECT k, cfeed.publish(50, cfeed.shard_for(50, k)) FROM unnest(ARRAY['a', 'b', 'c', 'd']) k;
SELECT * FROM cfeed.set_storage(50, 'ranges') ORDER BY shard;
SELECT shard, parent, closed, storage FROM cfeed.shard WHERE feed_id = 50 ORDER BY shard;
SELECT count(*) AS marks FROM cfeed.sweep_mark WHERE sweep_group = 11;
SELECT k, cfeed.shard_for(50, k) - 2 = (SELECT shard FROM cfeed.change c WHERE c.change_id = m.change_id) AS child_of_its_shard
FROM moved_keys m WHERE pos <= 4 ORDER BY k;
INSERT INTO moved_keys (k, change_id)
SELECT k, cfeed.publish(50, cfeed.shard_for(50, k)) FROM unnest(ARRAY['a', 'b', 'c', 'd']) k;
SELECT pg_temp.err($$SELECT cfeed.publish(50, 0)$$) AS parent_closed;
SELECT sum(change_count) AS stamped FROM cfeed.sweep(11);
SELECT count(*) FROM cfeed.sweep(11);
-- every shard gapless from its start, each change once; the parents ended
SELECT s.shard, s.storage, s.ended, count(r.*) AS changes,
	   max(r.change_sequence_number) - min(r.change_sequence_number) + 1 = count(r.*) AS gapless,
	   count(DISTINCT r.change_id) = count(r.*) AS once
FROM cfeed.shard s LEFT JOIN LATERAL cfeed.read(50, s.shard, NULL, 1000, 0) r ON true
WHERE s.feed_id = 50 GROUP BY s.shard, s.storage, s.ended ORDER BY s.shard;
-- each key's changes read parent first, then child: in the order written
SELECT m.k, array_agg(m.pos ORDER BY s.shard, r.change_sequence_number) AS read_order
FROM cfeed.shard s, cfeed.read(50, s.shard, NULL, 1000, 0) r, moved_keys m
WHERE s.feed_id = 50 AND m.change_id = r.change_id GROUP BY m.k ORDER BY m.k;
-- already there: nothing is closed or created, and nothing returned
SELECT count(*) AS again FROM cfeed.set_storage(50, 'ranges');
-- a publication of portable cursors (cfeed.change filtered on its number)
-- would send nothing of a range shard: a move into ranges is refused while
-- one exists, and nothing changes
SELECT cfeed.create_feed('portable', 1, feed_id => 51, sweep_group => 11);
SET client_min_messages = error;
CREATE PUBLICATION ranges_portable FOR TABLE cfeed.change WHERE (change_sequence_number IS NOT NULL);
RESET client_min_messages;
SELECT pg_temp.err($$SELECT * FROM cfeed.set_storage(51, 'ranges')$$) AS portable_publication;
SELECT count(*) AS portable_layout FROM cfeed.shard WHERE feed_id = 51;
DROP PUBLICATION ranges_portable;
-- one whose filter sends other feeds only does not count
SET client_min_messages = error;
CREATE PUBLICATION ranges_portable_other FOR TABLE cfeed.change
	WHERE (feed_id = 999 AND change_sequence_number IS NOT NULL);
CREATE PUBLICATION ranges_portable_this FOR TABLE cfeed.change
	WHERE (feed_id IN (51, 52) AND change_sequence_number > 2000000000000000);
RESET client_min_messages;
SELECT pg_temp.err($$SELECT * FROM cfeed.set_storage(51, 'ranges')$$) AS portable_this_feed;
DROP PUBLICATION ranges_portable_this;
SELECT * FROM cfeed.set_storage(51, 'ranges');
DROP PUBLICATION ranges_portable_other;
SELECT count(*) AS shards FROM cfeed.shard WHERE feed_id = 50;
-- a move into rows is refused while a publication sends the feed's stamps
-- (topology A for feeds stored in ranges): one that names cfeed.stamp,
-- whose filter may pass a stamp of the feed (unknown counts), and not one
-- whose filter sends other feeds only
SET client_min_messages = error;
CREATE PUBLICATION ranges_stamps_this FOR TABLE cfeed.stamp WHERE (feed_id = 50 AND shard >= 0);
CREATE PUBLICATION ranges_stamps_other FOR TABLE cfeed.stamp WHERE (feed_id = 999 AND shard >= 0);
RESET client_min_messages;
SELECT pg_temp.err($$SELECT * FROM cfeed.set_storage(50, 'rows', 1000)$$) AS stamps_published;
DROP PUBLICATION ranges_stamps_this;
-- and back to rows: a range shard's children stored in rows
SELECT * FROM cfeed.set_storage(50, 'rows', 1000) ORDER BY shard;
SELECT cfeed.publish(50, 4) IS NOT NULL AS published;
SELECT sum(change_count) AS stamped FROM cfeed.sweep(11);
SELECT shard, parent, closed, ended, storage FROM cfeed.shard WHERE feed_id = 50 ORDER BY shard;
SELECT count(*) AS read_child_in_rows FROM cfeed.read(50, 4);
DROP PUBLICATION ranges_stamps_other;
SELECT count(*) AS numbered_in_its_row FROM cfeed.change
WHERE feed_id = 50 AND shard = 4 AND change_sequence_number IS NOT NULL;
-- what set_storage refuses, as reshard does, and a storage it does not know
SELECT pg_temp.err($$SELECT * FROM cfeed.set_storage(50, 'heap')$$) AS unknown_storage;
SELECT pg_temp.err($$SELECT * FROM cfeed.set_storage(NULL, 'rows')$$) AS null_feed;
SELECT pg_temp.err($$SELECT * FROM cfeed.set_storage(50, NULL)$$) AS null_storage;
SELECT pg_temp.err($$SELECT * FROM cfeed.set_storage(50, 'rows', NULL)$$) AS null_wait;
SELECT pg_temp.err($$SELECT * FROM cfeed.set_storage(50, 'ranges', -1)$$) AS negative_wait;
SELECT pg_temp.err($$SELECT * FROM cfeed.set_storage(99, 'ranges')$$) AS unknown_feed;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pg_temp.err($$SELECT * FROM cfeed.set_storage(50, 'ranges')$$) AS repeatable_read;
ROLLBACK;
BEGIN READ ONLY;
SELECT pg_temp.err($$SELECT * FROM cfeed.set_storage(50, 'ranges')$$) AS read_only;
ROLLBACK;
-- only the extension's owner and superusers, even with EXECUTE granted
CREATE ROLE regress_set_storage;
SET ROLE regress_set_storage;
SELECT pg_temp.err($$SELECT * FROM cfeed.set_storage(50, 'ranges')$$) AS no_execute;
RESET ROLE;
GRANT EXECUTE ON FUNCTION cfeed.set_storage(int, text, int) TO regress_set_storage;
SET ROLE regress_set_storage;
SELECT pg_temp.err($$SELECT * FROM cfeed.set_storage(50, 'ranges')$$) AS granted_execute;
RESET ROLE;
DROP OWNED BY regress_set_storage;
DROP ROLE regress_set_storage;
SELECT count(*) AS shards_after_refusals FROM cfeed.shard WHERE feed_id = 50;
-- a move needs a new shard number for each open shard: past 65,536, 22023
SELECT cfeed.create_feed('many', 32769, feed_id => 52, sweep_group => 11);
SELECT pg_temp.err($$SELECT * FROM cfeed.set_storage(52, 'ranges')$$) AS out_of_shard_numbers;
SELECT count(*) AS shards_unchanged FROM cfeed.shard_config WHERE feed_id = 52;
-- history set back to null is written anew by the updating transaction:
-- in a group with a mark, a range shard's and a row shard's alike, the
-- sweeps look only where the mark points (seen failing: neither numbered)
SET cfeed.default_storage = ranges;
SELECT cfeed.create_feed('history-ranges', 1, feed_id => 60, sweep_group => 20);
RESET cfeed.default_storage;
SELECT cfeed.create_feed('history-rows', 1, feed_id => 61, sweep_group => 20);
INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number)
SELECT f, 0, nextval('cfeed.change_id'), 3 FROM generate_series(60, 61) f;
SELECT count(*) FROM cfeed.sweep(20);
UPDATE cfeed.change SET change_sequence_number = NULL
WHERE feed_id IN (60, 61) AND change_sequence_number = 3;
SELECT feed_id, shard, change_count FROM cfeed.sweep(20) ORDER BY 1, 2;
SELECT f AS feed_id, n FROM generate_series(60, 61) f, pg_temp.numbered(f, 0) ORDER BY 1, 2;
SELECT feed_id, pending FROM cfeed.stats WHERE feed_id IN (60, 61) ORDER BY 1;
-- a change of a range shard cannot be given a number by an UPDATE: stamped
-- or not, its number is its stamp's (0A000; seen failing: a stamped change
-- read twice, at its history number and at its stamp's)
SELECT cfeed.publish(60, 0, 6000) AS stamped_soon;
SELECT feed_id, shard, change_count FROM cfeed.sweep(20) ORDER BY 1, 2;
SELECT cfeed.publish(60, 0, 6001) AS pending;
SELECT pg_temp.err($$UPDATE cfeed.change SET change_sequence_number = 1 WHERE change_id = 6000$$) AS stamped,
	   pg_temp.err($$UPDATE cfeed.change SET change_sequence_number = 2 WHERE change_id = 6001$$) AS pending;
SELECT feed_id, shard, change_count FROM cfeed.sweep(20) ORDER BY 1, 2;
SELECT n, id FROM pg_temp.numbered(60, 0) ORDER BY 1;
