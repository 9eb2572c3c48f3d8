/*-------------------------------------------------------------------------
 *
 * order_by.c
 *	  The order_by argument of cfeed.backfill: a sort list of the table's
 *	  columns, checked with PostgreSQL's own parser and rebuilt from quoted
 *	  identifiers and keywords before it goes into backfill's statement.
 *
 * What is accepted
 * ----------------
 * Column names of the table (plain identifiers, folded to lower case, or
 * double-quoted), each optionally followed by ASC or DESC and by NULLS
 * FIRST or NULLS LAST, separated by commas.  The first word of each item
 * (the text from the start or a comma outside double quotes to the next)
 * is a name even when it is an SQL keyword ("end", "user", "order",
 * "desc"): it is double-quoted, folded to lower case, before the text is
 * parsed.  Then the text must be
 * exactly what raw_parser() makes, from "SELECT 1 ORDER BY " and the text,
 * into a sort clause of single-name column references with no USING, and
 * nothing else (no second statement, no LIMIT or FOR UPDATE after it).
 * The parse tree does not show comments, parentheses or a name's spelling,
 * so the text is also checked to hold, outside double quotes, only
 * identifier characters ($ within a word: no dollar quote), whitespace and
 * commas, each item is checked to
 * start with its name, and each name is taken as written: a name longer
 * than NAMEDATALEN - 1 bytes is not truncated as SQL would, and so is not a
 * column's, and a Unicode-escaped one (U&"...") is not a plain name.
 *
 * Errors
 * ------
 * The items are checked in order, and the first one that is not a plain
 * column name decides: 42703 when it starts with a word that is not a
 * column of the table, as "lower(x)", "nope DESC" or "nope DESC NULLS" do;
 * 22023 otherwise.  When the text does not parse (a syntax error, or a
 * construct the parser does not support), the items before the one of the
 * error (or of the first character that is not plain text, when that comes
 * first) are checked the same way, then that item's first word: an item
 * left incomplete at the end, as in "nope DESC NULLS", still names its
 * column first.
 *
 * The parser's NOTICE that an identifier "will be truncated" is kept from
 * the client while it runs (client_min_messages at least WARNING): names are
 * not truncated here.  A syntax error (class 42 or 22, or 0A000) is caught
 * without a subtransaction: raw_parser() takes no locks or buffers, only
 * memory; only its code and position are read, and any other error (out of
 * memory) is rethrown as it is.  Nothing else here
 * takes a lock; get_attnum() reads the syscache.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "mb/pg_wchar.h"
#include "nodes/nodeFuncs.h"
#include "nodes/parsenodes.h"
#include "parser/parser.h"
#include "parser/scansup.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"

#include "cfeed.h"

/* What order_by is parsed after; node locations count from its start. */
#define ORDER_BY_QUERY		"SELECT 1 ORDER BY "
#define ORDER_BY_OFFSET		((int) sizeof(ORDER_BY_QUERY) - 1)

/* The order_by text being checked, and the table it names columns of. */
typedef struct OrderBy
{
	Oid			relid;
	const char *given;			/* as given, for messages */
	const char *text;			/* as parsed: first words quoted */
	int			len;			/* strlen(text) */
} OrderBy;

/*
 * bad_order_by
 *		22023 for an order_by that is not a sort list of column names.
 */
static void
bad_order_by(const OrderBy *ob)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid order_by \"%s\"", ob->given),
			 errdetail("order_by is a comma-separated list of column names, each optionally followed by ASC or DESC and NULLS FIRST or NULLS LAST."),
			 errhint("For example: order_by => 'created_at, id DESC'.")));
}

/*
 * ident_start / ident_char
 *		Whether a byte may start or continue an unquoted identifier (the core
 *		scanner's ident_start and ident_cont).
 */
static bool
ident_start(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' ||
		IS_HIGHBIT_SET(c);
}

static bool
ident_char(char c)
{
	return ident_start(c) || (c >= '0' && c <= '9') || c == '$';
}

/*
 * quote_first_words
 *		The given text with the first word of each item (after a comma
 *		outside double quotes, or at the start) double-quoted, folded to lower
 *		case as SQL folds a plain identifier, not truncated; a space after it
 *		keeps a double quote that follows from joining it.  The word holds
 *		identifier characters only, so it needs no escaping.
 */
static char *
quote_first_words(const char *given)
{
	StringInfoData out;
	const char *p = given;
	bool		quoted = false;
	bool		item_start = true;

	initStringInfo(&out);
	while (*p != '\0')
	{
		if (item_start && ident_start(*p))
		{
			const char *word = p;

			while (ident_char(*p))
				p++;
			appendStringInfo(&out, "\"%s\" ",
							 downcase_identifier(word, p - word, false, false));
			item_start = false;
			continue;
		}
		if (*p == '"')
			quoted = !quoted;
		if (!scanner_isspace(*p))
			item_start = (*p == ',' && !quoted);
		appendStringInfoChar(&out, *p++);
	}
	return out.data;
}

/*
 * written_name
 *		The contents of the double-quoted identifier that starts at byte off
 *		of the text, not truncated; NULL when none starts there (nor an empty
 *		or unterminated one).  The first words are quoted, so that is where a
 *		name starts.
 */
static char *
written_name(const OrderBy *ob, int off)
{
	StringInfoData name;
	int			end;

	if (off < 0 || off >= ob->len || ob->text[off] != '"')
		return NULL;
	initStringInfo(&name);
	for (end = off + 1; end < ob->len; end++)
	{
		if (ob->text[end] == '"')
		{
			if (ob->text[end + 1] != '"')
				return name.len > 0 ? name.data : NULL; /* the closing quote */
			end++;				/* "" stands for " */
		}
		appendStringInfoChar(&name, ob->text[end]);
	}
	return NULL;				/* unterminated */
}

/*
 * plain_len
 *		How many bytes the text starts with that hold, outside double quotes,
 *		only identifier characters ($ within a word), whitespace and commas:
 *		no comment, parenthesis, operator or dollar quote the parse tree
 *		would not show.
 */
static int
plain_len(const OrderBy *ob)
{
	bool		quoted = false;
	int			i;

	for (i = 0; i < ob->len; i++)
	{
		char		c = ob->text[i];

		if (c == '"')
			quoted = !quoted;
		else if (quoted || scanner_isspace(c) || c == ',')
			continue;
		else if (c == '$' ? i == 0 || !ident_char(ob->text[i - 1]) : !ident_char(c))
			break;
	}
	return i;
}

/*
 * item_after
 *		Where the item after byte off of the text starts, past whitespace:
 *		off is -1 for the first item, else a comma's.
 */
static int
item_after(const OrderBy *ob, int off)
{
	off++;
	while (off < ob->len && scanner_isspace(ob->text[off]))
		off++;
	return off;
}

/*
 * comma_after
 *		The byte offset of the first comma outside double quotes from byte
 *		from (outside them) of the text, before byte len; len when none.
 */
static int
comma_after(const OrderBy *ob, int from, int len)
{
	bool		quoted = false;
	int			i;

	for (i = from; i < len; i++)
	{
		if (ob->text[i] == '"')
			quoted = !quoted;
		else if (ob->text[i] == ',' && !quoted)
			return i;
	}
	return len;
}

/*
 * last_comma
 *		The byte offset of the last comma outside double quotes among the
 *		first len bytes of the text, -1 when there is none.
 */
static int
last_comma(const OrderBy *ob, int len)
{
	int			comma = -1;
	int			next;

	while ((next = comma_after(ob, comma + 1, len)) < len)
		comma = next;
	return comma;
}

/*
 * parse_prefix
 *		raw_parser() of ORDER_BY_QUERY and the first len bytes of the text:
 *		the raw statements, or NIL after a syntax error (or a construct not
 *		supported), with *errpos its byte offset in the text (len when it has
 *		none).  See the file header for the NOTICE kept back and the error
 *		caught.
 */
static List *
parse_prefix(const OrderBy *ob, int len, int *errpos)
{
	char	   *query = psprintf(ORDER_BY_QUERY "%.*s", len, ob->text);
	MemoryContext cxt = CurrentMemoryContext;
	int			nestlevel = NewGUCNestLevel();
	List	   *volatile raw = NIL;

	*errpos = len;
	if (client_min_messages < WARNING)
		(void) set_config_option("client_min_messages", "warning", PGC_USERSET,
								 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	PG_TRY();
	{
		/* no caller's context callback: the error position stays cursorpos */
		error_context_stack = NULL;
		raw = raw_parser(query, RAW_PARSE_DEFAULT);
	}
	PG_CATCH();
	{
		int			code = geterrcode();
		int			cursorpos = geterrposition();
		int			off = 0;
		int			i;

		MemoryContextSwitchTo(cxt);
		if (ERRCODE_TO_CATEGORY(code) != ERRCODE_SYNTAX_ERROR_OR_ACCESS_RULE_VIOLATION &&
			ERRCODE_TO_CATEGORY(code) != ERRCODE_DATA_EXCEPTION &&
			code != ERRCODE_FEATURE_NOT_SUPPORTED)
			PG_RE_THROW();
		FlushErrorState();
		/* cursorpos counts characters from 1 */
		for (i = 1; i < cursorpos && query[off] != '\0'; i++)
			off += pg_mblen(query + off);
		if (cursorpos > 0)
			*errpos = Min(Max(off - ORDER_BY_OFFSET, 0), len);
	}
	PG_END_TRY();
	AtEOXact_GUC(true, nestlevel);
	return raw;
}

/*
 * plain_column
 *		Whether a sort item is a column name written as a plain or quoted
 *		identifier (name, as written), without USING.
 */
static bool
plain_column(SortBy *item, const char *name)
{
	ColumnRef  *ref = (ColumnRef *) item->node;

	return item->sortby_dir != SORTBY_USING && IsA(ref, ColumnRef) &&
		list_length(ref->fields) == 1 && IsA(linitial(ref->fields), String) &&
		strncmp(strVal(linitial(ref->fields)), name, NAMEDATALEN - 1) == 0;
}

/*
 * check_word
 *		42703 when the word at byte off of the text is not a column of the
 *		table.  Returns the word, NULL when none starts there.
 */
static char *
check_word(const OrderBy *ob, int off)
{
	char	   *name = written_name(ob, off);

	if (name != NULL && get_attnum(ob->relid, name) <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of table \"%s\" does not exist",
						name, get_rel_name(ob->relid)),
				 errhint("order_by lists column names of the table.")));
	return name;
}

/*
 * check_items
 *		Check the sort items of the first statement of raw in order (see
 *		the file header) and append them to out (when not NULL), rebuilt.
 *		The items of the text start after its commas outside double quotes:
 *		the first word of each is checked, while the text before it is plain
 *		and the items before it are plain column names, the one the parser
 *		found there.  Returns false at the first item that is not a plain
 *		column name.
 */
static bool
check_items(const OrderBy *ob, List *raw, StringInfo out)
{
	RawStmt    *stmt = linitial_node(RawStmt, raw);
	int			plain = plain_len(ob);
	int			start = item_after(ob, -1);
	ListCell   *lc;

	if (!IsA(stmt->stmt, SelectStmt))
		return false;
	foreach(lc, ((SelectStmt *) stmt->stmt)->sortClause)
	{
		SortBy	   *item = lfirst_node(SortBy, lc);
		char	   *name;

		if (start >= plain)
			return false;
		name = check_word(ob, start);
		if (name == NULL || !plain_column(item, name) ||
			exprLocation(item->node) != ORDER_BY_OFFSET + start)
			return false;
		start = item_after(ob, comma_after(ob, start, ob->len));
		if (out == NULL)
			continue;
		appendStringInfo(out, "%st.%s", out->len > 0 ? ", " : "", quote_identifier(name));
		if (item->sortby_dir != SORTBY_DEFAULT)
			appendStringInfoString(out, item->sortby_dir == SORTBY_ASC ? " ASC" : " DESC");
		if (item->sortby_nulls != SORTBY_NULLS_DEFAULT)
			appendStringInfoString(out, item->sortby_nulls == SORTBY_NULLS_FIRST ?
								   " NULLS FIRST" : " NULLS LAST");
	}
	return true;
}

/*
 * only_sort_clause
 *		Whether raw is one statement, the SELECT 1 of ORDER_BY_QUERY with the
 *		sort clause and nothing after it.
 */
static bool
only_sort_clause(List *raw)
{
	RawStmt    *stmt = linitial_node(RawStmt, raw);
	SelectStmt *select = (SelectStmt *) stmt->stmt;

	return list_length(raw) == 1 && stmt->stmt_len == 0 &&
		IsA(select, SelectStmt) && select->op == SETOP_NONE &&
		select->limitOffset == NULL && select->limitCount == NULL &&
		select->lockingClause == NIL && select->withClause == NULL &&
		select->intoClause == NULL && select->fromClause == NIL &&
		select->whereClause == NULL && select->groupClause == NIL &&
		select->havingClause == NULL && select->windowClause == NIL &&
		select->distinctClause == NIL && list_length(select->targetList) == 1;
}

/*
 * check_before_error
 *		The text does not parse, for an error at byte errpos: check the
 *		items before the item of the error, or of the first character that
 *		is not plain text if that comes first, then that item's first word,
 *		raising 42703 as the file header says; returns when that finds
 *		nothing.  The items before are plain text, so they parse unless one
 *		is not a sort item (that decides: 22023).
 */
static void
check_before_error(const OrderBy *ob, int errpos)
{
	int			comma = last_comma(ob, Min(errpos, plain_len(ob)));

	if (comma >= 0)
	{
		int			before;
		List	   *raw = parse_prefix(ob, comma, &before);

		if (raw == NIL || !check_items(ob, raw, NULL) || !only_sort_clause(raw))
			return;
	}
	(void) check_word(ob, item_after(ob, comma));
}

/*
 * cfeed_order_by_clause
 *		Validate backfill's order_by for table relid (see the file header)
 *		and return it rebuilt as "t.<column> [ASC|DESC] [NULLS FIRST|LAST],
 *		...", safe to put into SQL.  22023 for anything else, 42703 for an
 *		unknown column.
 */
char *
cfeed_order_by_clause(Oid relid, const char *given)
{
	OrderBy		ob;
	StringInfoData out;
	int			errpos;
	List	   *raw;

	ob.relid = relid;
	ob.given = given;
	ob.text = quote_first_words(given);
	ob.len = strlen(ob.text);
	initStringInfo(&out);
	raw = parse_prefix(&ob, ob.len, &errpos);
	if (raw == NIL)
		check_before_error(&ob, errpos);
	else if (check_items(&ob, raw, &out) && only_sort_clause(raw) &&
			 plain_len(&ob) == ob.len)
		return out.data;
	bad_order_by(&ob);
	return NULL;				/* keep the compiler quiet */
}
