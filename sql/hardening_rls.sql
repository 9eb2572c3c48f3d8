-- hardening_rls: per-feed access (grants, enforced by row-level security on
-- cfeed.change, sql/read_access.sql).  Reader 1 sees feed 1 only, reader 2
-- feed 2 only; a writer is restricted by a restrictive INSERT policy of the
-- DBA's, and the sweeper, which stamps as the extension's owner, is not
-- affected (a superuser owner always bypasses RLS; a non-superuser owner
-- does unless the table is FORCEd).
\i test/regress_setup.sql
\i test/hardening_setup.sql
-- the setup's pending change stamped: these checks start with none pending
SELECT feed_id, shard, change_count, last_change_sequence_number FROM cfeed.sweep();

CREATE ROLE regress_cfeed_h_writer;
GRANT INSERT ON cfeed.change TO regress_cfeed_h_writer;
SELECT cfeed.grant_write_all('regress_cfeed_h_writer');
GRANT USAGE ON SEQUENCE cfeed.change_id TO regress_cfeed_h_writer;
CREATE ROLE regress_cfeed_h_reader1;
CREATE ROLE regress_cfeed_h_reader2;
GRANT SELECT ON cfeed.change, cfeed.shard TO regress_cfeed_h_reader1, regress_cfeed_h_reader2;
CREATE TABLE public.h_event (change_id bigint PRIMARY KEY, body text);
GRANT SELECT ON public.h_event TO regress_cfeed_h_reader1, regress_cfeed_h_reader2;
INSERT INTO public.h_event SELECT change_id, 'event ' || feed_id || '/' || shard FROM cfeed.change
WHERE feed_id IN (1, 2) ON CONFLICT DO NOTHING;
ALTER TABLE cfeed.change FORCE ROW LEVEL SECURITY;
SELECT cfeed.grant_read(1, 'regress_cfeed_h_reader1'), cfeed.grant_read(2, 'regress_cfeed_h_reader2');
CREATE POLICY h_writers ON cfeed.change AS RESTRICTIVE FOR INSERT TO regress_cfeed_h_writer
	WITH CHECK (feed_id = 2);
-- the writer may publish to feed 2 only
SET ROLE regress_cfeed_h_writer;
SELECT cfeed.publish(2, 0, 1000000000000020) AS published;
SELECT pg_temp.err($$SELECT cfeed.publish(1, 0, 1000000000000021)$$);
RESET ROLE;
-- stamping is unaffected by RLS (FORCEd, and no policy for the owner)
SELECT feed_id, shard, change_count, last_change_sequence_number FROM cfeed.sweep();
SET ROLE regress_cfeed_h_reader1;
SELECT 'reader1' AS who, f, pg_temp.err(format('SELECT cfeed.read(%s, 0)', f)) FROM generate_series(1, 2) f ORDER BY f;
SELECT 'reader1' AS who, count(*) AS changes FROM cfeed.read(1, 0);
SELECT e.body, c.change_sequence_number
FROM public.h_event e JOIN cfeed.change c USING (change_id)
WHERE c.feed_id IN (1, 2) AND c.shard = 0 AND c.change_sequence_number > 0
ORDER BY c.feed_id, c.change_sequence_number LIMIT 100;
-- a waiting read of a feed it may not read is refused (42501)
SELECT pg_temp.err($$SELECT count(*) FROM cfeed.read(2, 0, NULL, 10, 50)$$) AS waiting_read;
RESET ROLE;
SET ROLE regress_cfeed_h_reader2;
SELECT 'reader2' AS who, f, pg_temp.err(format('SELECT cfeed.read(%s, 0)', f)) FROM generate_series(1, 2) f ORDER BY f;
SELECT 'reader2' AS who, count(*) AS changes FROM cfeed.read(2, 0);
SELECT e.body, c.change_sequence_number
FROM public.h_event e JOIN cfeed.change c USING (change_id)
WHERE c.feed_id IN (1, 2) AND c.shard = 0 AND c.change_sequence_number > 0
ORDER BY c.feed_id, c.change_sequence_number LIMIT 100;
RESET ROLE;
-- the heads of the other feed are refused too, and cfeed.shard leaves it out
SET ROLE regress_cfeed_h_reader1;
SELECT pg_temp.err($$SELECT cfeed.head(2, 0)$$) AS feed2_head;
SELECT feed_id, shard FROM cfeed.shard ORDER BY 1, 2;
RESET ROLE;
DROP POLICY h_writers ON cfeed.change;
-- a writer's backend remembers what the INSERT policies say (direct.c,
-- insert_policies) until they change: a policy created after a direct write
-- applies to the next one, and one dropped no longer does
SET ROLE regress_cfeed_h_writer;
SELECT cfeed.publish(1, 0) > 0 AS published_before;
RESET ROLE;
CREATE POLICY h_none ON cfeed.change AS RESTRICTIVE FOR INSERT WITH CHECK (false);
SET ROLE regress_cfeed_h_writer;
SELECT pg_temp.err($$SELECT cfeed.publish(1, 0)$$) AS refused_by_new_policy;
RESET ROLE;
DROP POLICY h_none ON cfeed.change;
SET ROLE regress_cfeed_h_writer;
SELECT cfeed.publish(1, 0) > 0 AS published_after;
RESET ROLE;
ALTER TABLE cfeed.change NO FORCE ROW LEVEL SECURITY;

DROP EXTENSION cfeed;
DROP TABLE public.h_plain, public.h_event;
DROP ROLE regress_cfeed_h_writer, regress_cfeed_h_reader1, regress_cfeed_h_reader2;
