
# test/t/003_stress_ranges.pl
#
# The stress run with every shard stored in ranges (cfeed.default_storage =
# ranges) and the background sweeper on: the same writers, sweepers, readers
# and checks as 002 (CfeedStress.pm), with each change's number read from
# its stamp, so that a change stamped twice, or a committed change never
# stamped, fails the run.  Duration: CFEED_STRESS_SECONDS (default 30).

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use CfeedStress;
use Test::More;

CfeedStress::run(name => 'stress_ranges', worker => 1, storage => 'ranges');

done_testing();
