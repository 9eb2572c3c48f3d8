#!/usr/bin/perl
# sqled/compat/make-compat.pl: the extension's pg_regress files for the SQL
# edition.  For each name: sql/NAME.sql as it is, and expected/NAME.out with
# the echo of test/regress_setup.sql replaced by the echo of
# compat/regress_setup.sql (psql -a echoes the nonempty lines of an \i'd
# file, and none while ECHO is none) and the differences by design of
# compat/differences.pl applied, into OUTDIR/sql and OUTDIR/expected.
#
# After "--", isolation specs: test/specs/NAME.spec (or the SQL edition's
# own, sqled/specs/NAME.spec with sqled/expected/NAME.out) with the extension's
# CREATE and DROP EXTENSION replaced by installing and dropping the SQL
# edition (the script without its BEGIN and COMMIT, read by pg_read_file:
# the specs run as the bootstrap superuser), into OUTDIR/iso/specs, and
# test/expected/NAME.out with the differences of compat/differences.pl
# under "NAME.spec" applied (a spec's output shows no setup).
#
#   perl compat/make-compat.pl TOPDIR OUTDIR SCRIPT NAME... [-- SPEC...]
use strict;
use warnings;
use Cwd qw(abs_path);

my ($top, $out, $script, @args) = @ARGV;
my (@names, @specs);
my $list = \@names;
for my $a (@args)
{
	if ($a eq '--') { $list = \@specs; next; }
	push @$list, $a;
}

sub slurp
{
	my ($path) = @_;
	open(my $fh, '<', $path) or die "make-compat.pl: $path: $!\n";
	local $/;
	my $text = <$fh>;
	close $fh;
	return $text;
}

sub spew
{
	my ($path, $text) = @_;
	open(my $fh, '>', $path) or die "make-compat.pl: $path: $!\n";
	print $fh $text;
	close $fh;
}

# the lines psql -a prints for an \i'd file
sub echo_of
{
	my ($text) = @_;
	my ($echo, $on) = ('', 1);
	for my $line (split /\n/, $text)
	{
		$echo .= "$line\n" if $on && $line =~ /\S/;
		$on = 0 if $line =~ /^\\set ECHO none/;
		$on = 1 if $line =~ /^\\set ECHO all/;
	}
	return $echo;
}

my %differences = do "$top/sqled/compat/differences.pl";
die "make-compat.pl: compat/differences.pl: $@$!\n" unless %differences;

my $c_setup = echo_of(slurp("$top/test/regress_setup.sql"));
my $sql_setup = echo_of(slurp("$top/sqled/compat/regress_setup.sql"));
mkdir "$out/sql";
mkdir "$out/expected";
mkdir "$out/test";
spew("$out/test/regress_setup.sql", slurp("$top/sqled/compat/regress_setup.sql"));
for my $name (@names)
{
	spew("$out/sql/$name.sql", slurp("$top/sql/$name.sql"));
	my $expected = slurp("$top/expected/$name.out");
	my $at = index($expected, $c_setup);
	die "make-compat.pl: expected/$name.out does not echo test/regress_setup.sql\n" if $at < 0;
	substr($expected, $at, length $c_setup) = $sql_setup;
	for my $d (@{ $differences{'*'} }, @{ $differences{$name} // [] })
	{
		my ($from, $to) = @$d;
		$expected =~ s/\Q$from\E/$to/g;
	}
	spew("$out/expected/$name.out", $expected);
}

# the isolation specs
if (@specs)
{
	my $body = slurp($script);
	$body =~ s/^(BEGIN|COMMIT);\n//mg;
	spew("$out/cfeed-sql-body.sql", $body);
	my $path = abs_path("$out/cfeed-sql-body.sql");
	my $install = "DO \$sqled\$ BEGIN IF pg_catalog.to_regnamespace('cfeed') IS NULL THEN "
	  . "EXECUTE pg_catalog.pg_read_file('$path'); END IF; END \$sqled\$;";
	my $drop = "SET client_min_messages = warning; DROP SCHEMA IF EXISTS cfeed CASCADE; "
	  . "DROP EVENT TRIGGER IF EXISTS cfeed_tracked_table_dropped; RESET client_min_messages;";
	mkdir "$out/iso";
	mkdir "$out/iso/specs";
	mkdir "$out/iso/expected";
	for my $name (@specs)
	{
		# the SQL edition's own specs (sqled/specs, expected output in
		# sqled/expected) or the extension's
		my $own = -e "$top/sqled/specs/$name.spec";
		my $spec = slurp($own ? "$top/sqled/specs/$name.spec" : "$top/test/specs/$name.spec");
		$spec =~ s/CREATE EXTENSION (IF NOT EXISTS )?cfeed;/$install/g;
		$spec =~ s/DROP EXTENSION (IF EXISTS )?cfeed( CASCADE)?;/$drop/g;
		die "make-compat.pl: $name.spec still names the extension\n" if $spec =~ /EXTENSION/;
		spew("$out/iso/specs/$name.spec", $spec);
		my $expected = slurp($own ? "$top/sqled/expected/$name.out" : "$top/test/expected/$name.out");
		for my $d (@{ $differences{"$name.spec"} // [] })
		{
			my ($from, $to) = @$d;
			$expected =~ s/\Q$from\E/$to/g
			  or die "make-compat.pl: a difference of $name.spec is not in its expected output\n";
		}
		spew("$out/iso/expected/$name.out", $expected);
	}
}
