-- dead_letters: failure reports, attempts and backoff, dead letters and
-- their replay in consumer groups; fencing, seek, retention, privileges,
-- errors (docs/consumer-groups.md, "Failures and dead letters").
\i test/regress_setup.sql
GRANT EXECUTE ON FUNCTION pg_temp.err(text) TO PUBLIC;

-- state(group, feed, shard): the lease's cursor (as an offset from the
-- start) and the group's failures and dead letters on the shard
CREATE FUNCTION pg_temp.state(g text, f int, s int) RETURNS TABLE (cursor bigint, failures text, dead text)
LANGUAGE sql AS $$
	SELECT l.cursor - 2000000000000000,
	       (SELECT string_agg(format('%s:%s:%s', x.change_sequence_number - 2000000000000000, x.attempts, x.last_error),
	                          ' ' ORDER BY x.change_sequence_number)
	        FROM cfeed.failed_change x WHERE (x.group_name, x.feed_id, x.shard) = (g, f, s) AND x.dead_lettered_at IS NULL),
	       (SELECT string_agg(format('%s:%s', x.change_sequence_number - 2000000000000000, x.attempts),
	                          ' ' ORDER BY x.change_sequence_number)
	        FROM cfeed.failed_change x WHERE (x.group_name, x.feed_id, x.shard) = (g, f, s) AND x.dead_lettered_at IS NOT NULL)
	FROM cfeed.lease l WHERE (l.group_name, l.feed_id, l.shard) = (g, f, s) $$;
-- page(group, feed, shard): what cfeed.read_group returns after the lease's cursor (offsets:attempts)
CREATE FUNCTION pg_temp.page(g text, f int, s int, n int DEFAULT 1000) RETURNS text LANGUAGE sql AS $$
	SELECT coalesce(string_agg(format('%s:%s', r.change_sequence_number - 2000000000000000, r.attempts), ' '
	                           ORDER BY r.change_sequence_number), '-')
	FROM cfeed.read_group(g, f, s, max_count => n) r $$;
-- due(group, feed): every failure of the group is due for its retry now
CREATE FUNCTION pg_temp.due(g text, f int) RETURNS void LANGUAGE sql AS $$
	UPDATE cfeed.failed_change SET retry_at = now() - interval '1 second'
	WHERE group_name = g AND feed_id = f AND dead_lettered_at IS NULL $$;

SELECT cfeed.create_feed('dl', 2);
SELECT count(cfeed.publish(1, 0)) FROM generate_series(1, 10);
SELECT count(cfeed.publish(1, 1)) FROM generate_series(1, 3);
SELECT feed_id, shard, change_count FROM cfeed.sweep() ORDER BY 1, 2;
SELECT shard, cursor, epoch FROM cfeed.acquire('g', 1, 'a', 600000);

-- the catalogs: dumped, with a primary key (a publication of all tables
-- needs a replica identity), row-level security, nothing for PUBLIC
SELECT c.relname, c.relrowsecurity,
       EXISTS (SELECT FROM pg_extension e, unnest(e.extconfig) x WHERE e.extname = 'cfeed' AND x = c.oid) AS dumped,
       EXISTS (SELECT FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary) AS has_pkey,
       (SELECT count(*) FROM aclexplode(COALESCE(c.relacl, acldefault('r', c.relowner))) a WHERE a.grantee = 0) AS public_grants
FROM pg_class c WHERE c.relnamespace = 'cfeed'::regnamespace
  AND c.relname IN ('failure_policy', 'failed_change', 'dead_letters')
ORDER BY 1;
-- the functions: none STRICT; PUBLIC may execute them (they run as the caller);
-- the trigger that forgets the failures a cursor passes runs as the owner
-- (checkpoint and seek need no privileges on the new tables), PUBLIC may not call it
SELECT p.oid::regprocedure AS function, p.proisstrict, p.provolatile, p.prosecdef,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public_execute
FROM pg_proc p WHERE p.pronamespace = 'cfeed'::regnamespace
  AND p.proname IN ('fail', 'read_group', 'set_failure_policy', 'read_dead_letters', 'resolve_dead_letter',
                    '_held_lease', '_not_a_dead_letter')
ORDER BY 1::text;
SELECT tgname, tgenabled, pg_get_triggerdef(t.oid) AS def,
       p.prosecdef, has_function_privilege('public', p.oid, 'EXECUTE') AS public_execute
FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
WHERE t.tgrelid = 'cfeed.lease'::regclass AND t.tgname = 'lease_passed';

-- without a policy (the default): every failure is counted, the change is
-- retried for ever, at once (no backoff), and never set aside
SELECT pg_temp.page('g', 1, 0, 3);
SELECT attempts, retry_at <= clock_timestamp() AS due_now, dead_letter
FROM cfeed.fail('g', 1, 0, 'a', 1, 2000000000000001, 'boom 1');
SELECT attempts, dead_letter FROM cfeed.fail('g', 1, 0, 'a', 1, 2000000000000001, 'boom 2');
SELECT attempts, dead_letter FROM cfeed.fail('g', 1, 0, 'a', 1, 2000000000000001, 'boom 3');
SELECT attempts, dead_letter FROM cfeed.fail('g', 1, 0, 'a', 1, 2000000000000001, 'boom 4');
SELECT attempts, dead_letter FROM cfeed.fail('g', 1, 0, 'a', 1, 2000000000000001, 'boom 5');
SELECT attempts, dead_letter FROM cfeed.fail('g', 1, 0, 'a', 1, 2000000000000001, 'boom 6');
SELECT * FROM pg_temp.state('g', 1, 0);
-- the failed change is delivered again at the head of the page, with its attempts
SELECT pg_temp.page('g', 1, 0, 3);
-- consumer_lag and groups show it: the change a shard is stuck on, and how often it failed
SELECT shard, failing - 2000000000000000 AS failing, attempts, last_error, dead_letters
FROM cfeed.consumer_lag WHERE group_name = 'g' ORDER BY shard;
SELECT group_name, feed_id, failing, dead_letters FROM cfeed.groups ORDER BY 1, 2;
-- processed at last: the checkpoint passing it forgets the failure
SELECT cfeed.checkpoint('g', 1, 0, 'a', 1, 2000000000000001);
SELECT * FROM pg_temp.state('g', 1, 0);
SELECT shard, failing, attempts, dead_letters FROM cfeed.consumer_lag WHERE group_name = 'g' ORDER BY shard;

-- set_failure_policy: bad arguments, then 2 attempts, 60 s backoff, dead letters
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$SELECT cfeed.set_failure_policy(NULL, 1)$$),
  ($$SELECT cfeed.set_failure_policy('g', NULL)$$),
  ($$SELECT cfeed.set_failure_policy('g', 1, NULL)$$),
  ($$SELECT cfeed.set_failure_policy('g', 1, 2, NULL)$$),
  ($$SELECT cfeed.set_failure_policy('g', 1, 2, 0, NULL)$$),
  ($$SELECT cfeed.set_failure_policy('g', 1, 2, 0, 0, NULL)$$),
  ($$SELECT cfeed.set_failure_policy('', 1)$$),
  ($$SELECT cfeed.set_failure_policy('g', 1, 0)$$),
  ($$SELECT cfeed.set_failure_policy('g', 1, -1)$$),
  ($$SELECT cfeed.set_failure_policy('g', 1, 2, -1)$$),
  ($$SELECT cfeed.set_failure_policy('g', 1, 2, 1000, 999)$$),
  ($$SELECT cfeed.set_failure_policy('g', 99)$$),
  ($$SELECT cfeed.set_failure_policy('g', -2147483648)$$),
  ($$SELECT cfeed.set_failure_policy(repeat('g', 201), 1)$$)
) AS t(cmd);
SELECT cfeed.set_failure_policy(repeat('g', 200), 1, 2) IS NOT NULL AS two_hundred_is_fine;
DELETE FROM cfeed.failure_policy WHERE group_name = repeat('g', 200);
SELECT cfeed.set_failure_policy('g', 1, max_attempts => 2, backoff_ms => 60000, max_backoff_ms => 600000,
                                dead_letter => true);
SELECT group_name, feed_id, max_attempts, backoff_ms, max_backoff_ms, dead_letter FROM cfeed.failure_policy;

-- backoff: after a failure the shard waits (read_group returns nothing) until retry_at
SELECT attempts, round(extract(epoch FROM retry_at - clock_timestamp())) AS retry_in_s, dead_letter
FROM cfeed.fail('g', 1, 0, 'a', 1, 2000000000000002, 'bad row');
SELECT pg_temp.page('g', 1, 0);
SELECT shard, failing - 2000000000000000 AS failing, attempts, last_error,
       round(extract(epoch FROM retry_at - clock_timestamp())) AS retry_in_s
FROM cfeed.consumer_lag WHERE group_name = 'g' AND shard = 0;
-- the other shard is not held up
SELECT pg_temp.page('g', 1, 1);
-- once due, it is delivered first in a page; the second failure is its last:
-- set aside as a dead letter, the cursor moves past it in the same call
SELECT pg_temp.due('g', 1);
SELECT pg_temp.page('g', 1, 0, 3);
SELECT attempts, retry_at, dead_letter FROM cfeed.fail('g', 1, 0, 'a', 1, 2000000000000002, 'bad row again');
SELECT * FROM pg_temp.state('g', 1, 0);
-- the dead letters view
SELECT group_name, feed_id, shard, change_sequence_number - 2000000000000000 AS n,
       change_id = (SELECT change_id FROM cfeed.change WHERE feed_id = 1 AND shard = 0
                    AND change_sequence_number = 2000000000000002) AS change_id_ok,
       attempts, last_error, dead_lettered_at IS NOT NULL AS dead_lettered
FROM cfeed.dead_letters ORDER BY 1, 2, 3, 4;
SELECT shard, dead_letters FROM cfeed.consumer_lag WHERE group_name = 'g' ORDER BY shard;
SELECT group_name, feed_id, failing, dead_letters FROM cfeed.groups ORDER BY 1, 2;
SELECT pg_temp.page('g', 1, 0, 2);

-- a failure is reported after ROLLBACK TO SAVEPOINT in the failed
-- transaction: the changes before it are checkpointed first, in the same commit
CREATE TEMP TABLE dl_done (change_id bigint PRIMARY KEY, n bigint);
BEGIN;
INSERT INTO dl_done SELECT change_id, change_sequence_number FROM cfeed.read_group('g', 1, 0, max_count => 1);
SAVEPOINT c;
INSERT INTO dl_done VALUES (0, 0);
INSERT INTO dl_done VALUES (0, 0);	-- the processing of change 4 fails
ROLLBACK TO SAVEPOINT c;
SELECT cfeed.checkpoint('g', 1, 0, 'a', 1, 2000000000000003);
SELECT attempts, dead_letter FROM cfeed.fail('g', 1, 0, 'a', 1, 2000000000000004, 'duplicate key');
COMMIT;
SELECT * FROM pg_temp.state('g', 1, 0);
SELECT n - 2000000000000000 AS processed FROM dl_done ORDER BY n;
-- a failure reported in a new transaction, after rolling a whole page back
-- (changes 4..7, change 6 fails): the page is cut before the failed change
-- even once it is due, so the changes before it are processed first
SELECT pg_temp.due('g', 1);
SELECT pg_temp.page('g', 1, 0, 4);
SELECT attempts, dead_letter FROM cfeed.fail('g', 1, 0, 'a', 1, 2000000000000006, 'page failed');
SELECT pg_temp.due('g', 1);
SELECT pg_temp.page('g', 1, 0, 4);
-- change 4 succeeds this time; change 6, at its last attempt but with change 5
-- unprocessed before it, is not set aside yet
SELECT cfeed.checkpoint('g', 1, 0, 'a', 1, 2000000000000004);
SELECT attempts, retry_at IS NOT NULL AS retries, dead_letter
FROM cfeed.fail('g', 1, 0, 'a', 1, 2000000000000006, 'page failed again');
SELECT * FROM pg_temp.state('g', 1, 0);
SELECT pg_temp.due('g', 1);
SELECT pg_temp.page('g', 1, 0, 4);
SELECT cfeed.checkpoint('g', 1, 0, 'a', 1, 2000000000000005);
SELECT pg_temp.page('g', 1, 0, 4);
SELECT attempts, dead_letter FROM cfeed.fail('g', 1, 0, 'a', 1, 2000000000000006, 'page failed at last');
SELECT * FROM pg_temp.state('g', 1, 0);

-- never both, never neither: a dead letter and the cursor move roll back together
BEGIN;
SELECT attempts, dead_letter FROM cfeed.fail('g', 1, 0, 'a', 1, 2000000000000007, 'x');
SELECT cfeed.set_failure_policy('g', 1, max_attempts => 1, dead_letter => true);
SELECT attempts, dead_letter FROM cfeed.fail('g', 1, 0, 'a', 1, 2000000000000007, 'x');
SELECT * FROM pg_temp.state('g', 1, 0);
ROLLBACK;
SELECT * FROM pg_temp.state('g', 1, 0);
-- several dead letters in a row: each is the next change once those before it are set aside
SELECT cfeed.set_failure_policy('g', 1, max_attempts => 1, dead_letter => true);
SELECT attempts, dead_letter FROM cfeed.fail('g', 1, 0, 'a', 1, 2000000000000007, 'seven');
SELECT attempts, dead_letter FROM cfeed.fail('g', 1, 0, 'a', 1, 2000000000000008, 'eight');
SELECT * FROM pg_temp.state('g', 1, 0);

-- refused reports: null arguments (22004), unknown feed, shard, lease or
-- change (42704), fencing (55000), numbers at or before the cursor (55000)
-- or beyond the head (22023)
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$SELECT * FROM cfeed.fail(NULL, 1, 0, 'a', 1, 2000000000000009, 'e')$$),
  ($$SELECT * FROM cfeed.fail('g', NULL, 0, 'a', 1, 2000000000000009, 'e')$$),
  ($$SELECT * FROM cfeed.fail('g', 1, NULL, 'a', 1, 2000000000000009, 'e')$$),
  ($$SELECT * FROM cfeed.fail('g', 1, 0, NULL, 1, 2000000000000009, 'e')$$),
  ($$SELECT * FROM cfeed.fail('g', 1, 0, 'a', NULL, 2000000000000009, 'e')$$),
  ($$SELECT * FROM cfeed.fail('g', 1, 0, 'a', 1, NULL, 'e')$$),
  ($$SELECT * FROM cfeed.fail('g', 1, 0, 'a', 1, 2000000000000009, NULL)$$),
  ($$SELECT * FROM cfeed.fail('g', 99, 0, 'a', 1, 2000000000000009, 'e')$$),
  ($$SELECT * FROM cfeed.fail('g', 1, 7, 'a', 1, 2000000000000009, 'e')$$),
  ($$SELECT * FROM cfeed.fail('nope', 1, 0, 'a', 1, 2000000000000009, 'e')$$),
  ($$SELECT * FROM cfeed.fail('g', 1, 0, 'b', 1, 2000000000000009, 'e')$$),
  ($$SELECT * FROM cfeed.fail('g', 1, 0, 'a', 2, 2000000000000009, 'e')$$),
  ($$SELECT * FROM cfeed.fail('g', 1, 0, 'a', 1, 2000000000000008, 'e')$$),
  ($$SELECT * FROM cfeed.fail('g', 1, 0, 'a', 1, 2000000000000001, 'e')$$),
  ($$SELECT * FROM cfeed.fail('g', 1, 0, 'a', 1, 2000000000000011, 'e')$$),
  ($$SELECT * FROM cfeed.fail('g', 1, 0, 'a', 1, 9223372036854775807, 'e')$$),
  ($$SELECT * FROM cfeed.fail('g', 1, 0, 'a', 1, -9223372036854775808, 'e')$$)
) AS t(cmd);
-- a change removed from the shard (as retention does) cannot be reported
DELETE FROM cfeed.change WHERE feed_id = 1 AND shard = 0 AND change_sequence_number = 2000000000000009;
SELECT pg_temp.err($$SELECT * FROM cfeed.fail('g', 1, 0, 'a', 1, 2000000000000009, 'e')$$);
-- an expired lease is fenced too
SELECT count(*) FROM cfeed.acquire('g', 1, 'a', ttl_ms => 1);
SELECT pg_sleep(0.05);
SELECT pg_temp.err($$SELECT * FROM cfeed.fail('g', 1, 0, 'a', 1, 2000000000000010, 'e')$$);
SELECT shard, cursor - 2000000000000000 AS cursor, epoch FROM cfeed.acquire('g', 1, 'a', 600000);
-- nothing above changed the group's state
SELECT * FROM pg_temp.state('g', 1, 0);

-- read_group: bad arguments
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$SELECT * FROM cfeed.read_group(NULL, 1, 0)$$),
  ($$SELECT * FROM cfeed.read_group('g', NULL, 0)$$),
  ($$SELECT * FROM cfeed.read_group('g', 1, NULL)$$),
  ($$SELECT * FROM cfeed.read_group('g', 1, 0, NULL, NULL)$$),
  ($$SELECT * FROM cfeed.read_group('g', 1, 0, NULL, -1)$$),
  ($$SELECT * FROM cfeed.read_group('g', 99, 0)$$),
  ($$SELECT * FROM cfeed.read_group('g', 1, 7)$$),
  ($$SELECT * FROM cfeed.read_group('nope', 1, 0)$$),
  ($$SELECT count(*) FROM cfeed.read_group('g', 1, 0, max_count => 0)$$)
) AS t(cmd);
-- read_group with an explicit cursor leaves the group's dead letters out
SELECT string_agg((change_sequence_number - 2000000000000000)::text, ' ' ORDER BY change_sequence_number)
FROM cfeed.read_group('g', 1, 0, 2000000000000000);

-- seek back over dead letters: they stay dead letters and are not delivered again
SELECT cfeed.seek('g', 1, 0, 2000000000000001) AS epoch;
SELECT pg_temp.page('g', 1, 0);
SELECT * FROM pg_temp.state('g', 1, 0);
SELECT shard, cursor - 2000000000000000 AS cursor, epoch FROM cfeed.acquire('g', 1, 'a', 600000) WHERE shard = 0;
-- a dead letter above the cursor cannot be reported nor resolved yet
SELECT pg_temp.err($$SELECT * FROM cfeed.fail('g', 1, 0, 'a', 2, 2000000000000002, 'e')$$);
SELECT pg_temp.err($$SELECT cfeed.resolve_dead_letter('g', 1, 0, 2000000000000002)$$);
-- a failure of a change the seek goes back before keeps its attempts; one it skips is forgotten
SELECT cfeed.set_failure_policy('g', 1, max_attempts => 3, dead_letter => true);
SELECT attempts, dead_letter FROM cfeed.fail('g', 1, 0, 'a', 2, 2000000000000003, 'three');
SELECT cfeed.seek('g', 1, 0, 2000000000000001) AS epoch;
SELECT * FROM pg_temp.state('g', 1, 0);
SELECT cfeed.seek('g', 1, 0, 2000000000000008) AS epoch;
SELECT * FROM pg_temp.state('g', 1, 0);
SELECT shard, cursor - 2000000000000000 AS cursor, epoch FROM cfeed.acquire('g', 1, 'a', 600000) WHERE shard = 0;

-- replay: read_dead_letters in order (all, one shard, a range, one change)
SELECT shard, change_sequence_number - 2000000000000000 AS n, attempts, last_error
FROM cfeed.read_dead_letters('g', 1);
SELECT count(*) FROM cfeed.read_dead_letters('g', 1, 1);
SELECT string_agg((change_sequence_number - 2000000000000000)::text, ' ' ORDER BY change_sequence_number)
FROM cfeed.read_dead_letters('g', 1, 0, 2000000000000004, 2000000000000007);
SELECT string_agg((change_sequence_number - 2000000000000000)::text, ' ' ORDER BY change_sequence_number)
FROM cfeed.read_dead_letters('g', 1, 0, 2000000000000006, 2000000000000006);
SELECT string_agg((change_sequence_number - 2000000000000000)::text, ' ' ORDER BY change_sequence_number)
FROM cfeed.read_dead_letters('g', 1, max_count => 2);
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$SELECT * FROM cfeed.read_dead_letters(NULL, 1)$$),
  ($$SELECT * FROM cfeed.read_dead_letters('g', NULL)$$),
  ($$SELECT * FROM cfeed.read_dead_letters('g', 1, 0, NULL, NULL, NULL)$$),
  ($$SELECT * FROM cfeed.read_dead_letters('g', 1, 0, NULL, NULL, -1)$$),
  ($$SELECT * FROM cfeed.read_dead_letters('g', 1, NULL, 2000000000000001)$$),
  ($$SELECT * FROM cfeed.read_dead_letters('g', 1, 0, 2000000000000005, 2000000000000004)$$),
  ($$SELECT * FROM cfeed.read_dead_letters('g', 99)$$),
  ($$SELECT * FROM cfeed.read_dead_letters('g', 1, 7)$$),
  ($$SELECT * FROM cfeed.read_dead_letters('nope', 1)$$)
) AS t(cmd);
-- resolve: in order, once; a dead letter replayed and resolved in one transaction is processed once
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$SELECT cfeed.resolve_dead_letter(NULL, 1, 0, 2000000000000002)$$),
  ($$SELECT cfeed.resolve_dead_letter('g', NULL, 0, 2000000000000002)$$),
  ($$SELECT cfeed.resolve_dead_letter('g', 1, NULL, 2000000000000002)$$),
  ($$SELECT cfeed.resolve_dead_letter('g', 1, 0, NULL)$$),
  ($$SELECT cfeed.resolve_dead_letter('g', 99, 0, 2000000000000002)$$),
  ($$SELECT cfeed.resolve_dead_letter('g', 1, 7, 2000000000000002)$$),
  ($$SELECT cfeed.resolve_dead_letter('g', 1, 0, 2000000000000003)$$),
  ($$SELECT cfeed.resolve_dead_letter('nope', 1, 0, 2000000000000002)$$),
  ($$SELECT cfeed.resolve_dead_letter('g', 1, 0, 2000000000000006)$$)
) AS t(cmd);
BEGIN;
INSERT INTO dl_done SELECT change_id, change_sequence_number FROM cfeed.read_dead_letters('g', 1, 0, max_count => 1);
SELECT cfeed.resolve_dead_letter('g', 1, 0, 2000000000000002);
COMMIT;
SELECT pg_temp.err($$SELECT cfeed.resolve_dead_letter('g', 1, 0, 2000000000000002)$$);
-- the rest, in order
DO $$
DECLARE r record;
BEGIN
	FOR r IN SELECT * FROM cfeed.read_dead_letters('g', 1) LOOP
		INSERT INTO dl_done VALUES (r.change_id, r.change_sequence_number);
		PERFORM cfeed.resolve_dead_letter(r.group_name, r.feed_id, r.shard, r.change_sequence_number);
	END LOOP;
END $$;
SELECT n - 2000000000000000 AS processed FROM dl_done ORDER BY n;
SELECT count(*) AS dead_letters FROM cfeed.dead_letters;

-- retention never deletes a dead letter (nor what follows it), even told to ignore leases
SELECT cfeed.set_failure_policy('r', 1, max_attempts => 1, dead_letter => true);
SELECT count(*) FROM cfeed.acquire('r', 1, 'a', 600000);
SELECT cfeed.checkpoint('r', 1, 1, 'a', 1, 2000000000000001);
SELECT attempts, dead_letter FROM cfeed.fail('r', 1, 1, 'a', 1, 2000000000000002, 'kept');
SELECT cfeed.checkpoint('r', 1, 1, 'a', 1, 2000000000000003);
SELECT cfeed.checkpoint('g', 1, 1, 'a', 1, 2000000000000003);
UPDATE cfeed.feed SET retention = interval '10 milliseconds' WHERE feed_id = 1;
SELECT pg_sleep(0.05);
SELECT shard, retention_held_by FROM cfeed.stats WHERE feed_id = 1 ORDER BY shard;
SELECT cfeed.apply_retention(ignore_leases => true) > 0 AS deleted;
SELECT shard, string_agg((change_sequence_number - 2000000000000000)::text, ' ' ORDER BY change_sequence_number)
FROM cfeed.change WHERE feed_id = 1 GROUP BY shard ORDER BY shard;
-- once resolved, retention goes on
SELECT cfeed.resolve_dead_letter('r', 1, 1, 2000000000000002);
SELECT cfeed.apply_retention() > 0 AS deleted;
SELECT shard, string_agg((change_sequence_number - 2000000000000000)::text, ' ' ORDER BY change_sequence_number)
FROM cfeed.change WHERE feed_id = 1 AND shard = 1 GROUP BY shard;
UPDATE cfeed.feed SET retention = NULL WHERE feed_id = 1;

-- without dead letters, a change is retried for ever after its last attempt,
-- with the longest backoff (max_backoff_ms), not one doubling further;
-- none when backoff_ms is 0
SELECT cfeed.set_failure_policy('bo', 1, max_attempts => 2, backoff_ms => 1000, max_backoff_ms => 60000);
SELECT count(*) FROM cfeed.acquire('bo', 1, 'a', 600000);
SELECT attempts, round(extract(epoch FROM retry_at - clock_timestamp())) AS retry_in_s, dead_letter
FROM cfeed.fail('bo', 1, 0, 'a', 1, (SELECT cursor + 1 FROM cfeed.lease WHERE group_name = 'bo' AND shard = 0), 'e');
SELECT pg_temp.due('bo', 1);
SELECT attempts, round(extract(epoch FROM retry_at - clock_timestamp())) AS retry_in_s, dead_letter
FROM cfeed.fail('bo', 1, 0, 'a', 1, (SELECT cursor + 1 FROM cfeed.lease WHERE group_name = 'bo' AND shard = 0), 'e');
SELECT pg_temp.due('bo', 1);
SELECT attempts, round(extract(epoch FROM retry_at - clock_timestamp())) AS retry_in_s, dead_letter
FROM cfeed.fail('bo', 1, 0, 'a', 1, (SELECT cursor + 1 FROM cfeed.lease WHERE group_name = 'bo' AND shard = 0), 'e');
SELECT pg_temp.due('bo', 1);
SELECT attempts, round(extract(epoch FROM retry_at - clock_timestamp())) AS retry_in_s, dead_letter
FROM cfeed.fail('bo', 1, 0, 'a', 1, (SELECT cursor + 1 FROM cfeed.lease WHERE group_name = 'bo' AND shard = 0), 'e');
SELECT cfeed.set_failure_policy('bo', 1, max_attempts => 2);
SELECT attempts, round(extract(epoch FROM retry_at - clock_timestamp())) AS retry_in_s, dead_letter
FROM cfeed.fail('bo', 1, 0, 'a', 1, (SELECT cursor + 1 FROM cfeed.lease WHERE group_name = 'bo' AND shard = 0), 'e');
SELECT cfeed.drop_group('bo', 1);

-- drop_group deletes the group's failures and dead letters with its leases; the policy stays
SELECT cfeed.set_failure_policy('d', 1);
SELECT shard, cursor - 2000000000000000 AS cursor FROM cfeed.acquire('d', 1, 'a', 600000) ORDER BY shard;
SELECT attempts, dead_letter FROM cfeed.fail('d', 1, 0, 'a', 1, 2000000000000010, 'gone');
SELECT count(*) FROM cfeed.failed_change WHERE group_name = 'd';
SELECT cfeed.drop_group('d', 1);
SELECT count(*) FROM cfeed.failed_change WHERE group_name = 'd';
SELECT count(*) FROM cfeed.failure_policy WHERE group_name = 'd';

-- privileges: the roles have exactly the grants docs/security.md lists.
-- A consumer: reader + SELECT, INSERT, UPDATE on cfeed.lease (checkpoints
-- as before 1.8, and fail() needs no more; since 1.9 no SELECT on
-- cfeed.feed, which showed every feed's name), then
-- SELECT on cfeed.failed_change for read_group.  A dead-letter operator:
-- reader + SELECT on cfeed.feed and cfeed.lease, SELECT, DELETE on
-- cfeed.failed_change, SELECT, INSERT, UPDATE on cfeed.failure_policy,
-- SELECT on cfeed.dead_letters.  A role without a read grant learns
-- nothing (42501).
CREATE ROLE dl_consumer;
CREATE ROLE dl_operator;
CREATE ROLE dl_stranger;
GRANT SELECT ON cfeed.change, cfeed.shard TO dl_consumer, dl_operator, dl_stranger;
GRANT SELECT ON cfeed.feed TO dl_operator, dl_stranger;
GRANT SELECT, INSERT, UPDATE ON cfeed.lease TO dl_consumer, dl_stranger;
GRANT SELECT ON cfeed.lease TO dl_operator;
GRANT SELECT, DELETE ON cfeed.failed_change TO dl_operator, dl_stranger;
GRANT SELECT, INSERT, UPDATE ON cfeed.failure_policy TO dl_operator, dl_stranger;
GRANT SELECT ON cfeed.dead_letters TO dl_operator;
SELECT cfeed.grant_read(1, 'dl_consumer'), cfeed.grant_read(1, 'dl_operator');
SELECT count(cfeed.publish(1, 0)) FROM generate_series(1, 3);
SELECT count(*) FROM cfeed.sweep();
SELECT cfeed.set_failure_policy('g', 1, max_attempts => 1, dead_letter => true);
SELECT cfeed.release('g', 1, 'a');
SET ROLE dl_consumer;
SELECT shard, cursor - 2000000000000000 AS cursor, epoch FROM cfeed.acquire('g', 1, 'c', 600000) ORDER BY shard;
SELECT pg_temp.err($$SELECT count(*) FROM cfeed.feed$$) AS feeds_not_shown,
	   pg_temp.err($$SELECT * FROM cfeed.acquire('g', 99, 'c')$$) AS missing_feed;
-- its own feed by name all the same (cfeed._feed_id, for cfeed tail --feed
-- NAME), and null for a name no feed has; so for a role that may not read
-- the feed: the same answer whether it exists or not
SELECT cfeed._feed_id('dl') AS own_feed, cfeed._feed_id('no-such-feed') AS missing_name;
RESET ROLE;
SET ROLE dl_stranger;
SELECT cfeed._feed_id('dl') AS not_granted, cfeed._feed_id('no-such-feed') AS missing_name;
RESET ROLE;
SET ROLE dl_consumer;
-- a lease of a shard that does not exist is refused (23503), also with
-- check_function_bodies off, as a restore sets it: only a session user with
-- the owner's privileges restores rows whose references come later
RESET ROLE;
SET SESSION AUTHORIZATION dl_consumer;
SET check_function_bodies = off;
SELECT pg_temp.err($$INSERT INTO cfeed.lease (group_name, feed_id, shard, cursor, epoch) VALUES ('g', 1, 77, 0, 0)$$)
	AS orphan_lease;
RESET check_function_bodies;
RESET SESSION AUTHORIZATION;
SET ROLE dl_consumer;
SELECT pg_temp.err($$SELECT cfeed.checkpoint('g', 1, 0, 'c', 5, 2000000000000010)$$);
-- read_group needs SELECT on cfeed.failed_change
SELECT pg_temp.err($$SELECT * FROM cfeed.read_group('g', 1, 0)$$);
RESET ROLE;
GRANT SELECT ON cfeed.failed_change TO dl_consumer;
SET ROLE dl_consumer;
SELECT pg_temp.page('g', 1, 0);
-- fail needs no privilege on cfeed.failed_change or cfeed.failure_policy
SELECT attempts, dead_letter FROM cfeed.fail('g', 1, 0, 'c', 5, 2000000000000011, 'e');
SELECT pg_temp.page('g', 1, 0);
SELECT count(*) FROM cfeed.read_dead_letters('g', 1);
-- ... and cannot write the table itself: no dead letter is erased (the
-- cursor moving on would then delete it), forged or pushed away
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$UPDATE cfeed.failed_change SET dead_lettered_at = NULL, retry_at = now() WHERE feed_id = 1$$),
  ($$UPDATE cfeed.failed_change SET retry_at = now() + interval '1 year' WHERE feed_id = 1$$),
  ($$DELETE FROM cfeed.failed_change WHERE feed_id = 1$$),
  ($$INSERT INTO cfeed.failed_change SELECT group_name, feed_id, shard, change_sequence_number + 1, change_id,
         attempts, last_error, first_failed_at, failed_at, retry_at, dead_lettered_at
     FROM cfeed.failed_change WHERE feed_id = 1$$),
  ($$SELECT * FROM cfeed._fail('g', 1, 0, 'c', 5, 2000000000000012, 'e', 0)$$),
  ($$SELECT cfeed._resolve_dead_letter('g', 1, 0, 2000000000000011)$$),
  ($$SELECT cfeed.resolve_dead_letter('g', 1, 0, 2000000000000011)$$),
  ($$SELECT cfeed.set_failure_policy('g', 1)$$)
) AS t(cmd);
SELECT cfeed.checkpoint('g', 1, 0, 'c', 5, 2000000000000012);
SELECT * FROM pg_temp.state('g', 1, 0);
SET ROLE dl_operator;
SELECT change_sequence_number - 2000000000000000 AS n, attempts FROM cfeed.read_dead_letters('g', 1);
SELECT count(*) FROM cfeed.dead_letters;
SELECT cfeed.resolve_dead_letter('g', 1, 0, 2000000000000011);
SELECT cfeed.set_failure_policy('g', 1, max_attempts => 2, dead_letter => true);
SELECT cfeed.set_failure_policy('g', 1, max_attempts => 2, dead_letter => true);
SET ROLE dl_stranger;
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$SELECT * FROM cfeed.fail('g', 1, 0, 'c', 5, 2000000000000013, 'e')$$),
  ($$SELECT * FROM cfeed.read_group('g', 1, 0)$$),
  ($$SELECT * FROM cfeed.read_dead_letters('g', 1)$$),
  ($$SELECT cfeed.resolve_dead_letter('g', 1, 0, 2000000000000011)$$),
  ($$SELECT cfeed.set_failure_policy('g', 1)$$),
  ($$SELECT count(*) FROM cfeed.dead_letters$$)
) AS t(cmd);
RESET ROLE;
-- the view shows only the feeds one may read
GRANT SELECT ON cfeed.dead_letters TO dl_consumer, dl_stranger;
SELECT attempts, dead_letter FROM cfeed.fail('g', 1, 0, 'c', 5, 2000000000000013, 'e');
SELECT attempts, dead_letter FROM cfeed.fail('g', 1, 0, 'c', 5, 2000000000000013, 'e');
SET ROLE dl_consumer;
SELECT count(*) FROM cfeed.dead_letters;
SET ROLE dl_stranger;
SELECT count(*) FROM cfeed.dead_letters;
RESET ROLE;
DROP OWNED BY dl_consumer, dl_operator, dl_stranger;
DROP ROLE dl_consumer, dl_operator, dl_stranger;

-- a cursor that moves forward onto the change before dead letters moves
-- over them: a dead letter at the end of a shard, left after the cursor by
-- a seek back, is passed by the next checkpoint and can then be resolved
SELECT cfeed.head(1, 0) AS head \gset
SELECT count(*) > 0 AS acquired FROM cfeed.acquire('h', 1, 'a', 600000);
SELECT epoch AS h_epoch FROM cfeed.lease WHERE group_name = 'h' AND feed_id = 1 AND shard = 0 \gset
SELECT cfeed.set_failure_policy('h', 1, max_attempts => 1, dead_letter => true);
SELECT cfeed.checkpoint('h', 1, 0, 'a', :h_epoch, :head - 1);
SELECT dead_letter FROM cfeed.fail('h', 1, 0, 'a', :h_epoch, :head, 'last');
SELECT cfeed.seek('h', 1, 0, :head - 2) > 0 AS sought;
SELECT epoch AS h_epoch FROM cfeed.lease WHERE group_name = 'h' AND feed_id = 1 AND shard = 0 \gset
SELECT count(*) FROM cfeed.acquire('h', 1, 'a', 600000) WHERE shard = 0;
SELECT change_sequence_number - :head AS n FROM cfeed.read_group('h', 1, 0);
SELECT cursor - :head AS cursor FROM cfeed.lease WHERE group_name = 'h' AND feed_id = 1 AND shard = 0;
SELECT cfeed.checkpoint('h', 1, 0, 'a', :h_epoch, :head - 1);
SELECT cursor - :head AS cursor FROM cfeed.lease WHERE group_name = 'h' AND feed_id = 1 AND shard = 0;
-- a seek back onto the change right before dead letters that end the
-- shard moves over them (no member would be given anything to checkpoint:
-- until 1.9 the cursor stayed there); one onto the change before a change
-- to process again stays where it was put
SELECT cfeed.seek('h', 1, 0, :head - 1) > 0 AS sought;
SELECT cursor - :head AS cursor FROM cfeed.lease WHERE group_name = 'h' AND feed_id = 1 AND shard = 0;
SELECT cfeed.seek('h', 1, 0, :head - 2) > 0 AS sought;
SELECT cursor - :head AS cursor FROM cfeed.lease WHERE group_name = 'h' AND feed_id = 1 AND shard = 0;
SELECT cfeed.seek('h', 1, 0, :head - 1) > 0 AS sought;
SELECT epoch AS h_epoch FROM cfeed.lease WHERE group_name = 'h' AND feed_id = 1 AND shard = 0 \gset
SELECT cursor - :head AS cursor FROM cfeed.lease WHERE group_name = 'h' AND feed_id = 1 AND shard = 0;
SELECT cfeed.resolve_dead_letter('h', 1, 0, :head);
SELECT count(*) AS dead_letters_left FROM cfeed.dead_letters WHERE group_name = 'h';
SELECT cfeed.drop_group('h', 1);
-- dead letters among and before deleted changes end the shard too (a
-- number whose change was deleted is no change to process): a seek back
-- onto the change before them moves over them all, to the last dead letter
SELECT cfeed.create_feed('dl-deleted', 1, feed_id => 43);
SELECT count(cfeed.publish(43, 0)) FROM generate_series(1, 5);
SELECT change_count FROM cfeed.sweep() WHERE feed_id = 43;
SELECT start_sequence_number AS s43 FROM cfeed.shard WHERE feed_id = 43 AND shard = 0 \gset
SELECT cfeed.set_failure_policy('k', 43, max_attempts => 1, dead_letter => true);
SELECT epoch AS k_epoch FROM cfeed.acquire('k', 43, 'm', 600000) WHERE shard = 0 \gset
SELECT cfeed.checkpoint('k', 43, 0, 'm', :k_epoch, :s43 + 1);
SELECT dead_letter FROM cfeed.fail('k', 43, 0, 'm', :k_epoch, :s43 + 2, 'x');
SELECT cfeed.checkpoint('k', 43, 0, 'm', :k_epoch, :s43 + 3);
SELECT dead_letter FROM cfeed.fail('k', 43, 0, 'm', :k_epoch, :s43 + 4, 'x');
SELECT cfeed.checkpoint('k', 43, 0, 'm', :k_epoch, :s43 + 5);
DELETE FROM cfeed.change WHERE feed_id = 43 AND change_sequence_number IN (:s43 + 3, :s43 + 5);
SELECT cfeed.head(43, 0) - :s43 AS head;
SELECT cfeed.seek('k', 43, 0, :s43 + 1) > 0 AS sought;
SELECT cursor - :s43 AS cursor FROM cfeed.lease WHERE group_name = 'k' AND feed_id = 43;
-- a checkpoint onto the change before a dead letter passes the deleted
-- numbers among the dead letters after it, up to the next stored change
SELECT cfeed.seek('k', 43, 0, :s43) > 0 AS sought;
SELECT epoch AS k_epoch FROM cfeed.acquire('k', 43, 'm', 600000) WHERE shard = 0 \gset
INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (43, 0, 4300);
SELECT change_count FROM cfeed.sweep() WHERE feed_id = 43;
SELECT change_sequence_number - :s43 AS n FROM cfeed.read_group('k', 43, 0);
SELECT cfeed.checkpoint('k', 43, 0, 'm', :k_epoch, :s43 + 1);
SELECT cursor - :s43 AS cursor FROM cfeed.lease WHERE group_name = 'k' AND feed_id = 43;
SELECT cfeed.drop_group('k', 43);

-- a change whose row image the consumer may not see (of a table it has no
-- SELECT on) is left out of what it reads, and fail() answers for it as
-- for a change that does not exist (42704): no failure is recorded, and
-- cfeed.failed_change shows nothing of it (before, fail() recorded it, its
-- change_id included, and so told that a hidden change was there)
CREATE TABLE public.dl_visible (id int PRIMARY KEY);
CREATE TABLE public.dl_secret (id int PRIMARY KEY);
SELECT cfeed.create_feed('dl-images', 1, feed_id => 41);
SELECT cfeed.track('public.dl_visible', 41), cfeed.track('public.dl_secret', 41);
CREATE ROLE dl_partial;
GRANT SELECT ON cfeed.change, cfeed.shard, cfeed.feed, cfeed.failed_change TO dl_partial;
GRANT SELECT, INSERT, UPDATE ON cfeed.lease TO dl_partial;
GRANT SELECT ON public.dl_visible TO dl_partial;
SELECT cfeed.grant_read(41, 'dl_partial');
INSERT INTO public.dl_visible VALUES (1);
INSERT INTO public.dl_secret VALUES (1);
INSERT INTO public.dl_visible VALUES (2);
SELECT change_count FROM cfeed.sweep() WHERE feed_id = 41;
SELECT start_sequence_number AS s41 FROM cfeed.shard WHERE feed_id = 41 AND shard = 0 \gset
SET ROLE dl_partial;
SELECT change_sequence_number - :s41 AS n FROM cfeed.read(41, 0) ORDER BY 1;
SELECT epoch AS p_epoch FROM cfeed.acquire('p', 41, 'm', 600000) WHERE shard = 0 \gset
SELECT n, pg_temp.err(format('SELECT * FROM cfeed.fail(%L, 41, 0, %L, %s, %s, %L)', 'p', 'm', :p_epoch, :s41 + n, 'x'))
FROM (VALUES (2), (4)) AS t(n);
SELECT attempts, dead_letter FROM cfeed.fail('p', 41, 0, 'm', :p_epoch, :s41 + 3, 'x');
SELECT change_sequence_number - :s41 AS n FROM cfeed.failed_change WHERE feed_id = 41;
RESET ROLE;
SELECT change_sequence_number - :s41 AS n, tbl IS NOT NULL AS has_image FROM cfeed.read_rows(41, 0) ORDER BY 1;
-- a poison change right after a change its member may not see is the next
-- one the member processes: its last attempt sets it aside and moves the
-- cursor to it (until 1.9 the change hidden before it kept it from being
-- set aside, and it was retried for ever); the member that reads every
-- change still has the hidden one to process first
SELECT cfeed.set_failure_policy('p', 41, max_attempts => 2, dead_letter => true);
SET ROLE dl_partial;
SELECT cfeed.checkpoint('p', 41, 0, 'm', :p_epoch, :s41 + 1);
SELECT attempts, dead_letter FROM cfeed.fail('p', 41, 0, 'm', :p_epoch, :s41 + 3, 'x');
SELECT cursor - :s41 AS cursor FROM cfeed.lease WHERE group_name = 'p' AND feed_id = 41;
SELECT count(*) AS page FROM cfeed.read_group('p', 41, 0);
RESET ROLE;
SELECT cfeed.set_failure_policy('q', 41, max_attempts => 1, dead_letter => true);
SELECT epoch AS q_epoch FROM cfeed.acquire('q', 41, 'm', 600000) WHERE shard = 0 \gset
SELECT cfeed.checkpoint('q', 41, 0, 'm', :q_epoch, :s41 + 1);
SELECT attempts, dead_letter FROM cfeed.fail('q', 41, 0, 'm', :q_epoch, :s41 + 3, 'x');
SELECT cursor - :s41 AS cursor FROM cfeed.lease WHERE group_name = 'q' AND feed_id = 41;
SELECT cfeed.drop_group('q', 41);
-- with a read policy of an operator's that shows the member every change,
-- the change before the poison change is one it reads: not set aside
CREATE POLICY dl_show_all ON cfeed.change FOR SELECT TO dl_partial USING (true);
SELECT cfeed.set_failure_policy('r', 41, max_attempts => 1, dead_letter => true);
SELECT epoch AS r_epoch FROM cfeed.acquire('r', 41, 'm', 600000) WHERE shard = 0 \gset
SET ROLE dl_partial;
SELECT count(*) AS reads FROM cfeed.read(41, 0);
SELECT cfeed.checkpoint('r', 41, 0, 'm', :r_epoch, :s41 + 1);
SELECT attempts, dead_letter FROM cfeed.fail('r', 41, 0, 'm', :r_epoch, :s41 + 3, 'x');
SELECT cursor - :s41 AS cursor FROM cfeed.lease WHERE group_name = 'r' AND feed_id = 41;
RESET ROLE;
SELECT cfeed.drop_group('r', 41);
DROP POLICY dl_show_all ON cfeed.change;
-- cfeed._read_as reads as a role that exists only
SELECT pg_temp.err('SELECT * FROM cfeed._read_as(4294967295, 41, 0, 0, 1)');
-- the error text kept is its first 8000 characters
INSERT INTO public.dl_visible VALUES (3);
SELECT change_count FROM cfeed.sweep() WHERE feed_id = 41;
SET ROLE dl_partial;
SELECT attempts, dead_letter FROM cfeed.fail('p', 41, 0, 'm', :p_epoch, :s41 + 4, repeat('e', 9000));
SELECT length(last_error) FROM cfeed.failed_change WHERE feed_id = 41 AND change_sequence_number = :s41 + 4;
RESET ROLE;
SELECT cfeed.drop_group('p', 41);
DROP OWNED BY dl_partial;
DROP ROLE dl_partial;
