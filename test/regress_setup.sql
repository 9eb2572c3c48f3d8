-- Shared setup of the pg_regress files (included with \i first thing): a
-- fresh extension, whatever an earlier file left, so that every file runs
-- alone or in any order.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS cfeed CASCADE;
RESET client_min_messages;
CREATE EXTENSION cfeed;
\set SHOW_CONTEXT never

-- err(sql): runs a statement and shows "SQLSTATE: message", or "ok"
CREATE FUNCTION pg_temp.err(cmd text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE cmd;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
