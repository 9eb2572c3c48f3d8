/*
 * cfeed._sweep_group_in_use(sweep_group): as src/feed.c: whether a shard is
 * in the sweep group (0 always counts), for the trigger shard_access, which
 * lets only the owner of cfeed's tables start a new group (in the C
 * edition each takes a background sweeper from the cluster's
 * cfeed.max_workers; the SQL edition keeps the rule, so that a feed
 * creator's rights are the same in both).  SECURITY DEFINER: any role may
 * ask; a group number in use is all it tells.
 */
	LANGUAGE sql STABLE PARALLEL SAFE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
	SELECT $1 OPERATOR(pg_catalog.=) 0
		OR EXISTS (SELECT FROM cfeed.shard_config s WHERE s.sweep_group OPERATOR(pg_catalog.=) $1)
$fn$;
