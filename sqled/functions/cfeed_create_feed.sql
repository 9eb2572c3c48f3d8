/*
 * cfeed.create_feed(name, shards, feed_id, sweep_group, longpoll, comment):
 * the feed and its shards 0..shards-1, with the caller's privileges
 * (src/feed.c); feed_id defaults to one above the highest.
 */
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_id int := create_feed.feed_id;
	v_picked bool := create_feed.feed_id IS NULL;
	v_old record;
BEGIN
	IF create_feed.name IS NULL THEN PERFORM cfeed._null_arg('name'); END IF;
	IF create_feed.shards IS NULL THEN PERFORM cfeed._null_arg('shards'); END IF;
	IF create_feed.sweep_group IS NULL THEN PERFORM cfeed._null_arg('sweep_group'); END IF;
	IF create_feed.longpoll IS NULL THEN PERFORM cfeed._null_arg('longpoll'); END IF;
	IF pg_catalog.length(create_feed.name) NOT BETWEEN 1 AND 200 THEN
		RAISE EXCEPTION 'feed name must have 1 to 200 characters' USING ERRCODE = '22023';
	END IF;
	IF create_feed.name !~ '^[A-Za-z0-9_-]+$' THEN
		RAISE EXCEPTION 'invalid feed name "%"', create_feed.name
			USING ERRCODE = '22023',
				  DETAIL = 'A feed name may contain only letters A-Z and a-z, digits, "_" and "-".';
	END IF;
	IF create_feed.shards NOT BETWEEN 1 AND 65536 THEN
		RAISE EXCEPTION 'a feed must have 1 to 65536 shards, not %', create_feed.shards
			USING ERRCODE = '22023';
	END IF;

	-- Concurrent create_feed calls: the C edition takes cfeed.feed's lock
	-- in SHARE ROW EXCLUSIVE mode in C, for any caller with INSERT on it;
	-- a LOCK TABLE in SQL would need UPDATE, DELETE or TRUNCATE.  Here the
	-- table's unique keys decide: a feed id or name a concurrent call
	-- committed first fails the INSERT, which waited for it, and the next
	-- look sees it (in READ COMMITTED; a snapshot that cannot gets 40001).
	LOOP
		IF v_picked THEN
			-- past the top of int: a name in the way says so first, below
			SELECT LEAST(COALESCE(pg_catalog.max(f.feed_id), 0)::bigint + 1, 2147483647)::int INTO v_id
			FROM cfeed.feed f;
		END IF;
		SELECT f.feed_id, f.name INTO v_old FROM cfeed.feed f
		WHERE f.feed_id = v_id OR f.name = create_feed.name
		ORDER BY f.name = create_feed.name DESC
		LIMIT 1;
		IF FOUND THEN
			IF v_old.name = create_feed.name THEN
				RAISE EXCEPTION 'feed "%" already exists', create_feed.name
					USING ERRCODE = '42710',
						  DETAIL = pg_catalog.format('Feed %s has that name; feed names are unique.', v_old.feed_id),
						  HINT = 'Choose another name.';
			END IF;
			IF v_picked THEN
				RAISE EXCEPTION 'cannot pick a feed id for feed "%": feed 2147483647 exists', create_feed.name
					USING ERRCODE = '54000',
						  DETAIL = 'create_feed picks the id above the highest, and 2147483647 is the highest an int holds.',
						  HINT = 'Give the feed_id.';
			END IF;
			RAISE EXCEPTION 'feed % already exists', v_id
				USING ERRCODE = '42710',
					  DETAIL = pg_catalog.format('Feed %s is named "%s"; feed ids are unique.', v_old.feed_id, v_old.name),
					  HINT = 'Choose another feed_id, or leave it null to take the next free one.';
		END IF;
		BEGIN
			INSERT INTO cfeed.feed (feed_id, name, comment) VALUES (v_id, create_feed.name, create_feed.comment);
			EXIT;
		EXCEPTION WHEN unique_violation THEN
			IF pg_catalog.current_setting('transaction_isolation') IN ('repeatable read', 'serializable') THEN
				RAISE EXCEPTION 'could not create feed "%": a concurrent transaction created feed % or one of that name',
						create_feed.name, v_id
					USING ERRCODE = '40001',
						  HINT = 'Retry the transaction.';
			END IF;
		END;
	END LOOP;
	INSERT INTO cfeed.shard (feed_id, shard, sweep_group, longpoll)
	SELECT v_id, s, create_feed.sweep_group, create_feed.longpoll
	FROM pg_catalog.generate_series(0, create_feed.shards - 1) AS s;
	RETURN v_id;
END
$fn$;
