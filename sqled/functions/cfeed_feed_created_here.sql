/*
 * cfeed._feed_created_here(feed_id): whether this transaction created the
 * feed: its row of cfeed.feed was inserted by this transaction or one of
 * its subtransactions (the SQL edition's create_feed inserts in one), whose
 * xids are its top-level xid and those after it: age() counts from the
 * top-level xid, so such a row's age is 0 or below, and every other
 * visible row's above (a row left unfrozen 2^31 transactions would wrap,
 * which PostgreSQL's freezing prevents).  SECURITY DEFINER (a writer of a
 * feed need not read cfeed.feed); of other transactions' feeds it tells
 * nothing.
 */
	LANGUAGE sql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
	SELECT pg_catalog.pg_current_xact_id_if_assigned() IS NOT NULL
	   AND EXISTS (SELECT FROM cfeed.feed f
				   WHERE f.feed_id OPERATOR(pg_catalog.=) $1 AND pg_catalog.age(f.xmin) OPERATOR(pg_catalog.<=) 0)
$fn$;
