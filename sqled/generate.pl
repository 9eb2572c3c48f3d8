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
#    that name it; so are pg_extension_config_dump calls (an extension
#    script's only);
#  - CREATE EVENT TRIGGER (a superuser's only): made where the role may,
#    else a warning.
#
# FUNCDIR/prologue.sql comes first and FUNCDIR/epilogue.sql last (objects of
# the SQL edition only: its sweep hint, cfeed.sweep's helpers).  The output
# is one file for psql -f (or pg_tle): it runs in one transaction.
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
			|| ($stmt !~ /'MODULE_PATHNAME'/ && $stmt =~ /\(internal\)|_may_read_support\b/)
			|| $stmt =~ /\bpg_extension_config_dump\b/)
		{
			# a planner support function (C only), its SUPPORT clauses, and
			# what only an extension's script may do: its comments only
			$stmt = leading_comments($stmt);
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
$out .= "\n" . slurp("$funcdir/epilogue.sql");

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
