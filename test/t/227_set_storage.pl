# test/t/227_set_storage.pl
#
# 210_reshard with cfeed.set_storage() in place of the splits: a feed
# stored in rows is moved to ranges and back to rows while the writers
# (publish, the INSERT pattern, a tracked table) run, and a consumer group,
# `cfeed tail` and an SSE stream of `cfeed serve` read throughout; each
# must get every committed change exactly once and every key's changes in
# commit order across both moves (docs/operations.md, "Storage in
# ranges").  Shorter writes than 210 (CFEED_RESHARD_SECONDS, default 12).

use strict;
use warnings;

use FindBin;
# loaded here, before the run, as 210 loads them (their INIT blocks)
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;

$ENV{CFEED_RESHARD_MOVES} = 1;
$ENV{CFEED_RESHARD_SECONDS} //= 12;
do "$FindBin::RealBin/210_reshard.pl";
die $@ if $@;
