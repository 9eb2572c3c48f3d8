/* src/sql/cfeed--1.2--1.3.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION cfeed UPDATE TO '1.3'" to load this file. \quit

/*
 * 1.3: a tracked change carries its row image in its own cfeed.change row.
 *
 * Up to 1.2 the image was a second row, in cfeed.row_image, with its own
 * primary-key entry: per tracked row two heap tuples and two index entries
 * besides the table's own, a third of what tracking cost.  From 1.3 the
 * change row has three more columns, null for changes published without an
 * image (cfeed.publish), and the trigger writes one tuple.
 *
 * Adding nullable columns without a default rewrites nothing, and nothing is
 * moved: the images written before the update stay in cfeed.row_image, where
 * read_rows still finds them (for a change whose own columns are null), and
 * the retention trigger still deletes them with their changes.  The table
 * stays for that, and for dumps of earlier versions, whose data for
 * cfeed.row_image restores into it.  A library of 1.3 running a database
 * still at 1.2 or earlier writes images to cfeed.row_image until ALTER
 * EXTENSION cfeed UPDATE.
 */
ALTER TABLE cfeed.change
	ADD COLUMN tbl regclass,
	ADD COLUMN op text,
	ADD COLUMN "row" jsonb;
COMMENT ON COLUMN cfeed.change.tbl IS 'for a change of a tracked table: the table (the tracked one, not a partition)';
COMMENT ON COLUMN cfeed.change.op IS 'for a change of a tracked table: insert, update or delete';
COMMENT ON COLUMN cfeed.change."row" IS 'for a change of a tracked table: the row as of the change, as to_jsonb(row) (the old row for a delete)';

COMMENT ON TABLE cfeed.row_image IS 'row images of tracked changes written before 1.3 (since 1.3 a change carries its image in cfeed.change); deleted with their changes';

CREATE OR REPLACE FUNCTION cfeed.read_rows(feed_id int, shard int, cursor bigint DEFAULT NULL,
										   max_count int DEFAULT 1000, wait_ms int DEFAULT 0)
	RETURNS TABLE (change_sequence_number bigint, change_id bigint, stamped_at timestamptz,
				   tbl regclass, op text, "row" jsonb)
	LANGUAGE c VOLATILE PARALLEL UNSAFE ROWS 1000
	AS 'MODULE_PATHNAME', 'cfeed_read_rows';
COMMENT ON FUNCTION cfeed.read_rows(int, int, bigint, int, int) IS 'like cfeed.read, with each change''s table, operation and row as of the change (null for changes published without a row image)';
