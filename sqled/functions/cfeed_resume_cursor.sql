/*
 * cfeed.resume_cursor(feed_id, shard, cursor, epoch): as src/epoch.c:
 * where a reader whose cursor was saved under epoch may go on reading: the
 * cursor, or, when a later epoch began below it (a failover that lost
 * stamps), the lowest such epoch's head.  An epoch this database does not
 * know (0, a lost epoch row, another cluster's) orders nowhere: every
 * epoch counts as later.  A null cursor stays null.  The caller needs
 * SELECT on cfeed.shard and a read grant on the feed; the heads come
 * through cfeed._sqled_epoch_heads (the feeds the caller may read).
 */
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $fn$
#variable_conflict use_column
DECLARE
	v_fork bigint;
BEGIN
	IF resume_cursor.feed_id IS NULL THEN PERFORM cfeed._null_arg('feed_id'); END IF;
	IF resume_cursor.shard IS NULL THEN PERFORM cfeed._null_arg('shard'); END IF;
	IF resume_cursor.epoch IS NULL THEN PERFORM cfeed._null_arg('epoch'); END IF;
	PERFORM cfeed._sqled_check_read(resume_cursor.feed_id, 'shard');
	PERFORM cfeed._sqled_check_shard(resume_cursor.feed_id, resume_cursor.shard);
	IF resume_cursor.cursor IS NULL THEN
		RETURN NULL;
	END IF;
	SELECT pg_catalog.min(h.head) INTO v_fork FROM cfeed._sqled_epoch_heads h
	WHERE h.feed_id = resume_cursor.feed_id AND h.shard = resume_cursor.shard
	  AND (h.epoch > resume_cursor.epoch OR NOT cfeed._sqled_epoch_known(resume_cursor.epoch));
	RETURN LEAST(resume_cursor.cursor, v_fork);
END
$fn$;
