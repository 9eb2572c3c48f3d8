#!/usr/bin/perl
# test/free-port.pl: print a port for the pg_regress and isolation servers
# of `make installcheck` when CFEED_TEST_PORT does not name one, so that
# several runs can share a machine.  A port is taken as free when nothing
# listens on it at 127.0.0.1 and no PostgreSQL socket or socket lock file of
# that port exists in the usual socket directories.  It tries the dynamic
# range (49152-65535, where PostgreSQL's TAP framework picks too) from a
# random start; exits 1 when it finds none.

use strict;
use warnings;
use Socket qw(PF_INET SOCK_STREAM SOL_SOCKET SO_REUSEADDR inet_aton sockaddr_in);

my ($low, $high) = (49152, 65535);
my @socket_dirs = ('/tmp', '/var/run/postgresql');
push @socket_dirs, $ENV{PG_REGRESS_SOCK_DIR} if $ENV{PG_REGRESS_SOCK_DIR};

# Whether a TCP listener could take the port on 127.0.0.1 now.
sub tcp_free
{
	my ($port) = @_;
	socket(my $sock, PF_INET, SOCK_STREAM, getprotobyname('tcp')) or return 0;
	setsockopt($sock, SOL_SOCKET, SO_REUSEADDR, pack('l', 1));
	my $ok = bind($sock, sockaddr_in($port, inet_aton('127.0.0.1')));
	close($sock);
	return $ok;
}

# Whether no server's Unix socket (or its lock file) names the port.
sub socket_free
{
	my ($port) = @_;
	return !grep { -e "$_/.s.PGSQL.$port" || -e "$_/.s.PGSQL.$port.lock" } @socket_dirs;
}

my $port = $low + int(rand($high - $low + 1));
for (1 .. $high - $low + 1)
{
	if (tcp_free($port) && socket_free($port))
	{
		print "$port\n";
		exit 0;
	}
	$port = $port == $high ? $low : $port + 1;
}
print STDERR "free-port.pl: no free port between $low and $high\n";
exit 1;
