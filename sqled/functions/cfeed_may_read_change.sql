/*
 * cfeed._may_read(feed_id, tbl regclass): the policy function of 1.4 to
 * 1.7 (cfeed.row_image's, images written before 1.3): as
 * cfeed._may_read_image, with the table itself.
 */
	LANGUAGE sql STABLE PARALLEL SAFE
	AS $fn$
	SELECT cfeed._may_read($1)
	   AND ($2 IS NULL OR cfeed._sqled_privileged() OR cfeed._sqled_may_read_table($2))
$fn$;
