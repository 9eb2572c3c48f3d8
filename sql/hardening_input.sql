-- hardening_input: bad input of every kind for every function (the
-- SQLSTATEs of docs/reference.md): NULLs, extreme numbers, unknown objects,
-- extreme strings, wrong types; none of it writes anything.
\i test/regress_setup.sql
\i test/hardening_setup.sql

-- everything the failing calls below must leave untouched
CREATE TEMP VIEW h_now AS
SELECT (SELECT count(*) FROM cfeed.feed) AS feeds,
       (SELECT count(*) FROM cfeed.shard_config) AS shards,
       (SELECT count(*) FROM cfeed.change) AS changes,
       (SELECT count(*) FROM cfeed.change WHERE change_sequence_number IS NULL) AS pending,
       (SELECT sum(change_sequence_number) FROM cfeed.change) AS numbers,
       (SELECT count(*) FROM cfeed.lease) AS leases,
       (SELECT string_agg(concat_ws(':', group_name, shard, owner, cursor, epoch), ',' ORDER BY shard)
        FROM cfeed.lease) AS lease_rows,
       (SELECT count(*) FROM cfeed.row_image) AS images,
       (SELECT count(*) FROM pg_trigger WHERE tgrelid = 'public.h_plain'::regclass) AS triggers;
CREATE TEMP TABLE h_state AS SELECT * FROM h_now;

-- 22004: NULL in each argument that needs a value, of every function (generated:
-- each call below is valid but for the one NULL)
CREATE TEMP TABLE h_call (fn text, kind text, args text[], nullable int[]);
INSERT INTO h_call VALUES
  ('cfeed.create_feed', 'f', '{''hn'',1,77,0,true,''c''}', '{3,6}'),
  ('cfeed.publish', 'f', '{1,0,1000000000000009}', '{}'),
  ('cfeed.shard_for', 'f', '{1,''k''}', '{}'),
  ('cfeed.sweep', 'f', '{0}', '{}'),
  ('cfeed.sweep_loop', 'p', '{0,0,0,0,"NULL","NULL","NULL"}', '{5,6,7}'),
  ('cfeed.read', 'f', '{1,0,"NULL",10,0}', '{3}'),
  ('cfeed.read_rows', 'f', '{1,0,"NULL",10,0}', '{3}'),
  ('cfeed.wait', 'f', '{1,0,0,0}', '{}'),
  ('cfeed.head', 'f', '{1,0}', '{}'),
  ('cfeed.cursor_at', 'f', '{1,0,now()}', '{}'),
  ('cfeed.channel', 'f', '{1,0}', '{}'),
  ('cfeed.acquire', 'f', '{''g'',1,''o'',1000,"NULL"}', '{5}'),
  ('cfeed.checkpoint', 'f', '{''g'',1,0,''o'',1,2000000000000001}', '{}'),
  ('cfeed.release', 'f', '{''g'',1,''o''}', '{}'),
  ('cfeed.seek', 'f', '{''g'',1,0,2000000000000001}', '{}'),
  ('cfeed.drop_group', 'f', '{''g'',1}', '{}'),
  ('cfeed.fail', 'f', '{''g'',1,0,''o'',1,2000000000000001,''e''}', '{}'),
  ('cfeed.read_group', 'f', '{''g'',1,0,"NULL",10}', '{4}'),
  ('cfeed.set_failure_policy', 'f', '{''g'',1,5,0,60000,false}', '{}'),
  ('cfeed.read_dead_letters', 'f', '{''g'',1,0,"NULL","NULL",10}', '{3,4,5}'),
  ('cfeed.resolve_dead_letter', 'f', '{''g'',1,0,2000000000000001}', '{}'),
  ('cfeed.apply_retention', 'f', '{false}', '{}'),
  ('cfeed.track', 'f', '{''public.h_plain'',1,''id''}', '{3}'),
  ('cfeed.untrack', 'f', '{''public.h_plain''}', '{}'),
  ('cfeed.backfill', 'f', '{''public.h_plain'',1,''id''}', '{3}'),
  ('cfeed.grant_read', 'f', '{1,0}', '{}'),
  ('cfeed.revoke_read', 'f', '{1,0}', '{}'),
  ('cfeed.grant_read_all', 'f', '{0}', '{}'),
  ('cfeed.revoke_read_all', 'f', '{0}', '{}'),
  ('cfeed.grant_write', 'f', '{1,0}', '{}'),
  ('cfeed.revoke_write', 'f', '{1,0}', '{}'),
  ('cfeed.grant_write_all', 'f', '{0}', '{}'),
  ('cfeed.revoke_write_all', 'f', '{0}', '{}'),
  ('cfeed.epoch', 'f', '{}', '{}'),
  ('cfeed.adopt_marks', 'f', '{}', '{}'),
  ('cfeed.resume_cursor', 'f', '{1,0,2000000000000001,0}', '{3}'),
  ('cfeed.reshard', 'f', '{1,2,0}', '{}'),
  ('cfeed.set_storage', 'f', '{1,''ranges'',0}', '{}');
-- every function of the extension (internal ones aside) is in the list
SELECT p.proname FROM pg_proc p
WHERE p.pronamespace = 'cfeed'::regnamespace AND p.proname NOT LIKE '\_%'
  AND 'cfeed.' || p.proname NOT IN (SELECT fn FROM h_call)
ORDER BY 1;
SELECT cmd, pg_temp.err(cmd)
FROM (SELECT CASE kind WHEN 'p' THEN 'CALL ' ELSE 'SELECT * FROM ' END || fn || '('
             || array_to_string(ARRAY(SELECT CASE WHEN j = i THEN 'NULL' ELSE args[j] END
                                      FROM generate_subscripts(args, 1) j ORDER BY j), ', ') || ')' AS cmd,
             fn, i
      FROM h_call, generate_subscripts(args, 1) i
      WHERE i <> ALL (nullable)) c
ORDER BY fn, i;
-- the internal helpers with NULL
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$SELECT cfeed._null_arg(NULL)$$),
  ($$SELECT cfeed._check_feed(NULL)$$),
  ($$SELECT cfeed._apply_retention(NULL)$$),
  ($$SELECT cfeed._apply_retention(10, NULL)$$),
  ($$SELECT cfeed._track_key(NULL, NULL::record)$$),
  ($$SELECT cfeed._retention_held_by(NULL, NULL)$$),
  ($$SELECT cfeed._held_lease(NULL, NULL, NULL, NULL, NULL)$$),
  ($$SELECT cfeed._not_a_dead_letter(NULL, NULL, NULL, NULL)$$)
) AS t(cmd);

-- negative and huge numbers: int max/min, bigint max/min
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$SELECT cfeed.create_feed('hx', -1)$$),
  ($$SELECT cfeed.create_feed('hx', 2147483647)$$),
  ($$SELECT cfeed.create_feed('hx', -2147483648)$$),
  ($$SELECT cfeed.create_feed('hx', 65537)$$),
  ($$SELECT cfeed.publish(-1, 0, 5)$$),
  ($$SELECT cfeed.publish(2147483647, 0, 5)$$),
  ($$SELECT cfeed.publish(-2147483648, 0, 5)$$),
  ($$SELECT cfeed.publish(1, -1, 5)$$),
  ($$SELECT cfeed.publish(1, 2147483647, 5)$$),
  ($$SELECT cfeed.publish(1, -2147483648, 5)$$),
  ($$SELECT cfeed.shard_for(-1, 'k')$$),
  ($$SELECT cfeed.shard_for(2147483647, 'k')$$),
  ($$SELECT * FROM cfeed.read(1, 0, NULL, -1)$$),
  ($$SELECT * FROM cfeed.read(1, 0, NULL, -2147483648)$$),
  ($$SELECT * FROM cfeed.read(1, 0, NULL, 10, -1)$$),
  ($$SELECT * FROM cfeed.read(1, 0, NULL, 10, -2147483648)$$),
  ($$SELECT * FROM cfeed.read(2147483647, 0)$$),
  ($$SELECT * FROM cfeed.read(1, -2147483648)$$),
  ($$SELECT * FROM cfeed.read_rows(1, 0, NULL, -1)$$),
  ($$SELECT * FROM cfeed.read_rows(1, 0, NULL, 10, -1)$$),
  ($$SELECT * FROM cfeed.read_rows(-1, 0)$$),
  ($$SELECT cfeed.wait(1, 0, 0, -1)$$),
  ($$SELECT cfeed.wait(1, 0, 0, -2147483648)$$),
  ($$SELECT cfeed.wait(-1, 0, 0, 0)$$),
  ($$SELECT cfeed.wait(1, 2147483647, 0, 0)$$),
  ($$SELECT cfeed.head(-2147483648, 0)$$),
  ($$SELECT cfeed.head(1, 2147483647)$$),
  ($$SELECT cfeed.cursor_at(-1, 0, now())$$),
  ($$SELECT cfeed.cursor_at(1, -1, now())$$),
  ($$SELECT cfeed.channel(-1, 0)$$),
  ($$SELECT cfeed.channel(1, 2147483647)$$),
  ($$SELECT * FROM cfeed.sweep(-2147483648)$$),
  ($$CALL cfeed.sweep_loop(0, -2147483648, 0, 0, NULL, NULL, NULL)$$),
  ($$CALL cfeed.sweep_loop(0, 0, -2147483648, 0, NULL, NULL, NULL)$$),
  ($$CALL cfeed.sweep_loop(0, 0, 0, -2147483648, NULL, NULL, NULL)$$),
  ($$SELECT * FROM cfeed.acquire('g', 1, 'o', 0)$$),
  ($$SELECT * FROM cfeed.acquire('g', 1, 'o', -2147483648)$$),
  ($$SELECT * FROM cfeed.acquire('g', -1, 'o')$$),
  ($$SELECT * FROM cfeed.acquire('g', 2147483647, 'o')$$),
  ($$SELECT cfeed.checkpoint('g', 1, 0, 'o', 1, 9223372036854775807)$$),
  ($$SELECT cfeed.checkpoint('g', 1, 0, 'o', 1, -9223372036854775808)$$),
  ($$SELECT cfeed.checkpoint('g', 1, 0, 'o', 9223372036854775807, 2000000000000001)$$),
  ($$SELECT cfeed.checkpoint('g', 1, 0, 'o', -9223372036854775808, 2000000000000001)$$),
  ($$SELECT cfeed.checkpoint('g', 1, -1, 'o', 1, 2000000000000001)$$),
  ($$SELECT cfeed.checkpoint('g', 1, 2147483647, 'o', 1, 2000000000000001)$$),
  ($$SELECT cfeed.checkpoint('g', -2147483648, 0, 'o', 1, 2000000000000001)$$),
  ($$SELECT cfeed.seek('g', 1, 0, 9223372036854775807)$$),
  ($$SELECT cfeed.seek('g', 1, -1, 0)$$),
  ($$SELECT cfeed.seek('g', 2147483647, 0, 0)$$),
  ($$SELECT cfeed.release('g', -1, 'o')$$),
  ($$SELECT cfeed.drop_group('g', 2147483647)$$),
  ($$SELECT cfeed._apply_retention(0)$$),
  ($$SELECT cfeed._apply_retention(-2147483648)$$),
  ($$SELECT cfeed.track('public.h_plain', -1)$$),
  ($$SELECT cfeed.track('public.h_plain', 2147483647)$$),
  ($$SELECT cfeed.backfill('public.h_plain', -1)$$),
  ($$SELECT cfeed.backfill('public.h_plain', 2147483647)$$),
  ($$SELECT * FROM cfeed.reshard(-1, 2)$$),
  ($$SELECT * FROM cfeed.reshard(2147483647, 2)$$),
  ($$SELECT * FROM cfeed.reshard(1, 2147483647)$$),
  ($$SELECT * FROM cfeed.reshard(1, -2147483648)$$),
  ($$SELECT * FROM cfeed.reshard(1, 2, -2147483648)$$),
  ($$SELECT * FROM cfeed.set_storage(-1, 'ranges')$$),
  ($$SELECT * FROM cfeed.set_storage(1, '')$$),
  ($$SELECT * FROM cfeed.set_storage(1, repeat('r', 64))$$),
  ($$SELECT * FROM cfeed.set_storage(1, 'RANGES')$$),
  ($$SELECT * FROM cfeed.set_storage(1, 'ranges', -2147483648)$$)
) AS t(cmd);
-- extremes that are valid read and write nothing
SELECT count(*) FROM cfeed.read(1, 0, 9223372036854775807);
SELECT count(*) FROM cfeed.read(1, 0, -9223372036854775808);
SELECT count(*) FROM cfeed.read(1, 0, NULL, 2147483647);
SELECT count(*) FROM cfeed.read(1, 0, 9223372036854775807, 2147483647, 0);
SELECT count(*) FROM cfeed.read_rows(1, 0, -9223372036854775808, 2147483647);
SELECT cfeed.wait(1, 0, -9223372036854775808, 2147483647) = cfeed.head(1, 0) AS wait_returns_at_once;
SELECT cfeed.wait(1, 0, 9223372036854775807, 0) = cfeed.head(1, 0) AS wait_times_out_at_once;
SELECT cfeed.cursor_at(1, 0, 'infinity') = cfeed.head(1, 0) AS future_is_head,
       cfeed.cursor_at(1, 0, '-infinity') AS past_is_start;
SELECT count(*) FROM cfeed.sweep(2147483647);
SELECT cfeed.release('g', 1, 'nobody') AS released, cfeed.drop_group('nope', 1) AS dropped;

-- unknown feeds, shards, groups and leases name the object (42704)
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$SELECT cfeed.checkpoint('nope', 1, 0, 'o', 1, 2000000000000001)$$),
  ($$SELECT cfeed.checkpoint('g', 1, 7, 'o', 1, 2000000000000001)$$),
  ($$SELECT cfeed.checkpoint('g', 99, 0, 'o', 1, 2000000000000001)$$),
  ($$SELECT cfeed.seek('g', 1, 7, 0)$$),
  ($$SELECT cfeed.seek('g', 99, 0, 0)$$),
  ($$SELECT cfeed.release('g', 99, 'o')$$),
  ($$SELECT cfeed.drop_group('g', 99)$$),
  ($$SELECT * FROM cfeed.acquire('g', 99, 'o')$$),
  ($$SELECT * FROM cfeed.read_rows(1, 7)$$),
  ($$SELECT cfeed.track('public.h_plain', 99)$$),
  ($$SELECT cfeed.untrack('public.h_plain')$$),
  ($$SELECT cfeed.backfill('public.h_plain', 1)$$),
  ($$SELECT cfeed._check_feed(99)$$)
) AS t(cmd);
-- leases refused for a wrong owner or epoch (55000)
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$SELECT cfeed.checkpoint('g', 1, 0, 'other', 1, 2000000000000001)$$),
  ($$SELECT cfeed.checkpoint('g', 1, 0, 'o', 2, 2000000000000001)$$),
  ($$SELECT cfeed.checkpoint('g', 1, 0, 'o', 1, 1999999999999999)$$)
) AS t(cmd);

-- extreme strings: 10k characters (repetitive and incompressible), quotes,
-- backslashes, unicode, control characters, empty and blank
CREATE TEMP TABLE h_str (label text, s text);
INSERT INTO h_str VALUES
  ('10k x', repeat('x', 10000)),
  ('10k random', (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 313) i)),
  ('quote', $q$it's "q"$q$),
  ('backslash', E'a\\b\\'),
  ('unicode', 'fëed_日本_🙂'),
  ('newline', E'a\nb'),
  ('empty', ''),
  ('blank', ' ');
SELECT label, length(s),
       pg_temp.err(format('SELECT cfeed.create_feed(%L)', s)) AS create_feed,
       pg_temp.err(format('SELECT cfeed.create_feed(%L, comment => %L)', 'ok_' || length(s), s)) AS long_comment
FROM h_str ORDER BY label;
-- the comment was accepted for each: undo those feeds (they were valid)
DELETE FROM cfeed.feed WHERE name LIKE 'ok\_%';
SELECT label, cfeed.shard_for(1, s) BETWEEN 0 AND 1 AS shard_for_ok FROM h_str ORDER BY label;
SELECT label,
       left(pg_temp.err(format('SELECT cfeed.checkpoint(%L, 1, 0, %L, 1, 2000000000000001)', s, 'o')), 120) AS checkpoint_group,
       left(pg_temp.err(format('SELECT cfeed.checkpoint(%L, 1, 0, %L, 1, 2000000000000001)', 'g', s)), 120) AS checkpoint_owner,
       left(pg_temp.err(format('SELECT cfeed.release(%L, 1, %L)', s, s)), 60) AS release,
       pg_temp.err(format('SELECT cfeed.drop_group(%L, 1)', s)) AS drop_group
FROM h_str ORDER BY label;
-- acquire/seek with such names create leases (valid) or are refused: in a
-- transaction rolled back afterwards
BEGIN;
SELECT label,
       left(pg_temp.err(format('SELECT * FROM cfeed.acquire(%L, 1, %L)', s, 'o')), 100) AS acquire_group,
       left(pg_temp.err(format('SELECT * FROM cfeed.acquire(%L, 1, %L)', 'g2', s)), 100) AS acquire_owner,
       left(pg_temp.err(format('SELECT cfeed.seek(%L, 1, 0, 2000000000000000)', s)), 100) AS seek
FROM h_str ORDER BY label;
ROLLBACK;
-- track and backfill with odd key and order_by strings
SELECT label,
       left(pg_temp.err(format('SELECT cfeed.track(%L, 1, %L)', 'public.h_plain', s)), 100) AS track_key,
       left(pg_temp.err(format('SELECT cfeed.backfill(%L, 1, %L)', 'public.h_plain', s)), 100) AS backfill_order
FROM h_str ORDER BY label;
-- order_by of backfill on a tracked table: odd strings and an injection attempt
BEGIN;
SELECT cfeed.track('public.h_plain', 2);
SELECT label, left(pg_temp.err(format('SELECT cfeed.backfill(%L, 2, %L)', 'public.h_plain', s)), 100) AS backfill_order
FROM h_str ORDER BY label;
SELECT pg_temp.err($$SELECT cfeed.backfill('public.h_plain', 2, 'id; DROP TABLE public.h_plain')$$);
SELECT pg_temp.err($$SELECT cfeed.backfill('public.h_plain', 2, 'id) x; DROP TABLE public.h_plain; --')$$);
SELECT count(*) AS h_plain_still_there FROM public.h_plain;
ROLLBACK;

-- wrong types and casts fail before the function runs; track/untrack/backfill of
-- an OID that is no relation give 42P01
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$SELECT cfeed.publish('x', 0)$$),
  ($$SELECT cfeed.publish(1.5, 0)$$),
  ($$SELECT cfeed.publish(2147483648, 0)$$),
  ($$SELECT cfeed.publish(1, 0, 9223372036854775808)$$),
  ($$SELECT cfeed.publish(1, 0, 'abc')$$),
  ($$SELECT * FROM cfeed.read(1, 0, 'abc')$$),
  ($$SELECT * FROM cfeed.read(1, 0, NULL, 2147483648)$$),
  ($$SELECT cfeed.cursor_at(1, 0, 'not a time')$$),
  ($$SELECT cfeed.cursor_at(1, 0, 5)$$),
  ($$SELECT cfeed.create_feed(42)$$),
  ($$SELECT cfeed.create_feed('hx', longpoll => 'maybe')$$),
  ($$SELECT cfeed.track('no_such_table', 1)$$),
  ($$SELECT cfeed.track(0, 1)$$),
  ($$SELECT cfeed.track(4294967295, 1)$$),
  ($$SELECT cfeed.untrack(0)$$),
  ($$SELECT cfeed.backfill(0, 1)$$),
  ($$SELECT cfeed.untrack('pg_class')$$),
  ($$SELECT cfeed.track('pg_class', 1)$$),
  ($$SELECT cfeed.track('cfeed.change', 1)$$),
  ($$SELECT cfeed.track('cfeed.change_id', 1)$$),
  ($$SELECT * FROM cfeed.acquire('g', 1, 'o', 1000, 'yesterday-ish')$$)
) AS t(cmd);

-- none of the calls above wrote anything
SELECT b.feeds = a.feeds AS feeds, b.shards = a.shards AS shards, b.changes = a.changes AS changes,
       b.pending = a.pending AS pending, b.numbers = a.numbers AS numbers,
       b.leases = a.leases AS leases, b.lease_rows = a.lease_rows AS lease_rows,
       b.images = a.images AS images, b.triggers = a.triggers AS triggers
FROM h_state b, h_now a;
DROP VIEW h_now;
-- and the pending change is stamped normally afterwards
SELECT feed_id, shard, change_count, last_change_sequence_number FROM cfeed.sweep();

DROP EXTENSION cfeed;
DROP TABLE public.h_plain;
