/*
 * cfeed._shard_config_truncate(): AFTER TRUNCATE on cfeed.shard_config:
 * refused (23503) unless cfeed.change is empty then (a TRUNCATE of both in
 * one statement), as a foreign key would.
 */
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $fn$
BEGIN
	-- only on cfeed.shard_config: on a role's own table it would check and lock feeds for it
	IF TG_RELID <> 'cfeed.shard_config'::pg_catalog.regclass::pg_catalog.oid THEN
		RAISE EXCEPTION 'function cfeed._shard_config_truncate() must be fired on cfeed.shard_config' USING ERRCODE = '39P01';
	END IF;
	IF EXISTS (SELECT FROM cfeed.change) THEN
		RAISE EXCEPTION 'cannot truncate cfeed.shard_config while cfeed.change has changes'
			USING ERRCODE = '23503',
				  DETAIL = 'Every change of cfeed.change belongs to a shard of cfeed.shard_config.',
				  HINT = 'Truncate both in one statement: TRUNCATE cfeed.shard_config, cfeed.change CASCADE.';
	END IF;
	RETURN NULL;
END
$fn$;
