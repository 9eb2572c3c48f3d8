/*
 * The SQL edition installs in one transaction (psql -f): all of it, or
 * nothing.  Function bodies are checked when they first run, as in a
 * restore: a body may name an object that a later part of the script makes.
 */
BEGIN;
SET LOCAL check_function_bodies = false;
SET LOCAL client_min_messages = warning;
