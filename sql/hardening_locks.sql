-- hardening_locks: LOCK TABLE on cfeed's tables (src/lock_guard.c).  A
-- role that may UPDATE or DELETE a table may LOCK it in any mode, yet
-- cfeed grants those privileges for one feed on tables every feed shares:
-- a deleter's ACCESS EXCLUSIVE lock on cfeed.change would stop every
-- writer, reader and sweep of every feed.  A role that does not own the
-- table may lock it in ROW EXCLUSIVE mode at most (42501 above, before the
-- lock is asked for), directly or through a view it owns; owners, and
-- other tables, as ever.  create_feed still serializes its callers.
\i test/regress_setup.sql
\i test/hardening_setup.sql

CREATE ROLE regress_cfeed_l_deleter;
CREATE ROLE regress_cfeed_l_consumer;
CREATE ROLE regress_cfeed_l_creator;
GRANT DELETE ON cfeed.change TO regress_cfeed_l_deleter;
SELECT cfeed.grant_write(1, 'regress_cfeed_l_deleter');
GRANT SELECT ON cfeed.change, cfeed.shard, cfeed.feed TO regress_cfeed_l_consumer;
GRANT SELECT, INSERT, UPDATE ON cfeed.lease TO regress_cfeed_l_consumer;
SELECT cfeed.grant_read(1, 'regress_cfeed_l_consumer');
GRANT SELECT, INSERT ON cfeed.feed, cfeed.shard TO regress_cfeed_l_creator;
CREATE SCHEMA regress_l_own AUTHORIZATION regress_cfeed_l_consumer;

-- every mode, by the deleter on cfeed.change and the consumer on
-- cfeed.lease: up to ROW EXCLUSIVE as their DML, refused above
CREATE TEMP TABLE l_modes (n int, mode text);
GRANT SELECT ON l_modes TO PUBLIC;
INSERT INTO l_modes VALUES (1, 'ROW SHARE'), (2, 'ROW EXCLUSIVE'), (3, 'SHARE UPDATE EXCLUSIVE'),
  (4, 'SHARE'), (5, 'SHARE ROW EXCLUSIVE'), (6, 'EXCLUSIVE'), (7, 'ACCESS EXCLUSIVE');
SET ROLE regress_cfeed_l_deleter;
SELECT m.mode, pg_temp.err(format('LOCK TABLE cfeed.change IN %s MODE', m.mode)) AS deleter
FROM l_modes m ORDER BY m.n;
-- in a transaction that stays open, and inside a function of its own
BEGIN;
SELECT pg_temp.err('LOCK TABLE cfeed.change IN ACCESS EXCLUSIVE MODE') AS open_transaction;
SELECT count(*) AS locks_held FROM pg_locks
WHERE relation = 'cfeed.change'::regclass AND pid = pg_backend_pid() AND mode <> 'RowExclusiveLock';
ROLLBACK;
SELECT pg_temp.err('DO $$ BEGIN LOCK TABLE cfeed.change IN SHARE MODE; END $$') AS in_function;
-- a DELETE still takes what it needs
SELECT pg_temp.err('DELETE FROM cfeed.change WHERE false') AS delete;
RESET ROLE;
SET ROLE regress_cfeed_l_consumer;
SELECT m.mode, pg_temp.err(format('LOCK TABLE cfeed.lease IN %s MODE', m.mode)) AS consumer
FROM l_modes m ORDER BY m.n;
-- outside a transaction block PostgreSQL refuses the LOCK before it asks
-- for any lock, for cfeed's tables too
LOCK TABLE cfeed.lease IN ACCESS EXCLUSIVE MODE;
-- several tables in one statement: refused for the one it may not
CREATE TABLE regress_l_own.mine (id int);
SELECT pg_temp.err('LOCK TABLE regress_l_own.mine, cfeed.lease IN EXCLUSIVE MODE') AS two_tables;
SELECT pg_temp.err('LOCK TABLE regress_l_own.mine IN ACCESS EXCLUSIVE MODE') AS own_table;
-- through a view it owns (PostgreSQL locks the view's tables with the
-- view owner's privileges), nested, and with the table in a subquery
CREATE VIEW regress_l_own.v_lease AS SELECT * FROM cfeed.lease;
CREATE VIEW regress_l_own.v_nested AS SELECT * FROM regress_l_own.v_lease;
CREATE VIEW regress_l_own.v_sub AS
  SELECT 1 AS one WHERE EXISTS (SELECT FROM cfeed.lease l WHERE l.feed_id = 1);
SELECT pg_temp.err('LOCK TABLE regress_l_own.v_lease IN ACCESS EXCLUSIVE MODE') AS view;
SELECT pg_temp.err('LOCK TABLE regress_l_own.v_nested IN SHARE MODE') AS nested_view;
SELECT pg_temp.err('LOCK TABLE regress_l_own.v_sub IN EXCLUSIVE MODE') AS subquery_view;
SELECT pg_temp.err('LOCK TABLE regress_l_own.v_lease IN ROW EXCLUSIVE MODE') AS view_row_exclusive;
RESET ROLE;
-- a view of cfeed's, which its owner may let a role update (cfeed.shard's
-- sweep_group and longpoll): locked as its tables are
GRANT UPDATE ON cfeed.shard TO regress_cfeed_l_consumer;
SET ROLE regress_cfeed_l_consumer;
SELECT pg_temp.err('LOCK TABLE cfeed.shard IN ACCESS EXCLUSIVE MODE') AS cfeed_view;
SELECT pg_temp.err('LOCK TABLE cfeed.shard IN ROW EXCLUSIVE MODE') AS cfeed_view_row_exclusive;
RESET ROLE;
REVOKE UPDATE ON cfeed.shard FROM regress_cfeed_l_consumer;

-- the owner (here a superuser) locks as ever; the consumer's view locks
-- cfeed.lease as the consumer, for anyone (as PostgreSQL checks it)
SELECT pg_temp.err('LOCK TABLE cfeed.change IN ACCESS EXCLUSIVE MODE') AS owner;
SELECT pg_temp.err('LOCK TABLE regress_l_own.v_lease IN ACCESS EXCLUSIVE MODE') AS consumer_view;

-- a creator with SELECT and INSERT on cfeed.feed and cfeed.shard
-- creates feeds, its lock of cfeed.feed taken in C
SET ROLE regress_cfeed_l_creator;
SELECT pg_temp.err($$SELECT cfeed.create_feed('l_created', 1, feed_id => 31)$$) AS creator;
RESET ROLE;
SET ROLE regress_cfeed_l_deleter;
SELECT pg_temp.err($$SELECT cfeed.create_feed('l_refused', 1)$$) AS not_creator;
RESET ROLE;
SELECT feed_id, name FROM cfeed.feed WHERE name LIKE 'l\_%' ORDER BY 1;

DROP SCHEMA regress_l_own CASCADE;
SELECT cfeed.revoke_write(1, 'regress_cfeed_l_deleter');
SELECT cfeed.revoke_read(1, 'regress_cfeed_l_consumer');
DROP OWNED BY regress_cfeed_l_deleter, regress_cfeed_l_consumer, regress_cfeed_l_creator;
DROP ROLE regress_cfeed_l_deleter, regress_cfeed_l_consumer, regress_cfeed_l_creator;
DROP TABLE public.h_plain;
