# test/t/225_operations_ranges.pl
#
# 090_operations with every shard stored in ranges (cfeed.default_storage =
# ranges): the operations torture test, whose operator also rewrites,
# reindexes and vacuums cfeed.stamp and cfeed.sweep_mark, tries to move a
# range shard to another sweep group (refused, 0A000) and truncates the
# stamps with the changes; every guarantee is checked on the numbers the
# stamps hold.  Shorter than 090 (CFEED_TORTURE_SECONDS, default 15 here).

use strict;
use warnings;

use FindBin;
# loaded here, before the run, as 090 loads them (their INIT blocks)
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;

$ENV{CFEED_TORTURE_STORAGE} = 'ranges';
$ENV{CFEED_TORTURE_SECONDS} //= 15;
do "$FindBin::RealBin/090_operations.pl";
die $@ if $@;
