/*
 * cfeed._may_read_image(feed_id, tbl): whether the current user may read a
 * change of the feed carrying a row image of tracked table number tbl.
 * Without an image, cfeed._may_read.  With one, in the SQL edition (which
 * does not track tables yet: images come only from restores of the C
 * edition), only roles that read every feed and bypass row-level security
 * (superuser, BYPASSRLS, the owner); the C edition also shows an image to
 * a reader who may SELECT all of its table unrestricted by its policies.
 */
	LANGUAGE sql STABLE PARALLEL SAFE
	AS $fn$
	SELECT cfeed._may_read($1) AND ($2 IS NULL OR cfeed._sqled_privileged())
$fn$;
