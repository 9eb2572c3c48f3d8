# sqled/compat/differences.pl: where the extension's pg_regress output
# differs on the SQL edition by design (docs/sql-edition.md): per file, the
# expected text of the C edition and the SQL edition's in its place.  Every
# file: there is no extension to drop.
(
	'*' => [
		[ "DROP EXTENSION cfeed;\n", "DROP EXTENSION cfeed;\nERROR:  extension \"cfeed\" does not exist\n" ],
	],
	# no extension whose configuration tables pg_dump dumps
	leases => [
		[ "WHERE e.extname = 'cfeed' AND c = 'cfeed.lease'::regclass;\n dumped \n--------\n      1\n",
		  "WHERE e.extname = 'cfeed' AND c = 'cfeed.lease'::regclass;\n dumped \n--------\n      0\n" ],
	],
);
