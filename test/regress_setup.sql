-- Shared setup of the pg_regress files (included with \i first thing): a
-- fresh extension, whatever an earlier file left, so that every file runs
-- alone or in any order.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS cfeed CASCADE;
RESET client_min_messages;
CREATE EXTENSION cfeed;
-- every file runs under a publication FOR ALL TABLES, as a database that
-- replicates everything has one: cfeed's own UPDATEs and DELETEs must not
-- need what such a publication refuses (a table without replica identity)
SELECT NOT EXISTS (SELECT FROM pg_publication WHERE pubname = 'cfeed_regress_all') AS no_pub \gset
\if :no_pub
SET client_min_messages = error;
CREATE PUBLICATION cfeed_regress_all FOR ALL TABLES;
RESET client_min_messages;
\endif
\set SHOW_CONTEXT never

-- err(sql): runs a statement and shows "SQLSTATE: message", or "ok"
CREATE FUNCTION pg_temp.err(cmd text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE cmd;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
