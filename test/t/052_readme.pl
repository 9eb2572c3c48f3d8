# The README's "Getting started" runs as printed: each of its SQL blocks
# in turn, in one database with the preload, and the results it shows.
# (A helper ran the docs' examples by hand: the "Your rows" block inserted
# order 42 a second time and failed, and its \gset with it.)  Only the
# long-poll's wait is shortened, and the $cursor placeholder of the join
# pattern given a value.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $readme = slurp_file('README.md');
my ($section) = $readme =~ /^## Getting started\n(.*?)^#{2,3} /ms
  or die 'no "Getting started" section in README.md';
my @blocks = $section =~ /^```sql\n(.*?)^```$/msg;
is(scalar(@blocks), 2, 'two SQL blocks: getting started, your rows');

my $node = PostgreSQL::Test::Cluster->new('readme');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'cfeed'");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION cfeed');

# A block as psql runs it, stopping at the first error: (stdout, stderr).
sub run_block
{
	my ($sql) = @_;
	my ($out, $err) = ('', '');
	$node->psql('postgres', $sql, stdout => \$out, stderr => \$err, on_error_stop => 1,
		extra_params => [ '-v', 'ON_ERROR_STOP=1' ]);
	return ($out, $err);
}

sub wait_stamped
{
	$node->poll_query_until('postgres',
		'select count(*) = 0 from cfeed.change where change_sequence_number is null')
	  or die 'not stamped';
	return;
}

# the writer's part, then (once the sweeper stamped, as it does within a
# few milliseconds) the reader's
my ($writer, $reader) = split /^(?=-- reader)/m, $blocks[0] =~ s/wait_ms => 30000/wait_ms => 100/r;
my ($out, $err) = run_block($writer);
is($err, '', 'getting started, the writer: no error');
wait_stamped();
($out, $err) = run_block($reader);
is($err, '', 'getting started, the reader: no error');
like($out, qr/^2000000000000001\|1000000000000000\|/m,
	'the reader of shard 3 (shard_for(1, \'42\')) gets the change as printed');

my $rows = $blocks[1] =~ s/\$cursor/2000000000000000/r;
($out, $err) = run_block($rows);
is($err, '', 'your rows: no error');
wait_stamped();
($out, $err) = run_block($rows =~ s/.*?(SELECT o\.\*)/$1/sr);
like($out, qr/^46\|bob\|12\.00\|\d+\|2000000000000002$/m,
	'the join pattern finds the row with its number') or diag("$out\n$err");

$node->stop;
done_testing();
