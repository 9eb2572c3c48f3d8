/* src/sql/cfeed--1.8--1.9.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION cfeed UPDATE TO '1.9'" to load this file. \quit

/*
 * 1.9: feeds that grow (resharding), and the rest listed in CHANGELOG.md.
 */

/* ---- dropped tracked tables ---- */

/*
 * A dropped table's number keeps its name and loses its table: tbl becomes
 * null when the table is dropped (by DROP TABLE, DROP SCHEMA ... CASCADE,
 * DROP OWNED or any other command), so that the number never names another
 * table that later gets the same OID, and a dump does not carry the dropped
 * table's bare OID into a database where it may be another table's.  The
 * changes keep their images; read_rows gives them with tbl null, to the
 * roles the read policy does not apply to (cfeed._may_read_image: a number
 * without a table shows its images to no other reader).
 */
CREATE FUNCTION cfeed._tracked_table_dropped() RETURNS event_trigger
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	UPDATE cfeed.tracked_table t SET tbl = NULL
	WHERE t.tbl::oid IN (SELECT d.objid FROM pg_event_trigger_dropped_objects() d
						 WHERE d.classid = 'pg_class'::regclass AND d.objsubid = 0
						   AND d.object_type = 'table');
END
$fn$;
COMMENT ON FUNCTION cfeed._tracked_table_dropped() IS 'internal: sql_drop event trigger: a dropped table''s number in cfeed.tracked_table loses its table (tbl null), keeping its name';
REVOKE ALL ON FUNCTION cfeed._tracked_table_dropped() FROM PUBLIC;
CREATE EVENT TRIGGER cfeed_tracked_table_dropped ON sql_drop
	WHEN TAG IN ('DROP TABLE', 'DROP SCHEMA', 'DROP OWNED')
	EXECUTE FUNCTION cfeed._tracked_table_dropped();

/*
 * The resolution by name applies to a number copied in (INSERT) or renamed
 * by its publisher (UPDATE of name), not to one whose table was dropped:
 * that one keeps tbl null even when another table has its name now.
 */
CREATE OR REPLACE FUNCTION cfeed._tracked_table_resolve() RETURNS trigger
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF TG_OP = 'INSERT' THEN
		IF EXISTS (SELECT FROM cfeed.tracked_table t
				   WHERE t.table_no = NEW.table_no AND t.name IS NOT DISTINCT FROM NEW.name) THEN
			RETURN NULL;
		END IF;
		IF EXISTS (SELECT FROM cfeed.tracked_table t WHERE t.table_no = NEW.table_no) THEN
			RAISE EXCEPTION 'tracked table number % is % here, not %', NEW.table_no,
				(SELECT t.name FROM cfeed.tracked_table t WHERE t.table_no = NEW.table_no), NEW.name
				USING ERRCODE = '23505',
					  DETAIL = 'Two clusters gave one number to different tables; their changes cannot share cfeed.change.',
					  HINT = 'On the cluster where that table has no changes yet, delete its row of cfeed.tracked_table and run cfeed.track on it again (a new number).';
		END IF;
	END IF;
	IF NEW.tbl IS NULL AND NEW.name IS NOT NULL
	   AND (TG_OP = 'INSERT' OR NEW.name IS DISTINCT FROM OLD.name) THEN
		NEW.tbl := pg_catalog.to_regclass(NEW.name);
	END IF;
	RETURN NEW;
END
$fn$;

-- numbers whose table was dropped before the update
UPDATE cfeed.tracked_table t SET tbl = NULL
WHERE t.tbl IS NOT NULL
  AND NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) t.tbl::pg_catalog.oid);
