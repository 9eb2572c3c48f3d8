/* cfeed._writer_xid(): the writing transaction's top-level xid. */
	LANGUAGE sql VOLATILE PARALLEL UNSAFE
	AS $fn$ SELECT pg_catalog.pg_current_xact_id() $fn$;
