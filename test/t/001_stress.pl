
# test/t/001_stress.pl
#
# Concurrency stress with SQL sweeping only: the library is preloaded but the
# background sweeper is switched off (cfeed.enable_sweeper = off), so every
# stamp comes from concurrent cfeed.sweep() / cfeed.sweep_loop() callers.
# See CfeedStress.pm for what runs and what is checked.  Duration:
# CFEED_STRESS_SECONDS (default 30).

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use CfeedStress;
use Test::More;

CfeedStress::run(name => 'stress_sql', worker => 0);

done_testing();
