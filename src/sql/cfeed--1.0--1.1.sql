/* src/sql/cfeed--1.0--1.1.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION cfeed UPDATE TO '1.1'" to load this file. \quit

/*
 * 1.1: lease names are at most 200 characters.
 *
 * In 1.0 a long group or owner name failed deep in the primary key's index
 * insertion (54000 "index row requires N bytes") or, when compressible, was
 * accepted.  Every function that writes a name into cfeed.lease (acquire
 * creates leases, takes and steals them) now gets 22023 naming the argument,
 * before anything is written.  A trigger rather than new function bodies:
 * one check covers every writer of the table, and the functions of 1.0 stay
 * as they are.  Rows restored from a dump pass through it too, and every row
 * 1.0 could store in the index passes it.
 */
CREATE FUNCTION cfeed._lease_names() RETURNS trigger
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	IF char_length(NEW.group_name) > 200 THEN
		RAISE EXCEPTION 'group_name must be at most 200 characters, got %',
			char_length(NEW.group_name)
			USING ERRCODE = '22023';
	END IF;
	IF char_length(NEW.owner) > 200 THEN
		RAISE EXCEPTION 'owner must be at most 200 characters, got %',
			char_length(NEW.owner)
			USING ERRCODE = '22023';
	END IF;
	RETURN NEW;
END
$fn$;
COMMENT ON FUNCTION cfeed._lease_names() IS 'internal: refuses lease group and owner names longer than 200 characters (22023)';
REVOKE ALL ON FUNCTION cfeed._lease_names() FROM PUBLIC;

CREATE TRIGGER lease_names BEFORE INSERT OR UPDATE OF group_name, owner ON cfeed.lease
	FOR EACH ROW EXECUTE FUNCTION cfeed._lease_names();
