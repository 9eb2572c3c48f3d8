/*
 * cfeed._change_stamp_guard(): BEFORE UPDATE OF feed_id, shard,
 * change_sequence_number, stamped_at on cfeed.change, for rows already
 * numbered, and rows given a number other than by a sweep (whose setting
 * cfeed_sqled.stamping the WHEN clause reads): an unnumbered change may be
 * given a history number only, as an INSERT's (22023); a number the
 * sweeper issued stays with its change where it was stamped (22023);
 * backfilled history may be edited within the
 * migration range, or set back to null: then it is written anew by this
 * transaction (its shard checked as an INSERT's, its writer_xid), as in
 * src/guard.c.
 */
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_start bigint;
BEGIN
	-- only on cfeed.change: on a role's own table it would check and lock feeds for it
	IF TG_RELID <> 'cfeed.change'::pg_catalog.regclass::pg_catalog.oid THEN
		RAISE EXCEPTION 'function cfeed._change_stamp_guard() must be fired on cfeed.change' USING ERRCODE = '39P01';
	END IF;
	IF NEW.feed_id IS NOT DISTINCT FROM OLD.feed_id AND NEW.shard IS NOT DISTINCT FROM OLD.shard
	   AND NEW.change_sequence_number IS NOT DISTINCT FROM OLD.change_sequence_number
	   AND NEW.stamped_at IS NOT DISTINCT FROM OLD.stamped_at THEN
		RETURN NEW;
	END IF;
	SELECT s.start_sequence_number INTO v_start FROM cfeed._sqled_shard_starts s
	WHERE s.feed_id = OLD.feed_id AND s.shard = OLD.shard;
	IF FOUND AND OLD.change_sequence_number > v_start THEN
		RAISE EXCEPTION 'change % of shard % of feed % cannot be renumbered or moved',
			OLD.change_sequence_number, OLD.shard, OLD.feed_id
			USING ERRCODE = '22023',
				  DETAIL = 'Its number was issued by the sweeper; feed_id, shard, change_sequence_number and stamped_at of a stamped change are fixed.',
				  HINT = 'Delete the change instead: its number is never issued again.';
	END IF;
	IF NEW.change_sequence_number IS NULL THEN
		-- history set back to null is written anew by this transaction, in
		-- a shard an INSERT may write (23503, 55000 closed; not in replica
		-- mode): the sweeps look only at writers not finished at the last
		-- sweep
		IF NEW.feed_id IS NOT NULL AND NEW.shard IS NOT NULL
		   AND pg_catalog.current_setting('session_replication_role') OPERATOR(pg_catalog.<>) 'replica' THEN
			PERFORM cfeed._sqled_shard_start(NEW.feed_id, NEW.shard);
		END IF;
		NEW.writer_xid := pg_catalog.pg_current_xact_id();
		NEW.stamped_at := NULL;
	ELSE
		-- an unnumbered change given a number (not by a sweep: its setting
		-- keeps it out, in the WHEN) is checked as an INSERT's: its shard
		-- (23503, 55000 closed), history only; in replica mode, a stamped
		-- change copied in
		IF OLD.change_sequence_number IS NULL AND NEW.feed_id IS NOT NULL AND NEW.shard IS NOT NULL
		   AND pg_catalog.current_setting('session_replication_role') OPERATOR(pg_catalog.<>) 'replica' THEN
			PERFORM cfeed._sqled_shard_start(NEW.feed_id, NEW.shard);
		END IF;
		PERFORM cfeed._sqled_check_number(NEW.feed_id, NEW.shard, NEW.change_sequence_number,
										  OLD.change_sequence_number IS NULL
										  AND pg_catalog.current_setting('session_replication_role') OPERATOR(pg_catalog.=) 'replica');
		IF OLD.change_sequence_number IS NULL THEN
			NEW.stamped_at := COALESCE(NEW.stamped_at, pg_catalog.transaction_timestamp());
		END IF;
	END IF;
	RETURN NEW;
END
$fn$;
