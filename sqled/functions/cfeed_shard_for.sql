/*
 * cfeed.shard_for(feed_id, key): the shard of a partition key, as
 * src/shards.c computes it (part of the public contract): FNV-1a, 32 bits,
 * over the key's UTF-8 bytes (offset basis 2166136261, prime 16777619),
 * as an unsigned 32-bit number, modulo the number of the feed's open
 * shards, plus the first open one (cfeed.reshard closes the lowest).  In
 * bigint arithmetic: the hash stays below 2^32 and the prime below 2^25,
 * so every product fits.  Where the transaction can write and the caller
 * may write the feed (cfeed._may_write, as the caller: this function has
 * the caller's privileges), the feed's shards lock is taken in share mode
 * before the layout is read (with a new snapshot, cfeed._sqled_layout) and
 * held until the transaction ends, as by the C function: a change placed
 * by this shard is not refused by a reshard committed between this call
 * and its INSERT; a role that may not write the feed takes no lock of it.
 * PARALLEL UNSAFE (the C function is PARALLEL SAFE): a new snapshot cannot
 * be taken in parallel mode.  A role that may neither read nor write the
 * feed gets 42501, as from the C function (cfeed._sqled_check_known).
 */
	LANGUAGE plpgsql STABLE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_layout record;
	v_bytes bytea;
	v_hash bigint := 2166136261;
	i int;
BEGIN
	IF shard_for.feed_id IS NULL THEN PERFORM cfeed._null_arg('feed_id'); END IF;
	IF shard_for.key IS NULL THEN PERFORM cfeed._null_arg('key'); END IF;
	PERFORM cfeed._sqled_check_known(shard_for.feed_id);
	SELECT * INTO v_layout
	FROM cfeed._sqled_layout(shard_for.feed_id, pg_catalog.current_setting('transaction_read_only') = 'off'
								 AND cfeed._may_write(shard_for.feed_id));
	v_bytes := pg_catalog.convert_to(shard_for.key, 'UTF8');
	FOR i IN 0 .. pg_catalog.length(v_bytes) - 1 LOOP
		v_hash := ((v_hash # pg_catalog.get_byte(v_bytes, i)) * 16777619) % 4294967296;
	END LOOP;
	RETURN v_layout.first_open + (v_hash % (v_layout.shard_count - v_layout.first_open))::int;
END
$fn$;
