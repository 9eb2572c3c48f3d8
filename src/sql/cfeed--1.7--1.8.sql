/* src/sql/cfeed--1.7--1.8.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION cfeed UPDATE TO '1.8'" to load this file. \quit

/*
 * 1.8: trust boundaries (no role reaches past its grant).
 */
