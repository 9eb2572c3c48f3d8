-- hardening_path: a hostile search_path.  A schema earlier on the path than
-- pg_catalog with a table named change and objects shadowing pg_catalog
-- names.  Every shadow records who called it (and the int and bigint
-- operators and the functions lie); cfeed must never call one, whoever runs
-- it.  Each call's result is kept and compared afterwards with the same call
-- under a clean path.
\i test/regress_setup.sql
\i test/hardening_setup.sql
-- the setup's pending change stamped: these checks start with none pending
SELECT feed_id, shard, change_count, last_change_sequence_number FROM cfeed.sweep();

CREATE SCHEMA evil;
GRANT USAGE ON SCHEMA evil TO PUBLIC;
CREATE TABLE evil.log (who text, what text, phase text);
GRANT INSERT, SELECT ON evil.log TO PUBLIC;
CREATE TABLE evil.change (feed_id int, shard int, change_id bigint, change_sequence_number bigint);
INSERT INTO evil.change VALUES (1, 0, 666, 2000000000000001);
GRANT ALL ON evil.change TO PUBLIC;
CREATE FUNCTION evil.log(what text) RETURNS void LANGUAGE sql
	AS $$ INSERT INTO evil.log VALUES (current_user, what, current_setting('h.phase', true)) $$;
CREATE FUNCTION evil.int4eq(int, int) RETURNS bool LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.log('int4 ='); RETURN true; END $$;
CREATE OPERATOR evil.= (LEFTARG = int, RIGHTARG = int, FUNCTION = evil.int4eq);
CREATE FUNCTION evil.int4ne(int, int) RETURNS bool LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.log('int4 <>'); RETURN true; END $$;
CREATE OPERATOR evil.<> (LEFTARG = int, RIGHTARG = int, FUNCTION = evil.int4ne);
CREATE FUNCTION evil.int8gt(bigint, bigint) RETURNS bool LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.log('int8 >'); RETURN true; END $$;
CREATE OPERATOR evil.> (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = evil.int8gt);
CREATE FUNCTION evil.int8le(bigint, bigint) RETURNS bool LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.log('int8 <='); RETURN true; END $$;
CREATE OPERATOR evil.<= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = evil.int8le);
CREATE FUNCTION evil.tideq(tid, tid) RETURNS bool LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.log('tid ='); RETURN $1 OPERATOR(pg_catalog.=) $2; END $$;
CREATE OPERATOR evil.= (LEFTARG = tid, RIGHTARG = tid, FUNCTION = evil.tideq);
CREATE FUNCTION evil.tslt(timestamptz, timestamptz) RETURNS bool LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.log('timestamptz <'); RETURN $1 OPERATOR(pg_catalog.<) $2; END $$;
CREATE OPERATOR evil.< (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = evil.tslt);
CREATE FUNCTION evil.now() RETURNS timestamptz LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.log('now'); RETURN '2000-01-01'; END $$;
CREATE FUNCTION evil.clock_timestamp() RETURNS timestamptz LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.log('clock_timestamp'); RETURN '2000-01-01'; END $$;
CREATE FUNCTION evil.nextval(regclass) RETURNS bigint LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.log('nextval'); RETURN 1; END $$;
CREATE FUNCTION evil.pg_current_xact_id() RETURNS xid8 LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.log('pg_current_xact_id'); RETURN '1'; END $$;
CREATE FUNCTION evil.coalesce_ish(bigint, bigint) RETURNS bigint LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.log('max'); RETURN 0; END $$;
CREATE AGGREGATE evil.max(bigint) (SFUNC = evil.coalesce_ish, STYPE = bigint);
CREATE FUNCTION evil.int4max(int, int) RETURNS int LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.log('max'); RETURN 0; END $$;
CREATE AGGREGATE evil.max(int) (SFUNC = evil.int4max, STYPE = int);
CREATE FUNCTION evil.unnest(anyarray) RETURNS SETOF anyelement LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.log('unnest'); END $$;
CREATE FUNCTION evil.to_jsonb(anyelement) RETURNS jsonb LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.log('to_jsonb'); RETURN '{}'; END $$;
CREATE FUNCTION evil.generate_series(int, int) RETURNS SETOF int LANGUAGE plpgsql
	AS $$ BEGIN PERFORM evil.log('generate_series'); RETURN NEXT 0; END $$;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA evil TO PUBLIC;
-- a role granted sweep by the owner: it must not get the owner's rights through the path
CREATE ROLE regress_cfeed_h_sweeper;
GRANT EXECUTE ON FUNCTION cfeed.sweep(int) TO regress_cfeed_h_sweeper;
CREATE TABLE public.h_tracked (id int PRIMARY KEY, v text);
SELECT cfeed.create_feed('hostile', 2, 10);
SELECT cfeed.track('public.h_tracked', 10);
INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number)
VALUES (1, 1, 1000000000000030, 5);	-- history, for cursor_at's history search
CREATE TEMP TABLE h_res (what text, val text);
GRANT INSERT ON h_res TO PUBLIC;

SET h.phase = 'owner';
SET search_path = evil, pg_catalog, public, pg_temp;
INSERT INTO h_res SELECT 'publish', cfeed.publish(1, 0, 1000000000000010);
INSERT INTO h_res SELECT 'publish default id', cfeed.publish(1, 1) OPERATOR(pg_catalog.>) 1000000000000000;
INSERT INTO h_tracked VALUES (1, 'a'), (2, 'b');
UPDATE h_tracked SET v = 'c' WHERE id OPERATOR(pg_catalog.=) 1;
DELETE FROM h_tracked WHERE id OPERATOR(pg_catalog.=) 2;
INSERT INTO h_res SELECT 'create_feed', pg_temp.err($$SELECT cfeed.create_feed('hostile2')$$);
INSERT INTO h_res SELECT 'shard_for', cfeed.shard_for(1, 'abc');
INSERT INTO h_res SELECT 'sweep', string_agg(concat_ws(':', feed_id, shard, change_count, last_change_sequence_number), ' ' ORDER BY feed_id, shard) FROM cfeed.sweep();
RESET search_path;
SELECT cfeed.publish(1, 0, 1000000000000011) AS published;
SET h.phase = 'granted sweeper';
SET ROLE regress_cfeed_h_sweeper;
SET search_path = evil, pg_catalog, public, pg_temp;
INSERT INTO h_res SELECT 'sweep as granted role', string_agg(concat_ws(':', feed_id, shard, change_count, last_change_sequence_number), ' ') FROM cfeed.sweep();
RESET ROLE;
SET h.phase = 'owner';
SET search_path = evil, pg_catalog, public, pg_temp;
CALL cfeed.sweep_loop(0, 0, 0, 0, NULL, NULL, NULL);
CREATE TEMP TABLE h_read AS SELECT * FROM cfeed.read(1, 0, 2000000000000001);
CREATE TEMP TABLE h_read_rows AS
	SELECT 0 AS s, * FROM cfeed.read_rows(10, 0) UNION ALL SELECT 1, * FROM cfeed.read_rows(10, 1);
INSERT INTO h_res SELECT 'head', cfeed.head(1, 0);
INSERT INTO h_res SELECT 'wait', cfeed.wait(1, 0, 2000000000000001, 0);
INSERT INTO h_res SELECT 'cursor_at future', cfeed.cursor_at(1, 0, 'infinity');
INSERT INTO h_res SELECT 'cursor_at past', cfeed.cursor_at(1, 0, '-infinity');
INSERT INTO h_res SELECT 'cursor_at history', cfeed.cursor_at(1, 1, '2000-01-01');
INSERT INTO h_res SELECT 'channel', cfeed.channel(1, 0);
INSERT INTO h_res SELECT 'acquire', string_agg(concat_ws(':', shard, cursor, epoch), ' ') FROM cfeed.acquire('hg', 1, 'ho', 600000);
INSERT INTO h_res SELECT 'checkpoint', pg_temp.err($$SELECT cfeed.checkpoint('hg', 1, 0, 'ho', 1, 2000000000000002)$$);
INSERT INTO h_res SELECT 'seek', cfeed.seek('hg', 1, 1, 2000000000000000);
INSERT INTO h_res SELECT 'release', cfeed.release('hg', 1, 'ho');
INSERT INTO h_res SELECT 'drop_group', cfeed.drop_group('hg', 1);
INSERT INTO h_res SELECT 'stats', count(*) FROM cfeed.stats;
INSERT INTO h_res SELECT 'grant_read', pg_temp.err($$SELECT cfeed.grant_read(1, 0)$$);
INSERT INTO h_res SELECT 'revoke_read', pg_temp.err($$SELECT cfeed.revoke_read(1, 0)$$);
INSERT INTO h_res SELECT 'untrack', pg_temp.err($$SELECT cfeed.untrack('public.h_tracked')$$);
RESET search_path;
RESET h.phase;
-- no shadow was ever called, by the caller or (worse) as the extension owner
-- for a role that was only granted sweep (cfeed pins search_path for all the
-- SQL it sends through SPI).
SELECT phase, who, what, count(*) FROM evil.log GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;
-- the results under the hostile path
SELECT what, val FROM h_res ORDER BY what;
-- reads under the hostile path equal reads under a clean path
SELECT (SELECT array_agg(change_sequence_number ORDER BY change_sequence_number) FROM h_read)
       = (SELECT array_agg(change_sequence_number ORDER BY change_sequence_number) FROM cfeed.read(1, 0, 2000000000000001)) AS read_same,
       (SELECT array_agg(change_id ORDER BY change_sequence_number) FROM h_read)
       = (SELECT array_agg(change_id ORDER BY change_sequence_number) FROM cfeed.read(1, 0, 2000000000000001)) AS read_ids_same,
       (SELECT count(*) FROM h_read) AS read_rows;
SELECT 0 AS s, change_sequence_number, op, "row" FROM cfeed.read_rows(10, 0)
UNION ALL SELECT 1, change_sequence_number, op, "row" FROM cfeed.read_rows(10, 1) ORDER BY 1, 2;
SELECT (SELECT array_agg(concat_ws(':', s, change_sequence_number, op, "row") ORDER BY s, change_sequence_number) FROM h_read_rows)
       = (SELECT array_agg(concat_ws(':', s, change_sequence_number, op, "row") ORDER BY s, change_sequence_number)
          FROM (SELECT 0 AS s, * FROM cfeed.read_rows(10, 0) UNION ALL SELECT 1, * FROM cfeed.read_rows(10, 1)) x) AS read_rows_same;
-- every shard is still gapless, and evil.change untouched
SELECT feed_id, shard, change_sequence_number, change_id - 1000000000000000 AS id FROM cfeed.change
ORDER BY 1, 2, 3;
SELECT * FROM evil.change;
DROP SCHEMA evil CASCADE;

DROP EXTENSION cfeed;
DROP TABLE public.h_plain, public.h_tracked;
DROP ROLE regress_cfeed_h_sweeper;
