
# test/t/114_sqled_pgtle.pl
#
# The pg_tle form of the SQL edition (sqled/cfeed-sql--VERSION.pgtle.sql,
# docs/sql-edition.md), without pg_tle (Debian does not package it): the
# extension script it hands to pgtle.install_extension is the plain
# script's text byte for byte, less the prologue's BEGIN and the
# epilogue's COMMIT (the transaction control an extension script may not
# hold), and holds none of pg_tle's own quote tags; and the file runs
# against a stand-in of pg_tle in a fresh database: install_extension
# makes the same checks of its arguments as pg_tle's, and "CREATE
# EXTENSION" (the stand-in's create_extension) EXECUTEs the script as
# pg_tle runs an extension script (search_path, check_function_bodies off,
# client_min_messages at warning, \echo lines left out, transaction
# control refused), as a role that is not superuser; then a short smoke of
# the API.  What the stand-in cannot show: the script running inside
# CREATE EXTENSION (its objects members of the extension, its
# configuration tables marked for pg_dump).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use Digest::MD5 qw(md5_hex);

my $top = "$FindBin::RealBin/../..";
open(my $fh, '<', "$top/cfeed.control") or die "cfeed.control: $!";
my ($version) = join('', <$fh>) =~ /^default_version = '([^']+)'/m;
close $fh;
my $plain_path = "$top/sqled/cfeed-sql--$version.sql";
my $pgtle_path = "$top/sqled/cfeed-sql--$version.pgtle.sql";
plan skip_all => "$pgtle_path not built (make -C sqled)" unless -f $plain_path && -f $pgtle_path;
my $plain = slurp_file($plain_path);
my $pgtle = slurp_file($pgtle_path);

# the file: one call of pgtle.install_extension, the script dollar-quoted
my ($tag, $ext) = $pgtle =~ /^SELECT pgtle\.install_extension\(\n\t'cfeed_sql',\n\t'\Q$version\E',\n\t'[^'\n]*',\n\t(\$\w*\$)(.*?)\1,\n\tARRAY\['plpgsql'\]\n\);\n\z/ms;
ok(defined $ext, 'the pg_tle file is one call of pgtle.install_extension(cfeed_sql, version, description, script, requires)');
$ext //= '';

# the plain script less its BEGIN and COMMIT, each once, alone on its line
my $want = $plain;
is(scalar(() = $want =~ /^BEGIN;$/mg), 1, 'the plain script has one BEGIN');
is(scalar(() = $want =~ /^COMMIT;$/mg), 1, 'the plain script has one COMMIT');
$want =~ s/^BEGIN;$//m;
$want =~ s/^COMMIT;$//m;
ok($ext eq $want, 'the extension script is the plain script byte for byte, less BEGIN and COMMIT');
for my $t ('$_pgtle_o_$', '$_pgtle_i_$', $tag // '$_cfeed_pgtle_$')
{
	ok(index($ext, $t) < 0, "the script holds no $t");
}

# the generator refuses what pg_tle would (or what would end its quote)
my $bad = PostgreSQL::Test::Utils::tempdir() . '/bad.sql';
for my $case (
	[ "BEGIN;\nSELECT 1;\nCOMMIT;\nCOMMIT;\n", qr/transaction control/, 'a second COMMIT' ],
	[ "BEGIN;\nSAVEPOINT a;\nCOMMIT;\n", qr/transaction control/, 'a SAVEPOINT' ],
	[ "BEGIN;\nSELECT \$_cfeed_pgtle_\$x\$_cfeed_pgtle_\$;\nCOMMIT;\n", qr/holds \$_cfeed_pgtle_\$/, 'its own quote tag' ],
	[ "BEGIN;\nSELECT \$_pgtle_i_\$x\$_pgtle_i_\$;\nCOMMIT;\n", qr/holds \$_pgtle_i_\$/, 'pg_tle\'s inner tag' ],
	[ "BEGIN;\nSELECT '\@extowner\@';\nCOMMIT;\n", qr/\@extowner\@/, '@extowner@' ],
	[ "BEGIN;\n\\set x 1\nCOMMIT;\n", qr/meta-command/, 'a psql meta-command' ])
{
	my ($sql, $err, $what) = @$case;
	open(my $out, '>', $bad) or die "$bad: $!";
	print $out $sql;
	close $out;
	my ($stdout, $stderr);
	IPC::Run::run([ 'perl', "$top/sqled/generate.pl", '--pgtle', 'x', '1.0', $bad ], '>', \$stdout, '2>', \$stderr);
	like($stderr, $err, "generate.pl --pgtle refuses $what");
}

my $node = PostgreSQL::Test::Cluster->new('sqled_pgtle');
$node->init;
$node->start;

# the stand-in: pg_tle's checks of install_extension's arguments, the
# script kept as pg_tle keeps it, and create_extension running it as pg_tle
# runs an extension script (its execute_extension_script)
$node->safe_psql('postgres', q{
CREATE ROLE app_owner LOGIN;
CREATE DATABASE app OWNER app_owner;
});
$node->safe_psql('app', q{
CREATE SCHEMA pgtle;
CREATE TABLE pgtle.standin_ext (name text PRIMARY KEY, version text, description text, ext text, requires text[]);
CREATE FUNCTION pgtle.install_extension(name text, version text, description text, ext text, requires text[] DEFAULT NULL)
	RETURNS boolean LANGUAGE plpgsql AS $fn$
BEGIN
	IF name IS NULL OR version IS NULL OR description IS NULL OR ext IS NULL THEN
		RAISE EXCEPTION 'a required argument is null' USING ERRCODE = '22004';
	END IF;
	IF name !~ '^[a-z_][a-z0-9_]*$' OR version !~ '^[0-9][0-9.a-z]*$' THEN
		RAISE EXCEPTION 'invalid extension name or version' USING ERRCODE = '22023';
	END IF;
	IF pg_catalog.strpos(ext, '$_pgtle_o_$') > 0 OR pg_catalog.strpos(ext, '$_pgtle_i_$') > 0 THEN
		RAISE EXCEPTION 'invalid character in extension definition' USING ERRCODE = '22023';
	END IF;
	INSERT INTO pgtle.standin_ext
	VALUES (name, version, description, ext, pg_catalog.array_append(requires, 'pg_tle'));
	RETURN true;
END
$fn$;
CREATE FUNCTION pgtle.create_extension(ext_name text) RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
	e pgtle.standin_ext;
	r text;
BEGIN
	SELECT * INTO STRICT e FROM pgtle.standin_ext s WHERE s.name = ext_name;
	FOREACH r IN ARRAY e.requires LOOP
		IF r <> 'pg_tle' AND NOT EXISTS (SELECT FROM pg_catalog.pg_extension x WHERE x.extname = r) THEN
			RAISE EXCEPTION 'required extension "%" is not installed', r;
		END IF;
	END LOOP;
	PERFORM pg_catalog.set_config('search_path', 'public, pg_temp', true);
	PERFORM pg_catalog.set_config('check_function_bodies', 'off', true);
	PERFORM pg_catalog.set_config('client_min_messages', 'warning', true);
	EXECUTE pg_catalog.regexp_replace(e.ext, '^\\echo.*$', '', 'ng');
END
$fn$;
GRANT USAGE ON SCHEMA pgtle TO app_owner;
GRANT SELECT, INSERT ON pgtle.standin_ext TO app_owner;
});

my @psql = ('psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-h', $node->host, '-p', $node->port,
	'-U', 'app_owner', '-d', 'app');

# the stand-in refuses an extension script with transaction control: the
# plain script's text as it is
$node->safe_psql('app',
	"SELECT pgtle.install_extension('plain', '1', 'the plain script', pg_read_file('$plain_path'))");
my ($stdout, $stderr);
IPC::Run::run([ @psql, '-c', q{SELECT pgtle.create_extension('plain')} ], '>', \$stdout, '2>', \$stderr);
like($stderr, qr/ERROR:.*transaction/i,
	'the stand-in refuses the plain script, whose BEGIN an extension script may not hold');
is($node->safe_psql('app', q{SELECT count(*) FROM pg_namespace WHERE nspname = 'cfeed'}), 0,
	'and nothing of it is left');

# the pg_tle file, as a role that is not superuser (the event trigger is
# then left out with a warning, as on a managed service)
($stdout, $stderr) = ('', '');
my $ok = IPC::Run::run([ @psql, '-f', $pgtle_path ], '>', \$stdout, '2>', \$stderr);
ok($ok, 'the pg_tle file runs (pgtle.install_extension)') or diag($stderr);
is($node->safe_psql('app', q{SELECT octet_length(ext) || ' ' || md5(ext) FROM pgtle.standin_ext WHERE name = 'cfeed_sql'}),
	length($ext) . ' ' . md5_hex($ext), 'install_extension received the script byte for byte (length and MD5)');
is($node->safe_psql('app', q{SELECT requires FROM pgtle.standin_ext WHERE name = 'cfeed_sql'}),
	'{plpgsql,pg_tle}', 'it requires plpgsql (and pg_tle)');
($stdout, $stderr) = ('', '');
$ok = IPC::Run::run([ @psql, '-c', q{SELECT pgtle.create_extension('cfeed_sql')} ], '>', \$stdout, '2>', \$stderr);
ok($ok, 'its script runs as an extension script') or diag($stderr);
like($stderr, qr/WARNING:  event trigger cfeed_tracked_table_dropped not created: only a superuser may create it/,
	'without superuser, the event trigger is left out with a warning');
unlike($stderr, qr/ERROR/, 'no error');

# a short smoke of the API, as the owner
is($node->safe_psql('app',
		q{SELECT count(*) FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
		  WHERE p.pronamespace = 'cfeed'::regnamespace AND l.lanname = 'c'}),
	0, 'no C function');
is($node->safe_psql('app', q{SELECT tableowner FROM pg_tables WHERE schemaname = 'cfeed' AND tablename = 'change'}),
	'app_owner', 'the role that created it owns cfeed.change');
my $smoke = join('', map { "$_\n" } split /\n/, $node->safe_psql('app', q{
SET ROLE app_owner;
SELECT cfeed.create_feed('smoke', 2);
SELECT cfeed.publish(1, 0) IS NOT NULL, cfeed.publish(1, 0) IS NOT NULL, cfeed.publish(1, 1) IS NOT NULL;
SELECT sum(change_count) FROM cfeed.sweep(0);
SELECT string_agg((change_sequence_number - 2000000000000000)::text, ',' ORDER BY change_sequence_number)
FROM cfeed.read(1, 0, NULL);
SELECT cfeed.head(1, 1) - 2000000000000000, cfeed.wait(1, 1, 2000000000000000, 1000) - 2000000000000000;
SELECT cfeed.publish(1, 1) IS NOT NULL;
}));
is($smoke, "1\nt|t|t\n3\n1,2\n1|1\nt\n",
	'create_feed, publish, sweep, read, head and wait work');
like($node->safe_psql('app', q{SET ROLE app_owner; CALL cfeed.sweep_loop(0, 1000, 0, 0, null, null, null)}),
	qr/^1\|\d+\|1$/, 'sweep_loop stamps the last one');
is($node->safe_psql('app', q{SELECT cfeed.head(1, 1) - 2000000000000000}), 2, 'shard 1 stamped 1..2');

$node->stop;
done_testing();
