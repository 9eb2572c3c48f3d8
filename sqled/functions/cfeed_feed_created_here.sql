/*
 * cfeed._feed_created_here(feed_id): whether this transaction created the
 * feed: its row of cfeed.feed, and its first shard if it has one, are
 * visible and were written by an inserter still in progress, which only this
 * transaction (or a subtransaction of it: the SQL edition's create_feed
 * inserts in one) can be.  Each row's 32-bit xmin is put in the epoch of
 * the transaction's top-level xid, at or after it (its subtransactions'
 * xids follow it); an xid in the future there (an old frozen row's xmin)
 * is not this transaction's.  A feed row this transaction only updated
 * has an older shard, so it does not count (the C function reads the
 * tuple's flags instead); one probe of the shard key, not a look at every
 * shard: create_feed's trigger asks once per shard it adds.  SECURITY
 * DEFINER (a writer of a feed need not read cfeed.feed); of other
 * transactions' feeds it tells nothing.
 */
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_top bigint := pg_catalog.pg_current_xact_id_if_assigned()::text::bigint;
	v_xmin bigint;
	v_xid bigint;
	v_rows int := 0;
BEGIN
	IF v_top IS NULL THEN
		RETURN false;
	END IF;
	FOR v_xmin IN SELECT f.xmin::text::bigint FROM cfeed.feed f WHERE f.feed_id = $1
				  UNION ALL
				  (SELECT s.xmin::text::bigint FROM cfeed.shard_config s WHERE s.feed_id = $1
				   ORDER BY s.shard LIMIT 1) LOOP
		v_xid := (v_top >> 32 << 32) + v_xmin;
		IF v_xid < v_top THEN
			v_xid := v_xid + 4294967296;
		END IF;
		BEGIN
			IF pg_catalog.pg_xact_status(v_xid::text::xid8) IS DISTINCT FROM 'in progress' THEN
				RETURN false;
			END IF;
		EXCEPTION WHEN invalid_parameter_value THEN
			RETURN false;		-- "transaction ID ... is in the future"
		END;
		v_rows := v_rows + 1;
	END LOOP;
	RETURN v_rows > 0 AND EXISTS (SELECT FROM cfeed.feed f WHERE f.feed_id = $1);
END
$fn$;
