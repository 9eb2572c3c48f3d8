/* src/sql/cfeed--1.6--1.7.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION cfeed UPDATE TO '1.7'" to load this file. \quit

/*
 * 1.7: the read policy's selectivity.
 *
 * The policy change_read (and row_image_read, lease_access, the filter of
 * the cfeed.shard view) is a call of cfeed._may_read, which the planner
 * cannot see into: it took a third of the rows to pass, as for any boolean
 * function.  A reader subject to the policy (every consumer that is not
 * the extension's owner) reading after a cursor near a shard's head, where
 * the range left is small, so got a plan for a third of it: for the
 * seed's join (orders JOIN cfeed.change USING (change_id) ... ORDER BY
 * change_sequence_number LIMIT n) a bitmap scan of the whole range, the
 * join of every row and a sort, instead of the index's order stopped at n
 * rows, ten times slower.  A reader may read what it reads, so the support
 * function tells the planner that every row passes: the reader's plans are
 * the owner's.
 */
CREATE FUNCTION cfeed._may_read_support(internal) RETURNS internal
	LANGUAGE c STRICT
	AS 'MODULE_PATHNAME', 'cfeed_may_read_support';
REVOKE ALL ON FUNCTION cfeed._may_read_support(internal) FROM PUBLIC;
COMMENT ON FUNCTION cfeed._may_read_support(internal) IS 'internal: planner support of cfeed._may_read (every row passes the read policy, as far as plans go)';

ALTER FUNCTION cfeed._may_read(int) SUPPORT cfeed._may_read_support;
ALTER FUNCTION cfeed._may_read(int, regclass) SUPPORT cfeed._may_read_support;
