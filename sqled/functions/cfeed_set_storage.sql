/*
 * cfeed.set_storage(feed_id, storage, wait_ms): every shard of the SQL
 * edition is stored in rows (docs/sql-edition.md), so a move to rows does
 * nothing and returns no row, as the C function does for a feed already
 * there, and a move to ranges is refused (0A000) before anything is
 * locked or written.  The checks before it are the C function's.
 */
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE ROWS 16
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF set_storage.feed_id IS NULL THEN PERFORM cfeed._null_arg('feed_id'); END IF;
	IF set_storage.storage IS NULL THEN PERFORM cfeed._null_arg('storage'); END IF;
	IF set_storage.wait_ms IS NULL THEN PERFORM cfeed._null_arg('wait_ms'); END IF;
	IF set_storage.storage NOT IN ('rows', 'ranges') THEN
		RAISE EXCEPTION 'invalid storage "%"', set_storage.storage
			USING ERRCODE = '22023', HINT = 'A shard is stored in "rows" or "ranges".';
	END IF;
	IF set_storage.wait_ms < 0 THEN
		RAISE EXCEPTION 'argument "wait_ms" must not be negative, got %', set_storage.wait_ms
			USING ERRCODE = '22023', HINT = 'Pass wait_ms => 0 or more.';
	END IF;
	PERFORM cfeed._sqled_may_reshard(set_storage.feed_id, 'cfeed.set_storage()', 'set the storage of');
	IF NOT EXISTS (SELECT FROM cfeed.feed f WHERE f.feed_id = set_storage.feed_id) THEN
		RAISE EXCEPTION 'feed % does not exist', set_storage.feed_id
			USING ERRCODE = '42704', HINT = 'Create it with cfeed.create_feed().';
	END IF;
	PERFORM cfeed._sqled_layout(set_storage.feed_id, false);	-- 55000 for a layout shard_for cannot route by
	IF set_storage.storage = 'ranges' THEN
		RAISE EXCEPTION 'storage in ranges is not in the SQL edition of cfeed'
			USING ERRCODE = '0A000',
				  DETAIL = 'Every shard of the SQL edition is stored in rows.',
				  HINT = 'Move the database to the C extension first (docs/sql-edition.md).';
	END IF;
END
$fn$;
