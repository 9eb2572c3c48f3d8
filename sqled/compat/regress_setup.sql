-- Shared setup of the pg_regress files, the SQL edition's (sqled/Makefile
-- runs the extension's files with this one in place of
-- test/regress_setup.sql): a fresh SQL edition, whatever an earlier file
-- left, so that every file runs alone or in any order.
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS cfeed CASCADE;
DROP EVENT TRIGGER IF EXISTS cfeed_tracked_table_dropped;
\getenv script SQLED_SCRIPT_PATH
\set ECHO none
\o /dev/null
\i :script
\o
\set ECHO all
RESET client_min_messages;
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
