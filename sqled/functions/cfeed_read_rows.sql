/*
 * cfeed.read_rows(feed_id, shard, cursor, max_count, wait_ms): cfeed.read
 * with each change's table, operation and row image, read by a second
 * statement whose newer snapshot sees every change the first returned.
 * Images are in the change's own columns (since 1.3) or, written before,
 * in cfeed.row_image; the table is the tracked table of the change's
 * number.  The read policy decides which images the caller sees.
 */
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE ROWS 1000
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_numbers bigint[];
	v_ids bigint[];
	v_times timestamptz[];
BEGIN
	SELECT pg_catalog.array_agg(r.change_sequence_number ORDER BY r.change_sequence_number),
		   pg_catalog.array_agg(r.change_id ORDER BY r.change_sequence_number),
		   pg_catalog.array_agg(r.stamped_at ORDER BY r.change_sequence_number)
	  INTO v_numbers, v_ids, v_times
	  FROM cfeed.read(read_rows.feed_id, read_rows.shard, read_rows.cursor,
					  read_rows.max_count, read_rows.wait_ms) r;
	IF v_numbers IS NULL THEN
		RETURN;
	END IF;
	RETURN QUERY
		SELECT u.n, u.id, u.t,
			   COALESCE(cfeed._tracked_table(c.tbl), i.tbl), COALESCE(c.op, i.op), COALESCE(c."row", i."row")
		FROM ROWS FROM (pg_catalog.unnest(v_numbers), pg_catalog.unnest(v_ids),
						pg_catalog.unnest(v_times)) AS u(n, id, t)
		LEFT JOIN cfeed.change c
			   ON c.feed_id OPERATOR(pg_catalog.=) read_rows.feed_id
			  AND c.shard OPERATOR(pg_catalog.=) read_rows.shard
			  AND c.change_sequence_number OPERATOR(pg_catalog.=) u.n
		LEFT JOIN cfeed.row_image i
			   ON c.tbl IS NULL
			  AND i.change_id OPERATOR(pg_catalog.=) u.id
			  AND i.feed_id OPERATOR(pg_catalog.=) read_rows.feed_id
		ORDER BY u.n;
END
$fn$;
