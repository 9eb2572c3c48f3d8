
# test/t/002_stress_worker.pl
#
# The same stress run with the background sweeper on: it sweeps alongside
# the SQL sweepers (without it, the run is simply 001 again).  See
# CfeedStress.pm.  Duration: CFEED_STRESS_SECONDS (default 30).

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use CfeedStress;
use Test::More;

CfeedStress::run(name => 'stress_worker', worker => 1);

done_testing();
