/*
 * sqled/move/to-extension.sql: a database moves from the SQL edition of
 * cfeed @VERSION@ to the C extension of the same version, in one
 * transaction (docs/sql-edition.md, "Moving between the editions").
 * Made into cfeed-sql-to-extension--@VERSION@.sql by generate.pl, which puts
 * sqled/move/copy.sql where it says so.  Run as a superuser (CREATE
 * EXTENSION cfeed needs one), on a server whose shared_preload_libraries
 * names cfeed:
 *
 *	 psql -v ON_ERROR_STOP=1 -d app -f cfeed-sql-to-extension--@VERSION@.sql
 *
 *	 1. check: a superuser, the SQL edition here, no extension cfeed;
 *	 2. stop the SQL edition: every table and sequence of schema cfeed in
 *		ACCESS EXCLUSIVE mode: shard_config and change first (the order of
 *		DROP EXTENSION and of the sweeps: a sweep waits, and fails with
 *		55000 once the move commits), then the sequences (no change_id is
 *		drawn after its position is copied, and a session's first
 *		statement, which reads cfeed.change_id_timeline under the C
 *		library, waits holding nothing of cfeed's), then the other tables.
 *		Open writing transactions finish first; later writers wait for the
 *		move and then write into the extension's tables, or fail and
 *		commit nothing.  A writer that deadlocks with the move (one that
 *		drew a change_id before it waits for cfeed.change, or wrote before
 *		in its transaction) is the one to fail: the move's deadlock_timeout
 *		is 10 s;
 *	 3. rename schema cfeed to cfeed_moving, drop the SQL edition's event
 *		trigger, CREATE EXTENSION cfeed VERSION '@VERSION@';
 *	 4. copy.sql: every row and sequence position, the privileges, checks,
 *		the tracked tables' triggers made again on the new edition;
 *	 5. drop schema cfeed_moving unless an object outside it depends on it.
 */
\set ON_ERROR_STOP 1
BEGIN;
SET LOCAL search_path = pg_catalog, pg_temp;
SET LOCAL client_min_messages = warning;
SET LOCAL check_function_bodies = false;

-- 1. check
DO $move$
BEGIN
	IF NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER) THEN
		RAISE EXCEPTION 'only a superuser may move cfeed to the C extension'
			USING ERRCODE = '42501',
				  DETAIL = 'CREATE EXTENSION cfeed needs a superuser.';
	END IF;
	IF EXISTS (SELECT FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'cfeed') THEN
		RAISE EXCEPTION 'extension cfeed is installed already'
			USING ERRCODE = '55000',
				  DETAIL = 'This script moves a database from the SQL edition to the C extension.';
	END IF;
	IF pg_catalog.to_regprocedure('cfeed._sqled_owner()') IS NULL THEN
		RAISE EXCEPTION 'the SQL edition of cfeed is not installed in this database'
			USING ERRCODE = '55000',
				  DETAIL = 'There is no schema cfeed made by cfeed-sql--@VERSION@.sql.';
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

-- 2. stop the SQL edition: its tables and sequences (see the top)
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

-- 3. the extension beside the SQL edition
DROP EVENT TRIGGER IF EXISTS cfeed_tracked_table_dropped;
ALTER SCHEMA cfeed RENAME TO cfeed_moving;
CREATE EXTENSION cfeed VERSION '@VERSION@';

-- @copy

-- 5. the SQL edition goes, unless an object outside it depends on it: its
-- objects are those of schema cfeed_moving and their parts (defaults,
-- policies, rules, triggers, constraints, indexes: auto or internal
-- dependencies)
DO $move$
DECLARE
	v_dependents text;
BEGIN
	WITH RECURSIVE inside AS (
		SELECT 'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid AS classid, c.oid AS objid
		FROM pg_catalog.pg_class c WHERE c.relnamespace OPERATOR(pg_catalog.=) 'cfeed_moving'::regnamespace
		UNION
		SELECT 'pg_catalog.pg_proc'::pg_catalog.regclass::pg_catalog.oid, p.oid
		FROM pg_catalog.pg_proc p WHERE p.pronamespace OPERATOR(pg_catalog.=) 'cfeed_moving'::regnamespace
		UNION
		SELECT 'pg_catalog.pg_type'::pg_catalog.regclass::pg_catalog.oid, t.oid
		FROM pg_catalog.pg_type t WHERE t.typnamespace OPERATOR(pg_catalog.=) 'cfeed_moving'::regnamespace
		UNION
		SELECT d.classid, d.objid
		FROM pg_catalog.pg_depend d
		JOIN inside i ON i.classid OPERATOR(pg_catalog.=) d.refclassid AND i.objid OPERATOR(pg_catalog.=) d.refobjid
		WHERE d.deptype IN ('a', 'i'))
	SELECT pg_catalog.string_agg(DISTINCT COALESCE(
			(SELECT pg_catalog.pg_describe_object('pg_catalog.pg_class'::pg_catalog.regclass, r.ev_class, 0)
			 FROM pg_catalog.pg_rewrite r
			 WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass
			   AND r.oid OPERATOR(pg_catalog.=) d.objid),	-- a view's rule: the view
			pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid)), ', ')
	INTO v_dependents
	FROM pg_catalog.pg_depend d
	JOIN inside i ON i.classid OPERATOR(pg_catalog.=) d.refclassid AND i.objid OPERATOR(pg_catalog.=) d.refobjid
	WHERE d.deptype OPERATOR(pg_catalog.=) 'n'
	  AND NOT EXISTS (SELECT FROM inside j
					  WHERE j.classid OPERATOR(pg_catalog.=) d.classid AND j.objid OPERATOR(pg_catalog.=) d.objid);
	IF v_dependents IS NOT NULL THEN
		RAISE EXCEPTION 'objects outside the SQL edition depend on it'
			USING ERRCODE = '2BP01',
				  DETAIL = pg_catalog.format('Dependent objects: %s.', v_dependents),
				  HINT = 'Drop them first and make them again after the move; nothing has changed.';
	END IF;
END
$move$;
DROP SCHEMA cfeed_moving CASCADE;

COMMIT;
