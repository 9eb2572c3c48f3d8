# test/t/218_reshard_ranges.pl
#
# 210_reshard with every shard stored in ranges (cfeed.default_storage =
# ranges): two splits under writers, with a consumer group, `cfeed tail`
# and an SSE stream of `cfeed serve` reading throughout; each must get
# every committed change exactly once and every key's changes in commit
# order across the splits, which needs a closed range shard to end once
# its last changes are stamped (docs/design.md, "Storage in ranges").
# Shorter writes than 210 (CFEED_RESHARD_SECONDS, default 9 here).

use strict;
use warnings;

use FindBin;
# loaded here, before the run, as 210 loads them (their INIT blocks)
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;

$ENV{CFEED_RESHARD_STORAGE} = 'ranges';
$ENV{CFEED_RESHARD_SECONDS} //= 9;
do "$FindBin::RealBin/210_reshard.pl";
die $@ if $@;
