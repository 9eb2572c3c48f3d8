-- cfeed.fail and cfeed.resolve_dead_letter in the SQL edition: checked as
-- the caller, run as the owner through the INSTEAD OF triggers of a view
-- (sqled/functions/epilogue.sql); the behaviour itself is the extension's
-- regression file dead_letters, run against the SQL edition too.
\i test/regress_setup.sql
SELECT cfeed.create_feed('dl', 1);
SELECT count(cfeed.publish(1, 0)) FROM generate_series(1, 4);
SELECT count(*) FROM cfeed.sweep();
SELECT count(*) FROM cfeed.acquire('g', 1, 'a', 600000);
SELECT cfeed.set_failure_policy('g', 1, max_attempts => 1, dead_letter => true);

-- the views hold nothing; PUBLIC may insert into them, and may execute
-- none of their trigger functions (making a trigger needs EXECUTE); the
-- work runs as the owner, the checks as the caller
SELECT (SELECT count(*) FROM cfeed._sqled_fail) + (SELECT count(*) FROM cfeed._sqled_resolve_dead_letter) AS rows;
SELECT c.relname, has_table_privilege('public', c.oid, 'INSERT') AS public_insert,
       has_table_privilege('public', c.oid, 'UPDATE') OR has_table_privilege('public', c.oid, 'DELETE') AS public_other
FROM pg_class c WHERE c.relnamespace = 'cfeed'::regnamespace AND c.relname IN ('_sqled_fail', '_sqled_resolve_dead_letter')
ORDER BY 1;
SELECT t.tgrelid::regclass, t.tgname, p.proname, p.prosecdef, has_function_privilege('public', p.oid, 'EXECUTE') AS public_execute
FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
WHERE t.tgrelid IN ('cfeed._sqled_fail'::regclass, 'cfeed._sqled_resolve_dead_letter'::regclass)
ORDER BY 1, 2;

-- roles: a consumer of feed 1 (a reader's SELECT on cfeed.change and
-- cfeed.shard, which fail's last check reads as it, and UPDATE on
-- cfeed.lease), an operator (DELETE on cfeed.failed_change), and a
-- stranger with those privileges but no read grant
CREATE ROLE sqled_dl_consumer;
CREATE ROLE sqled_dl_operator;
CREATE ROLE sqled_dl_stranger;
GRANT SELECT ON cfeed.change, cfeed.shard TO sqled_dl_consumer, sqled_dl_stranger;
GRANT SELECT, UPDATE ON cfeed.lease TO sqled_dl_consumer, sqled_dl_stranger;
GRANT SELECT, DELETE ON cfeed.failed_change TO sqled_dl_operator, sqled_dl_stranger;
SELECT cfeed.grant_read(1, 'sqled_dl_consumer'), cfeed.grant_read(1, 'sqled_dl_operator');
-- inserting into the views directly is checked as calling the functions is
SET ROLE sqled_dl_stranger;
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$INSERT INTO cfeed._sqled_fail (group_name, feed_id, shard, owner, epoch, change_sequence_number, error)
     VALUES ('g', 1, 0, 'a', 1, 2000000000000001, 'e')$$),
  ($$INSERT INTO cfeed._sqled_resolve_dead_letter VALUES ('g', 1, 0, 2000000000000001)$$),
  ($$SELECT cfeed._sqled_fail_run()$$)
) AS t(cmd);
-- nor can a role run the work through a trigger of its own
CREATE TEMP TABLE mine (LIKE cfeed._sqled_fail);
CREATE TEMP VIEW mine_v AS SELECT * FROM mine;
SELECT cmd, pg_temp.err(cmd) FROM (VALUES
  ($$CREATE TRIGGER t INSTEAD OF INSERT ON mine_v FOR EACH ROW EXECUTE FUNCTION cfeed._sqled_fail_run()$$),
  ($$CREATE TRIGGER t BEFORE INSERT ON mine FOR EACH ROW EXECUTE FUNCTION cfeed._sqled_fail_run()$$),
  ($$CREATE TRIGGER t BEFORE INSERT ON mine FOR EACH ROW EXECUTE FUNCTION cfeed._sqled_resolve_dead_letter_run()$$)
) AS t(cmd);
DROP VIEW mine_v;
DROP TABLE mine;
SET ROLE sqled_dl_operator;
SELECT pg_temp.err($$INSERT INTO cfeed._sqled_fail (group_name, feed_id, shard, owner, epoch, change_sequence_number, error)
                     VALUES ('g', 1, 0, 'a', 1, 2000000000000001, 'e')$$);
-- the consumer's insert is a failure report, as cfeed.fail's
SET ROLE sqled_dl_consumer;
INSERT INTO cfeed._sqled_fail (group_name, feed_id, shard, owner, epoch, change_sequence_number, error)
VALUES ('g', 1, 0, 'a', 1, 2000000000000001, 'direct')
RETURNING attempts, retry_at, dead_letter;
SELECT attempts, retry_at, dead_letter FROM cfeed.fail('g', 1, 0, 'a', 1, 2000000000000002, 'called');
SELECT pg_temp.err($$SELECT cfeed.resolve_dead_letter('g', 1, 0, 2000000000000001)$$);
SET ROLE sqled_dl_operator;
SELECT cfeed.resolve_dead_letter('g', 1, 0, 2000000000000001);
RESET ROLE;
SELECT change_sequence_number - 2000000000000000 AS n, last_error FROM cfeed.dead_letters ORDER BY 1;

-- under session_replication_role = replica the views' triggers do not
-- fire: 55000, never a call that did nothing
BEGIN;
SET LOCAL session_replication_role = replica;
SELECT pg_temp.err($$SELECT * FROM cfeed.fail('g', 1, 0, 'a', 1, 2000000000000003, 'e')$$);
SELECT pg_temp.err($$SELECT cfeed.resolve_dead_letter('g', 1, 0, 2000000000000002)$$);
ROLLBACK;
SELECT change_sequence_number - 2000000000000000 AS n, last_error FROM cfeed.dead_letters ORDER BY 1;

DROP OWNED BY sqled_dl_consumer, sqled_dl_operator, sqled_dl_stranger;
DROP ROLE sqled_dl_consumer, sqled_dl_operator, sqled_dl_stranger;
