/* src/sql/cfeed--1.7--1.8.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION cfeed UPDATE TO '1.8'" to load this file. \quit

/*
 * 1.8: trust boundaries (no role reaches past its grant).
 */

/* ---- write access: per-feed write grants, row images only from tracking ---- */



/* ---- numbers: range checks, overflow-safe arithmetic, linear consumer groups ---- */



/* ---- read access: readers without table privileges ---- */



/* ---- sweepers: pauses, errors ---- */



/* ---- publications: every table has a replica identity ---- */

/*
 * A publication FOR ALL TABLES publishes cfeed's tables too, and PostgreSQL
 * then refuses an UPDATE or DELETE of a table without a replica identity
 * (55000), replicated or not: cfeed.read_grant had none (its feed_id is null
 * for a grant of every feed, so no unique index can serve), and grant_read
 * and revoke_read failed.  Its rows are small: the whole row identifies it.
 */
ALTER TABLE cfeed.read_grant REPLICA IDENTITY FULL;



/* ---- end ---- */
