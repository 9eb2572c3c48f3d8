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
 * FIRST or NULLS LAST, separated by commas: exactly what raw_parser()
 * makes, from "SELECT 1 ORDER BY " and the text, into a sort clause of
 * single-name column references with no USING, and nothing else (no second
 * statement, no LIMIT or FOR UPDATE after it).  The parse tree does not
 * show comments, parentheses or a name's spelling, so the text is also
 * checked to hold, outside double quotes, only identifier characters,
 * whitespace and commas, and each name is taken as written: a name longer
 * than NAMEDATALEN - 1 bytes is not truncated as SQL would, and so is not a
 * column's, and a Unicode-escaped one (U&"...") is not a plain name.
 * Reserved words (desc, order, user) must be double-quoted, as in SQL.
 *
 * Errors
 * ------
 * The items are checked in order, and the first one that is not a plain
 * column name decides: 42703 when it starts with a word (as written) that
 * is not a column of the table, as "lower(x)" or "nope DESC" do; 22023
 * otherwise.  When the text does not parse, the items before the syntax
 * error are checked the same way, then the word at the error when a name
 * was expected there (the start of the text, or after a comma); an error at
 * the end of the text (an item left incomplete) is 22023.
 *
 * The parser's NOTICE that an identifier "will be truncated" is kept from
 * the client while it runs (client_min_messages at least WARNING): names are
 * not truncated here.  A syntax error is caught without a subtransaction:
 * raw_parser() takes no locks or buffers, only memory.  Nothing else here
 * takes a lock; get_attnum() reads the syscache.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "mb/pg_wchar.h"
#include "miscadmin.h"
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
	const char *text;
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
			 errmsg("invalid order_by \"%s\"", ob->text),
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
 * written_name
 *		The identifier that starts at byte off of the text, as written: a
 *		quoted one's contents, a plain one folded to lower case, neither
 *		truncated; NULL when no identifier starts there (nor an empty or
 *		unterminated quoted one).  Called at
 *		locations the parser found a token at.
 */
static char *
written_name(const OrderBy *ob, int off)
{
	int			end = off;

	if (off < 0 || off >= ob->len)
		return NULL;
	if (ob->text[off] == '"')
	{
		StringInfoData name;

		initStringInfo(&name);
		for (end = off + 1; end < ob->len; end++)
		{
			if (ob->text[end] == '"')
			{
				if (ob->text[end + 1] != '"')
					return name.len > 0 ? name.data : NULL; /* the closing quote */
				end++;			/* "" stands for " */
			}
			appendStringInfoChar(&name, ob->text[end]);
		}
		return NULL;			/* unterminated */
	}
	if (!ident_start(ob->text[off]))
		return NULL;
	while (end < ob->len && ident_char(ob->text[end]))
		end++;
	return downcase_identifier(ob->text + off, end - off, false, false);
}

/*
 * plain_text
 *		Whether the text holds, outside double quotes, only identifier
 *		characters, whitespace and commas: no comment, parenthesis or
 *		operator the parse tree would not show.
 */
static bool
plain_text(const OrderBy *ob)
{
	bool		quoted = false;
	int			i;

	for (i = 0; i < ob->len; i++)
	{
		char		c = ob->text[i];

		if (c == '"')
			quoted = !quoted;
		else if (!quoted && !ident_char(c) && !scanner_isspace(c) && c != ',')
			return false;
	}
	return true;
}

/*
 * parse_prefix
 *		raw_parser() of ORDER_BY_QUERY and the first len bytes of the text:
 *		the raw statements, or NIL after a syntax error, with *errpos its
 *		byte offset in the text (len when it has none).  See the file header
 *		for the NOTICE kept back and the error caught.
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
		ErrorData  *edata;
		int			category;
		int			off = 0;
		int			i;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		category = ERRCODE_TO_CATEGORY(edata->sqlerrcode);
		if (category != ERRCODE_SYNTAX_ERROR_OR_ACCESS_RULE_VIOLATION &&
			category != ERRCODE_DATA_EXCEPTION)
			PG_RE_THROW();
		FlushErrorState();
		/* cursorpos counts characters from 1 */
		for (i = 1; i < edata->cursorpos && query[off] != '\0'; i++)
			off += pg_mblen(query + off);
		if (edata->cursorpos > 0)
			*errpos = Min(Max(off - ORDER_BY_OFFSET, 0), len);
		FreeErrorData(edata);
	}
	PG_END_TRY();
	AtEOXact_GUC(true, nestlevel);
	return raw;
}

/*
 * leading_location
 *		Where the text of a sort item's expression starts, as the parser
 *		located it (-1 when unknown): an operator's or cast's left operand,
 *		else the node itself.
 */
static int
leading_location(Node *node)
{
	if (node == NULL)
		return -1;
	switch (nodeTag(node))
	{
		case T_A_Expr:
			return leading_location(((A_Expr *) node)->lexpr);
		case T_TypeCast:
			return leading_location(((TypeCast *) node)->arg);
		case T_CollateClause:
			return leading_location(((CollateClause *) node)->arg);
		case T_A_Indirection:
			return leading_location(((A_Indirection *) node)->arg);
		case T_NullTest:
			return leading_location((Node *) ((NullTest *) node)->arg);
		case T_BooleanTest:
			return leading_location((Node *) ((BooleanTest *) node)->arg);
		case T_BoolExpr:
			if (((BoolExpr *) node)->boolop != NOT_EXPR)
				return leading_location(linitial(((BoolExpr *) node)->args));
			break;
		default:
			break;
	}
	return exprLocation(node);
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
 *		Returns false at the first item that is not a plain column name.
 */
static bool
check_items(const OrderBy *ob, List *raw, StringInfo out)
{
	RawStmt    *stmt = linitial_node(RawStmt, raw);
	ListCell   *lc;

	if (!IsA(stmt->stmt, SelectStmt))
		return false;
	foreach(lc, ((SelectStmt *) stmt->stmt)->sortClause)
	{
		SortBy	   *item = lfirst_node(SortBy, lc);
		char	   *name = check_word(ob, leading_location(item->node) - ORDER_BY_OFFSET);

		if (name == NULL || !plain_column(item, name))
			return false;
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
 *		The first len bytes of the text do not parse, for a syntax error at
 *		byte errpos: check what comes before it and the word at it, raising
 *		42703 as the file header says; returns when that finds nothing.
 */
static void
check_before_error(const OrderBy *ob, int len, int errpos)
{
	int			cut = errpos;
	bool		name_expected;

	check_stack_depth();
	if (errpos >= len)
		return;					/* at the end: an incomplete item */
	while (cut > 0 && scanner_isspace(ob->text[cut - 1]))
		cut--;
	name_expected = (cut == 0 || ob->text[cut - 1] == ',');
	if (cut > 0 && ob->text[cut - 1] == ',')
		cut--;
	if (cut > 0)
	{
		int			before;
		List	   *raw = parse_prefix(ob, cut, &before);

		if (raw == NIL)
			check_before_error(ob, cut, before);
		else
			(void) check_items(ob, raw, NULL);
	}
	if (name_expected)
		(void) check_word(ob, errpos);
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
	ob.text = given;
	ob.len = strlen(given);
	initStringInfo(&out);
	raw = parse_prefix(&ob, ob.len, &errpos);
	if (raw == NIL)
		check_before_error(&ob, ob.len, errpos);
	else if (check_items(&ob, raw, &out) && only_sort_clause(raw) && plain_text(&ob))
		return out.data;
	bad_order_by(&ob);
	return NULL;				/* keep the compiler quiet */
}
