
# test/t/111_sqled_stress.pl
#
# The SQL edition (sqled/, docs/sql-edition.md) under the concurrency
# stress of 001_stress.pl, on a server that loads no cfeed.so: writers with
# random aborts and savepoints, long transactions holding the xmin horizon,
# concurrent sweep() and sweep_loop() callers (aborting some sweeps),
# readers that fail on any gap (a number appearing below a head already
# read would be one), a checker of prefix visibility in every snapshot, and
# the final checks of SPEC §3 (gapless, exactly once, head = highest,
# change_id order, guarantee 4 against the writers' snapshots).  See
# CfeedStress.pm.  Duration: CFEED_SQLED_STRESS_SECONDS (default 10).

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use CfeedStress;
use Test::More;

my $top = "$FindBin::RealBin/../..";
open(my $fh, '<', "$top/cfeed.control") or die "cfeed.control: $!";
my ($version) = join('', <$fh>) =~ /^default_version = '([^']+)'/m;
close $fh;
my $script = "$top/sqled/cfeed-sql--$version.sql";
plan skip_all => "$script not built (make -C sqled)" unless -f $script;

CfeedStress::run(
	name => 'stress_sqled',
	worker => 0,
	sqled => $script,
	seconds => $ENV{CFEED_SQLED_STRESS_SECONDS} // 10,
	min_changes => 1000);

done_testing();
