-- Shared setup of the hardening_* pg_regress files (included with \i after
-- test/regress_setup.sql): feeds h (feed 1, 2 shards) and h2 (feed 2), three
-- stamped changes and one pending on feed 1 shard 0, a lease of group g
-- held by owner o, and a plain table public.h_plain; pg_temp.err for every
-- role.  Each file drops public.h_plain at its end.
GRANT EXECUTE ON FUNCTION pg_temp.err(text) TO PUBLIC;

SELECT cfeed.create_feed('h', 2);
SELECT cfeed.create_feed('h2', 1);
-- explicit change_ids below stay clear of the sequence's
SELECT setval('cfeed.change_id', 1000000001000000) > 0 AS moved;
SELECT cfeed.publish(1, 0, 1000000000000001), cfeed.publish(1, 1, 1000000000000002),
       cfeed.publish(2, 0, 1000000000000003);
SELECT feed_id, shard, change_count FROM cfeed.sweep() ORDER BY 1, 2;
SELECT cfeed.publish(1, 0, 1000000000000004);	-- left pending
SELECT shard, cursor, epoch FROM cfeed.acquire('g', 1, 'o', 600000);
CREATE TABLE public.h_plain (id int PRIMARY KEY, v text);
INSERT INTO public.h_plain VALUES (1, 'a');
