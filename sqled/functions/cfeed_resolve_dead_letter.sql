/*
 * cfeed.resolve_dead_letter(group_name, feed_id, shard,
 * change_sequence_number): as src/dead_letters.c: the caller's checks (a
 * read grant on the feed, DELETE on cfeed.failed_change), then
 * cfeed._resolve_dead_letter as the owner of cfeed's tables (it locks the
 * lease, which the operator need not be able to), through the view
 * cfeed._sqled_resolve_dead_letter (see the epilogue; 55000 under
 * session_replication_role = replica, as cfeed.fail).
 */
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
DECLARE
	v_resolved bool;
BEGIN
	INSERT INTO cfeed._sqled_resolve_dead_letter AS v (group_name, feed_id, shard, change_sequence_number)
	VALUES (resolve_dead_letter.group_name, resolve_dead_letter.feed_id, resolve_dead_letter.shard,
			resolve_dead_letter.change_sequence_number)
	RETURNING v.resolved INTO v_resolved;
	IF v_resolved IS NULL THEN
		PERFORM cfeed._sqled_replica_role('cfeed.resolve_dead_letter');
	END IF;
END
$fn$;
