/* src/sql/cfeed--1.8--1.9.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION cfeed UPDATE TO '1.9'" to load this file. \quit

/*
 * 1.9: feeds that grow (resharding), and the rest listed in CHANGELOG.md.
 */
