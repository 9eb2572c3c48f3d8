/*
 * cfeed._may_read_image(feed_id, tbl): whether the current user may read a
 * change of the feed carrying a row image of tracked table number tbl
 * (src/read_access.c): without an image, cfeed._may_read; with one, also
 * the image's table, which must be here (a number without a table shows
 * its images to no other reader) and which the user may SELECT whole,
 * unrestricted by its row-level security; roles that read every feed and
 * bypass row-level security (superuser, BYPASSRLS, the owner) read all.
 */
	LANGUAGE sql STABLE PARALLEL SAFE
	AS $fn$
	SELECT cfeed._may_read($1)
	   AND ($2 IS NULL OR cfeed._sqled_privileged() OR cfeed._sqled_may_read_table(cfeed._tracked_table($2)))
$fn$;
