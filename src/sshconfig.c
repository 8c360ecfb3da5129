/*
 * sshconfig.c - the user's OpenSSH client config, read for one host the way ssh(1) reads it.
 *
 * Follows ssh_config(5) as OpenSSH 9 reads it:
 * - The first value obtained for a keyword wins; IdentityFile accumulates (duplicates dropped).
 * - Host patterns are matched, case-sensitively, against the alias as it was asked for (the host
 *   part of the spec), not against HostName. A "!pattern" that matches makes the whole Host line
 *   not match.
 * - An Include inside a block that does not apply is still read and checked, but no Host block in
 *   the included files matches (ssh's SSHCONF_NEVERMATCH); the including file's state is restored
 *   after each included file.
 * - The values of the keywords used here are checked wherever they stand, in blocks that do not
 *   apply too, so a bad line fails the whole file as it does for ssh. Every keyword needs a value.
 *
 * Left out on purpose:
 * - Match: only "Match all" applies. Any other Match block (host, user, exec, canonical, final...)
 *   is skipped up to the next Host or Match line: its lines are neither applied nor checked, an
 *   Include among them is not followed. Its criteria need what ssh only knows while connecting.
 * - /etc/ssh/ssh_config is not read, and the owners and modes of the files are not checked.
 * - Keywords other than those of lc__ssh_host are ignored, ProxyCommand among them.
 */
#include "sshconfig.h"

#include <ctype.h>
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* As ssh's READCONF_MAX_DEPTH: it also stops a file that includes itself. */
#define MAX_INCLUDE_DEPTH 16

/* The % tokens a path value may hold, and HostName. */
#define PATH_TOKENS "%dhilLnpru"
#define HOSTNAME_TOKENS "%h"

enum {
  SEEN_HOSTNAME = 1u << 0,
  SEEN_USER = 1u << 1,
  SEEN_PORT = 1u << 2,
  SEEN_IDENTITIES_ONLY = 1u << 3,
  SEEN_PROXY_JUMP = 1u << 4,
  SEEN_KNOWN_HOSTS = 1u << 5,
  SEEN_STRICT = 1u << 6,
  SEEN_CONNECT_TIMEOUT = 1u << 7,
  SEEN_CIPHERS = 1u << 8,
};

typedef enum keyword {
  KW_UNKNOWN = 0,
  KW_HOST,
  KW_MATCH,
  KW_INCLUDE,
  KW_HOSTNAME,
  KW_USER,
  KW_PORT,
  KW_IDENTITY_FILE,
  KW_IDENTITIES_ONLY,
  KW_PROXY_JUMP,
  KW_KNOWN_HOSTS,
  KW_STRICT,
  KW_CONNECT_TIMEOUT,
  KW_CIPHERS,
} keyword;

static const struct {
  const char *name;
  keyword id;
} keywords[] = {
    {"host", KW_HOST},
    {"match", KW_MATCH},
    {"include", KW_INCLUDE},
    {"hostname", KW_HOSTNAME},
    {"user", KW_USER},
    {"port", KW_PORT},
    {"identityfile", KW_IDENTITY_FILE},
    {"identitiesonly", KW_IDENTITIES_ONLY},
    {"proxyjump", KW_PROXY_JUMP},
    {"userknownhostsfile", KW_KNOWN_HOSTS},
    {"stricthostkeychecking", KW_STRICT},
    {"connecttimeout", KW_CONNECT_TIMEOUT},
    {"ciphers", KW_CIPHERS},
};

/* The ciphers that OpenSSH 9 and the SSH backend (libssh 0.10 on OpenSSL) both know. */
#define KNOWN_CIPHERS                                                                              \
  "chacha20-poly1305@openssh.com,aes128-gcm@openssh.com,aes256-gcm@openssh.com,aes128-ctr,"        \
  "aes192-ctr,aes256-ctr,aes128-cbc,aes192-cbc,aes256-cbc,3des-cbc"

/* How a missing or odd file is taken. */
typedef enum open_how {
  OPEN_EXPLICIT, /* the caller named it: it must exist */
  OPEN_DEFAULT,  /* ~/.ssh/config: missing is fine */
  OPEN_INCLUDE,  /* missing is fine, a directory is passed over */
} open_how;

/* A growing array of strings, kept NULL-terminated. */
typedef struct strv {
  char **v;
  size_t n;
  size_t cap;
} strv;

/* What one read of the config gathers. Values are kept raw: tokens are expanded at the end. */
typedef struct parse {
  lc__err *err;
  bool resolving;    /* false: only list the Host names */
  const char *alias; /* what Host patterns are matched against */
  char *home;        /* NULL when unknown */
  char *local_user;  /* NULL when unknown */
  unsigned seen;     /* SEEN_*: the keywords whose first value was taken */
  char *hostname;
  char *user;
  int port;
  int identities_only;
  char *proxy_jump;
  char *known_hosts;
  lc__strict strict;
  int connect_timeout_s;
  char *ciphers; /* the list that Ciphers makes of LC__SSH_CIPHERS_DEFAULT */
  strv ids;
  strv names;
} parse;

/* One file being read. */
typedef struct cfile {
  const char *path;
  int line;
  int depth;       /* 0 for the top file */
  bool nevermatch; /* included from a block that does not apply: no Host in it matches */
  bool *active;    /* whether lines apply here; shared with the including file */
  bool skip;       /* inside a Match block other than "Match all" */
} cfile;

/* The values of % tokens; NULL where unknown. */
typedef struct tokens {
  const char *home;
  const char *host;
  const char *alias;
  const char *remote_user;
  const char *local_user;
  char uid[24];
  char port[8];
  char local_host[256];
  char local_host_short[256];
} tokens;

static void line_error(const parse *p, const cfile *f, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Records "FILE:LINE: detail" in p->err. */
static void line_error(const parse *p, const cfile *f, const char *fmt, ...) {
  char detail[LC_ERRMSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  if (vsnprintf(detail, sizeof(detail), fmt, ap) < 0)
    detail[0] = '\0';
  va_end(ap);
  lc__err_set(p->err, LC_ECONFIG, "%s:%d: %s", f->path, f->line, detail);
}

/* line_error(), as an expression worth LC_ECONFIG (so: r = BAD_LINE(...)). */
#define BAD_LINE(p, f, ...) (line_error((p), (f), __VA_ARGS__), LC_ECONFIG)

static void strv_clear(strv *a) {
  lc__strv_free(a->v, a->n);
  a->v = NULL;
  a->n = a->cap = 0;
}

/* Appends s, which the array owns from then on (and only then). */
static int strv_push(strv *a, char *s) {
  int r = LC_EINTERNAL;
  if (a->n + 1 >= a->cap) {
    size_t cap = a->cap ? a->cap * 2 : 8;
    char **v = lc__realloc(a->v, cap * sizeof(*v));
    if (v == NULL) {
      r = -ENOMEM;
      goto out;
    }
    a->v = v;
    a->cap = cap;
  }
  a->v[a->n++] = s;
  a->v[a->n] = NULL;
  r = 0;
out:
  return r;
}

static bool strv_has(const strv *a, const char *s) {
  for (size_t i = 0; i < a->n; i++)
    if (strcmp(a->v[i], s) == 0)
      return true;
  return false;
}

/* Pushes a copy of s unless the array holds it already. */
static int strv_add_unique(strv *a, const char *s) {
  char *copy = NULL;
  int r = 0;
  if (strv_has(a, s))
    goto out;
  if ((copy = lc__strdup(s)) == NULL) {
    r = -ENOMEM;
    goto out;
  }
  if ((r = strv_push(a, copy)) < 0)
    goto out;
  copy = NULL;
out:
  free(copy);
  return r;
}

static void parse_free(parse *p) {
  free(p->home);
  free(p->local_user);
  free(p->hostname);
  free(p->user);
  free(p->proxy_jump);
  free(p->known_hosts);
  free(p->ciphers);
  strv_clear(&p->ids);
  strv_clear(&p->names);
}

static keyword keyword_id(const char *name) {
  for (size_t i = 0; i < LC_ARRAY_SIZE(keywords); i++)
    if (strcasecmp(name, keywords[i].name) == 0)
      return keywords[i].id;
  return KW_UNKNOWN;
}

/* ssh's match_pattern: '*' matches any run of characters, '?' any one, the rest only itself. */
static bool match_pattern(const char *s, const char *pat) {
  const char *star = NULL, *resume = NULL;
  while (*s) {
    if (*pat == '*') {
      star = pat++;
      resume = s;
    } else if (*pat == '?' || *pat == *s) {
      pat++;
      s++;
    } else if (star) {
      pat = star + 1;
      s = ++resume;
    } else {
      return false;
    }
  }
  while (*pat == '*')
    pat++;
  return *pat == '\0';
}

/* 1 to 65535 in decimal digits; 0 for anything else. */
static int parse_port(const char *s) {
  long v = 0;
  if (*s == '\0')
    return 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9')
      return 0;
    v = v * 10 + (*s - '0');
    if (v > 65535)
      return 0;
  }
  return (int)v;
}

/* ssh's time format ("90", "90s", "1m30s", units s m h d w in either case); -1 when bad. */
static long parse_seconds(const char *s) {
  static const char units[] = "smhdw";
  static const long unit_seconds[] = {1, 60, 60L * 60, 24L * 60 * 60, 7L * 24 * 60 * 60};
  long total = 0;
  if (*s == '\0')
    return -1;
  while (*s) {
    long n = 0, unit = 1;
    if (*s < '0' || *s > '9')
      return -1;
    for (; *s >= '0' && *s <= '9'; s++)
      if ((n = n * 10 + (*s - '0')) > INT_MAX)
        return -1;
    if (*s != '\0') {
      const char *u = strchr(units, tolower((unsigned char)*s));
      if (u == NULL)
        return -1;
      unit = unit_seconds[u - units];
      s++;
    }
    if (n > (INT_MAX - total) / unit)
      return -1;
    total += n * unit;
  }
  return total;
}

/* The first % of s that starts a token not in allowed (or ends s), or NULL. */
static const char *bad_token(const char *s, const char *allowed) {
  for (; (s = strchr(s, '%')) != NULL; s += 2)
    if (s[1] == '\0' || strchr(allowed, s[1]) == NULL)
      return s;
  return NULL;
}

/*
 * Cuts the next argument out of *s, in place, as ssh's argv_split does: double or single quotes
 * group (also inside a word), a backslash escapes a quote, a backslash or (outside quotes) a space,
 * and a '#' that starts an argument ends the line. *arg is NULL when there is none left.
 */
static int next_arg(const parse *p, const cfile *f, char **s, char **arg) {
  char *in = *s, *o;
  char quote = 0;
  int r = 0;
  *arg = NULL;
  in += strspn(in, " \t");
  if (*in == '\0' || *in == '#')
    goto out;
  *arg = o = in;
  for (; *in; in++) {
    if (quote == 0 && (*in == ' ' || *in == '\t'))
      break;
    if (*in == '\\' &&
        (in[1] == '"' || in[1] == '\'' || in[1] == '\\' || (quote == 0 && in[1] == ' ')))
      *o++ = *++in;
    else if (quote == 0 && (*in == '"' || *in == '\''))
      quote = *in;
    else if (quote != 0 && *in == quote)
      quote = 0;
    else
      *o++ = *in;
  }
  if (quote != 0) {
    *arg = NULL;
    r = BAD_LINE(p, f, "unterminated quote");
    goto out;
  }
  if (*in)
    in++;
  *o = '\0';
out:
  *s = in;
  return r;
}

/* Takes the one value of keyword kw. */
static int one_arg(const parse *p, const cfile *f, const char *kw, char **s, char **arg) {
  char *extra = NULL;
  int r = LC_EINTERNAL;
  if ((r = next_arg(p, f, s, arg)) < 0)
    goto out;
  if (*arg == NULL) {
    r = BAD_LINE(p, f, "%s needs a value", kw);
    goto out;
  }
  if ((r = next_arg(p, f, s, &extra)) < 0)
    goto out;
  if (extra != NULL)
    r = BAD_LINE(p, f, "%s takes one value; '%s' is one too many", kw, extra);
out:
  return r;
}

/*
 * Home directory and login name of the user called name, or of the calling user when name is
 * NULL; either output may be NULL. -ENOENT when there is no such user.
 */
static int passwd_lookup(const char *name, char **home, char **login) {
  struct passwd pw, *found = NULL;
  char *buf = NULL, *h = NULL, *l = NULL;
  size_t size = 1024;
  int r = LC_EINTERNAL, e;
  for (;;) {
    char *bigger = lc__realloc(buf, size);
    if (bigger == NULL) {
      r = -ENOMEM;
      goto out;
    }
    buf = bigger;
    if (name)
      e = getpwnam_r(name, &pw, buf, size, &found);
    else
      e = getpwuid_r(getuid(), &pw, buf, size, &found);
    if (e != ERANGE || size >= (1u << 20))
      break;
    size *= 2;
  }
  if (found == NULL) {
    r = e == ENOMEM ? -ENOMEM : -ENOENT;
    goto out;
  }
  if ((home && (h = lc__strdup(pw.pw_dir)) == NULL) ||
      (login && (l = lc__strdup(pw.pw_name)) == NULL)) {
    r = -ENOMEM;
    goto out;
  }
  if (home) {
    *home = h;
    h = NULL;
  }
  if (login) {
    *login = l;
    l = NULL;
  }
  r = 0;
out:
  free(buf);
  free(h);
  free(l);
  return r;
}

/* The home directory ($HOME, else the password database) and the local user name. */
static int env_init(parse *p) {
  const char *home = getenv("HOME"), *user;
  bool home_set = home != NULL && *home != '\0';
  int r = LC_EINTERNAL;
  r = passwd_lookup(NULL, home_set ? NULL : &p->home, &p->local_user);
  if (r == -ENOMEM)
    goto out;
  if (home_set && (p->home = lc__strdup(home)) == NULL) {
    r = -ENOMEM;
    goto out;
  }
  if (p->local_user == NULL) {
    if ((user = getenv("USER")) == NULL || *user == '\0')
      user = getenv("LOGNAME");
    if (user != NULL && *user != '\0' && (p->local_user = lc__strdup(user)) == NULL) {
      r = -ENOMEM;
      goto out;
    }
  }
  r = 0;
out:
  return r;
}

/*
 * Copies a path with its leading ~ or ~user replaced by that home directory. With escape, each %
 * of the home directory is doubled so that the token pass at the end keeps it as it is.
 */
static int tilde_expand(const parse *p, const cfile *f, const char *kw, const char *in, bool escape,
                        char **out) {
  lc__buf b = {0};
  char *user = NULL, *other = NULL;
  const char *home, *rest;
  int r = LC_EINTERNAL;
  *out = NULL;
  if (in[0] != '~') {
    r = (*out = lc__strdup(in)) == NULL ? -ENOMEM : 0;
    goto out;
  }
  rest = in + 1 + strcspn(in + 1, "/");
  if (rest == in + 1) {
    if ((home = p->home) == NULL) {
      r = BAD_LINE(p, f, "%s %s: no home directory to put for ~", kw, in);
      goto out;
    }
  } else {
    if ((user = lc__strndup(in + 1, (size_t)(rest - in - 1))) == NULL) {
      r = -ENOMEM;
      goto out;
    }
    if ((r = passwd_lookup(user, &other, NULL)) == -ENOENT) {
      r = BAD_LINE(p, f, "%s %s: no user called '%s'", kw, in, user);
      goto out;
    } else if (r < 0) {
      goto out;
    }
    home = other;
  }
  for (const char *c = home; *c; c++) {
    if (escape && *c == '%' && (r = lc__buf_append(&b, "%", 1)) < 0)
      goto out;
    if ((r = lc__buf_append(&b, c, 1)) < 0)
      goto out;
  }
  if (b.len > 0 && b.data[b.len - 1] == '/' && *rest == '/')
    rest++;
  if ((r = lc__buf_append(&b, rest, strlen(rest))) < 0)
    goto out;
  *out = b.data;
  b.data = NULL;
  r = 0;
out:
  lc__buf_free(&b);
  free(user);
  free(other);
  return r;
}

/* Checks the % tokens of a path value and expands its ~ (callers handle "none"). */
static int path_value(const parse *p, const cfile *f, const char *kw, const char *value,
                      char **out) {
  const char *t;
  int r = LC_EINTERNAL;
  *out = NULL;
  if ((t = bad_token(value, PATH_TOKENS)) != NULL) {
    r = BAD_LINE(p, f, "%s %s: unknown token '%.2s'", kw, value, t);
    goto out;
  }
  r = tilde_expand(p, f, kw, value, true, out);
out:
  return r;
}

/* Host: whether the block applies; or, when listing, the names it holds. */
static int on_host(parse *p, cfile *f, const char *kw, char *s) {
  char *arg;
  bool hit = false, negated = false;
  int r = LC_EINTERNAL, n = 0;
  for (;;) {
    if ((r = next_arg(p, f, &s, &arg)) < 0)
      goto out;
    if (arg == NULL)
      break;
    n++;
    if (*arg == '\0') {
      r = BAD_LINE(p, f, "%s: empty pattern", kw);
      goto out;
    }
    if (!p->resolving) {
      if (strpbrk(arg, "*?!") == NULL && (r = strv_add_unique(&p->names, arg)) < 0)
        goto out;
    } else if (arg[0] == '!') {
      negated = negated || match_pattern(p->alias, arg + 1);
    } else {
      hit = hit || match_pattern(p->alias, arg);
    }
  }
  if (n == 0) {
    r = BAD_LINE(p, f, "%s needs a pattern", kw);
    goto out;
  }
  *f->active = hit && !negated && !f->nevermatch;
  f->skip = false;
  r = 0;
out:
  return r;
}

/* Match: "Match all" applies; any other Match block is skipped whole (see the top). */
static int on_match(const parse *p, cfile *f, const char *kw, char *s) {
  char *arg, *first = NULL;
  int r = LC_EINTERNAL, n = 0;
  for (;;) {
    if ((r = next_arg(p, f, &s, &arg)) < 0)
      goto out;
    if (arg == NULL)
      break;
    if (n++ == 0)
      first = arg;
  }
  if (n == 0) {
    r = BAD_LINE(p, f, "%s needs a criterion", kw);
    goto out;
  }
  f->skip = !(n == 1 && strcasecmp(first, "all") == 0);
  *f->active = !f->skip && !f->nevermatch;
  r = 0;
out:
  return r;
}

static int read_config(parse *p, const char *path, int depth, bool *active, bool nevermatch,
                       open_how how);

/*
 * Include: each file named, globs sorted, relative paths under ~/.ssh. It recurses through
 * parse_line and read_config, at most MAX_INCLUDE_DEPTH deep.
 */
/* NOLINTNEXTLINE(misc-no-recursion) */
static int on_include(parse *p, cfile *f, const char *kw, char *s) {
  glob_t g;
  char *arg, *pattern = NULL;
  bool globbed = false, was_active = *f->active;
  int r = LC_EINTERNAL, n = 0, gr;
  memset(&g, 0, sizeof(g));
  for (;;) {
    if ((r = next_arg(p, f, &s, &arg)) < 0)
      goto out;
    if (arg == NULL)
      break;
    n++;
    if (arg[0] == '~') {
      if ((r = tilde_expand(p, f, kw, arg, false, &pattern)) < 0)
        goto out;
    } else if (arg[0] == '/') {
      pattern = lc__strdup(arg);
    } else if (p->home == NULL) {
      r = BAD_LINE(p, f, "%s %s: no home directory for a relative path", kw, arg);
      goto out;
    } else {
      pattern = lc__sprintf("%s/.ssh/%s", p->home, arg);
    }
    if (pattern == NULL) {
      r = -ENOMEM;
      goto out;
    }
    gr = glob(pattern, 0, NULL, &g);
    globbed = true;
    if (gr == GLOB_NOSPACE) {
      r = -ENOMEM;
      goto out;
    } else if (gr != 0 && gr != GLOB_NOMATCH) {
      r = BAD_LINE(p, f, "%s %s: cannot read", kw, arg);
      goto out;
    }
    for (size_t i = 0; gr == 0 && i < g.gl_pathc; i++) {
      if (f->depth >= MAX_INCLUDE_DEPTH) {
        r = BAD_LINE(p, f, "%s %s: Includes nested more than %d deep", kw, arg, MAX_INCLUDE_DEPTH);
        goto out;
      }
      r = read_config(p, g.gl_pathv[i], f->depth + 1, f->active, f->nevermatch || !was_active,
                      OPEN_INCLUDE);
      *f->active = was_active;
      if (r < 0)
        goto out;
    }
    globfree(&g);
    globbed = false;
    free(pattern);
    pattern = NULL;
  }
  if (n == 0) {
    r = BAD_LINE(p, f, "%s needs a file", kw);
    goto out;
  }
  r = 0;
out:
  if (globbed)
    globfree(&g);
  free(pattern);
  return r;
}

/* Adds each name of the comma-separated list to a, leaving out those a has already. */
static int strv_add_list(strv *a, const char *list) {
  int r = 0;
  for (const char *s = list; r == 0 && *s != '\0'; s += *s == ',') {
    size_t n = strcspn(s, ",");
    char *name = lc__strndup(s, n);
    r = name == NULL ? -ENOMEM : strv_add_unique(a, name);
    free(name);
    s += n;
  }
  return r;
}

/* Whether name is one of the comma-separated list's names. */
static bool list_has(const char *list, const char *name) {
  size_t len = strlen(name);
  for (const char *s = list; *s != '\0'; s += *s == ',') {
    size_t n = strcspn(s, ",");
    if (n == len && strncmp(s, name, n) == 0)
      return true;
    s += n;
  }
  return false;
}

/*
 * A Ciphers value as ssh_config(5) has it, applied to LC__SSH_CIPHERS_DEFAULT (this backend's
 * default, not ssh's): "a,b" is the list itself, "+a,b" appends to the default, "^a,b" puts a and
 * b first, "-p,q" removes the ciphers that match the patterns p and q (* and ?). Names must be
 * known ciphers, except after '-'. *out: the resulting list.
 */
static int cipher_list(parse *p, const cfile *f, const char *kw, const char *arg, char **out) {
  char op = arg[0] == '+' || arg[0] == '-' || arg[0] == '^' ? arg[0] : '\0';
  const char *names = op != '\0' ? arg + 1 : arg;
  strv given = {0}, result = {0}, base = {0};
  lc__buf joined = {0};
  int r = LC_EINTERNAL;

  *out = NULL;
  if (names[0] == '\0' || names[0] == ',' || names[strlen(names) - 1] == ',' ||
      strstr(names, ",,") != NULL) {
    r = BAD_LINE(p, f, "bad %s '%s': an empty cipher name", kw, arg);
    goto out;
  }
  if ((r = strv_add_list(&given, names)) < 0 ||
      (r = strv_add_list(&base, LC__SSH_CIPHERS_DEFAULT)) < 0)
    goto out;
  for (size_t i = 0; op != '-' && i < given.n; i++)
    if (!list_has(KNOWN_CIPHERS, given.v[i])) {
      r = BAD_LINE(p, f, "bad %s '%s': unknown cipher '%s' (known: %s)", kw, arg, given.v[i],
                   KNOWN_CIPHERS);
      goto out;
    }
  if (op == '-') {
    for (size_t i = 0; i < base.n; i++) {
      bool drop = false;
      for (size_t j = 0; j < given.n && !drop; j++)
        drop = match_pattern(base.v[i], given.v[j]);
      if (!drop && (r = strv_add_unique(&result, base.v[i])) < 0)
        goto out;
    }
  } else {
    strv *first = op == '+' ? &base : &given, *then = op == '+' ? &given : &base;
    for (size_t i = 0; i < first->n; i++)
      if ((r = strv_add_unique(&result, first->v[i])) < 0)
        goto out;
    for (size_t i = 0; op != '\0' && i < then->n; i++)
      if ((r = strv_add_unique(&result, then->v[i])) < 0)
        goto out;
  }
  if (result.n == 0) {
    r = BAD_LINE(p, f, "bad %s '%s': it leaves no cipher", kw, arg);
    goto out;
  }
  for (size_t i = 0; i < result.n; i++)
    if ((r = lc__buf_printf(&joined, "%s%s", i > 0 ? "," : "", result.v[i])) < 0)
      goto out;
  *out = joined.data;
  joined.data = NULL;
  r = 0;
out:
  lc__buf_free(&joined);
  strv_clear(&given);
  strv_clear(&result);
  strv_clear(&base);
  return r;
}

/* Moves *value into *field when the line applies and the keyword's bit is not yet seen. */
static void take_first(parse *p, bool apply, unsigned bit, char **field, char **value) {
  if (apply && !(p->seen & bit)) {
    *field = *value;
    *value = NULL;
    p->seen |= bit;
  }
}

/* Checks the value of a keyword used here and, where its block applies, takes it if first. */
static int on_value(parse *p, const cfile *f, keyword id, const char *kw, char *s) {
  char *arg = NULL, *value = NULL, *more;
  const char *t;
  bool apply = p->resolving && *f->active;
  long seconds;
  int r = LC_EINTERNAL, v;

  if (id == KW_KNOWN_HOSTS) {
    /* Several files may follow; the first is the one written to. */
    if ((r = next_arg(p, f, &s, &arg)) < 0)
      goto out;
    if (arg == NULL) {
      r = BAD_LINE(p, f, "%s needs a value", kw);
      goto out;
    }
    do {
      if ((r = next_arg(p, f, &s, &more)) < 0)
        goto out;
    } while (more != NULL);
  } else if ((r = one_arg(p, f, kw, &s, &arg)) < 0) {
    goto out;
  }

  switch (id) {
  case KW_HOSTNAME:
    if ((t = bad_token(arg, HOSTNAME_TOKENS)) != NULL) {
      r = BAD_LINE(p, f, "%s %s: unknown token '%.2s' (only %%h and %%%%)", kw, arg, t);
      goto out;
    }
    if (apply && !(p->seen & SEEN_HOSTNAME)) {
      if ((p->hostname = lc__strdup(arg)) == NULL) {
        r = -ENOMEM;
        goto out;
      }
      p->seen |= SEEN_HOSTNAME;
    }
    break;
  case KW_USER:
    if (apply && !(p->seen & SEEN_USER)) {
      if ((p->user = lc__strdup(arg)) == NULL) {
        r = -ENOMEM;
        goto out;
      }
      p->seen |= SEEN_USER;
    }
    break;
  case KW_PORT:
    if ((v = parse_port(arg)) == 0) {
      r = BAD_LINE(p, f, "bad %s '%s' (1 to 65535)", kw, arg);
      goto out;
    }
    if (apply && !(p->seen & SEEN_PORT)) {
      p->port = v;
      p->seen |= SEEN_PORT;
    }
    break;
  case KW_IDENTITY_FILE:
    if (strcasecmp(arg, "none") == 0) /* ssh keeps it, then passes it over */
      break;
    if ((r = path_value(p, f, kw, arg, &value)) < 0)
      goto out;
    if (apply && !strv_has(&p->ids, value)) {
      if ((r = strv_push(&p->ids, value)) < 0)
        goto out;
      value = NULL;
    }
    break;
  case KW_IDENTITIES_ONLY:
    if (strcasecmp(arg, "yes") == 0 || strcasecmp(arg, "true") == 0) {
      v = 1;
    } else if (strcasecmp(arg, "no") == 0 || strcasecmp(arg, "false") == 0) {
      v = 0;
    } else {
      r = BAD_LINE(p, f, "bad %s '%s' (yes or no)", kw, arg);
      goto out;
    }
    if (apply && !(p->seen & SEEN_IDENTITIES_ONLY)) {
      p->identities_only = v;
      p->seen |= SEEN_IDENTITIES_ONLY;
    }
    break;
  case KW_PROXY_JUMP:
    if (apply && !(p->seen & SEEN_PROXY_JUMP)) {
      if (strcasecmp(arg, "none") != 0 && (p->proxy_jump = lc__strdup(arg)) == NULL) {
        r = -ENOMEM;
        goto out;
      }
      p->seen |= SEEN_PROXY_JUMP;
    }
    break;
  case KW_KNOWN_HOSTS:
    if (strcasecmp(arg, "none") == 0)
      value = lc__strdup("/dev/null");
    else if ((r = path_value(p, f, kw, arg, &value)) < 0)
      goto out;
    if (value == NULL) {
      r = -ENOMEM;
      goto out;
    }
    take_first(p, apply, SEEN_KNOWN_HOSTS, &p->known_hosts, &value);
    break;
  case KW_STRICT:
    if (strcasecmp(arg, "yes") == 0 || strcasecmp(arg, "true") == 0 ||
        strcasecmp(arg, "ask") == 0) {
      v = LC__STRICT_YES;
    } else if (strcasecmp(arg, "accept-new") == 0) {
      v = LC__STRICT_ACCEPT_NEW;
    } else if (strcasecmp(arg, "no") == 0 || strcasecmp(arg, "false") == 0 ||
               strcasecmp(arg, "off") == 0) {
      v = LC__STRICT_NO;
    } else {
      r = BAD_LINE(p, f, "bad %s '%s' (yes, ask, accept-new, no or off)", kw, arg);
      goto out;
    }
    if (apply && !(p->seen & SEEN_STRICT)) {
      p->strict = (lc__strict)v;
      p->seen |= SEEN_STRICT;
    }
    break;
  case KW_CONNECT_TIMEOUT:
    seconds = strcasecmp(arg, "none") == 0 ? 0 : parse_seconds(arg);
    if (seconds < 0) {
      r = BAD_LINE(p, f, "bad %s '%s' (seconds, or a time like 1m30s)", kw, arg);
      goto out;
    }
    if (apply && !(p->seen & SEEN_CONNECT_TIMEOUT)) {
      p->connect_timeout_s = (int)seconds;
      p->seen |= SEEN_CONNECT_TIMEOUT;
    }
    break;
  case KW_CIPHERS:
    if ((r = cipher_list(p, f, kw, arg, &value)) < 0)
      goto out;
    take_first(p, apply, SEEN_CIPHERS, &p->ciphers, &value);
    break;
  default:
    break;
  }
  r = 0;
out:
  free(value);
  return r;
}

/* One line: "Keyword value...", "Keyword=value", a comment or nothing. */
/* NOLINTNEXTLINE(misc-no-recursion) */
static int parse_line(parse *p, cfile *f, char *line) {
  char *s = line, *kw;
  size_t len = strlen(line);
  keyword id;
  bool equals;
  int r = 0;

  while (len > 0 && strchr(" \t\r\n\f", line[len - 1]) != NULL)
    line[--len] = '\0';
  s += strspn(s, " \t");
  if (*s == '\0' || *s == '#')
    goto out;
  kw = s;
  s += strcspn(s, " \t=");
  if (*s != '\0') {
    equals = *s == '=';
    *s++ = '\0';
    s += strspn(s, " \t");
    if (!equals && *s == '=')
      s += 1 + strspn(s + 1, " \t");
  }
  if (*kw == '\0')
    goto out;
  id = keyword_id(kw);
  if (f->skip && id != KW_HOST && id != KW_MATCH)
    goto out;
  if (*s == '\0') {
    r = BAD_LINE(p, f, "%s needs a value", kw);
    goto out;
  }
  switch (id) {
  case KW_UNKNOWN:
    break;
  case KW_HOST:
    r = on_host(p, f, kw, s);
    break;
  case KW_MATCH:
    r = on_match(p, f, kw, s);
    break;
  case KW_INCLUDE:
    r = on_include(p, f, kw, s);
    break;
  default:
    r = on_value(p, f, id, kw, s);
    break;
  }
out:
  return r;
}

/*
 * Reads one file. *active says whether its first lines apply, as the including file left it, and
 * is changed by its Host and Match lines.
 */
/* NOLINTNEXTLINE(misc-no-recursion,readability-non-const-parameter) */
static int read_config(parse *p, const char *path, int depth, bool *active, bool nevermatch,
                       open_how how) {
  cfile f = {.path = path, .depth = depth, .nevermatch = nevermatch, .active = active};
  struct stat st;
  FILE *fp = NULL;
  char *line = NULL;
  size_t cap = 0;
  int r = LC_EINTERNAL;

  if ((fp = fopen(path, "re")) == NULL) {
    r = -errno;
    if (r == -ENOENT && how != OPEN_EXPLICIT)
      r = 0;
    else
      lc__err_set(p->err, r, "%s: %s", path, lc_strerror(r));
    goto out;
  }
  if (fstat(fileno(fp), &st) == 0 && S_ISDIR(st.st_mode)) {
    r = 0;
    if (how != OPEN_INCLUDE)
      r = lc__err_set(p->err, -EISDIR, "%s: %s", path, lc_strerror(-EISDIR));
    goto out;
  }
  for (;;) {
    errno = 0;
    if (getline(&line, &cap, fp) < 0)
      break;
    f.line++;
    if ((r = parse_line(p, &f, line)) < 0)
      goto out;
  }
  if (!feof(fp)) {
    r = errno ? -errno : -EIO;
    lc__err_set(p->err, r, "%s: %s", path, lc_strerror(r));
    goto out;
  }
  r = 0;
out:
  free(line);
  if (fp)
    fclose(fp);
  return r;
}

/* Reads config_path, or ~/.ssh/config when it is NULL. */
static int read_top(parse *p, const char *config_path) {
  char *path = NULL;
  bool active = true;
  int r = LC_EINTERNAL;
  if (config_path != NULL) {
    r = read_config(p, config_path, 0, &active, false, OPEN_EXPLICIT);
    goto out;
  }
  r = 0;
  if (p->home == NULL)
    goto out;
  if ((path = lc__sprintf("%s/.ssh/config", p->home)) == NULL) {
    r = -ENOMEM;
    goto out;
  }
  r = read_config(p, path, 0, &active, false, OPEN_DEFAULT);
out:
  free(path);
  return r;
}

/* Splits "[user@]host[:port]" or "[user@][v6addr][:port]"; *port is 0 when the spec has none. */
static int parse_spec(const char *spec, char **user, char **host, int *port, lc__err *err) {
  const char *at = strrchr(spec, '@'), *h = at ? at + 1 : spec, *end, *port_str = NULL, *close;
  int r = LC_EINTERNAL;
  *user = *host = NULL;
  *port = 0;
  if (at == spec) {
    r = lc__err_set(err, LC_ECONFIG, "host spec '%s': empty user", spec);
    goto out;
  }
  if (*h == '[') {
    if ((close = strchr(h, ']')) == NULL || (close[1] != '\0' && close[1] != ':')) {
      r = lc__err_set(err, LC_ECONFIG, "host spec '%s': expected [address] or [address]:port",
                      spec);
      goto out;
    }
    h++;
    end = close;
    if (close[1] == ':')
      port_str = close + 2;
  } else if ((end = strchr(h, ':')) != NULL && strchr(end + 1, ':') == NULL) {
    port_str = end + 1;
  } else {
    end = h + strlen(h); /* no port, or an IPv6 address without brackets */
  }
  if (end == h) {
    r = lc__err_set(err, LC_ECONFIG, "host spec '%s': no host", spec);
    goto out;
  }
  for (const char *c = spec; c < end; c++) {
    if ((unsigned char)*c <= ' ' || *c == 0x7f) {
      r = lc__err_set(err, LC_ECONFIG, "host spec '%s': blank or control character", spec);
      goto out;
    }
  }
  if (*h == '-' || *spec == '-') {
    r = lc__err_set(err, LC_ECONFIG, "host spec '%s': a user or host cannot start with '-'", spec);
    goto out;
  }
  if (port_str != NULL && (*port = parse_port(port_str)) == 0) {
    r = lc__err_set(err, LC_ECONFIG, "host spec '%s': bad port '%s' (1 to 65535)", spec, port_str);
    goto out;
  }
  if ((at && (*user = lc__strndup(spec, (size_t)(at - spec))) == NULL) ||
      (*host = lc__strndup(h, (size_t)(end - h))) == NULL) {
    r = -ENOMEM;
    goto out;
  }
  r = 0;
out:
  if (r < 0) {
    free(*user);
    *user = NULL;
  }
  return r;
}

static const char *token_value(const tokens *t, char c) {
  switch (c) {
  case '%':
    return "%";
  case 'd':
    return t->home;
  case 'h':
    return t->host;
  case 'i':
    return t->uid[0] ? t->uid : NULL;
  case 'l':
    return t->local_host[0] ? t->local_host : NULL;
  case 'L':
    return t->local_host_short[0] ? t->local_host_short : NULL;
  case 'n':
    return t->alias;
  case 'p':
    return t->port[0] ? t->port : NULL;
  case 'r':
    return t->remote_user;
  case 'u':
    return t->local_user;
  default:
    return NULL;
  }
}

/* Expands the % tokens of in, which were checked when it was read. */
static int expand_tokens(const char *kw, const char *in, const tokens *t, char **out,
                         lc__err *err) {
  lc__buf b = {0};
  const char *v;
  size_t n;
  int r = LC_EINTERNAL;
  *out = NULL;
  for (const char *s = in; *s; s += n) {
    if (*s != '%') {
      n = strcspn(s, "%");
      if ((r = lc__buf_append(&b, s, n)) < 0)
        goto out;
      continue;
    }
    if (s[1] == '\0' || (v = token_value(t, s[1])) == NULL) {
      r = lc__err_set(err, LC_ECONFIG, "%s %s: nothing known to put for '%.2s'", kw, in, s);
      goto out;
    }
    if ((r = lc__buf_append(&b, v, strlen(v))) < 0)
      goto out;
    n = 2;
  }
  if ((r = lc__buf_append(&b, "", 0)) < 0)
    goto out;
  *out = b.data;
  b.data = NULL;
  r = 0;
out:
  lc__buf_free(&b);
  return r;
}

/* The values of the % tokens of paths, once host, users and port are known. */
static void tokens_fill(tokens *t, const parse *p, const lc__ssh_host *h) {
  memset(t, 0, sizeof(*t));
  t->home = p->home;
  t->host = h->hostname;
  t->alias = h->alias;
  t->remote_user = h->user ? h->user : p->local_user;
  t->local_user = p->local_user;
  snprintf(t->uid, sizeof(t->uid), "%lu", (unsigned long)getuid());
  snprintf(t->port, sizeof(t->port), "%d", h->port);
  if (gethostname(t->local_host, sizeof(t->local_host) - 1) != 0)
    t->local_host[0] = '\0';
  t->local_host[sizeof(t->local_host) - 1] = '\0';
  memcpy(t->local_host_short, t->local_host, sizeof(t->local_host_short));
  t->local_host_short[strcspn(t->local_host_short, ".")] = '\0';
}

int lc__sshconfig_resolve(lc__ssh_host *out, const char *config_path, const char *spec,
                          lc__err *err) {
  parse p = {.err = err, .resolving = true};
  lc__ssh_host h = {0};
  tokens t;
  char *spec_user = NULL;
  int spec_port = 0;
  int r = LC_EINTERNAL;

  if (out == NULL || spec == NULL) {
    r = lc__err_set(err, -EINVAL, "no host spec given");
    goto out;
  }
  memset(out, 0, sizeof(*out));
  if ((r = parse_spec(spec, &spec_user, &h.alias, &spec_port, err)) < 0)
    goto out;
  p.alias = h.alias;
  if ((r = env_init(&p)) < 0 || (r = read_top(&p, config_path)) < 0)
    goto out;

  if (p.hostname != NULL) {
    memset(&t, 0, sizeof(t));
    t.host = h.alias;
    if ((r = expand_tokens("HostName", p.hostname, &t, &h.hostname, err)) < 0)
      goto out;
  } else if ((h.hostname = lc__strdup(h.alias)) == NULL) {
    r = -ENOMEM;
    goto out;
  }
  if (spec_user != NULL) {
    h.user = spec_user;
    spec_user = NULL;
  } else {
    h.user = p.user;
    p.user = NULL;
  }
  h.port = spec_port ? spec_port : (p.seen & SEEN_PORT) ? p.port : 22;
  tokens_fill(&t, &p, &h);
  if (p.ids.n > 0 && (h.identity_files = lc__calloc(p.ids.n, sizeof(char *))) == NULL) {
    r = -ENOMEM;
    goto out;
  }
  for (size_t i = 0; i < p.ids.n; i++) {
    if ((r = expand_tokens("IdentityFile", p.ids.v[i], &t, &h.identity_files[i], err)) < 0)
      goto out;
    h.identity_count++;
  }
  if (p.known_hosts != NULL &&
      (r = expand_tokens("UserKnownHostsFile", p.known_hosts, &t, &h.known_hosts, err)) < 0)
    goto out;
  h.identities_only = p.identities_only;
  h.proxy_jump = p.proxy_jump;
  p.proxy_jump = NULL;
  h.strict = p.strict;
  h.connect_timeout_s = p.connect_timeout_s;
  h.ciphers = p.ciphers;
  p.ciphers = NULL;
  *out = h;
  memset(&h, 0, sizeof(h));
  r = 0;
out:
  if (r == -ENOMEM)
    lc__err_set(err, r, "out of memory reading the ssh config");
  lc__ssh_host_clear(&h);
  free(spec_user);
  parse_free(&p);
  return r;
}

void lc__ssh_host_clear(lc__ssh_host *h) {
  if (h == NULL)
    return;
  free(h->alias);
  free(h->hostname);
  free(h->user);
  lc__strv_free(h->identity_files, h->identity_count);
  free(h->proxy_jump);
  free(h->known_hosts);
  free(h->ciphers);
  memset(h, 0, sizeof(*h));
}

int lc__sshconfig_aliases(char ***out, size_t *count, const char *config_path, lc__err *err) {
  parse p = {.err = err};
  int r = LC_EINTERNAL;

  *out = NULL;
  *count = 0;
  if ((r = env_init(&p)) < 0 || (r = read_top(&p, config_path)) < 0)
    goto out;
  if (p.names.v == NULL && (p.names.v = lc__calloc(1, sizeof(char *))) == NULL) {
    r = -ENOMEM;
    goto out;
  }
  *out = p.names.v;
  *count = p.names.n;
  memset(&p.names, 0, sizeof(p.names));
  r = 0;
out:
  if (r == -ENOMEM)
    lc__err_set(err, r, "out of memory reading the ssh config");
  parse_free(&p);
  return r;
}

void lc__strv_free(char **v, size_t n) {
  if (v == NULL)
    return;
  for (size_t i = 0; i < n; i++)
    free(v[i]);
  free(v);
}
