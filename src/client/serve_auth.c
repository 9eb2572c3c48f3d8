/*
 * src/client/serve_auth.c
 *		Bearer tokens of `cfeed serve`: the token file and the decision
 *		whether a token may read a feed.
 *
 * The file (--tokens) has one token per line:
 *
 *		TOKEN  FEEDS  [LABEL]
 *
 * FEEDS is a comma-separated list of feed names, or * for every feed the
 * gateway's database role may read.  TOKEN is at least 16 characters, or -
 * for requests without a token (anonymous reading of the listed feeds).
 * LABEL names the token in the log (the token itself is never logged).
 * Blank lines and lines starting with # are ignored.  The file is read once
 * at start-up.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "serve.h"

#define MIN_TOKEN_LENGTH 16

static ServeToken *tokens;
static int	ntokens;
static const ServeToken *anonymous;

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
 * cfeed_auth_load
 *		Read the token file; exits 2 when it cannot be read or a line is
 *		malformed (naming the line, never its token).
 */
void
cfeed_auth_load(const char *path)
{
	FILE	   *f = fopen(path, "r");
	char		line[4096];
	int			lineno = 0;
	struct stat st;

	if (f == NULL)
	{
		fprintf(stderr, "cfeed serve: could not open token file \"%s\": %m\n", path);
		exit(CFEED_EXIT_USAGE);
	}
	if (fstat(fileno(f), &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0)
		fprintf(stderr, "cfeed serve: warning: token file \"%s\" is readable by others; chmod 600 it\n", path);

	while (fgets(line, sizeof(line), f) != NULL)
	{
		char	   *save = NULL;
		char	   *secret;
		char	   *feeds;
		char	   *label;
		ServeToken *t;
		char		fallback[32];

		lineno++;
		secret = strtok_r(line, " \t\r\n", &save);
		if (secret == NULL || secret[0] == '#')
			continue;
		feeds = strtok_r(NULL, " \t\r\n", &save);
		label = strtok_r(NULL, " \t\r\n", &save);
		if (feeds == NULL || strtok_r(NULL, " \t\r\n", &save) != NULL)
		{
			fprintf(stderr, "cfeed serve: %s:%d: expected TOKEN FEEDS [LABEL]\n", path, lineno);
			exit(CFEED_EXIT_USAGE);
		}
		if (strcmp(secret, "-") != 0 && strlen(secret) < MIN_TOKEN_LENGTH)
		{
			fprintf(stderr, "cfeed serve: %s:%d: a token must have at least %d characters\n",
					path, lineno, MIN_TOKEN_LENGTH);
			exit(CFEED_EXIT_USAGE);
		}
		tokens = realloc(tokens, sizeof(ServeToken) * (ntokens + 1));
		if (tokens == NULL)
			cfeed_serve_oom();
		t = &tokens[ntokens++];
		memset(t, 0, sizeof(*t));
		if (!parse_feeds(t, feeds))
		{
			fprintf(stderr, "cfeed serve: %s:%d: invalid feed list (names are [A-Za-z0-9_-]+, comma-separated, or *)\n",
					path, lineno);
			exit(CFEED_EXIT_USAGE);
		}
		t->secret = cfeed_serve_strdup(secret);
		snprintf(fallback, sizeof(fallback), "line %d", lineno);
		t->label = cfeed_serve_strdup(strcmp(secret, "-") == 0 ? "anonymous" :
									  label ? label : fallback);
	}
	fclose(f);
	for (int i = 0; i < ntokens; i++)
		if (strcmp(tokens[i].secret, "-") == 0)
			anonymous = &tokens[i];
	if (ntokens == 0)
		fprintf(stderr, "cfeed serve: warning: token file \"%s\" has no token; every feed request gets 401\n", path);
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
 * cfeed_auth_lookup
 *		The token with this secret (NULL secret: the anonymous entry), or
 *		NULL when there is none.
 */
const ServeToken *
cfeed_auth_lookup(const char *secret)
{
	const ServeToken *found = NULL;

	if (secret == NULL)
		return anonymous;
	for (int i = 0; i < ntokens; i++)
		if (&tokens[i] != anonymous && same_secret(secret, tokens[i].secret))
			found = &tokens[i];
	return found;
}

/*
 * cfeed_auth_anonymous
 *		Whether requests without a token may read something.
 */
bool
cfeed_auth_anonymous(void)
{
	return anonymous != NULL;
}

/*
 * cfeed_auth_may_read
 *		Whether token may read the feed named feed.
 */
bool
cfeed_auth_may_read(const ServeToken *token, const char *feed)
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
