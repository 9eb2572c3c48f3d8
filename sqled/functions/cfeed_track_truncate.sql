/*
 * cfeed._track_truncate(): BEFORE TRUNCATE on a tracked table or one of
 * its partitions (trigger cfeed_track_truncate): refused (55000), as
 * src/track_trigger.c: TRUNCATE fires no row triggers.
 */
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF TG_OP <> 'TRUNCATE' THEN
		RAISE EXCEPTION 'function cfeed._track_truncate() must be fired as a TRUNCATE trigger'
			USING ERRCODE = '39P01';
	END IF;
	RAISE EXCEPTION 'cannot truncate table "%": it is tracked by feed %', TG_TABLE_NAME, TG_ARGV[0]::int
		USING ERRCODE = '55000',
			  DETAIL = 'TRUNCATE fires no row triggers, so the feed would miss the deletes.',
			  HINT = 'Use DELETE (published as tombstones), or run cfeed.untrack() first.';
END
$fn$;
