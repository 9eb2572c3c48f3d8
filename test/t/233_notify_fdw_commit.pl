# test/t/233_notify_fdw_commit.pl
#
# A sweep's NOTIFYs wait for its commit (src/notify.c), where cfeed
# measures PostgreSQL's notification queue without taking the lock with
# which PostgreSQL serializes notifying commits.  A first version took that
# lock in its pre-commit callback, so the callbacks that run after it held
# it too: postgres_fdw's, which sends COMMIT to the remote server, whose
# NOTIFY (a trigger of the remote table) then waited for the lock for good,
# a wait no deadlock check sees, and every notifying commit of the cluster
# behind them (a review).  Here a transaction writes a foreign table of a
# loopback server and sweeps: it commits, and the remote NOTIFY is heard.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('notify_fdw');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'cfeed'\ncfeed.enable_sweeper = off\n");
$node->start;
my $port = $node->port;
my $host = $node->host;
$node->safe_psql('postgres', qq{
	CREATE EXTENSION cfeed;
	SELECT cfeed.create_feed('f', 1);
	CREATE EXTENSION postgres_fdw;
	CREATE SERVER loop FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '$host', port '$port', dbname 'postgres');
	CREATE USER MAPPING FOR CURRENT_USER SERVER loop;
	CREATE TABLE nt (v int);
	CREATE FUNCTION nt_notify() RETURNS trigger LANGUAGE plpgsql AS \$\$
	BEGIN PERFORM pg_notify('remote', NEW.v::text); RETURN NULL; END \$\$;
	CREATE TRIGGER nt_notify AFTER INSERT ON nt FOR EACH ROW EXECUTE FUNCTION nt_notify();
	CREATE FOREIGN TABLE nt_f (v int) SERVER loop OPTIONS (table_name 'nt');
});

my $listener = $node->background_psql('postgres');
$listener->query_safe('LISTEN remote');

# The foreign connection is opened (its callback registered) before the
# first sweep registers cfeed's.
my ($ret, $out, $err) = $node->psql('postgres', q{
	SELECT count(*) FROM nt_f;
	SELECT cfeed.publish(1, 0) > 0;
	BEGIN;
	INSERT INTO nt_f VALUES (1);
	SELECT change_count FROM cfeed.sweep();
	COMMIT;
	SELECT count(*) FROM nt;
}, timeout => 30);
is($ret, 0, 'the transaction that wrote the foreign table and swept committed') or diag($err);
is($out, "0\nt\n1\n1", 'the sweep stamped, and the remote row is there');
my $heard = $listener->query("SELECT 'probe'");
like($heard, qr/notification "remote" with payload "1"/, 'the remote NOTIFY was sent');
$listener->quit;
$node->stop;
done_testing();
