/*
 * cfeed.shard_for(feed_id, key): the shard of a partition key, as
 * src/shards.c computes it (part of the public contract): FNV-1a, 32 bits,
 * over the key's UTF-8 bytes (offset basis 2166136261, prime 16777619),
 * as an unsigned 32-bit number, modulo the feed's shard count.  In bigint
 * arithmetic: the hash stays below 2^32 and the prime below 2^25, so
 * every product fits.  SECURITY DEFINER: any role may compute a shard, as
 * with the C function (the shard count is not a secret of the feed's
 * readers: clients compute it outside the database).
 */
	LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_count int;
	v_max int;
	v_bytes bytea;
	v_hash bigint := 2166136261;
	i int;
BEGIN
	IF shard_for.feed_id IS NULL THEN PERFORM cfeed._null_arg('feed_id'); END IF;
	IF shard_for.key IS NULL THEN PERFORM cfeed._null_arg('key'); END IF;
	SELECT pg_catalog.count(*), pg_catalog.max(s.shard) INTO v_count, v_max
	FROM cfeed.shard_config s WHERE s.feed_id = shard_for.feed_id;
	IF v_count = 0 THEN
		RAISE EXCEPTION USING ERRCODE = '42704', HINT = 'Create it with cfeed.create_feed().',
			MESSAGE = pg_catalog.format(CASE WHEN EXISTS (SELECT FROM cfeed.feed f WHERE f.feed_id = shard_for.feed_id)
											 THEN 'feed %s has no shards' ELSE 'feed %s does not exist' END,
										shard_for.feed_id);
	END IF;
	IF v_max <> v_count - 1 THEN
		RAISE EXCEPTION 'shards of feed % are not numbered 0..%', shard_for.feed_id, v_count - 1
			USING ERRCODE = '55000',
				  DETAIL = pg_catalog.format('The feed has %s shards, the highest being %s.', v_count, v_max),
				  HINT = 'cfeed.shard_for() needs contiguous shard numbers starting at 0.';
	END IF;
	v_bytes := pg_catalog.convert_to(shard_for.key, 'UTF8');
	FOR i IN 0 .. pg_catalog.length(v_bytes) - 1 LOOP
		v_hash := ((v_hash # pg_catalog.get_byte(v_bytes, i)) * 16777619) % 4294967296;
	END LOOP;
	RETURN (v_hash % v_count)::int;
END
$fn$;
