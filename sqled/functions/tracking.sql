/*
 * ======================================================================
 * Tracking tables, the SQL edition's helpers (sqled/functions/tracking.sql)
 * ======================================================================
 *
 * cfeed.track, cfeed.untrack, cfeed.backfill and the triggers of a tracked
 * table (cfeed_track_*.sql, cfeed_backfill.sql) are the C edition's
 * (src/tracked.c, track_ddl.c, track_trigger.c, backfill.c): the same
 * triggers with the same arguments ('<feed_id>', '<key>': the key's
 * columns as quoted identifiers joined by commas, '' for the primary key),
 * the same key text, shard, change_id and row image (to_jsonb of the row)
 * per change, the same checks and errors.  What PL/pgSQL cannot keep
 * between calls (the C edition's per-relation cache) is looked up again
 * per row in the catalogs.
 *
 * Row images come only from cfeed's tracking: cfeed._change_guard refuses
 * a change carrying one from a role without the owner's privileges unless
 * the INSERT is cfeed's own, which it tells by the call stack
 * (cfeed._sqled_from_tracking): the C edition's image scope, which SQL
 * cannot hold where the writer could not set it.
 */

/*
 * cfeed._sqled_track_table: the checks of src/tracked.c on the table a
 * track, untrack or backfill call names (42P01 for an OID that is no
 * relation, 42809 for one that is not a table or partitioned table, 42501
 * unless the current user has the privileges of its owner), made before
 * its lock is taken (nobody holds a lock on a table it does not own), then
 * LOCK TABLE in lockmode (its partitions too).  Returns the table's name.
 */
CREATE FUNCTION cfeed._sqled_track_table(tbl regclass, lockmode text) RETURNS name
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_name name;
	v_kind "char";
	v_owner oid;
BEGIN
	SELECT c.relname, c.relkind, c.relowner INTO v_name, v_kind, v_owner
	FROM pg_catalog.pg_class c WHERE c.oid = _sqled_track_table.tbl::pg_catalog.oid;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'relation with OID % does not exist', _sqled_track_table.tbl::pg_catalog.oid
			USING ERRCODE = '42P01';
	END IF;
	IF v_kind NOT IN ('r', 'p') THEN
		RAISE EXCEPTION '"%" is not a table', v_name
			USING ERRCODE = '42809', HINT = 'cfeed tracks tables and partitioned tables.';
	END IF;
	IF NOT pg_catalog.pg_has_role(v_owner, 'USAGE') THEN
		RAISE EXCEPTION 'must be owner of table %', v_name USING ERRCODE = '42501';
	END IF;
	EXECUTE pg_catalog.format('LOCK TABLE %s IN %s MODE', cfeed._sqled_qualified(_sqled_track_table.tbl), lockmode);
	RETURN v_name;
END
$fn$;
COMMENT ON FUNCTION cfeed._sqled_track_table(regclass, text) IS 'internal (SQL edition): checks that the current user owns a table cfeed may track, then locks it';

/*
 * cfeed._sqled_qualified: a relation's schema-qualified, quoted name.
 */
CREATE FUNCTION cfeed._sqled_qualified(tbl oid) RETURNS text
	LANGUAGE sql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
	SELECT pg_catalog.format('%I.%I', n.nspname, c.relname)
	FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	WHERE c.oid = $1
$fn$;
COMMENT ON FUNCTION cfeed._sqled_qualified(oid) IS 'internal (SQL edition): a relation''s schema-qualified, quoted name';

/*
 * cfeed._sqled_track_args: the arguments (feed_id, key) of a relation's
 * cfeed_track trigger, null when it has none (is not tracked), as
 * src/tracked.c finds it: by its name and its two arguments.
 */
CREATE FUNCTION cfeed._sqled_track_args(tbl oid) RETURNS text[]
	LANGUAGE plpgsql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_raw bytea;
	v_at int;
	v_args text[] := '{}';
BEGIN
	SELECT g.tgargs INTO v_raw FROM pg_catalog.pg_trigger g
	WHERE g.tgrelid = _sqled_track_args.tbl AND g.tgname = 'cfeed_track' AND g.tgnargs = 2;
	IF NOT FOUND THEN
		RETURN NULL;
	END IF;
	-- tgargs: each argument followed by a zero byte
	LOOP
		v_at := pg_catalog.position(v_raw, '\x00'::pg_catalog.bytea);
		EXIT WHEN v_at = 0;
		v_args := v_args || pg_catalog.convert_from(pg_catalog.substring(v_raw, 1, v_at - 1),
												pg_catalog.getdatabaseencoding());
		v_raw := pg_catalog.substring(v_raw, v_at + 1);
	END LOOP;
	RETURN v_args;
END
$fn$;
COMMENT ON FUNCTION cfeed._sqled_track_args(oid) IS 'internal (SQL edition): the feed_id and key arguments of a table''s cfeed_track trigger, null when it is not tracked';

/*
 * cfeed._sqled_key_columns: the columns of a tracked table's key, as
 * src/tracked.c resolves them: keyspec '' for the primary key's (55000
 * without one), else a comma-separated list of column names (SQL
 * identifiers, quoted or folded to lower case; 22023 when it is not one,
 * 42703 for a name that is no column of the table).
 */
CREATE FUNCTION cfeed._sqled_key_columns(tbl oid, keyspec text) RETURNS name[]
	LANGUAGE plpgsql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_relname name := (SELECT c.relname FROM pg_catalog.pg_class c WHERE c.oid = _sqled_key_columns.tbl);
	v_cols name[] := '{}';
	v_names text[] := '{}';
	v_name text;
	v_len int := pg_catalog.length(keyspec);
	v_at int := 1;
	v_ch text;
	v_start int;
	v_ok bool := true;
BEGIN
	IF keyspec = '' THEN
		SELECT pg_catalog.array_agg(a.attname ORDER BY k.n) INTO v_cols
		FROM pg_catalog.pg_index i
		CROSS JOIN LATERAL pg_catalog.unnest((i.indkey::pg_catalog.int2[])[0 : i.indnkeyatts - 1])
			WITH ORDINALITY k(att, n)
		JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.att
		WHERE i.indrelid = _sqled_key_columns.tbl AND i.indisprimary;
		IF v_cols IS NULL THEN
			RAISE EXCEPTION 'table "%" has no primary key', v_relname
				USING ERRCODE = '55000',
					  DETAIL = 'cfeed shards a tracked table''s changes by its primary key unless a key is given.',
					  HINT = 'Add a primary key, or track it with cfeed.track(tbl, feed_id, key => ''column'').';
		END IF;
		RETURN v_cols;
	END IF;

	-- the identifiers of the list, as PostgreSQL's SplitIdentifierString reads them
	LOOP
		WHILE v_at <= v_len AND pg_catalog.substr(keyspec, v_at, 1) IN (' ', E'\t', E'\n', E'\r', E'\f', E'\x0B') LOOP
			v_at := v_at + 1;
		END LOOP;
		v_ch := pg_catalog.substr(keyspec, v_at, 1);
		IF v_ch = '"' THEN
			v_name := '';
			LOOP
				v_at := v_at + 1;
				IF v_at > v_len THEN
					v_ok := false;		-- unterminated
					EXIT;
				END IF;
				v_ch := pg_catalog.substr(keyspec, v_at, 1);
				IF v_ch = '"' THEN
					EXIT WHEN pg_catalog.substr(keyspec, v_at + 1, 1) <> '"';
					v_at := v_at + 1;
				END IF;
				v_name := v_name || v_ch;
			END LOOP;
			EXIT WHEN NOT v_ok;
			v_at := v_at + 1;
			IF v_name = '' THEN
				v_ok := false;
				EXIT;
			END IF;
		ELSE
			v_start := v_at;
			WHILE v_at <= v_len AND pg_catalog.substr(keyspec, v_at, 1) NOT IN (',', ' ', E'\t', E'\n', E'\r', E'\f', E'\x0B') LOOP
				v_at := v_at + 1;
			END LOOP;
			IF v_at = v_start THEN
				v_ok := false;
				EXIT;
			END IF;
			v_name := pg_catalog.translate(pg_catalog.substr(keyspec, v_start, v_at - v_start),
										   'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz');
		END IF;
		v_names := v_names || v_name::name::text;
		WHILE v_at <= v_len AND pg_catalog.substr(keyspec, v_at, 1) IN (' ', E'\t', E'\n', E'\r', E'\f', E'\x0B') LOOP
			v_at := v_at + 1;
		END LOOP;
		EXIT WHEN v_at > v_len;
		IF pg_catalog.substr(keyspec, v_at, 1) <> ',' THEN
			v_ok := false;
			EXIT;
		END IF;
		v_at := v_at + 1;
	END LOOP;
	IF NOT v_ok THEN
		RAISE EXCEPTION 'invalid key "%" for table "%"', keyspec, v_relname
			USING ERRCODE = '22023', HINT = 'Give a column name, or several separated by commas.';
	END IF;
	IF pg_catalog.cardinality(v_names) > 32 THEN
		RAISE EXCEPTION 'a key may have at most % columns', 32 USING ERRCODE = '22023';
	END IF;
	FOREACH v_name IN ARRAY v_names LOOP
		IF NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a
					   WHERE a.attrelid = _sqled_key_columns.tbl AND a.attname = v_name::name
						 AND a.attnum > 0 AND NOT a.attisdropped) THEN
			RAISE EXCEPTION 'column "%" of table "%" does not exist', v_name, v_relname
				USING ERRCODE = '42703', HINT = 'The key names columns of the tracked table.';
		END IF;
		v_cols := v_cols || v_name::name;
	END LOOP;
	RETURN v_cols;
END
$fn$;
COMMENT ON FUNCTION cfeed._sqled_key_columns(oid, text) IS 'internal (SQL edition): the key columns of a tracked table (its primary key''s for an empty key)';

/*
 * cfeed._sqled_key_expr: the SQL expression of a row's key text, the row
 * being rowref (a parameter, $1, or a table's alias): each key column's output (format('%s', col), what
 * psql shows), joined by '|' for several columns, a null column being the
 * empty string (src/tracked.c, cfeed_track_key_text).
 */
CREATE FUNCTION cfeed._sqled_key_expr(cols name[], rowref text) RETURNS text
	LANGUAGE sql IMMUTABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
	SELECT pg_catalog.format('pg_catalog.format(%L, %s)',
							 pg_catalog.array_to_string(pg_catalog.array_fill('%s'::text, ARRAY[pg_catalog.cardinality($1)]), '|'),
							 pg_catalog.string_agg(pg_catalog.format('(%s).%I', $2, c), ', ' ORDER BY o))
	FROM pg_catalog.unnest($1) WITH ORDINALITY u(c, o)
$fn$;
COMMENT ON FUNCTION cfeed._sqled_key_expr(name[], text) IS 'internal (SQL edition): the expression of a row''s key text';

/*
 * cfeed._sqled_change_id_column: whether a table has a bigint column
 * change_id, which the triggers set to each change's change_id.
 */
CREATE FUNCTION cfeed._sqled_change_id_column(tbl oid) RETURNS bool
	LANGUAGE sql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
	SELECT EXISTS (SELECT FROM pg_catalog.pg_attribute a
				   WHERE a.attrelid = $1 AND a.attname = 'change_id' AND a.attnum > 0
					 AND NOT a.attisdropped AND a.atttypid = 'pg_catalog.int8'::pg_catalog.regtype)
$fn$;
COMMENT ON FUNCTION cfeed._sqled_change_id_column(oid) IS 'internal (SQL edition): whether a table has a bigint change_id column';

/*
 * cfeed._sqled_check_permanent: 0A000 for a temporary table (src/tracked.c,
 * cfeed_track_check_permanent): PostgreSQL drops it without the event
 * trigger by which cfeed forgets a dropped tracked table, so its number
 * would go on naming its OID, which a later table may get.
 */
CREATE FUNCTION cfeed._sqled_check_permanent(tbl oid) RETURNS void
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_name name;
BEGIN
	SELECT c.relname INTO v_name FROM pg_catalog.pg_class c
	WHERE c.oid = _sqled_check_permanent.tbl AND c.relpersistence = 't';
	IF FOUND THEN
		RAISE EXCEPTION 'cannot track temporary table "%"', v_name
			USING ERRCODE = '0A000',
				  DETAIL = 'PostgreSQL drops a temporary table without the event trigger by which cfeed forgets a dropped tracked table.',
				  HINT = 'Track a permanent table.';
	END IF;
END
$fn$;
COMMENT ON FUNCTION cfeed._sqled_check_permanent(oid) IS 'internal (SQL edition): 0A000 for a temporary table, which cfeed does not track';

/*
 * cfeed._sqled_table_number: the number (cfeed.change.tbl) of the tracked
 * table whose trigger fired on relation tbl: tbl itself, or for a
 * partition the highest of its ancestors up to which each is tracked (row
 * triggers are cloned to partitions), as src/table_numbers.c: created if
 * it has none, as the owner of cfeed's tables, one transaction at a time
 * per table (the advisory lock (1667655015, table)); with refresh (for
 * cfeed.track), the number's name is set to the table's current name.  A
 * number is created only for a table that is tracked (its cfeed_track
 * trigger); any role may ask (numbers are no secret: cfeed._tracked_table
 * tells any role the table of one).  In REPEATABLE READ a number another
 * transaction created after the snapshot is not seen, and the table gets
 * a second one (both lead to it); cfeed.track numbers a table when it
 * tracks it, so a writer creates one only for a table tracked without.
 */
CREATE FUNCTION cfeed._sqled_table_number(tbl oid, refresh bool) RETURNS int
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_root oid := tbl;
	v_anc oid;
	v_no int;
	v_name text;
BEGIN
	IF (SELECT c.relispartition FROM pg_catalog.pg_class c WHERE c.oid = _sqled_table_number.tbl) THEN
		FOR v_anc IN SELECT a.relid FROM pg_catalog.pg_partition_ancestors(_sqled_table_number.tbl) WITH ORDINALITY a(relid, n)
					 WHERE a.relid <> _sqled_table_number.tbl ORDER BY a.n LOOP
			EXIT WHEN NOT EXISTS (SELECT FROM pg_catalog.pg_trigger g
								  WHERE g.tgrelid = v_anc AND g.tgname = 'cfeed_track');
			v_root := v_anc;
		END LOOP;
	END IF;
	-- a trigger attached to a temporary table by hand (src/tracked.c), even
	-- one whose OID a dropped tracked table's number still names
	PERFORM cfeed._sqled_check_permanent(v_root);
	IF NOT refresh THEN
		SELECT t.table_no INTO v_no FROM cfeed.tracked_table t WHERE t.tbl = v_root::pg_catalog.regclass LIMIT 1;
		IF FOUND THEN
			RETURN v_no;
		END IF;
	END IF;
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_trigger g WHERE g.tgrelid = v_root AND g.tgname = 'cfeed_track') THEN
		RAISE EXCEPTION 'table "%" is not tracked', (SELECT c.relname FROM pg_catalog.pg_class c WHERE c.oid = v_root)	-- not reached from cfeed's own calls
			USING ERRCODE = '55000';
	END IF;
	v_name := cfeed._sqled_qualified(v_root);
	PERFORM pg_catalog.pg_advisory_xact_lock(1667655015, v_root::pg_catalog.int4);
	SELECT t.table_no INTO v_no FROM cfeed.tracked_table t WHERE t.tbl = v_root::pg_catalog.regclass LIMIT 1;
	IF FOUND THEN
		UPDATE cfeed.tracked_table t SET name = v_name
		WHERE t.tbl = v_root::pg_catalog.regclass AND t.name IS DISTINCT FROM v_name;
		RETURN v_no;
	END IF;
	INSERT INTO cfeed.tracked_table (table_no, tbl, name)
	SELECT n.no, v_root::pg_catalog.regclass, v_name
	FROM (SELECT 1 + pg_catalog.floor(pg_catalog.random() * 2147483646)::pg_catalog.int4 AS no
		  FROM pg_catalog.generate_series(1, 16)) n
	WHERE NOT EXISTS (SELECT FROM cfeed.tracked_table t WHERE t.table_no = n.no)
	LIMIT 1
	RETURNING table_no INTO v_no;
	IF v_no IS NULL THEN
		RAISE EXCEPTION 'could not number tracked table "%"', (SELECT c.relname FROM pg_catalog.pg_class c WHERE c.oid = v_root)
			USING ERRCODE = '40001', DETAIL = 'cfeed.tracked_table changed concurrently.', HINT = 'Retry the transaction.';
	END IF;
	RETURN v_no;
END
$fn$;
COMMENT ON FUNCTION cfeed._sqled_table_number(oid, bool) IS 'internal (SQL edition): the number of the tracked table of a relation whose tracking trigger fired, created if it has none';
GRANT EXECUTE ON FUNCTION cfeed._sqled_table_number(oid, bool) TO PUBLIC;

/*
 * cfeed._sqled_pending_put, cfeed._sqled_pending_take: the change_ids the
 * BEFORE trigger draws for the AFTER trigger (src/track_trigger.c's
 * per-transaction map): a key-changing UPDATE's tombstone (key 'u' and
 * the update's change_id) and a DELETE from a partition ('d', the
 * partition and the row: a row moved to another partition is deleted
 * there, then inserted with the change_id its BEFORE INSERT trigger draws,
 * so the delete's is drawn first).  Kept in transaction-local settings
 * (undone with the subtransaction that made them), in 256 buckets: a
 * statement's many rows make no long string, and the settings' names are
 * few.  take returns null when there is none, and forgets the one it
 * returns (of equal keys, the first put: equal rows).  Any role can set
 * such a setting: take returns only a change_id between after and before
 * (exclusive), the row's previous change_id and the update's (or the
 * sequence's last value, plus one), where cfeed's own is, so that a
 * forged one cannot put the change before the row's previous change or
 * after a later one of its key.
 */
CREATE FUNCTION cfeed._sqled_pending_put(k text, id bigint) RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_name text := 'cfeed_sqled.pending_' || (pg_catalog.hashtext(k) OPERATOR(pg_catalog.&) 255);
BEGIN
	PERFORM pg_catalog.set_config(v_name,
		COALESCE(pg_catalog.current_setting(v_name, true), '') || ';' || k || '=' || id, true);
END
$fn$;
COMMENT ON FUNCTION cfeed._sqled_pending_put(text, bigint) IS 'internal (SQL edition): remembers a change_id the BEFORE trigger drew for the AFTER trigger';

CREATE FUNCTION cfeed._sqled_pending_take(k text, after bigint, before bigint) RETURNS bigint
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_name text := 'cfeed_sqled.pending_' || (pg_catalog.hashtext(k) OPERATOR(pg_catalog.&) 255);
	v_all text := COALESCE(pg_catalog.current_setting(v_name, true), '');
	v_at int;
	v_rest text;
	v_end int;
	v_id bigint;
BEGIN
	LOOP
		v_at := pg_catalog.strpos(v_all, ';' || k || '=');
		IF v_at = 0 THEN
			RETURN NULL;
		END IF;
		v_rest := pg_catalog.substr(v_all, v_at + pg_catalog.length(k) + 2);
		v_end := pg_catalog.strpos(v_rest, ';');
		IF v_end = 0 THEN
			v_end := pg_catalog.length(v_rest) + 1;
		END IF;
		v_all := pg_catalog.substr(v_all, 1, v_at - 1) || pg_catalog.substr(v_rest, v_end);
		PERFORM pg_catalog.set_config(v_name, v_all, true);
		v_id := pg_catalog.substr(v_rest, 1, v_end - 1)::bigint;
		IF v_id > COALESCE(after, 0) AND v_id < before THEN
			RETURN v_id;
		END IF;
	END LOOP;
END
$fn$;
COMMENT ON FUNCTION cfeed._sqled_pending_take(text, bigint, bigint) IS 'internal (SQL edition): the change_id the BEFORE trigger drew for this AFTER trigger, forgotten once taken';

/*
 * cfeed._sqled_from_tracking: whether a call stack (GET DIAGNOSTICS ...
 * PG_CONTEXT of cfeed._change_guard) is that of the INSERT of a tracked
 * change by cfeed._track_row or of history by cfeed.backfill: the line
 * after the guard's own is the statement, exactly as those functions
 * write it, and the one after it their frame.  PostgreSQL writes these
 * lines: no role can put the frame of cfeed's function under the text
 * of cfeed's statement but by running it (a statement that only began
 * with it would not parse).  The statements' texts are here and in those
 * functions: the regression tests write through both.
 */
CREATE FUNCTION cfeed._sqled_from_tracking(context text) RETURNS bool
	LANGUAGE sql IMMUTABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
	SELECT pg_catalog.starts_with($1, 'PL/pgSQL function cfeed._change_guard() line ')
	   AND (pg_catalog.starts_with(pg_catalog.substr($1, pg_catalog.strpos($1, E'\n') + 1),
				E'SQL statement "INSERT INTO cfeed.change (feed_id, shard, change_id, tbl, op, "row") VALUES (v_feed, v_shard, v_ids[i], v_no, v_ops[i], v_rows[i])"\n'
				'PL/pgSQL function cfeed._track_row() line ')
			OR pg_catalog.starts_with(pg_catalog.substr($1, pg_catalog.strpos($1, E'\n') + 1),
				E'SQL statement "INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number, tbl, op, "row") SELECT backfill.feed_id, h.shard, h.change_id, h.number, v_no, ''insert'', h."row" FROM ROWS FROM (pg_catalog.unnest(v_shards), pg_catalog.unnest(v_ids), pg_catalog.unnest(v_numbers), pg_catalog.unnest(v_rows)) h(shard, change_id, number, "row") ORDER BY h.change_id"\n'
				'PL/pgSQL function cfeed.backfill(regclass,integer,text) line '))
$fn$;
COMMENT ON FUNCTION cfeed._sqled_from_tracking(text) IS 'internal (SQL edition): whether a call stack is that of cfeed''s own INSERT of a tracked change or of history';

/*
 * cfeed._sqled_may_read_table: whether the current user may see the row
 * images of a table (src/read_access.c): it exists, the user may SELECT
 * it (or every column of it, when it has never dropped one: older images
 * hold a dropped column's values), and its row-level security does not
 * apply to the user.
 */
CREATE FUNCTION cfeed._sqled_may_read_table(tbl regclass) RETURNS bool
	LANGUAGE sql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
	SELECT $1 IS NOT NULL
	   AND EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid = $1::pg_catalog.oid)
	   AND (pg_catalog.has_table_privilege($1, 'SELECT')
			OR NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a
						   WHERE a.attrelid = $1::pg_catalog.oid AND a.attnum > 0
							 AND (a.attisdropped OR NOT pg_catalog.has_column_privilege($1, a.attnum, 'SELECT'))))
	   AND NOT pg_catalog.row_security_active($1)
$fn$;
COMMENT ON FUNCTION cfeed._sqled_may_read_table(regclass) IS 'internal (SQL edition): whether the current user may see the row images of a table';

/*
 * cfeed._sqled_may_read_table_as: cfeed._sqled_may_read_table for another
 * role, whose row-level security PostgreSQL's function cannot tell: it
 * applies where the table has it enabled, unless the role is a superuser,
 * has BYPASSRLS, or has the privileges of the table's owner and the table
 * does not FORCE it (check_enable_rls).
 */
CREATE FUNCTION cfeed._sqled_may_read_table_as(reader oid, tbl regclass) RETURNS bool
	LANGUAGE sql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
	SELECT $2 IS NOT NULL
	   AND EXISTS (SELECT FROM pg_catalog.pg_class c, pg_catalog.pg_roles r
				   WHERE c.oid = $2::pg_catalog.oid AND r.oid = $1
					 AND (pg_catalog.has_table_privilege($1, c.oid, 'SELECT')
						  OR NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a
										 WHERE a.attrelid = c.oid AND a.attnum > 0
										   AND (a.attisdropped OR NOT pg_catalog.has_column_privilege($1, c.oid, a.attnum, 'SELECT'))))
					 AND (NOT c.relrowsecurity OR r.rolsuper OR r.rolbypassrls
						  OR (NOT c.relforcerowsecurity AND pg_catalog.pg_has_role($1, c.relowner, 'USAGE'))))
$fn$;
COMMENT ON FUNCTION cfeed._sqled_may_read_table_as(oid, regclass) IS 'internal (SQL edition): whether a role may see the row images of a table';

/*
 * cfeed._sqled_order_by: backfill's order_by checked and rebuilt as
 * "t.<column> [ASC|DESC] [NULLS FIRST|LAST], ..." (src/order_by.c): a
 * comma-separated list of the table's column names (plain identifiers,
 * folded to lower case, or double-quoted; the first word of each item is
 * a name even when it is an SQL keyword, and is taken as written, not
 * truncated), each optionally followed by ASC or DESC and NULLS FIRST or
 * NULLS LAST, and nothing else.  The items are checked in order, and the
 * first one that is not a plain column name decides: 42703 when it starts
 * with a word that is not a column of the table, 22023 otherwise.  The C
 * edition checks the text with PostgreSQL's parser; here the grammar is
 * that small one, read by hand, with the same results (the regression
 * test track runs the C edition's cases).
 */
CREATE FUNCTION cfeed._sqled_order_by(tbl oid, given text) RETURNS text
	LANGUAGE plpgsql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_items text[] := '{}';
	v_item text := '';
	v_quoted bool := false;
	v_ch text;
	v_name text;
	v_rest text;
	v_words text[];
	v_out text[] := '{}';
	v_sort text;
	i int;
BEGIN
	-- the items: the text between commas outside double quotes
	FOR i IN 1 .. pg_catalog.length(given) LOOP
		v_ch := pg_catalog.substr(given, i, 1);
		IF v_ch = '"' THEN
			v_quoted := NOT v_quoted;
		ELSIF v_ch = ',' AND NOT v_quoted THEN
			v_items := v_items || v_item;
			v_item := '';
			CONTINUE;
		END IF;
		v_item := v_item || v_ch;
	END LOOP;
	v_items := v_items || v_item;

	FOREACH v_item IN ARRAY v_items LOOP
		v_item := pg_catalog.ltrim(v_item, E' \t\n\r\f\x0B');
		v_name := NULL;
		IF v_item ~ '^([A-Za-z_]|[^\x01-\x7F])' THEN
			v_name := pg_catalog.substring(v_item, '^(?:[A-Za-z_]|[^\x01-\x7F])(?:[A-Za-z_0-9$]|[^\x01-\x7F])*');
			v_rest := pg_catalog.substr(v_item, pg_catalog.length(v_name) + 1);
			v_name := pg_catalog.translate(v_name, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz');
		ELSIF v_item ~ '^"(?:[^"]|"")+"' THEN
			v_name := pg_catalog.substring(v_item, '^"((?:[^"]|"")+)"');
			v_rest := pg_catalog.substr(v_item, pg_catalog.length(v_name) + 3);
			v_name := pg_catalog.replace(v_name, '""', '"');
		END IF;
		IF v_name IS NULL THEN
			EXIT;
		END IF;
		IF NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a
					   WHERE a.attrelid = _sqled_order_by.tbl AND a.attname::text = v_name
						 AND a.attnum > 0 AND NOT a.attisdropped) THEN
			RAISE EXCEPTION 'column "%" of table "%" does not exist', v_name, (SELECT c.relname FROM pg_catalog.pg_class c WHERE c.oid = _sqled_order_by.tbl)
				USING ERRCODE = '42703', HINT = 'order_by lists column names of the table.';
		END IF;
		v_rest := pg_catalog.btrim(v_rest, E' \t\n\r\f\x0B');
		v_words := CASE WHEN v_rest = '' THEN '{}'::text[]
						ELSE pg_catalog.regexp_split_to_array(pg_catalog.lower(v_rest), E'[ \t\n\r\f\x0B]+') END;
		v_sort := NULL;
		IF v_words = '{}' THEN
			v_sort := '';
		ELSIF v_words IN ('{asc}', '{desc}') THEN
			v_sort := ' ' || pg_catalog.upper(v_words[1]);
		ELSIF v_words IN ('{nulls,first}', '{nulls,last}') THEN
			v_sort := ' NULLS ' || pg_catalog.upper(v_words[2]);
		ELSIF pg_catalog.cardinality(v_words) = 3 AND v_words[1] IN ('asc', 'desc')
			  AND v_words[2:3] IN ('{nulls,first}', '{nulls,last}') THEN
			v_sort := ' ' || pg_catalog.upper(v_words[1]) || ' NULLS ' || pg_catalog.upper(v_words[3]);
		END IF;
		IF v_sort IS NULL THEN
			v_name := NULL;
			EXIT;
		END IF;
		v_out := v_out || (pg_catalog.format('t.%I', v_name) || v_sort);
	END LOOP;
	IF v_name IS NULL THEN
		RAISE EXCEPTION 'invalid order_by "%"', given
			USING ERRCODE = '22023',
				  DETAIL = 'order_by is a comma-separated list of column names, each optionally followed by ASC or DESC and NULLS FIRST or NULLS LAST.',
				  HINT = 'For example: order_by => ''created_at, id DESC''.';
	END IF;
	RETURN pg_catalog.array_to_string(v_out, ', ');
END
$fn$;
COMMENT ON FUNCTION cfeed._sqled_order_by(oid, text) IS 'internal (SQL edition): backfill''s order_by, checked and rebuilt';

/*
 * cfeed._sqled_backfill_starts: the start values of a feed's shards
 * 0..count-1 for backfill, as the caller (cfeed._sqled_shard_starts: the
 * feeds it may write), 55000 for a shard that has history already: any
 * change numbered at or below its start, whoever may see it
 * (cfeed._sqled_shard_history).
 */
CREATE FUNCTION cfeed._sqled_backfill_starts(feed_id int, count int) RETURNS bigint[]
	LANGUAGE plpgsql STABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_starts bigint[] := '{}';
	v_start bigint;
	s int;
BEGIN
	FOR s IN 0 .. count - 1 LOOP
		SELECT x.start_sequence_number INTO v_start FROM cfeed._sqled_shard_starts x
		WHERE x.feed_id = _sqled_backfill_starts.feed_id AND x.shard = s;
		IF NOT FOUND THEN
			PERFORM cfeed._sqled_check_shard(_sqled_backfill_starts.feed_id, s);
		END IF;
		IF (SELECT h.history FROM cfeed._sqled_shard_history h
			WHERE h.feed_id = _sqled_backfill_starts.feed_id AND h.shard = s) THEN
			RAISE EXCEPTION 'shard % of feed % already has history', s, feed_id
				USING ERRCODE = '55000',
					  DETAIL = pg_catalog.format('Changes numbered at or below the shard''s start value %s exist; a shard''s history is written once.', v_start),
					  HINT = 'Backfill a feed once, before or right after it starts tracking.';
		END IF;
		v_starts := v_starts || v_start;
	END LOOP;
	RETURN v_starts;
END
$fn$;
COMMENT ON FUNCTION cfeed._sqled_backfill_starts(int, int) IS 'internal (SQL edition): the start values of a feed''s shards for backfill, which none may have history';

