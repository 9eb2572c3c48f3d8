/*
 * sqled/move/to-sql.sql: a database moves from the C extension cfeed
 * @VERSION@ to the SQL edition of the same version, in one transaction
 * (docs/sql-edition.md, "Moving between the editions").  Made into
 * cfeed-extension-to-sql--@VERSION@.sql by generate.pl, which puts the SQL
 * edition's install script and sqled/move/copy.sql where it says so.  Run
 * as a superuser (or the extension's owner, who may drop it); the SQL
 * edition's objects are made by the role named in psql variable owner
 * (default: the role running the script):
 *
 *	 psql -v ON_ERROR_STOP=1 -v owner=app_owner -d app -f cfeed-extension-to-sql--@VERSION@.sql
 *
 *	 1. check: the extension's owner or a superuser, extension cfeed at
 *		version @VERSION@;
 *	 2. stop the extension: every table and sequence of schema cfeed in
 *		ACCESS EXCLUSIVE mode: shard_config and change first (the order of
 *		DROP EXTENSION and of the sweeps: a sweep waits, and fails with
 *		55000 once the move commits), then the sequences (no change_id is
 *		drawn after its position is copied, and a session's first
 *		statement, which reads cfeed.change_id_timeline under the C
 *		library, waits holding nothing of cfeed's), then the other tables.
 *		Open writing transactions finish first; later writers wait for the
 *		move and then write into the SQL edition's tables, or fail and
 *		commit nothing.  A writer that deadlocks with the move (one that
 *		drew a change_id before it waits for cfeed.change, or wrote before
 *		in its transaction) is the one to fail: the move's deadlock_timeout
 *		is 10 s;
 *	 3. rename schema cfeed to cfeed_moving and the extension's event
 *		trigger, install the SQL edition as the owner;
 *	 4. copy.sql: every row and sequence position, the privileges, checks,
 *		the tracked tables' triggers made again on the new edition;
 *	 5. DROP EXTENSION cfeed (RESTRICT: an object of the database's own that
 *		depends on the extension stops the move, and nothing has changed).
 */
\set ON_ERROR_STOP 1
\if :{?owner}
\else
\set owner :USER
\endif
BEGIN;
SET LOCAL search_path = pg_catalog, pg_temp;
SET LOCAL client_min_messages = warning;

-- 1. check
DO $move$
BEGIN
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'cfeed') THEN
		RAISE EXCEPTION 'extension cfeed is not installed in this database'
			USING ERRCODE = '55000',
				  DETAIL = 'This script moves a database from the C extension to the SQL edition.';
	END IF;
	IF (SELECT e.extversion FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'cfeed')
	   OPERATOR(pg_catalog.<>) '@VERSION@' THEN
		RAISE EXCEPTION 'extension cfeed is not at version @VERSION@'
			USING ERRCODE = '55000',
				  HINT = 'Update it first: ALTER EXTENSION cfeed UPDATE TO ''@VERSION@''.';
	END IF;
	IF NOT pg_catalog.pg_has_role((SELECT e.extowner FROM pg_catalog.pg_extension e
								   WHERE e.extname OPERATOR(pg_catalog.=) 'cfeed'), 'USAGE') THEN
		RAISE EXCEPTION 'only the owner of extension cfeed may move it to the SQL edition'
			USING ERRCODE = '42501';
	END IF;
	IF pg_catalog.to_regnamespace('cfeed_moving') IS NOT NULL THEN
		RAISE EXCEPTION 'schema cfeed_moving exists'
			USING ERRCODE = '42P06',
				  HINT = 'The move renames schema cfeed to cfeed_moving until it commits: rename or drop the schema in the way.';
	END IF;
END
$move$;

-- a writer that deadlocks with the move is the one to fail (see the top)
SET LOCAL deadlock_timeout = '10s';

-- 2. stop the extension: its tables and sequences (see the top)
DO $move$
DECLARE
	r record;
BEGIN
	FOR r IN SELECT c.oid::regclass AS rel, c.relkind, c.relowner::regrole AS owner
			 FROM pg_catalog.pg_class c
			 WHERE c.relnamespace OPERATOR(pg_catalog.=) 'cfeed'::regnamespace AND c.relkind IN ('r', 'S')
			 ORDER BY c.relname OPERATOR(pg_catalog.<>) 'shard_config', c.relname OPERATOR(pg_catalog.<>) 'change',
					  c.relkind OPERATOR(pg_catalog.<>) 'S', c.relname
	LOOP
		IF r.relkind OPERATOR(pg_catalog.=) 'S' THEN
			-- no LOCK for a sequence: ALTER SEQUENCE ... OWNER TO its owner
			-- takes ACCESS EXCLUSIVE and changes nothing
			EXECUTE pg_catalog.format('ALTER SEQUENCE %s OWNER TO %s', r.rel, r.owner);
		ELSE
			EXECUTE pg_catalog.format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', r.rel);
		END IF;
	END LOOP;
END
$move$;

-- 3. the SQL edition beside the extension, made by the owner
ALTER EVENT TRIGGER cfeed_tracked_table_dropped RENAME TO cfeed_tracked_table_dropped_moving;
ALTER SCHEMA cfeed RENAME TO cfeed_moving;
SET LOCAL ROLE :"owner";
SET LOCAL check_function_bodies = false;
-- @install
RESET ROLE;

-- @copy

-- 5. the extension goes (RESTRICT)
DROP EXTENSION cfeed;

COMMIT;
