-- Shared setup of the pg_regress files (included with \i).
CREATE EXTENSION IF NOT EXISTS cfeed;
\set SHOW_CONTEXT never

-- err(sql): runs a statement and shows "SQLSTATE: message", or "ok"
CREATE FUNCTION pg_temp.err(cmd text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE cmd;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
