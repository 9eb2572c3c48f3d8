/*
 * src/serve/serve_auth.c
 *		Bearer tokens of `cfeed serve`: the token file, its reload on
 *		SIGHUP, and the decision whether a token may read a feed.
 *
 * The file (--tokens) has one token per line:
 *
 *		TOKEN  FEEDS  [LABEL]
 *
 * FEEDS is a comma-separated list of feed names, or * for every feed the
 * gateway's database role may read.  TOKEN is at least 16 characters, or -
 * for requests without a token (anonymous reading of the listed feeds).
 * LABEL names the token in the log (the token itself is never logged).
 * Blank lines and lines starting with # are ignored.
 *
 * The file is read at start-up (a bad one exits 2) and again on SIGHUP (a
 * bad one is logged and the tokens loaded before stay).  The loaded set is
 * swapped under auth_lock, and every decision is taken under it and copied
 * into the request (ServeGrant), so no request holds a pointer into a set:
 * the old set is freed at once, and open streams go on as they were
 * authorized.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "serve.h"

#define MIN_TOKEN_LENGTH 16

/* One token of the file. */
typedef struct ServeToken
{
	char	   *secret;
	char	   *label;			/* logged instead of the secret */
	bool		all_feeds;
	char	  **feeds;
	int			nfeeds;
} ServeToken;

/* The tokens of one reading of the file. */
typedef struct TokenSet
{
	ServeToken *tokens;
	int			ntokens;
	const ServeToken *anonymous;	/* the "-" line, or NULL */
} TokenSet;

static pthread_mutex_t auth_lock = PTHREAD_MUTEX_INITIALIZER;
static TokenSet *loaded;

/*
 * free_set
 *		Free a token set (NULL is fine).
 */
static void
free_set(TokenSet *set)
{
	if (set == NULL)
		return;
	for (int i = 0; i < set->ntokens; i++)
	{
		for (int f = 0; f < set->tokens[i].nfeeds; f++)
			free(set->tokens[i].feeds[f]);
		free(set->tokens[i].feeds);
		free(set->tokens[i].secret);
		free(set->tokens[i].label);
	}
	free(set->tokens);
	free(set);
}

/*
 * parse_feeds
 *		Fill t's feed list from a comma-separated list (or *).  False on an
 *		empty or malformed name.
 */
static bool
parse_feeds(ServeToken *t, char *list)
{
	char	   *save = NULL;

	if (strcmp(list, "*") == 0)
	{
		t->all_feeds = true;
		return true;
	}
	for (char *name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save))
	{
		if (*name == '\0' || strlen(name) >= SERVE_NAME_MAX ||
			strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") != strlen(name))
			return false;
		t->feeds = realloc(t->feeds, sizeof(char *) * (t->nfeeds + 1));
		if (t->feeds == NULL)
			cfeed_serve_oom();
		t->feeds[t->nfeeds++] = cfeed_serve_strdup(name);
	}
	return t->nfeeds > 0;
}

/*
 * parse_line
 *		Add the token of one line (lineno) to set.  NULL when it is fine (or
 *		blank, or a comment), else what is wrong with it (never its token).
 */
static const char *
parse_line(TokenSet *set, char *line, int lineno)
{
	char	   *save = NULL;
	char	   *secret = strtok_r(line, " \t\r\n", &save);
	char	   *feeds;
	char	   *label;
	ServeToken *t;
	char		fallback[32];

	if (secret == NULL || secret[0] == '#')
		return NULL;
	feeds = strtok_r(NULL, " \t\r\n", &save);
	label = strtok_r(NULL, " \t\r\n", &save);
	if (feeds == NULL || strtok_r(NULL, " \t\r\n", &save) != NULL)
		return "expected TOKEN FEEDS [LABEL]";
	if (strcmp(secret, "-") != 0 && strlen(secret) < MIN_TOKEN_LENGTH)
		return "a token must have at least 16 characters";
	set->tokens = realloc(set->tokens, sizeof(ServeToken) * (set->ntokens + 1));
	if (set->tokens == NULL)
		cfeed_serve_oom();
	t = &set->tokens[set->ntokens++];
	memset(t, 0, sizeof(*t));
	t->secret = cfeed_serve_strdup(secret);
	snprintf(fallback, sizeof(fallback), "line %d", lineno);
	t->label = cfeed_serve_strdup(strcmp(secret, "-") == 0 ? "anonymous" :
								  label ? label : fallback);
	if (!parse_feeds(t, feeds))
		return "invalid feed list (names are [A-Za-z0-9_-]+, comma-separated, or *)";
	return NULL;
}

/*
 * read_set
 *		Read the token file into a new set.  NULL, with the reason in err
 *		(naming the line, never its token), when it cannot be read or a
 *		line is malformed.  Warnings (a file readable by others, no token)
 *		go to warn, "" when none.
 */
static TokenSet *
read_set(const char *path, char *err, size_t errsize, char *warn, size_t warnsize)
{
	FILE	   *f = fopen(path, "r");
	TokenSet   *set;
	char	   *line = NULL;	/* whole lines, however long (a token may list
								 * many feeds of 200 characters) */
	size_t		size = 0;
	int			lineno = 0;
	struct stat st;

	warn[0] = '\0';
	if (f == NULL)
	{
		snprintf(err, errsize, "could not open token file \"%s\": %s", path, strerror(errno));
		return NULL;
	}
	set = cfeed_serve_alloc(sizeof(TokenSet));
	while (getline(&line, &size, f) != -1)
	{
		const char *bad = parse_line(set, line, ++lineno);

		if (bad != NULL)
		{
			snprintf(err, errsize, "%s:%d: %s", path, lineno, bad);
			free(line);
			fclose(f);
			free_set(set);
			return NULL;
		}
	}
	free(line);
	if (fstat(fileno(f), &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0)
		snprintf(warn, warnsize, "token file \"%s\" is readable by others; chmod 600 it", path);
	if (set->ntokens == 0)
		snprintf(warn + strlen(warn), warnsize - strlen(warn),
				 "%stoken file \"%s\" has no token; every feed request gets 401",
				 warn[0] ? "; " : "", path);
	fclose(f);
	for (int i = 0; i < set->ntokens; i++)
		if (strcmp(set->tokens[i].secret, "-") == 0)
			set->anonymous = &set->tokens[i];
	return set;
}

/*
 * cfeed_auth_load
 *		Read the token file at start-up; exits 2 when it cannot be read or a
 *		line is malformed.
 */
void
cfeed_auth_load(const char *path)
{
	char		err[512];
	char		warn[512];

	loaded = read_set(path, err, sizeof(err), warn, sizeof(warn));
	if (loaded == NULL)
	{
		fprintf(stderr, "cfeed serve: %s\n", err);
		exit(CFEED_EXIT_USAGE);
	}
	if (warn[0] != '\0')
		fprintf(stderr, "cfeed serve: warning: %s\n", warn);
}

/*
 * cfeed_auth_reload
 *		Read the token file again (SIGHUP): new requests are authorized by
 *		it; open ones go on.  A file that cannot be read or has a malformed
 *		line is logged, and the tokens loaded before stay.
 */
void
cfeed_auth_reload(const char *path)
{
	char		err[512];
	char		warn[512];
	TokenSet   *set = read_set(path, err, sizeof(err), warn, sizeof(warn));
	TokenSet   *old;

	if (set == NULL)
	{
		cfeed_serve_log(LOG_ERROR, "token file not reloaded, the tokens loaded before stay: %s", err);
		return;
	}
	if (warn[0] != '\0')
		cfeed_serve_log(LOG_WARNING, "%s", warn);
	pthread_mutex_lock(&auth_lock);
	old = loaded;
	loaded = set;
	pthread_mutex_unlock(&auth_lock);
	free_set(old);
	cfeed_serve_log(LOG_INFO, "token file reloaded: %d token(s)", set->ntokens);
}

/*
 * same_secret
 *		Compare in time independent of where the strings differ.
 */
static bool
same_secret(const char *a, const char *b)
{
	size_t		la = strlen(a);
	size_t		lb = strlen(b);
	unsigned char diff = (la != lb);

	for (size_t i = 0; i < la; i++)
		diff |= (unsigned char) a[i] ^ (unsigned char) b[i % (lb ? lb : 1)];
	return diff == 0;
}

/*
 * find_token
 *		The token of set with this secret (NULL secret: the anonymous
 *		entry), or NULL when there is none.
 */
static const ServeToken *
find_token(const TokenSet *set, const char *secret)
{
	const ServeToken *found = NULL;

	if (secret == NULL)
		return set->anonymous;
	for (int i = 0; i < set->ntokens; i++)
		if (&set->tokens[i] != set->anonymous && same_secret(secret, set->tokens[i].secret))
			found = &set->tokens[i];
	return found;
}

/*
 * may_read
 *		Whether token (NULL: none) may read the feed named feed.
 */
static bool
may_read(const ServeToken *token, const char *feed)
{
	if (token == NULL)
		return false;
	if (token->all_feeds)
		return true;
	for (int i = 0; i < token->nfeeds; i++)
		if (strcmp(token->feeds[i], feed) == 0)
			return true;
	return false;
}

/*
 * cfeed_auth_check
 *		Whether the token with this secret (NULL: a request without one) may
 *		read feed: AUTH_UNKNOWN (no such token; no token, where the feed is
 *		not readable without one: the client is to authenticate),
 *		AUTH_FORBIDDEN, or AUTH_OK with *grant filled (its label, whether it
 *		reads every feed, whether the feed is readable without a token).
 *		A feed readable without a token is readable with any valid one.
 */
ServeAuth
cfeed_auth_check(const char *secret, const char *feed, ServeGrant *grant)
{
	const ServeToken *token;
	ServeAuth	result = AUTH_OK;

	pthread_mutex_lock(&auth_lock);
	token = find_token(loaded, secret);
	if (token == NULL || (secret == NULL && !may_read(token, feed)))
		result = AUTH_UNKNOWN;
	else if (!may_read(token, feed) && !may_read(loaded->anonymous, feed))
		result = AUTH_FORBIDDEN;
	else
	{
		snprintf(grant->label, sizeof(grant->label), "%s", token->label);
		grant->all_feeds = token->all_feeds;
		grant->public_feed = may_read(loaded->anonymous, feed);
	}
	pthread_mutex_unlock(&auth_lock);
	return result;
}

/*
 * cfeed_auth_check_all_feeds
 *		Whether the token with this secret (NULL: none) reads every feed (a
 *		* token, or a * line for requests without a token): /metrics under
 *		--metrics token, which names every feed the gateway follows.
 *		AUTH_UNKNOWN (no such token, or none where one is needed),
 *		AUTH_FORBIDDEN (a token of some feeds only) or AUTH_OK.
 */
ServeAuth
cfeed_auth_check_all_feeds(const char *secret)
{
	const ServeToken *token;
	ServeAuth	result;

	pthread_mutex_lock(&auth_lock);
	token = find_token(loaded, secret);
	if (token != NULL && (token->all_feeds || (loaded->anonymous != NULL && loaded->anonymous->all_feeds)))
		result = AUTH_OK;
	else
		result = token == NULL || secret == NULL ? AUTH_UNKNOWN : AUTH_FORBIDDEN;
	pthread_mutex_unlock(&auth_lock);
	return result;
}
