/*
 * cfeed.fail(group_name, feed_id, shard, owner, epoch,
 * change_sequence_number, error): as src/dead_letters.c: the caller's
 * checks (a read grant on the feed, UPDATE on cfeed.lease), then
 * cfeed._fail as the owner of cfeed's tables, through the view
 * cfeed._sqled_fail (see the epilogue: a SECURITY DEFINER function could
 * not check its caller).  A member needs no privilege on
 * cfeed.failed_change.  The view's triggers do not fire under
 * session_replication_role = replica (a view's triggers cannot be ENABLE
 * ALWAYS): 55000 then, rather than a report that did nothing.
 */
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	r record;
BEGIN
	INSERT INTO cfeed._sqled_fail AS v (group_name, feed_id, shard, owner, epoch, change_sequence_number, error)
	VALUES (fail.group_name, fail.feed_id, fail.shard, fail.owner, fail.epoch, fail.change_sequence_number, fail.error)
	RETURNING v.attempts, v.retry_at, v.dead_letter INTO r;
	IF r.attempts IS NULL THEN
		PERFORM cfeed._sqled_replica_role('cfeed.fail');
	END IF;
	attempts := r.attempts;
	retry_at := r.retry_at;
	dead_letter := r.dead_letter;
	RETURN NEXT;
END
$fn$;
