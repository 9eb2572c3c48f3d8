/*
 * cfeed._stamp_replicated(): every shard of the SQL edition is stored in
 * rows, whose reads never look at stamps, so a stamp that logical
 * replication applies (a publisher's, topology A for feeds stored in
 * ranges) is refused, as the C edition refuses one for a shard it stores
 * in rows.  Any other insert (a move between the editions or a restore
 * that carries the stamps of a dropped range feed) passes as it is.
 */
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	-- only on cfeed.stamp: on a role's own table it would check and lock feeds for it
	IF TG_RELID <> 'cfeed.stamp'::pg_catalog.regclass::pg_catalog.oid THEN
		RAISE EXCEPTION 'function cfeed._stamp_replicated() must be fired on cfeed.stamp' USING ERRCODE = '39P01';
	END IF;
	IF EXISTS (SELECT FROM pg_catalog.pg_stat_activity a
			   WHERE a.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid()
				 AND a.backend_type OPERATOR(pg_catalog.~) '^logical replication .*worker$') THEN
		RAISE EXCEPTION 'a replicated stamp names shard % of feed %, which this cluster stores in rows', NEW.shard, NEW.feed_id
			USING ERRCODE = '0A000',
				  DETAIL = 'The SQL edition stores every shard in rows, whose reads never look at stamps (cfeed.stamp).',
				  HINT = 'Subscribe with the C extension, the feed stored in ranges, as on the publisher.';
	END IF;
	RETURN NEW;
END
$fn$;
