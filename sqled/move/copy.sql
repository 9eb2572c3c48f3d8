/*
 * sqled/move/copy.sql: the part both moves share (generate.pl puts it into
 * each).  Schema cfeed_moving is the edition being left, locked and
 * renamed; schema cfeed the other edition, just made, empty.
 *
 *	 a. the same catalogs: every table and sequence of one schema is in the
 *		other, with the same columns (names and types, in order): else
 *		55000 (editions of different versions);
 *	 b. the rows, table by table in the order of their foreign keys, as the
 *		superuser or owner running the move: the guards take them as a
 *		restore's (another transaction's writer_xid, an earlier written_at:
 *		numbers, stamps and closed shards kept, shards not checked), and
 *		give the pending changes the move's xid, so that the new edition's
 *		sweeps find them; row-level security does not apply to the owner;
 *	 c. the sequences' positions (last value and whether it was drawn);
 *	 d. the privileges granted on the schema, its tables, views, sequences
 *		and functions to roles other than the owner: granted or revoked on
 *		the new edition's objects of the same names until they are the same
 *		(the owner's own rights are the new owner's);
 *	 e. the check: every table holds the same rows (count, and every row of
 *		the old one in the new one; writer_xid aside), and the sequences
 *		stand where they stood;
 *	 f. the triggers of tables outside cfeed on functions of the edition
 *		left (a tracked table's cfeed_track, cfeed_track_change_id and
 *		cfeed_track_truncate: both editions make the same) are made again
 *		on the new edition's function of the same name, with the same
 *		definition and enabled state (ENABLE, ALWAYS, REPLICA, DISABLE), on
 *		partitions too; a trigger whose function the new edition lacks
 *		stops the move.  Dropping and making a trigger needs the table's
 *		owner: the superuser that runs the move, or the extension's owner
 *		when it owns the tracked tables.
 */

-- a. the same catalogs
DO $move$
DECLARE
	r record;
BEGIN
	FOR r IN
		WITH cols AS (
			SELECT n.nspname, c.relname,
				   pg_catalog.string_agg(pg_catalog.format('%I %s', a.attname,
														   pg_catalog.format_type(a.atttypid, a.atttypmod)),
										 ', ' ORDER BY a.attnum) AS cols
			FROM pg_catalog.pg_class c
			JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
			LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) c.oid
				AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped
			WHERE n.nspname IN ('cfeed', 'cfeed_moving') AND c.relkind IN ('r', 'S')
			GROUP BY 1, 2)
		SELECT COALESCE(o.relname, x.relname) AS relname, o.cols AS old_cols, x.cols AS new_cols
		FROM (SELECT * FROM cols WHERE nspname OPERATOR(pg_catalog.=) 'cfeed_moving') o
		FULL JOIN (SELECT * FROM cols WHERE nspname OPERATOR(pg_catalog.=) 'cfeed') x USING (relname)
		WHERE o.cols IS DISTINCT FROM x.cols
		ORDER BY 1
	LOOP
		RAISE EXCEPTION 'cfeed.% is not the same in both editions', r.relname
			USING ERRCODE = '55000',
				  DETAIL = pg_catalog.format('Columns in the edition left: %s; in the new one: %s.',
											 COALESCE(r.old_cols, 'none'), COALESCE(r.new_cols, 'none')),
				  HINT = 'Both editions must be of the same version: update the extension, or install the SQL edition of its version, first.';
	END LOOP;
END
$move$;

-- b. the rows; c. the sequences
DO $move$
DECLARE
	v_order text[] := ARRAY['feed', 'tracked_table', 'shard_config', 'change', 'row_image', 'lease',
							'failure_policy', 'failed_change', 'read_grant', 'write_grant', 'epoch', 'epoch_head',
							'stamp', 'sweep_mark'];
	v_table text;
	v_cols text;
	r record;
BEGIN
	SELECT pg_catalog.string_agg(c.relname, ', ' ORDER BY c.relname) INTO v_table
	FROM pg_catalog.pg_class c
	WHERE c.relnamespace OPERATOR(pg_catalog.=) 'cfeed'::regnamespace AND c.relkind OPERATOR(pg_catalog.=) 'r'
	  AND c.relname OPERATOR(pg_catalog.<>) ALL (v_order);
	IF v_table IS NOT NULL THEN
		RAISE EXCEPTION 'the move does not know table % of cfeed', v_table
			USING ERRCODE = '55000',
				  HINT = 'Move with the scripts of the editions'' version (sqled/).';
	END IF;
	-- a range shard's stamps name its changes by their writers' xids, which
	-- the copy gives the move's own (docs/design.md, "Storage in ranges")
	IF EXISTS (SELECT FROM cfeed_moving.shard_config s WHERE s.storage OPERATOR(pg_catalog.=) 'ranges') THEN
		RAISE EXCEPTION 'a feed is stored in ranges'
			USING ERRCODE = '0A000',
				  DETAIL = 'Moving feeds stored in ranges between the editions is not built yet.';
	END IF;
	-- a sweep mark left by a dropped range feed moves as it is: the same
	-- database, its xids still this database's (cfeed._sweep_mark_restored
	-- takes any other insert of one for a restore's)
	PERFORM pg_catalog.set_config('cfeed_mark.maker', pg_catalog.pg_current_xact_id()::text, true);
	FOREACH v_table IN ARRAY v_order LOOP
		SELECT pg_catalog.string_agg(pg_catalog.quote_ident(a.attname), ', ' ORDER BY a.attnum) INTO v_cols
		FROM pg_catalog.pg_attribute a
		WHERE a.attrelid OPERATOR(pg_catalog.=) pg_catalog.format('cfeed.%I', v_table)::regclass
		  AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped;
		EXECUTE pg_catalog.format('INSERT INTO cfeed.%1$I (%2$s) SELECT %2$s FROM cfeed_moving.%1$I', v_table, v_cols);
	END LOOP;
	PERFORM pg_catalog.set_config('cfeed_mark.maker', '', true);
	FOR r IN SELECT c.relname FROM pg_catalog.pg_class c
			 WHERE c.relnamespace OPERATOR(pg_catalog.=) 'cfeed'::regnamespace AND c.relkind OPERATOR(pg_catalog.=) 'S'
			 ORDER BY 1
	LOOP
		EXECUTE pg_catalog.format('SELECT pg_catalog.setval(''cfeed.%1$I'', s.last_value, s.is_called) FROM cfeed_moving.%1$I s',
								  r.relname);
	END LOOP;
END
$move$;

-- d. the privileges
DO $move$
DECLARE
	r record;
BEGIN
	FOR r IN
		WITH pairs AS (
			-- the schema
			SELECT 'SCHEMA' AS kind, 'cfeed' AS name, o.nspacl AS old_acl, o.nspowner AS old_owner,
				   x.nspacl AS new_acl, x.nspowner AS new_owner, 'n' AS defkind
			FROM pg_catalog.pg_namespace o, pg_catalog.pg_namespace x
			WHERE o.nspname OPERATOR(pg_catalog.=) 'cfeed_moving' AND x.nspname OPERATOR(pg_catalog.=) 'cfeed'
			UNION ALL
			-- tables, views, sequences of the same name
			SELECT CASE WHEN x.relkind OPERATOR(pg_catalog.=) 'S' THEN 'SEQUENCE' ELSE 'TABLE' END,
				   x.oid::regclass::text, o.relacl, o.relowner, x.relacl, x.relowner,
				   CASE WHEN x.relkind OPERATOR(pg_catalog.=) 'S' THEN 's' ELSE 'r' END
			FROM pg_catalog.pg_class o
			JOIN pg_catalog.pg_class x ON x.relname OPERATOR(pg_catalog.=) o.relname
				AND x.relnamespace OPERATOR(pg_catalog.=) 'cfeed'::regnamespace
			WHERE o.relnamespace OPERATOR(pg_catalog.=) 'cfeed_moving'::regnamespace
			  AND o.relkind IN ('r', 'v', 'S') AND x.relkind OPERATOR(pg_catalog.=) o.relkind
			UNION ALL
			-- functions and procedures of the same name and arguments
			SELECT 'ROUTINE', x.oid::regprocedure::text, o.proacl, o.proowner, x.proacl, x.proowner, 'f'
			FROM pg_catalog.pg_proc o
			JOIN pg_catalog.pg_proc x ON x.proname OPERATOR(pg_catalog.=) o.proname
				AND x.pronamespace OPERATOR(pg_catalog.=) 'cfeed'::regnamespace
				AND x.proargtypes OPERATOR(pg_catalog.=) o.proargtypes
			WHERE o.pronamespace OPERATOR(pg_catalog.=) 'cfeed_moving'::regnamespace
		), old_privs AS (
			SELECT p.kind, p.name, a.grantee, a.privilege_type, a.is_grantable
			FROM pairs p, pg_catalog.aclexplode(COALESCE(p.old_acl, pg_catalog.acldefault(p.defkind::"char", p.old_owner))) a
			WHERE a.grantee OPERATOR(pg_catalog.<>) p.old_owner
		), new_privs AS (
			SELECT p.kind, p.name, a.grantee, a.privilege_type, a.is_grantable
			FROM pairs p, pg_catalog.aclexplode(COALESCE(p.new_acl, pg_catalog.acldefault(p.defkind::"char", p.new_owner))) a
			WHERE a.grantee OPERATOR(pg_catalog.<>) p.new_owner
		)
		SELECT 'GRANT' AS verb, * FROM (SELECT * FROM old_privs EXCEPT SELECT * FROM new_privs) g
		UNION ALL
		SELECT 'REVOKE', * FROM (SELECT * FROM new_privs EXCEPT SELECT * FROM old_privs) v
		ORDER BY verb DESC, kind, name, grantee, privilege_type
	LOOP
		IF r.verb OPERATOR(pg_catalog.=) 'REVOKE' THEN
			EXECUTE pg_catalog.format('REVOKE %s ON %s %s FROM %s', r.privilege_type, r.kind, r.name,
									  CASE WHEN r.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
										   ELSE pg_catalog.quote_ident(r.grantee::regrole::text) END);
		ELSE
			EXECUTE pg_catalog.format('GRANT %s ON %s %s TO %s%s', r.privilege_type, r.kind, r.name,
									  CASE WHEN r.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
										   ELSE pg_catalog.quote_ident(r.grantee::regrole::text) END,
									  CASE WHEN r.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
		END IF;
	END LOOP;
END
$move$;

-- e. the check
DO $move$
DECLARE
	r record;
	v_cols text;
	v_old bigint;
	v_new bigint;
	v_missing bigint;
BEGIN
	FOR r IN SELECT c.relname, c.relkind FROM pg_catalog.pg_class c
			 WHERE c.relnamespace OPERATOR(pg_catalog.=) 'cfeed_moving'::regnamespace AND c.relkind IN ('r', 'S')
			 ORDER BY 1
	LOOP
		IF r.relkind OPERATOR(pg_catalog.=) 'S' THEN
			EXECUTE pg_catalog.format('SELECT ((SELECT ROW(s.last_value, s.is_called) FROM cfeed_moving.%1$I s)'
									  ' IS DISTINCT FROM (SELECT ROW(s.last_value, s.is_called) FROM cfeed.%1$I s))::int',
									  r.relname) INTO v_missing;
			v_old := 1;
			v_new := 1;
		ELSE
			SELECT pg_catalog.string_agg(pg_catalog.quote_ident(a.attname), ', ' ORDER BY a.attnum) INTO v_cols
			FROM pg_catalog.pg_attribute a
			WHERE a.attrelid OPERATOR(pg_catalog.=) pg_catalog.format('cfeed.%I', r.relname)::regclass
			  AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped
			  AND NOT (r.relname OPERATOR(pg_catalog.=) 'change' AND a.attname OPERATOR(pg_catalog.=) 'writer_xid');
			EXECUTE pg_catalog.format('SELECT (SELECT pg_catalog.count(*) FROM cfeed_moving.%1$I),'
									  ' (SELECT pg_catalog.count(*) FROM cfeed.%1$I),'
									  ' (SELECT pg_catalog.count(*) FROM (SELECT %2$s FROM cfeed_moving.%1$I'
									  ' EXCEPT ALL SELECT %2$s FROM cfeed.%1$I) d)', r.relname, v_cols)
				INTO v_old, v_new, v_missing;
		END IF;
		IF v_old OPERATOR(pg_catalog.<>) v_new OR v_missing OPERATOR(pg_catalog.<>) 0 THEN
			RAISE EXCEPTION 'cfeed.% did not move whole', r.relname
				USING ERRCODE = 'XX000',
					  DETAIL = pg_catalog.format('%s rows before, %s after, %s not found after.', v_old, v_new, v_missing);
		END IF;
	END LOOP;
END
$move$;

-- f. the tracked tables' triggers: each one's definition as
-- pg_get_triggerdef writes it with the edition left first in the search
-- path (its function's name unqualified, every other name qualified as it
-- needs), run with the new edition first in the search path
DO $move$
DECLARE
	v_states jsonb;
	r record;
	v_def text;
BEGIN
	SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('rel', t.tgrelid, 'name', t.tgname, 'enabled', t.tgenabled))
	INTO v_states
	FROM pg_catalog.pg_trigger t
	JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) t.tgfoid
	WHERE p.pronamespace OPERATOR(pg_catalog.=) 'cfeed_moving'::regnamespace AND NOT t.tgisinternal;
	FOR r IN SELECT t.oid, t.tgrelid::regclass::text AS rel, t.tgname
			 FROM pg_catalog.pg_trigger t
			 JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) t.tgfoid
			 JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) t.tgrelid
			 WHERE p.pronamespace OPERATOR(pg_catalog.=) 'cfeed_moving'::regnamespace AND NOT t.tgisinternal
			   AND t.tgparentid OPERATOR(pg_catalog.=) 0
			   AND c.relnamespace OPERATOR(pg_catalog.<>) ALL (ARRAY['cfeed'::regnamespace, 'cfeed_moving'::regnamespace])
			 ORDER BY t.tgrelid, t.tgname
	LOOP
		PERFORM pg_catalog.set_config('search_path', 'cfeed_moving, pg_catalog, pg_temp', true);
		v_def := pg_catalog.pg_get_triggerdef(r.oid);
		PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
		EXECUTE pg_catalog.format('DROP TRIGGER %I ON %s', r.tgname, r.rel);
		PERFORM pg_catalog.set_config('search_path', 'cfeed, pg_catalog, pg_temp', true);
		EXECUTE v_def;
		PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
	END LOOP;
	-- their enabled states, partitions' clones too
	FOR r IN SELECT s.rel::regclass::text AS rel, s.name, s.enabled
			 FROM pg_catalog.jsonb_to_recordset(COALESCE(v_states, '[]')) s(rel oid, name name, enabled text)
			 JOIN pg_catalog.pg_trigger t ON t.tgrelid OPERATOR(pg_catalog.=) s.rel
				 AND t.tgname OPERATOR(pg_catalog.=) s.name
			 WHERE t.tgenabled::text OPERATOR(pg_catalog.<>) s.enabled
			 ORDER BY s.rel, s.name
	LOOP
		EXECUTE pg_catalog.format('ALTER TABLE ONLY %s %s TRIGGER %I', r.rel,
								  CASE r.enabled WHEN 'A' THEN 'ENABLE ALWAYS' WHEN 'R' THEN 'ENABLE REPLICA'
												 WHEN 'D' THEN 'DISABLE' ELSE 'ENABLE' END, r.name);
	END LOOP;
END
$move$;
