/*
 * cfeed.backfill(tbl, feed_id, order_by): as src/backfill.c: numbers the
 * existing rows of a table the feed tracks into each shard's migration
 * range (start-k+1 .. start for a shard with k rows), in order_by order
 * (cfeed._sqled_order_by; the primary key's, else the tracking key's, when
 * null), drawing their change_ids in that order, with 'insert' images
 * (and the change_id column set, the image showing the row that UPDATE
 * wrote, after the table's other BEFORE triggers), and returns the number
 * of rows.  42501 unless the caller may write the feed and owns the
 * table; 55000 when the feed does not track it, a shard has history
 * already, a shard has no room, or a trigger skipped, moved or rewrote a
 * row or wrote the table meanwhile (then nothing is written).  An
 * inheritance parent's rows only (ONLY: its triggers do not fire for its
 * children's rows).  The table is held in SHARE ROW EXCLUSIVE mode (the C
 * edition: SHARE; this one must also disable its triggers, below), so
 * writers wait and history and the live changes meet exactly.  Its
 * tracking triggers are disabled (ALTER TABLE ... DISABLE TRIGGER, in this
 * transaction only) while its change_id column is set: the C edition
 * silences them in its backend for the UPDATE's rows only, and publishes
 * what the table's other triggers write meanwhile, which this edition
 * refuses instead (a setting any role could set would let a role silence
 * the triggers as the owner's SECURITY DEFINER functions run).
 */
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_name name;
	v_args text[];
	v_count int;
	v_order text;
	v_qname text := cfeed._sqled_qualified(backfill.tbl);
	v_cid bool;
	v_no int;
	v_starts bigint[];
	v_shards int[];
	v_ids bigint[];
	v_numbers bigint[];
	v_rows jsonb[];
	v_toids oid[];
	v_tids tid[];
	v_full record;
	v_target text;
	v_kept bool;
	v_trig record;
	v_enable text[] := '{}';
	v_sql text;
BEGIN
	IF backfill.tbl IS NULL THEN PERFORM cfeed._null_arg('tbl'); END IF;
	IF backfill.feed_id IS NULL THEN PERFORM cfeed._null_arg('feed_id'); END IF;
	PERFORM cfeed._sqled_check_write(backfill.feed_id);
	v_name := cfeed._sqled_track_table(backfill.tbl, 'SHARE ROW EXCLUSIVE');
	SELECT l.shard_count INTO v_count FROM cfeed._sqled_layout(backfill.feed_id, false) l;
	v_args := cfeed._sqled_track_args(backfill.tbl);
	IF v_args IS NULL OR v_args[1]::int <> backfill.feed_id THEN
		RAISE EXCEPTION 'table "%" is not tracked by feed %', v_name, backfill.feed_id
			USING ERRCODE = '55000',
				  DETAIL = 'backfill() shards the rows by the key the table is tracked with.',
				  HINT = 'Run cfeed.track() and cfeed.backfill() in one transaction, so that history and live changes meet exactly.';
	END IF;
	-- the table's own row-level security would hide rows from the numbering
	IF pg_catalog.row_security_active(backfill.tbl) THEN
		RAISE EXCEPTION 'row-level security of table "%" applies to backfill()', v_name
			USING ERRCODE = '42501',
				  DETAIL = 'It would number only the rows the policies let you see.',
				  HINT = 'Run backfill() as a role the table''s row-level security does not apply to (its owner, unless FORCE ROW LEVEL SECURITY is set; a role with BYPASSRLS).';
	END IF;
	IF backfill.order_by IS NULL THEN
		SELECT pg_catalog.string_agg(pg_catalog.format('t.%I', c), ', ' ORDER BY o) INTO v_order
		FROM pg_catalog.unnest(cfeed._sqled_key_columns(backfill.tbl,
				CASE WHEN EXISTS (SELECT FROM pg_catalog.pg_index i
								  WHERE i.indrelid = backfill.tbl AND i.indisprimary)
					 THEN '' ELSE v_args[2] END)) WITH ORDINALITY u(c, o);
	ELSE
		v_order := cfeed._sqled_order_by(backfill.tbl, backfill.order_by);
	END IF;
	v_starts := cfeed._sqled_backfill_starts(backfill.feed_id, v_count);
	v_cid := cfeed._sqled_change_id_column(backfill.tbl);
	v_target := CASE WHEN (SELECT c.relkind FROM pg_catalog.pg_class c WHERE c.oid = backfill.tbl) = 'p'
					 THEN v_qname ELSE 'ONLY ' || v_qname END;

	-- the rows in order, their shards and images; change_ids drawn in order
	EXECUTE pg_catalog.format(
		'SELECT pg_catalog.array_agg(n.shard ORDER BY n.o), pg_catalog.array_agg(n.cid ORDER BY n.o),'
		' pg_catalog.array_agg(%s ORDER BY n.o), pg_catalog.array_agg(n.toid ORDER BY n.o),'
		' pg_catalog.array_agg(n.tid ORDER BY n.o)'
		' FROM (SELECT r.*, pg_catalog.nextval(''cfeed.change_id'') AS cid'
		'  FROM (SELECT t.tableoid AS toid, t.ctid AS tid, pg_catalog.to_jsonb(t) AS j,'
		'   cfeed.shard_for($1, %s) AS shard, pg_catalog.row_number() OVER (ORDER BY %s) AS o'
		'   FROM %s t ORDER BY o) r) n',
		CASE WHEN v_cid THEN 'n.j OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(''change_id'', n.cid)' ELSE 'n.j' END,
		cfeed._sqled_key_expr(cfeed._sqled_key_columns(backfill.tbl, v_args[2]), 't'),
		v_order, v_target)
		INTO v_shards, v_ids, v_rows, v_toids, v_tids
		USING backfill.feed_id;
	IF v_ids IS NULL THEN
		RETURN 0;
	END IF;

	-- numbered per shard: start-k+1 .. start; the first shard without room fails
	SELECT pg_catalog.array_agg(n.number ORDER BY n.o) INTO v_numbers
	FROM (SELECT h.o, v_starts[h.shard + 1] - pg_catalog.count(*) OVER (PARTITION BY h.shard)
					  + pg_catalog.row_number() OVER (PARTITION BY h.shard ORDER BY h.o) AS number
		  FROM pg_catalog.unnest(v_shards) WITH ORDINALITY h(shard, o)) n;
	SELECT h.shard, pg_catalog.count(*) AS k INTO v_full
	FROM pg_catalog.unnest(v_shards) h(shard)
	GROUP BY h.shard HAVING pg_catalog.count(*) > v_starts[h.shard + 1]
	ORDER BY h.shard LIMIT 1;
	IF FOUND THEN
		RAISE EXCEPTION 'shard % of feed % has no room for % history rows', v_full.shard, backfill.feed_id, v_full.k
			USING ERRCODE = '55000',
				  DETAIL = pg_catalog.format('History is numbered 1 .. %s, the shard''s migration range, which holds %s rows.',
											 v_starts[v_full.shard + 1], v_starts[v_full.shard + 1]),
				  HINT = 'Use more shards, or create the shard with a higher start value.';
	END IF;

	IF v_cid THEN
		-- the rows' change_id, with the tracking triggers off meanwhile; the
		-- images become the rows the UPDATE wrote
		FOR v_trig IN
			SELECT g.tgrelid, g.tgname, g.tgenabled FROM pg_catalog.pg_trigger g
			WHERE g.tgname IN ('cfeed_track', 'cfeed_track_change_id') AND g.tgenabled <> 'D'
			  AND (g.tgrelid = backfill.tbl
				   OR g.tgrelid IN (SELECT p.relid FROM pg_catalog.pg_partition_tree(backfill.tbl) p)) LOOP
			EXECUTE pg_catalog.format('ALTER TABLE ONLY %s DISABLE TRIGGER %I',
									  cfeed._sqled_qualified(v_trig.tgrelid), v_trig.tgname);
			v_enable := v_enable || pg_catalog.format('ALTER TABLE ONLY %s ENABLE %s TRIGGER %I',
				cfeed._sqled_qualified(v_trig.tgrelid),
				CASE v_trig.tgenabled WHEN 'A' THEN 'ALWAYS' WHEN 'R' THEN 'REPLICA' ELSE '' END, v_trig.tgname);
		END LOOP;
		EXECUTE pg_catalog.format(
			'WITH w AS (UPDATE %s t SET change_id = u.cid'
			'  FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3),'
			'   pg_catalog.unnest($4)) WITH ORDINALITY u(toid, tid, cid, shard, o)'
			'  WHERE t.tableoid = u.toid AND t.ctid = u.tid'
			'  RETURNING u.o, pg_catalog.to_jsonb(t) AS j, t.tableoid AS toid, t.ctid AS tid,'
			'   t.change_id = u.cid AND u.shard = cfeed.shard_for($5, %s) AS kept)'
			' SELECT pg_catalog.array_agg(w.j ORDER BY w.o), pg_catalog.array_agg(w.toid ORDER BY w.o),'
			'  pg_catalog.array_agg(w.tid ORDER BY w.o),'
			'  pg_catalog.count(*) = $6 AND pg_catalog.bool_and(w.kept IS TRUE) FROM w',
			v_target, cfeed._sqled_key_expr(cfeed._sqled_key_columns(backfill.tbl, v_args[2]), 't'))
			INTO v_rows, v_toids, v_tids, v_kept
			USING v_toids, v_tids, v_ids, v_shards, backfill.feed_id, pg_catalog.cardinality(v_ids);
		FOREACH v_sql IN ARRAY v_enable LOOP
			EXECUTE v_sql;
		END LOOP;
		IF NOT v_kept THEN
			RAISE EXCEPTION 'a trigger skipped or moved a row that backfill numbered'
				USING ERRCODE = '55000',
					  DETAIL = 'backfill() sets each row''s change_id with an UPDATE, which fires the table''s other triggers; a BEFORE UPDATE trigger returned no row, set change_id to another value, or changed the row''s key so that it belongs to another shard.',
					  HINT = 'Let the table''s triggers pass an UPDATE that sets change_id alone, then backfill again.';
		END IF;
		-- a row the table's other triggers wrote meanwhile (its tracking
		-- triggers off): the C edition publishes it, this one refuses.  The
		-- table must hold exactly the row versions the UPDATE wrote: a later
		-- write makes a new version (tableoid and ctid), an insert or a
		-- delete changes the count.
		EXECUTE pg_catalog.format(
			'SELECT (SELECT pg_catalog.count(*) FROM %1$s t) = $3'
			' AND (SELECT pg_catalog.count(*) FROM %1$s t'
			'  JOIN ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) u(toid, tid)'
			'  ON t.tableoid = u.toid AND t.ctid = u.tid) = $3', v_target)
			INTO v_kept
			USING v_toids, v_tids, pg_catalog.cardinality(v_ids);
		IF NOT v_kept THEN
			RAISE EXCEPTION 'a trigger wrote the table while backfill numbered its rows'
				USING ERRCODE = '55000',
					  DETAIL = 'The table''s tracking triggers are off while backfill() sets the rows'' change_id in the SQL edition, so that write would not be published.',
					  HINT = 'Let the table''s triggers pass an UPDATE that sets change_id alone, then backfill again.';
		END IF;
	END IF;

	v_no := cfeed._sqled_table_number(backfill.tbl, false);
	INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number, tbl, op, "row") SELECT backfill.feed_id, h.shard, h.change_id, h.number, v_no, 'insert', h."row" FROM ROWS FROM (pg_catalog.unnest(v_shards), pg_catalog.unnest(v_ids), pg_catalog.unnest(v_numbers), pg_catalog.unnest(v_rows)) h(shard, change_id, number, "row") ORDER BY h.change_id;
	RETURN pg_catalog.cardinality(v_ids);
END
$fn$;
