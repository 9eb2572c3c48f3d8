# A sweep stamps a row shard's changes directly (src/direct.c), not with
# the SQL update it falls back to when something a DBA added to
# cfeed.change needs the executor: with cfeed's own triggers only, no
# UPDATE of cfeed.change shows among the sweep's statements (auto_explain,
# nested statements); with a trigger of the DBA's, the SQL update does.
# (A guard trigger added to cfeed.change without being taught to direct.c
# sent every sweep to the SQL update, unnoticed by the suites: their
# results are the same either way.)
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use CfeedCheck;

my $node = cfeed_node('direct', "cfeed.enable_sweeper = off\n");
$node->safe_psql('postgres', q{
	CREATE EXTENSION cfeed;
	SELECT cfeed.create_feed('f', 1);});

# Sweep after a publish in a session that explains every nested statement
# into the server log; the log lines it added.
sub sweep_log
{
	my $offset = -s $node->logfile;
	$node->safe_psql('postgres', q{
		LOAD 'auto_explain';
		SET auto_explain.log_min_duration = 0;
		SET auto_explain.log_nested_statements = on;
		SELECT cfeed.publish(1, 0);
		SELECT count(*) FROM cfeed.sweep();});
	return slurp_file($node->logfile, $offset);
}

my $log = sweep_log();
like($log, qr/Function Scan on sweep/, 'auto_explain logged the sweep');
unlike($log, qr/Update on change/, 'the sweep stamped directly: no UPDATE of cfeed.change');

$node->safe_psql('postgres', q{
	CREATE FUNCTION dba_seen() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
	CREATE TRIGGER dba_seen BEFORE UPDATE ON cfeed.change FOR EACH ROW EXECUTE FUNCTION dba_seen();});
like(sweep_log(), qr/Update on change/, 'with a trigger of the DBA\'s, the sweep stamps with the SQL update');
is($node->safe_psql('postgres', q{SELECT count(*) FROM cfeed.change WHERE change_sequence_number IS NULL}), '0',
	'both sweeps stamped their change');

done_testing();
