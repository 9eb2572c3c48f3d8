#!/usr/bin/perl
# sqled/generate.pl: the SQL edition's install script, made from the
# extension's own scripts.
#
#   perl sqled/generate.pl VERSION SQLDIR FUNCDIR > cfeed-sql--VERSION.sql
#
# Reads SQLDIR/cfeed--1.0.sql and every update script up to VERSION, in
# order, statement by statement (quotes, dollar quotes and comments
# respected), and writes them out unchanged but for:
#
#  - psql's \echo guard lines, which only CREATE EXTENSION may skip;
#  - each statement that creates a C function ('MODULE_PATHNAME', 'sym'):
#    its header (up to LANGUAGE c: name, arguments, defaults, result) is
#    kept, and the rest (language, attributes, body) is FUNCDIR/sym.sql, the
#    function in SQL or PL/pgSQL; without such a file, a PL/pgSQL body that
#    raises 0A000 (not in the SQL edition yet), so that the catalogs, the
#    signatures, the privileges and the comments stay the extension's;
#  - statements naming a function of type internal (a planner support
#    function, which only C can be): left out, with the SUPPORT clauses
#    that name it;
#  - pg_extension_config_dump calls (an extension script's only): made
#    where the script runs as an extension's (pg_tle), else skipped;
#  - CREATE EVENT TRIGGER (a superuser's only): made where the role may,
#    else a warning.
#
# FUNCDIR/prologue.sql comes first, FUNCDIR/tracking.sql and
# FUNCDIR/epilogue.sql last (objects of the SQL edition only: tracking's
# helpers, its sweep hint, cfeed.sweep's helpers).  The output
# is one file for psql -f: it runs in one transaction.
#
#   perl sqled/generate.pl --pgtle NAME VERSION cfeed-sql--VERSION.sql > cfeed-sql--VERSION.pgtle.sql
#
# The same script as a pg_tle extension NAME: a call of
# pgtle.install_extension whose extension script is the file's text but
# for its transaction control (the prologue's BEGIN and the epilogue's
# COMMIT), which an extension script may not contain; fails on anything
# else pg_tle refuses or that would end the quote (docs/sql-edition.md).
#
#   perl sqled/generate.pl VERSION SQLDIR FUNCDIR --move to-sql|to-extension MOVEDIR
#
# writes instead a script that moves a database between the editions
# (docs/sql-edition.md): MOVEDIR/to-sql.sql or MOVEDIR/to-extension.sql
# with @VERSION@ replaced, its line "-- @copy" by MOVEDIR/copy.sql and its
# line "-- @install" by the install script above without its BEGIN and
# COMMIT (the move's transaction holds it).
use strict;
use warnings;

if (@ARGV && $ARGV[0] eq '--pgtle')
{
	die "usage: generate.pl --pgtle NAME VERSION SCRIPT\n" unless @ARGV == 4;
	print pgtle(@ARGV[1 .. 3]);
	exit 0;
}

my ($version, $sqldir, $funcdir, $move_opt, $move, $movedir) = @ARGV;
die "usage: generate.pl VERSION SQLDIR FUNCDIR [--move to-sql|to-extension MOVEDIR]\n"
  unless defined $funcdir
  && (!defined $move_opt
	|| ($move_opt eq '--move' && defined $movedir && $move =~ /^to-(sql|extension)$/));

sub slurp
{
	my ($path) = @_;
	open(my $fh, '<', $path) or die "generate.pl: $path: $!\n";
	local $/;
	my $text = <$fh>;
	close $fh;
	return $text;
}

# The scripts of a fresh install of $version: 1.0, then 1.0--1.1, ...
my @scripts = ("$sqldir/cfeed--1.0.sql");
my %next;
for my $f (glob("$sqldir/cfeed--*--*.sql"))
{
	$f =~ m{cfeed--([0-9.]+)--([0-9.]+)\.sql$} or next;
	$next{$1} = [$2, $f];
}
my $v = '1.0';
while ($v ne $version)
{
	my $n = $next{$v} or die "generate.pl: no update script from $v toward $version\n";
	($v, my $f) = @$n;
	push @scripts, $f;
}

# Split SQL text into statements, each with the whitespace and comments
# before it; the last element may be trailing comments only.
sub statements
{
	my ($text) = @_;
	my @out;
	my $cur = '';
	while (length $text)
	{
		if ($text =~ s/^(--[^\n]*\n?)//)
		{
			$cur .= $1;
		}
		elsif ($text =~ s{^(/\*.*?\*/)}{}s)
		{
			$cur .= $1;
		}
		elsif ($text =~ s/^('(?:[^']|'')*')//s)
		{
			$cur .= $1;
		}
		elsif ($text =~ s/^("(?:[^"]|"")*")//s)
		{
			$cur .= $1;
		}
		elsif ($text =~ /^(\$[A-Za-z_0-9]*\$)/)
		{
			my $tag = $1;
			$text =~ s/^(\Q$tag\E.*?\Q$tag\E)//s
			  or die "generate.pl: unterminated $tag quote\n";
			$cur .= $1;
		}
		elsif ($text =~ s/^;//)
		{
			push @out, "$cur;";
			$cur = '';
		}
		else
		{
			$text =~ s/^([^-\/'"\$;]+|.)//s;
			$cur .= $1;
		}
	}
	push @out, $cur if $cur =~ /\S/;
	return @out;
}

# A C function's statement, with its LANGUAGE c part replaced.
sub replace_c_function
{
	my ($stmt) = @_;
	$stmt =~ /'MODULE_PATHNAME',\s*'(\w+)'/ or die "generate.pl: no symbol in: $stmt\n";
	my $sym = $1;
	$stmt =~ /^(.*?)\bLANGUAGE\s+c\b/is or die "generate.pl: no LANGUAGE c in: $stmt\n";
	my $header = $1;
	my $file = "$funcdir/$sym.sql";
	if (-e $file)
	{
		my $body = slurp($file);
		# the file's leading comment says what it is; the header is the script's
		$body =~ s{^\s*/\*.*?\*/\s*}{}s;
		$body =~ s/\s*;\s*$//;
		return "$header$body;";
	}
	(my $name) = $header =~ /(?:FUNCTION|PROCEDURE)\s+([\w.]+)/i;
	# keep what the script says besides the language and the body
	$stmt =~ /\bLANGUAGE\s+c\b(.*?)\bAS\s+'MODULE_PATHNAME'/is;
	my $attrs = $1 // '';
	$attrs =~ s/\bSUPPORT\s+[\w.]+//i;
	$attrs =~ s/^\s+|\s+$//g;
	$attrs = " $attrs" if $attrs ne '';
	return "${header}LANGUAGE plpgsql$attrs\n\tSET search_path = pg_catalog, pg_temp\n"
	  . "\tAS \$sqled_stub\$\nBEGIN\n"
	  . "\tRAISE EXCEPTION '$name is not in the SQL edition of cfeed yet'\n"
	  . "\t\tUSING ERRCODE = '0A000',\n"
	  . "\t\t\t  HINT = 'See docs/sql-edition.md for what the SQL edition does; the C extension has it.';\n"
	  . "END\n\$sqled_stub\$;";
}

# The comments (and whitespace) before a statement.
sub leading_comments
{
	my ($stmt) = @_;
	$stmt =~ /^(\s*(?:(?:--[^\n]*\n)|(?:\/\*.*?\*\/)|\s)*)/s;
	return $1;
}

# An event trigger needs a superuser, which a managed service's user is
# not: made where it can be, else a warning says what is missing.
sub wrap_event_trigger
{
	my ($stmt) = @_;
	my $comments = leading_comments($stmt);
	(my $body = substr($stmt, length $comments)) =~ s/;\s*$//;
	(my $name) = $body =~ /CREATE EVENT TRIGGER\s+(\w+)/;
	return "${comments}DO \$sqled_evt\$\nBEGIN\n\tEXECUTE \$sqled_sql\$$body\$sqled_sql\$;\n"
	  . "EXCEPTION WHEN insufficient_privilege THEN\n"
	  . "\tRAISE WARNING 'event trigger $name not created: only a superuser may create it'\n"
	  . "\t\tUSING DETAIL = 'See docs/sql-edition.md for what it does and what its absence means.';\n"
	  . "END\n\$sqled_evt\$;";
}

# A configuration table (its rows in pg_dump's output) of an extension:
# only a script that CREATE EXTENSION runs may say so (pg_tle's form);
# psql -f gets 0A000, and the table stays an ordinary one, dumped anyway.
sub wrap_config_dump
{
	my ($stmt) = @_;
	my $comments = leading_comments($stmt);
	(my $body = substr($stmt, length $comments)) =~ s/;\s*$//;
	$body =~ s/^SELECT\s+(pg_catalog\.pg_extension_config_dump\s*\(.*\))\s*$/$1/s
	  or die "generate.pl: not a plain pg_extension_config_dump call: $body\n";
	return "${comments}DO \$sqled_dump\$\nBEGIN\n\tPERFORM $body;\n"
	  . "EXCEPTION WHEN feature_not_supported THEN\n"
	  . "\tNULL;  -- not run by CREATE EXTENSION\n"
	  . "END\n\$sqled_dump\$;";
}

# The pg_tle form of the plain script $path: pgtle.install_extension($name,
# $version, ...) with the script's text, less its transaction control, as
# the extension's script, dollar-quoted with a tag the text must not hold.
sub pgtle
{
	my ($name, $version, $path) = @_;
	my $tag = '$_cfeed_pgtle_$';
	my $text = slurp($path);
	my @stmts = statements($text);
	my $txn = qr/^(?:BEGIN|START\s+TRANSACTION|COMMIT|END|ROLLBACK|ABORT|SAVEPOINT|RELEASE|PREPARE\s+TRANSACTION)\b/i;
	my @left;
	for my $i (0 .. $#stmts)
	{
		my $stmt = $stmts[$i];
		my $comments = leading_comments($stmt);
		my $sql = substr($stmt, length $comments);
		if ($sql =~ $txn)
		{
			# an extension script runs in CREATE EXTENSION's transaction
			# (pg_tle: "transaction control statements are not allowed
			# within an extension script"): the prologue's BEGIN and the
			# epilogue's COMMIT go, nothing else may be there
			my $first = !grep { substr($_, length leading_comments($_)) =~ /\S/ } @stmts[0 .. $i - 1];
			my $last = !grep { substr($_, length leading_comments($_)) =~ /\S/ } @stmts[$i + 1 .. $#stmts];
			die "generate.pl: transaction control in $path other than its first BEGIN and last COMMIT: $sql\n"
			  unless ($first && $sql eq 'BEGIN;') || ($last && $sql eq 'COMMIT;');
			$stmt = $comments;
		}
		push @left, $stmt;
	}
	# statements() drops trailing whitespace: the script's text, whole
	my $whole = join('', @stmts);
	die "generate.pl: $path did not split into its statements\n" unless substr($text, 0, length $whole) eq $whole;
	my $ext = join('', @left) . substr($text, length $whole);
	# pg_tle refuses a script holding its own quotes' tags; ours would end the quote
	for my $t ('$_pgtle_o_$', '$_pgtle_i_$', $tag)
	{
		die "generate.pl: $path holds $t, which a pg_tle extension script may not\n" if index($ext, $t) >= 0;
	}
	# CREATE EXTENSION substitutes these, and only \echo lines are left out
	die "generate.pl: $path holds \@extschema\@ or \@extowner\@, which CREATE EXTENSION would replace\n"
	  if $ext =~ /\@ext(?:schema|owner)\b[^@\s]*\@/;
	die "generate.pl: $path holds a psql meta-command, which is not SQL\n" if $ext =~ /^\\/m;
	(my $base = $path) =~ s{.*/}{};
	(my $out = $base) =~ s/\.sql$/.pgtle.sql/;
	return "/* $out: the SQL edition of cfeed $version as the pg_tle extension $name\n"
	  . " * (docs/sql-edition.md).  Generated by sqled/generate.pl from $base, whose text,\n"
	  . " * less its BEGIN and COMMIT, is the extension's script: edit src/sql and sqled/functions.\n"
	  . " *\n"
	  . " *   as a member of pgtle_admin:   psql -v ON_ERROR_STOP=1 -d app -f $out\n"
	  . " *   as the owner-to-be:           CREATE EXTENSION $name;\n"
	  . " */\n"
	  . "SELECT pgtle.install_extension(\n"
	  . "\t'$name',\n"
	  . "\t'$version',\n"
	  . "\t'cfeed, SQL edition: race-safe change feeds with gapless per-shard sequence numbers',\n"
	  . "\t$tag$ext$tag,\n"
	  . "\tARRAY['plpgsql']\n"
	  . ");\n";
}

my $out = "/* cfeed-sql--$version.sql: the SQL edition of cfeed $version (docs/sql-edition.md).\n"
  . " * Generated by sqled/generate.pl from src/sql/ and sqled/functions/: edit those. */\n\n";
$out .= slurp("$funcdir/prologue.sql") . "\n";
for my $script (@scripts)
{
	my $text = slurp($script);
	$text =~ s/^\\echo [^\n]*\n//mg;
	(my $base = $script) =~ s{.*/}{};
	$out .= "\n/* ==== from $base ==== */\n";
	for my $stmt (statements($text))
	{
		if ($stmt =~ /'MODULE_PATHNAME',\s*'cfeed_may_read_support'/
			|| ($stmt !~ /'MODULE_PATHNAME'/ && $stmt =~ /\(internal\)|_may_read_support\b/))
		{
			# a planner support function (C only) and its SUPPORT clauses:
			# their comments only
			$stmt = leading_comments($stmt);
		}
		elsif ($stmt =~ /\bpg_extension_config_dump\b/)
		{
			$stmt = wrap_config_dump($stmt);
		}
		elsif ($stmt =~ /'MODULE_PATHNAME'/)
		{
			$stmt = replace_c_function($stmt);
		}
		elsif ($stmt =~ /^\s*(?:(?:--[^\n]*\n)|(?:\/\*.*?\*\/)|\s)*CREATE EVENT TRIGGER\b/s)
		{
			$stmt = wrap_event_trigger($stmt);
		}
		$out .= $stmt;
	}
	$out .= "\n";
}
$out .= "\n" . slurp("$funcdir/tracking.sql") . "\n" . slurp("$funcdir/epilogue.sql");

if (defined $move)
{
	# the install script's statements inside the move's transaction
	$out =~ s/^BEGIN;\n//m or die "generate.pl: no BEGIN in the prologue\n";
	$out =~ s/^COMMIT;\n(?![\s\S]*^COMMIT;)//m or die "generate.pl: no COMMIT in the epilogue\n";
	my $script = slurp("$movedir/$move.sql");
	my $copy = slurp("$movedir/copy.sql");
	$script =~ s/^-- \@copy\n/$copy/m or die "generate.pl: no -- \@copy line in $move.sql\n";
	$script =~ s/^-- \@install\n/$out/m if $move eq 'to-sql';
	$script =~ s/\@VERSION\@/$version/g;
	$out = "/* Generated by sqled/generate.pl from sqled/move/$move.sql: edit that. */\n\n" . $script;
}
print $out;
