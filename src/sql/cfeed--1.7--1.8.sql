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



/* ---- end ---- */
