# test/t/093_sweeper_off_at_fork.pl
#
# A sweeper forked after the reload that turned cfeed.enable_sweeper off
# (the launcher had asked for it just before) must stop at once: it gets no
# SIGHUP of that reload, and used to sweep on for good (104_serve_sse_rounds
# once in CI: "the sweepers did not stop").  The postmaster is held
# (SIGSTOP) while the launcher asks for a new sweep group's sweeper and the
# reload is requested; resumed, it reloads before it forks the sweeper.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = PostgreSQL::Test::Cluster->new('off_at_fork');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'cfeed'\ncfeed.launcher_interval = 100\n");
$node->start;
$node->safe_psql('postgres', q{CREATE EXTENSION cfeed; SELECT cfeed.create_feed('f', 2)});
my $sweepers = q{SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'cfeed sweeper%'};
ok($node->poll_query_until('postgres', "SELECT ($sweepers) = 1"), 'the sweeper of group 0 runs');

# A session opened before the postmaster is held: the statements below need
# no new process.
my $session = $node->background_psql('postgres');
kill 'STOP', $node->{_pid} or die "cannot stop the postmaster: $!";
# group 1 appears: the group-0 sweeper publishes it, the launcher asks the
# (held) postmaster for its sweeper
$session->query_safe('UPDATE cfeed.shard SET sweep_group = 1 WHERE feed_id = 1 AND shard = 1');
usleep(1_500_000);
$session->query_safe('ALTER SYSTEM SET cfeed.enable_sweeper = off');
$session->query_safe('SELECT pg_reload_conf()');
kill 'CONT', $node->{_pid} or die "cannot resume the postmaster: $!";
$session->quit;

ok($node->poll_query_until('postgres', "SELECT ($sweepers) = 0"),
	'every sweeper stopped, the one forked after the reload too');
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity
	WHERE backend_type = 'cfeed sweeper group 1' OR application_name = 'cfeed sweeper group 1'}), '0',
	'no sweeper of group 1 runs');

# Turned on again, both groups are swept.
$node->safe_psql('postgres', 'ALTER SYSTEM RESET cfeed.enable_sweeper; SELECT pg_reload_conf()');
ok($node->poll_query_until('postgres', "SELECT ($sweepers) = 2"), 'on again: the sweepers of groups 0 and 1 run');

$node->stop;
done_testing();
