/*
 * cfeed._shard_config_guard(): BEFORE INSERT OR DELETE OR UPDATE OF
 * feed_id, shard, sweep_group, closed on cfeed.shard_config
 * (src/shard_guard.c): a new shard's start value must be in range; a shard
 * closed or opened again, or added open (where keys go changes), waits for
 * the writers of its feed (their shards lock, in exclusive mode); a shard that goes away
 * waits for the writers of its feed (their shards lock, in exclusive mode)
 * and, outside replica mode, is refused (23503) while changes of it exist,
 * as seen by a new snapshot taken once the lock is held; a shard that
 * moves to another sweep group waits for the sweeps of both groups and
 * keeps them waiting until this transaction ends (the sweep locks, lowest
 * group first).  SECURITY DEFINER: the changes are looked for whatever the
 * caller may read.
 */
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_replica bool := pg_catalog.current_setting('session_replication_role') = 'replica';
BEGIN
	-- only on cfeed.shard_config: on a role's own table it would check and lock feeds for it
	IF TG_RELID <> 'cfeed.shard_config'::pg_catalog.regclass::pg_catalog.oid THEN
		RAISE EXCEPTION 'function cfeed._shard_config_guard() must be fired on cfeed.shard_config' USING ERRCODE = '39P01';
	END IF;
	IF TG_OP = 'INSERT' THEN
		IF NOT v_replica AND NEW.start_sequence_number NOT BETWEEN 0 AND 9223372036854775806 THEN
			RAISE EXCEPTION 'start value % of new shard % of feed % is out of range',
				NEW.start_sequence_number, NEW.shard, NEW.feed_id
				USING ERRCODE = '22023',
					  DETAIL = 'A shard starts at 0 to 9223372036854775806: its numbers are issued above the start, and history is numbered from 1 up to it.',
					  HINT = 'Leave last_change_sequence_number to its default, 2000000000000000.';
		END IF;
		IF NOT NEW.closed THEN
			PERFORM pg_catalog.pg_advisory_xact_lock(1667655013, NEW.feed_id);
		END IF;
		RETURN NEW;
	END IF;
	IF TG_OP = 'UPDATE' AND NEW.closed IS DISTINCT FROM OLD.closed THEN
		PERFORM pg_catalog.pg_advisory_xact_lock(1667655013, OLD.feed_id);
	END IF;
	IF TG_OP = 'DELETE' OR NEW.feed_id IS DISTINCT FROM OLD.feed_id OR NEW.shard IS DISTINCT FROM OLD.shard THEN
		PERFORM pg_catalog.pg_advisory_xact_lock(1667655013, OLD.feed_id);
		IF NOT v_replica AND EXISTS (SELECT FROM cfeed.change c
									 WHERE c.feed_id = OLD.feed_id AND c.shard = OLD.shard) THEN
			RAISE EXCEPTION 'shard % of feed % still has changes', OLD.shard, OLD.feed_id
				USING ERRCODE = '23503',
					  DETAIL = 'Every change of cfeed.change belongs to a shard of cfeed.shard_config.',
					  HINT = pg_catalog.format('Delete the shard''s changes first (DELETE FROM cfeed.change WHERE feed_id = %s AND shard = %s).',
											   OLD.feed_id, OLD.shard);
		END IF;
	END IF;
	IF TG_OP = 'UPDATE' AND NEW.sweep_group IS DISTINCT FROM OLD.sweep_group THEN
		PERFORM pg_catalog.pg_advisory_xact_lock(1667655012, LEAST(OLD.sweep_group, NEW.sweep_group));
		PERFORM pg_catalog.pg_advisory_xact_lock(1667655012, GREATEST(OLD.sweep_group, NEW.sweep_group));
	END IF;
	IF TG_OP = 'DELETE' THEN
		RETURN OLD;
	END IF;
	RETURN NEW;
END
$fn$;
