/*
 * cfeed._may_read(feed_id, tbl regclass): the policy function of 1.4 to
 * 1.7, kept for its signature: as cfeed._may_read_image.
 */
	LANGUAGE sql STABLE PARALLEL SAFE
	AS $fn$
	SELECT cfeed._may_read($1) AND ($2 IS NULL OR cfeed._sqled_privileged())
$fn$;
