# test/t/226_failover_ranges.pl
#
# 200_failover with every shard stored in ranges (CFEED_TEST_STORAGE =
# ranges: cfeed.default_storage in every node, the checks through read()):
# a synchronous failover keeps every stamp a reader saw; an asynchronous
# one loses some, and cfeed.resume_cursor rewinds a cursor from before it
# to the head at promotion; restarts, a sweep waiting for a synchronous
# standby, and a copy of an older base backup begin epochs as in rows.

use strict;
use warnings;

use FindBin;
# loaded here, before the run, as 200 loads them (their INIT blocks)
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;

$ENV{CFEED_TEST_STORAGE} = 'ranges';
do "$FindBin::RealBin/200_failover.pl";
die $@ if $@;
