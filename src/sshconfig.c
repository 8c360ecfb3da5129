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

#include "lazycluster/runtime.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* As ssh's READCONF_MAX_DEPTH: it also stops a file that includes itself. */
#define MAX_INCLUDE_DEPTH 16

/* The % tokens a path value may hold, and HostName. */
#define PATH_TOKENS "%dhikLlnpru"
#define PROXY_TOKENS "%hnpr"
#define HOSTNAME_TOKENS "%h"

enum {
  SEEN_HOSTNAME = 1u << 0,
  SEEN_USER = 1u << 1,
  SEEN_PORT = 1u << 2,
  SEEN_IDENTITIES_ONLY = 1u << 3,
  SEEN_PROXY = 1u << 4, /* ProxyJump and ProxyCommand share one value, as in ssh */
  SEEN_KNOWN_HOSTS = 1u << 5,
  SEEN_STRICT = 1u << 6,
  SEEN_CONNECT_TIMEOUT = 1u << 7,
  SEEN_CIPHERS = 1u << 8,
  SEEN_GLOBAL_KNOWN_HOSTS = 1u << 9,
  SEEN_HOSTKEY_ALIAS = 1u << 10,
  SEEN_IDENTITY_AGENT = 1u << 11,
  SEEN_ADDRESS_FAMILY = 1u << 12,
  SEEN_CONNECTION_ATTEMPTS = 1u << 13,
  SEEN_ALIVE_INTERVAL = 1u << 14,
  SEEN_ALIVE_COUNT = 1u << 15,
  SEEN_HOSTKEY_ALGS = 1u << 16,
  SEEN_KEX = 1u << 17,
  SEEN_PUBKEY_ALGS = 1u << 18,
  SEEN_BATCH_MODE = 1u << 19,
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
  KW_PROXY_COMMAND,
  KW_KNOWN_HOSTS,
  KW_GLOBAL_KNOWN_HOSTS,
  KW_STRICT,
  KW_CONNECT_TIMEOUT,
  KW_CIPHERS,
  KW_CERTIFICATE_FILE,
  KW_HOSTKEY_ALIAS,
  KW_IDENTITY_AGENT,
  KW_ADDRESS_FAMILY,
  KW_CONNECTION_ATTEMPTS,
  KW_ALIVE_INTERVAL,
  KW_ALIVE_COUNT,
  KW_HOSTKEY_ALGS,
  KW_KEX,
  KW_PUBKEY_ALGS,
  KW_BATCH_MODE,
  KW_UNHONOURED, /* changes how a host is reached, not implemented: warned about (see below) */
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
    {"proxycommand", KW_PROXY_COMMAND},
    {"userknownhostsfile", KW_KNOWN_HOSTS},
    {"globalknownhostsfile", KW_GLOBAL_KNOWN_HOSTS},
    {"stricthostkeychecking", KW_STRICT},
    {"connecttimeout", KW_CONNECT_TIMEOUT},
    {"ciphers", KW_CIPHERS},
    {"certificatefile", KW_CERTIFICATE_FILE},
    {"hostkeyalias", KW_HOSTKEY_ALIAS},
    {"identityagent", KW_IDENTITY_AGENT},
    {"addressfamily", KW_ADDRESS_FAMILY},
    {"connectionattempts", KW_CONNECTION_ATTEMPTS},
    {"serveraliveinterval", KW_ALIVE_INTERVAL},
    {"serveralivecountmax", KW_ALIVE_COUNT},
    {"hostkeyalgorithms", KW_HOSTKEY_ALGS},
    {"kexalgorithms", KW_KEX},
    {"pubkeyacceptedalgorithms", KW_PUBKEY_ALGS},
    {"pubkeyacceptedkeytypes", KW_PUBKEY_ALGS},
    {"batchmode", KW_BATCH_MODE},
};

/*
 * Keywords that change whether or how a host is reached and that the SSH backend does not
 * implement: a line that applies is named in a warning, with why. `what` is NULL when any value
 * counts, else the values that are harmless (the defaults) separated by '|'.
 */
static const struct {
  const char *name;
  const char *harmless;
  const char *why;
} unhonoured[] = {
    {"bindaddress", NULL, "the connection's source address is not set"},
    {"bindinterface", NULL, "the connection's source interface is not set"},
    {"canonicalizehostname", "no|false", "host names are not canonicalized"},
    {"knownhostscommand", "none", "host keys come only from the known_hosts files"},
    {"verifyhostkeydns", "no|false", "host keys are not looked up in DNS"},
    {"revokedhostkeys", "none", "revoked host keys are not checked"},
    {"pkcs11provider", "none", "keys come only from files and the agent"},
    {"securitykeyprovider", "internal", "security keys are not used"},
    {"hostbasedauthentication", "no|false", "only public key authentication is used"},
    {"pubkeyauthentication", "yes|true|unbound|host-bound",
     "only public key authentication is used"},
    {"preferredauthentications", "publickey*", "only public key authentication is used"},
    {"proxyusefdpass", "no|false", "the ProxyCommand's stdin and stdout carry the connection"},
    {"macs", NULL, "the backend's MAC list is used"},
    {"casignaturealgorithms", NULL, "the backend's CA signature algorithms are used"},
    {"requiredrsasize", NULL, "the backend's minimum RSA size (1024) is used"},
};

/* The ciphers that OpenSSH 9 and the SSH backend (libssh 0.10 on OpenSSL) both know. */
#define KNOWN_CIPHERS                                                                              \
  "chacha20-poly1305@openssh.com,aes128-gcm@openssh.com,aes256-gcm@openssh.com,aes128-ctr,"        \
  "aes192-ctr,aes256-ctr,aes128-cbc,aes192-cbc,aes256-cbc,3des-cbc"
/* The key exchanges, host key and user key algorithms that libssh 0.10 knows. */
#define KNOWN_KEX                                                                                  \
  LC__SSH_KEX_DEFAULT ",diffie-hellman-group14-sha1,diffie-hellman-group1-sha1,"                   \
                      "diffie-hellman-group-exchange-sha1"
#define KNOWN_KEYS                                                                                 \
  LC__SSH_HOSTKEYS_DEFAULT ",ssh-rsa,ssh-rsa-cert-v01@openssh.com,sk-ssh-ed25519@openssh.com,"     \
                           "sk-ecdsa-sha2-nistp256@openssh.com"

/* ssh's default identity files, in its order, when the config names none. */
static const char *const default_identities[] = {
    "~/.ssh/id_rsa",        "~/.ssh/id_ecdsa", "~/.ssh/id_ecdsa_sk", "~/.ssh/id_ed25519",
    "~/.ssh/id_ed25519_sk", "~/.ssh/id_xmss",  "~/.ssh/id_dsa",
};

/* How a missing or odd file is taken. */
typedef enum open_how {
  OPEN_EXPLICIT, /* the caller named it: it must exist */
  OPEN_DEFAULT,  /* ~/.ssh/config or the system file: missing is fine */
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
  bool resolving;        /* false: only list the Host names */
  const char *alias;     /* what Host patterns are matched against */
  const char *spec_user; /* the spec's user: wins over User, and is what Match user sees */
  int spec_port;
  bool final_pass;     /* the second reading that "Match final" asks for */
  bool want_final;     /* a "Match final" was seen */
  const char *sys_dir; /* where the system file's relative Includes are; NULL: reading ~ */
  char *home;          /* NULL when unknown */
  char *local_user;    /* NULL when unknown */
  unsigned seen;       /* SEEN_*: the keywords whose first value was taken */
  char *hostname;
  char *user;
  int port;
  int identities_only;
  char *proxy_jump;
  char *proxy_command; /* raw; "none" kept */
  strv known_hosts;    /* raw */
  strv global_known_hosts;
  char *hostkey_alias;
  char *identity_agent; /* raw */
  lc__strict strict;
  const char *strict_name;
  int connect_timeout_s;
  int connection_attempts;
  int alive_interval_s;
  int alive_count;
  lc__addr_family family;
  int batch_mode;
  char *ciphers; /* the list that Ciphers makes of LC__SSH_CIPHERS_DEFAULT */
  char *kex;
  char *hostkey_algs;
  char *pubkey_algs;
  strv ids;   /* raw */
  strv certs; /* raw */
  strv names;
  strv warnings;
  /* the kept files this resolve read (kept_mark): slot and generation each */
  struct {
    size_t slot;
    unsigned gen;
  } read[16];
  size_t nread;
} parse;

/* One file being read. */
typedef struct cfile {
  const char *path;
  int line;
  int depth;       /* 0 for the top file */
  bool nevermatch; /* included from a block that does not apply: no Host in it matches */
  bool *active;    /* whether lines apply here; shared with the including file */
  bool skip;       /* listing only: inside a Match block, whose lines are not checked */
} cfile;

/* The values of % tokens; NULL where unknown. */
typedef struct tokens {
  const char *home;
  const char *host;
  const char *key_alias; /* %k: HostKeyAlias, else the alias */
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
  char **v = lc__grow(a->v, &a->cap, a->n + 2, sizeof(*v), 8); /* and the NULL after */
  if (v == NULL) {
    r = -ENOMEM;
    goto out;
  }
  a->v = v;
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
  free(p->proxy_command);
  strv_clear(&p->known_hosts);
  strv_clear(&p->global_known_hosts);
  free(p->hostkey_alias);
  free(p->identity_agent);
  free(p->ciphers);
  free(p->kex);
  free(p->hostkey_algs);
  free(p->pubkey_algs);
  strv_clear(&p->ids);
  strv_clear(&p->certs);
  strv_clear(&p->names);
  strv_clear(&p->warnings);
}

static keyword keyword_id(const char *name) {
  for (size_t i = 0; i < LC_ARRAY_SIZE(keywords); i++)
    if (strcasecmp(name, keywords[i].name) == 0)
      return keywords[i].id;
  for (size_t i = 0; i < LC_ARRAY_SIZE(unhonoured); i++)
    if (strcasecmp(name, unhonoured[i].name) == 0)
      return KW_UNHONOURED;
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

/*
 * ssh's match_pattern_list: a comma-separated list of patterns, each perhaps negated with '!'.
 * True when a pattern matches and no negated one does. lower: the patterns are lowercased first
 * (as ssh does for host names).
 */
static bool match_list(const char *s, const char *list, bool lower) {
  char pat[1024];
  bool hit = false;
  for (const char *l = list; *l != '\0'; l += *l == ',') {
    size_t n = strcspn(l, ",");
    bool neg = *l == '!';
    size_t off = neg ? 1 : 0;
    if (n - off >= sizeof(pat))
      return false;
    for (size_t i = off; i < n; i++)
      pat[i - off] = lower ? (char)tolower((unsigned char)l[i]) : l[i];
    pat[n - off] = '\0';
    if (match_pattern(s, pat)) {
      if (neg)
        return false;
      hit = true;
    }
    l += n;
  }
  return hit;
}

static int expand_tokens(const char *kw, const char *in, const tokens *t, char **out, lc__err *err);
static void tokens_init(tokens *t, const parse *p, const char *host, const char *user, int port);

/* The host name as a Match line sees it: HostName so far with %h expanded, else the alias. */
static char *match_host(const parse *p) {
  tokens t;
  char *out = NULL;
  lc__err ignored = {0};
  if (p->hostname == NULL)
    return lc__strdup(p->alias);
  memset(&t, 0, sizeof(t));
  t.host = p->alias;
  if (expand_tokens("HostName", p->hostname, &t, &out, &ignored) < 0)
    return NULL;
  return out;
}

/* Runs cmd as ssh's Match exec does (the user's shell, -c), all output to /dev/null: whether it
 * exited 0. */
static bool exec_true(const char *cmd) {
  const char *shell = getenv("SHELL");
  char *argv[4];
  posix_spawn_file_actions_t fa;
  pid_t pid;
  int st = 0;
  bool ok = false;
  if (shell == NULL || *shell == '\0' || access(shell, X_OK) != 0)
    shell = "/bin/sh";
  argv[0] = (char *)shell;
  argv[1] = (char *)"-c";
  argv[2] = (char *)cmd;
  argv[3] = NULL;
  if (posix_spawn_file_actions_init(&fa) != 0)
    return false;
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  if (posix_spawn(&pid, shell, &fa, NULL, argv, environ) == 0) {
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
      ;
    ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
  }
  posix_spawn_file_actions_destroy(&fa);
  return ok;
}

/*
 * Match, as ssh's match_cfg_line: every criterion must hold (host, originalhost, user, localuser,
 * exec, all, canonical, final, each perhaps negated with '!'); canonical and final hold only in
 * the final pass, which "Match final" asks for. exec runs only while the criteria before it hold.
 * When only listing names, the block is passed over unchecked.
 */
static int on_match(parse *p, cfile *f, const char *kw, char *s) {
  char *arg, *val, *host = NULL, *cmd = NULL;
  const char *ruser;
  bool result = true, all = false;
  int r = LC_EINTERNAL, n = 0;
  tokens t;

  if (!p->resolving) {
    f->skip = true;
    *f->active = false;
    r = 0;
    goto out;
  }
  if ((host = match_host(p)) == NULL) {
    r = -ENOMEM;
    goto out;
  }
  ruser = p->spec_user ? p->spec_user : p->user ? p->user : p->local_user ? p->local_user : "";
  for (;;) {
    bool neg, hit;
    if ((r = next_arg(p, f, &s, &arg)) < 0)
      goto out;
    if (arg == NULL)
      break;
    n++;
    neg = arg[0] == '!';
    if (neg)
      arg++;
    if (strcasecmp(arg, "all") == 0) {
      if (neg || all) {
        r = BAD_LINE(p, f, "%s: '%sall' cannot be negated or repeated", kw, neg ? "!" : "");
        goto out;
      }
      all = true;
      continue;
    }
    if (all) {
      r = BAD_LINE(p, f, "%s: 'all' must come alone or after canonical or final", kw);
      goto out;
    }
    if (strcasecmp(arg, "canonical") == 0 || strcasecmp(arg, "final") == 0) {
      if (strcasecmp(arg, "final") == 0 && !neg)
        p->want_final = true;
      if (p->final_pass == neg)
        result = false;
      continue;
    }
    if (strcasecmp(arg, "host") != 0 && strcasecmp(arg, "originalhost") != 0 &&
        strcasecmp(arg, "user") != 0 && strcasecmp(arg, "localuser") != 0 &&
        strcasecmp(arg, "exec") != 0) {
      r = BAD_LINE(p, f,
                   "%s: unsupported criterion '%s' (host, originalhost, user, localuser, "
                   "exec, all, canonical, final)",
                   kw, arg);
      goto out;
    }
    if ((r = next_arg(p, f, &s, &val)) < 0)
      goto out;
    if (val == NULL || *val == '\0') {
      r = BAD_LINE(p, f, "%s %s needs a value", kw, arg);
      goto out;
    }
    if (strcasecmp(arg, "host") == 0) {
      hit = match_list(host, val, true);
    } else if (strcasecmp(arg, "originalhost") == 0) {
      hit = match_list(p->alias, val, true);
    } else if (strcasecmp(arg, "user") == 0) {
      hit = match_list(ruser, val, false);
    } else if (strcasecmp(arg, "localuser") == 0) {
      hit = match_list(p->local_user ? p->local_user : "", val, false);
    } else {
      const char *bad = bad_token(val, "%CdhiLlnpru");
      if (bad != NULL) {
        r = BAD_LINE(p, f, "%s exec %s: unknown token '%.2s'", kw, val, bad);
        goto out;
      }
      if (!result || f->nevermatch) {
        /* not run: an earlier criterion failed, or the block cannot apply */
        hit = !neg;
      } else {
        int port = p->spec_port ? p->spec_port : (p->seen & SEEN_PORT) ? p->port : 22;
        tokens_init(&t, p, host, ruser, port);
        free(cmd);
        cmd = NULL;
        if ((r = expand_tokens("Match exec", val, &t, &cmd, p->err)) < 0) {
          r = BAD_LINE(p, f, "%s", p->err->msg);
          goto out;
        }
        hit = exec_true(cmd);
      }
    }
    if (hit == neg)
      result = false;
  }
  if (n == 0) {
    r = BAD_LINE(p, f, "%s needs a criterion", kw);
    goto out;
  }
  f->skip = false;
  *f->active = result && !f->nevermatch;
  r = 0;
out:
  free(host);
  free(cmd);
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
    } else if (p->sys_dir != NULL) {
      pattern = lc__sprintf("%s/%s", p->sys_dir, arg);
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
 * An algorithm list (Ciphers, KexAlgorithms, HostKeyAlgorithms, PubkeyAcceptedAlgorithms) as
 * ssh_config(5) has it, applied to the backend's default list dflt (not ssh's): "a,b" is the
 * list itself, "+a,b" appends to the default, "^a,b" puts a and b first, "-p,q" removes the names
 * that match the patterns p and q (* and ?). Names must be in known, except after '-'. *out: the
 * resulting list.
 */
static int algo_list(parse *p, const cfile *f, const char *kw, const char *arg, const char *dflt,
                     const char *known, char **out) {
  const char *noun = strcasecmp(kw, "ciphers") == 0 ? "cipher" : "algorithm";
  char op = arg[0] == '+' || arg[0] == '-' || arg[0] == '^' ? arg[0] : '\0';
  const char *names = op != '\0' ? arg + 1 : arg;
  strv given = {0}, result = {0}, base = {0};
  lc__buf joined = {0};
  int r = LC_EINTERNAL;

  *out = NULL;
  if (names[0] == '\0' || names[0] == ',' || names[strlen(names) - 1] == ',' ||
      strstr(names, ",,") != NULL) {
    r = BAD_LINE(p, f, "bad %s '%s': an empty %s name", kw, arg, noun);
    goto out;
  }
  if ((r = strv_add_list(&given, names)) < 0 || (r = strv_add_list(&base, dflt)) < 0)
    goto out;
  for (size_t i = 0; op != '-' && i < given.n; i++)
    if (!list_has(known, given.v[i])) {
      r = BAD_LINE(p, f, "bad %s '%s': unknown %s '%s' (known: %s)", kw, arg, noun, given.v[i],
                   known);
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
    r = BAD_LINE(p, f, "bad %s '%s': it leaves no %s", kw, arg, noun);
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

/* Sets *field to v when the line applies and the keyword's bit is not yet seen. */
static void take_int(parse *p, bool apply, unsigned bit, int *field, int v) {
  if (apply && !(p->seen & bit)) {
    *field = v;
    p->seen |= bit;
  }
}

/* yes/true 1, no/false 0, else -1. */
static int yes_no(const char *arg) {
  if (strcasecmp(arg, "yes") == 0 || strcasecmp(arg, "true") == 0)
    return 1;
  if (strcasecmp(arg, "no") == 0 || strcasecmp(arg, "false") == 0)
    return 0;
  return -1;
}

/* Every argument of a list keyword (UserKnownHostsFile, GlobalKnownHostsFile), raw. */
static int all_args(const parse *p, const cfile *f, const char *kw, char *s, strv *out) {
  char *arg, *copy;
  int r = LC_EINTERNAL;
  for (;;) {
    if ((r = next_arg(p, f, &s, &arg)) < 0)
      goto out;
    if (arg == NULL)
      break;
    if ((copy = lc__strdup(arg)) == NULL || (r = strv_push(out, copy)) < 0) {
      free(copy);
      r = -ENOMEM;
      goto out;
    }
  }
  r = out->n == 0 ? BAD_LINE(p, f, "%s needs a value", kw) : 0;
out:
  return r;
}

/* A keyword of the `unhonoured` table, where it applies: one warning per keyword. */
static int on_unhonoured(parse *p, const cfile *f, const char *kw, const char *value, bool apply) {
  char *w = NULL, lower[256], harmless[128];
  int r = 0;
  size_t i;
  for (i = 0; i < LC_ARRAY_SIZE(unhonoured); i++)
    if (strcasecmp(kw, unhonoured[i].name) == 0)
      break;
  if (!apply || i == LC_ARRAY_SIZE(unhonoured))
    goto out;
  if (unhonoured[i].harmless != NULL) {
    snprintf(lower, sizeof(lower), "%s", value);
    snprintf(harmless, sizeof(harmless), "%s", unhonoured[i].harmless);
    for (char *c = lower; *c; c++)
      *c = (char)tolower((unsigned char)*c);
    for (char *c = harmless; *c; c++)
      if (*c == '|')
        *c = ',';
    if (match_list(lower, harmless, false))
      goto out;
  }
  for (size_t j = 0; j < p->warnings.n; j++)
    if (strstr(p->warnings.v[j], kw) != NULL)
      goto out;
  if ((w = lc__sprintf("%s:%d: %s %s: not implemented, %s", f->path, f->line, kw, value,
                       unhonoured[i].why)) == NULL ||
      (r = strv_push(&p->warnings, w)) < 0) {
    r = -ENOMEM;
    goto out;
  }
  w = NULL;
out:
  free(w);
  return r;
}

/* Checks the value of a keyword used here and, where its block applies, takes it if first. */
static int on_value(parse *p, const cfile *f, keyword id, const char *kw, char *s) {
  char *arg = NULL, *value = NULL;
  const char *t;
  bool apply = p->resolving && *f->active;
  long seconds;
  strv list = {0};
  int r = LC_EINTERNAL, v;

  if (id == KW_PROXY_COMMAND) {
    /* the rest of the line, as written: it is handed to the shell */
    if ((t = bad_token(s, PROXY_TOKENS)) != NULL) {
      r = BAD_LINE(p, f, "%s %s: unknown token '%.2s' (%%h %%n %%p %%r %%%%)", kw, s, t);
      goto out;
    }
    if ((value = lc__strdup(s)) == NULL) {
      r = -ENOMEM;
      goto out;
    }
    take_first(p, apply, SEEN_PROXY, &p->proxy_command, &value);
    r = 0;
    goto out;
  }
  if (id == KW_KNOWN_HOSTS || id == KW_GLOBAL_KNOWN_HOSTS) {
    if ((r = all_args(p, f, kw, s, &list)) < 0)
      goto out;
    for (size_t i = 0; id == KW_KNOWN_HOSTS && i < list.n; i++) {
      if (strcasecmp(list.v[i], "none") == 0)
        continue;
      if ((r = path_value(p, f, kw, list.v[i], &value)) < 0)
        goto out;
      free(value);
      value = NULL;
    }
    if (apply) {
      unsigned bit = id == KW_KNOWN_HOSTS ? SEEN_KNOWN_HOSTS : SEEN_GLOBAL_KNOWN_HOSTS;
      strv *field = id == KW_KNOWN_HOSTS ? &p->known_hosts : &p->global_known_hosts;
      if (!(p->seen & bit)) {
        *field = list;
        memset(&list, 0, sizeof(list));
        p->seen |= bit;
      }
    }
    r = 0;
    goto out;
  }
  if (id == KW_UNHONOURED) {
    r = on_unhonoured(p, f, kw, s, apply);
    goto out;
  }
  if ((r = one_arg(p, f, kw, &s, &arg)) < 0)
    goto out;

  switch (id) {
  case KW_HOSTNAME:
    if ((t = bad_token(arg, HOSTNAME_TOKENS)) != NULL) {
      r = BAD_LINE(p, f, "%s %s: unknown token '%.2s' (only %%h and %%%%)", kw, arg, t);
      goto out;
    }
    if ((value = lc__strdup(arg)) == NULL) {
      r = -ENOMEM;
      goto out;
    }
    take_first(p, apply, SEEN_HOSTNAME, &p->hostname, &value);
    break;
  case KW_USER:
  case KW_HOSTKEY_ALIAS:
    if ((value = lc__strdup(arg)) == NULL) {
      r = -ENOMEM;
      goto out;
    }
    if (id == KW_USER)
      take_first(p, apply, SEEN_USER, &p->user, &value);
    else
      take_first(p, apply, SEEN_HOSTKEY_ALIAS, &p->hostkey_alias, &value);
    break;
  case KW_PORT:
    if ((v = parse_port(arg)) == 0) {
      r = BAD_LINE(p, f, "bad %s '%s' (1 to 65535)", kw, arg);
      goto out;
    }
    take_int(p, apply, SEEN_PORT, &p->port, v);
    break;
  case KW_IDENTITY_FILE:
  case KW_CERTIFICATE_FILE:
    if (strcasecmp(arg, "none") == 0) /* ssh keeps it, then passes it over */
      break;
    if ((r = path_value(p, f, kw, arg, &value)) < 0) /* checked here, expanded at the end */
      goto out;
    if (apply && (r = strv_add_unique(id == KW_IDENTITY_FILE ? &p->ids : &p->certs, arg)) < 0)
      goto out;
    break;
  case KW_IDENTITIES_ONLY:
  case KW_BATCH_MODE:
    if ((v = yes_no(arg)) < 0) {
      r = BAD_LINE(p, f, "bad %s '%s' (yes or no)", kw, arg);
      goto out;
    }
    if (id == KW_IDENTITIES_ONLY)
      take_int(p, apply, SEEN_IDENTITIES_ONLY, &p->identities_only, v);
    else
      take_int(p, apply, SEEN_BATCH_MODE, &p->batch_mode, v);
    break;
  case KW_PROXY_JUMP:
    if ((value = lc__strdup(arg)) == NULL) {
      r = -ENOMEM;
      goto out;
    }
    take_first(p, apply, SEEN_PROXY, &p->proxy_jump, &value);
    break;
  case KW_IDENTITY_AGENT:
    if (strcasecmp(arg, "none") != 0 && strcmp(arg, "SSH_AUTH_SOCK") != 0 &&
        (arg[0] != '$' || arg[1] == '{') && (r = path_value(p, f, kw, arg, &value)) < 0)
      goto out;
    free(value);
    if ((value = lc__strdup(arg)) == NULL) {
      r = -ENOMEM;
      goto out;
    }
    take_first(p, apply, SEEN_IDENTITY_AGENT, &p->identity_agent, &value);
    break;
  case KW_STRICT:
    if (strcasecmp(arg, "yes") == 0 || strcasecmp(arg, "true") == 0) {
      v = LC__STRICT_YES;
      t = "true";
    } else if (strcasecmp(arg, "ask") == 0) {
      v = LC__STRICT_YES;
      t = "ask";
    } else if (strcasecmp(arg, "accept-new") == 0) {
      v = LC__STRICT_ACCEPT_NEW;
      t = "accept-new";
    } else if (strcasecmp(arg, "no") == 0 || strcasecmp(arg, "false") == 0 ||
               strcasecmp(arg, "off") == 0) {
      v = LC__STRICT_NO;
      t = "false";
    } else {
      r = BAD_LINE(p, f, "bad %s '%s' (yes, ask, accept-new, no or off)", kw, arg);
      goto out;
    }
    if (apply && !(p->seen & SEEN_STRICT))
      p->strict_name = t;
    take_int(p, apply, SEEN_STRICT, (int *)&p->strict, v);
    break;
  case KW_CONNECT_TIMEOUT:
  case KW_ALIVE_INTERVAL:
    seconds = strcasecmp(arg, "none") == 0 ? 0 : parse_seconds(arg);
    if (seconds < 0) {
      r = BAD_LINE(p, f, "bad %s '%s' (seconds, or a time like 1m30s)", kw, arg);
      goto out;
    }
    if (id == KW_CONNECT_TIMEOUT)
      take_int(p, apply, SEEN_CONNECT_TIMEOUT, &p->connect_timeout_s, (int)seconds);
    else
      take_int(p, apply, SEEN_ALIVE_INTERVAL, &p->alive_interval_s, (int)seconds);
    break;
  case KW_CONNECTION_ATTEMPTS:
  case KW_ALIVE_COUNT: {
    char *end;
    long n = strtol(arg, &end, 10);
    if (*end != '\0' || end == arg || n < (id == KW_ALIVE_COUNT ? 0 : 1) || n > 1000) {
      r = BAD_LINE(p, f, "bad %s '%s' (a number, %d to 1000)", kw, arg,
                   id == KW_ALIVE_COUNT ? 0 : 1);
      goto out;
    }
    if (id == KW_CONNECTION_ATTEMPTS)
      take_int(p, apply, SEEN_CONNECTION_ATTEMPTS, &p->connection_attempts, (int)n);
    else
      take_int(p, apply, SEEN_ALIVE_COUNT, &p->alive_count, (int)n);
    break;
  }
  case KW_ADDRESS_FAMILY:
    if (strcasecmp(arg, "any") == 0) {
      v = LC__AF_ANY;
    } else if (strcasecmp(arg, "inet") == 0) {
      v = LC__AF_INET;
    } else if (strcasecmp(arg, "inet6") == 0) {
      v = LC__AF_INET6;
    } else {
      r = BAD_LINE(p, f, "bad %s '%s' (any, inet or inet6)", kw, arg);
      goto out;
    }
    take_int(p, apply, SEEN_ADDRESS_FAMILY, (int *)&p->family, v);
    break;
  case KW_CIPHERS:
    if ((r = algo_list(p, f, kw, arg, LC__SSH_CIPHERS_DEFAULT, KNOWN_CIPHERS, &value)) < 0)
      goto out;
    take_first(p, apply, SEEN_CIPHERS, &p->ciphers, &value);
    break;
  case KW_KEX:
    if ((r = algo_list(p, f, kw, arg, LC__SSH_KEX_DEFAULT, KNOWN_KEX, &value)) < 0)
      goto out;
    take_first(p, apply, SEEN_KEX, &p->kex, &value);
    break;
  case KW_HOSTKEY_ALGS:
    if ((r = algo_list(p, f, kw, arg, LC__SSH_HOSTKEYS_DEFAULT, KNOWN_KEYS, &value)) < 0)
      goto out;
    take_first(p, apply, SEEN_HOSTKEY_ALGS, &p->hostkey_algs, &value);
    break;
  case KW_PUBKEY_ALGS:
    if ((r = algo_list(p, f, kw, arg, LC__SSH_PUBKEYS_DEFAULT, KNOWN_KEYS, &value)) < 0)
      goto out;
    take_first(p, apply, SEEN_PUBKEY_ALGS, &p->pubkey_algs, &value);
    break;
  default:
    break;
  }
  r = 0;
out:
  free(value);
  strv_clear(&list);
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

/* ---- the files, kept as read ------------------------------------------------------------- */

/*
 * A config of one Host block per host is read once per host: H hosts, H x H blocks (256 hosts:
 * 393,000 lines, 78 ms of CPU here, 0.3 ms a host, and growing with H). The last files read are
 * kept with where their Host, Match and Include lines are. A file is read every time and used as
 * kept only when its text is byte for byte the kept one (nothing stale is ever used); once a
 * resolve read it without an error it is known good: its lines in blocks that do not apply are
 * not checked again, and the reading jumps to its next Host, Match or Include line.
 */
#define KEPT_FILES 8
#define KEPT_MAX (1 << 20) /* a larger file is read line by line each time */

/* A Host, Match or Include line: its offset and its number (1 first). */
typedef struct fhead {
  size_t off;
  size_t line;
} fhead;

/* One file as this resolve reads it (its own copy). */
typedef struct ftext {
  char *text;
  size_t len;
  fhead *heads;
  size_t nheads;
  bool checked; /* a resolve read this very text without an error */
} ftext;

static struct {
  char *path;
  char *text;
  size_t len;
  fhead *heads;
  size_t nheads;
  bool checked;
  unsigned gen; /* changes whenever the slot is filled anew */
  uint64_t used;
} kept[KEPT_FILES];
static unsigned kept_gen;
static uint64_t kept_clock;
static pthread_mutex_t kept_mu = PTHREAD_MUTEX_INITIALIZER;

static void ftext_free(ftext *t) {
  free(t->text);
  free(t->heads);
  memset(t, 0, sizeof(*t));
}

/* Whether the line at s (up to end) starts with word, as a whole word, after blanks. */
static bool line_starts_with(const char *s, const char *end, const char *word) {
  size_t n = strlen(word);
  while (s < end && (*s == ' ' || *s == '\t'))
    s++;
  return (size_t)(end - s) >= n && strncasecmp(s, word, n) == 0 &&
         ((size_t)(end - s) == n || !isalnum((unsigned char)s[n]));
}

static int ftext_heads(ftext *t) {
  size_t cap = 0, line = 0;
  for (size_t pos = 0; pos < t->len;) {
    const char *nl = memchr(t->text + pos, '\n', t->len - pos);
    const char *s = t->text + pos, *end = nl != NULL ? nl : t->text + t->len;
    line++;
    if (line_starts_with(s, end, "host") || line_starts_with(s, end, "match") ||
        line_starts_with(s, end, "include")) {
      fhead *v = lc__grow(t->heads, &cap, t->nheads + 1, sizeof(*v), 64);
      if (v == NULL)
        return -ENOMEM;
      t->heads = v;
      t->heads[t->nheads++] = (fhead){.off = pos, .line = line};
    }
    pos = (size_t)(end - t->text) + (nl != NULL);
  }
  return 0;
}

/* Notes slot (of generation gen) as read by this resolve, for kept_mark. */
static void kept_note(parse *p, size_t slot) {
  if (p->nread < LC_ARRAY_SIZE(p->read)) {
    p->read[p->nread].slot = slot;
    p->read[p->nread++].gen = kept[slot].gen;
  }
}

/* Takes path's kept entry when it holds t's text: its heads and whether it is known good. */
static bool kept_take(parse *p, const char *path, ftext *t) {
  bool hit = false;
  pthread_mutex_lock(&kept_mu);
  for (size_t i = 0; i < KEPT_FILES && !hit; i++) {
    if (kept[i].path == NULL || strcmp(kept[i].path, path) != 0 || kept[i].len != t->len ||
        memcmp(kept[i].text, t->text, t->len) != 0)
      continue;
    if (kept[i].nheads > 0 && (t->heads = lc__malloc(kept[i].nheads * sizeof(*t->heads))) == NULL)
      break;
    if (kept[i].nheads > 0)
      memcpy(t->heads, kept[i].heads, kept[i].nheads * sizeof(*t->heads));
    t->nheads = kept[i].nheads;
    t->checked = kept[i].checked;
    kept[i].used = ++kept_clock;
    kept_note(p, i);
    hit = true;
  }
  pthread_mutex_unlock(&kept_mu);
  return hit;
}

/* Keeps t as path's text (in path's slot, an empty one or the least recently used). */
static void kept_put(parse *p, const char *path, const ftext *t) {
  char *cpath = lc__strdup(path), *text = lc__malloc(t->len + 1);
  fhead *heads = lc__malloc((t->nheads + 1) * sizeof(*heads));
  size_t slot = 0;
  if (cpath == NULL || text == NULL || heads == NULL) {
    free(cpath);
    free(text);
    free(heads);
    return;
  }
  memcpy(text, t->text, t->len);
  if (t->nheads > 0)
    memcpy(heads, t->heads, t->nheads * sizeof(*heads));
  pthread_mutex_lock(&kept_mu);
  for (size_t i = 0; i < KEPT_FILES; i++) {
    if (kept[i].path != NULL && strcmp(kept[i].path, path) == 0) {
      slot = i;
      break;
    }
    if (kept[i].used < kept[slot].used)
      slot = i;
  }
  free(kept[slot].path);
  free(kept[slot].text);
  free(kept[slot].heads);
  kept[slot].path = cpath;
  kept[slot].text = text;
  kept[slot].len = t->len;
  kept[slot].heads = heads;
  kept[slot].nheads = t->nheads;
  kept[slot].checked = false;
  kept[slot].gen = ++kept_gen;
  kept[slot].used = ++kept_clock;
  kept_note(p, slot);
  pthread_mutex_unlock(&kept_mu);
}

/* The files this resolve read without an error are known good (unless refilled meanwhile). */
static void kept_mark(const parse *p) {
  pthread_mutex_lock(&kept_mu);
  for (size_t i = 0; i < p->nread; i++)
    if (kept[p->read[i].slot].gen == p->read[i].gen)
      kept[p->read[i].slot].checked = true;
  pthread_mutex_unlock(&kept_mu);
}

/* Reads fp (path) whole into t, with where its Host, Match and Include lines are. */
static int ftext_read(parse *p, const char *path, FILE *fp, ftext *t) {
  size_t cap = 0;
  int r;
  for (;;) {
    size_t got;
    char *v = lc__grow(t->text, &cap, t->len + 8192, 1, 8192);
    if (v == NULL)
      return -ENOMEM;
    t->text = v;
    got = fread(t->text + t->len, 1, cap - t->len, fp);
    t->len += got;
    if (got == 0)
      break;
  }
  if (ferror(fp)) {
    r = errno ? -errno : -EIO;
    return lc__err_set(p->err, r, "%s: %s", path, lc_strerror(r));
  }
  if (kept_take(p, path, t))
    return 0;
  if (ftext_heads(t) < 0)
    return -ENOMEM;
  if (t->len <= KEPT_MAX)
    kept_put(p, path, t);
  return 0;
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
  ftext t = {0};
  char *line = NULL;
  size_t cap = 0, pos = 0, next_head = 0;
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
  if ((r = ftext_read(p, path, fp, &t)) < 0)
    goto out;
  while (pos < t.len) {
    const char *nl = memchr(t.text + pos, '\n', t.len - pos);
    size_t end = nl != NULL ? (size_t)(nl - t.text) + 1 : t.len, n = end - pos;
    char *v;
    if (p->resolving && t.checked && !*f.active) { /* known good, and it does not apply */
      while (next_head < t.nheads && t.heads[next_head].off < pos)
        next_head++;
      if (next_head == t.nheads)
        break;
      if (t.heads[next_head].off > pos) {
        pos = t.heads[next_head].off;
        f.line = (int)t.heads[next_head].line - 1;
        continue;
      }
    }
    if ((v = lc__grow(line, &cap, n + 1, 1, 256)) == NULL) {
      r = -ENOMEM;
      goto out;
    }
    line = v;
    memcpy(line, t.text + pos, n);
    line[n] = '\0';
    pos = end;
    f.line++;
    if ((r = parse_line(p, &f, line)) < 0)
      goto out;
  }
  r = 0;
out:
  free(line);
  ftext_free(&t);
  if (fp)
    fclose(fp);
  return r;
}

/*
 * Reads config_path alone (as ssh -F), or ~/.ssh/config and then, when resolving, the system-wide
 * file (LC__SSH_SYSTEM_CONFIG, or $LC_SSH_SYSTEM_CONFIG in tests) whose relative Includes are
 * under its own directory.
 */
static int read_top(parse *p, const char *config_path) {
  char *path = NULL, *dir = NULL;
  const char *sys = getenv("LC_SSH_SYSTEM_CONFIG");
  bool active = true;
  int r = LC_EINTERNAL;
  if (config_path != NULL) {
    r = read_config(p, config_path, 0, &active, false, OPEN_EXPLICIT);
    goto out;
  }
  r = 0;
  if (p->home != NULL) {
    if ((path = lc__sprintf("%s/.ssh/config", p->home)) == NULL) {
      r = -ENOMEM;
      goto out;
    }
    if ((r = read_config(p, path, 0, &active, false, OPEN_DEFAULT)) < 0)
      goto out;
  }
  if (!p->resolving)
    goto out;
  if (sys == NULL || *sys == '\0')
    sys = LC__SSH_SYSTEM_CONFIG;
  if ((dir = lc__strdup(sys)) == NULL) {
    r = -ENOMEM;
    goto out;
  }
  if (strrchr(dir, '/') != NULL)
    *strrchr(dir, '/') = '\0';
  else
    strcpy(dir, ".");
  p->sys_dir = dir[0] ? dir : "/";
  active = true;
  r = read_config(p, sys, 0, &active, false, OPEN_DEFAULT);
  p->sys_dir = NULL;
out:
  free(path);
  free(dir);
  return r;
}

static int escape_percent(char **out, const char *s);

/* Reads the config, and a second time when it asks for a final pass ("Match final"). */
static int read_all(parse *p, const char *config_path) {
  char *host = NULL;
  int r = LC_EINTERNAL;
  if ((r = read_top(p, config_path)) < 0 || !p->resolving || !p->want_final)
    goto out;
  /* as ssh: the final pass sees the host name as it will be used */
  if ((host = match_host(p)) == NULL) {
    r = -ENOMEM;
    goto out;
  }
  for (char *c = host; *c; c++)
    *c = (char)tolower((unsigned char)*c);
  free(p->hostname);
  p->hostname = NULL;
  if ((r = escape_percent(&p->hostname, host)) < 0)
    goto out;
  p->seen |= SEEN_HOSTNAME;
  p->final_pass = true;
  r = read_top(p, config_path);
out:
  free(host);
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
  case 'k':
    return t->key_alias ? t->key_alias : t->alias;
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

/* The values of the % tokens, once host, users and port are known. */
static void tokens_init(tokens *t, const parse *p, const char *host, const char *user, int port) {
  memset(t, 0, sizeof(*t));
  t->home = p->home;
  t->host = host;
  t->alias = p->alias;
  t->remote_user = user ? user : p->local_user;
  t->local_user = p->local_user;
  snprintf(t->uid, sizeof(t->uid), "%lu", (unsigned long)getuid());
  snprintf(t->port, sizeof(t->port), "%d", port);
  if (gethostname(t->local_host, sizeof(t->local_host) - 1) != 0)
    t->local_host[0] = '\0';
  t->local_host[sizeof(t->local_host) - 1] = '\0';
  memcpy(t->local_host_short, t->local_host, sizeof(t->local_host_short));
  t->local_host_short[strcspn(t->local_host_short, ".")] = '\0';
}

/* Copies s with each % doubled, so that a token pass leaves it as it is. */
static int escape_percent(char **out, const char *s) {
  lc__buf b = {0};
  int r = 0;
  *out = NULL;
  for (; r == 0 && *s; s++)
    r = lc__buf_append(&b, *s == '%' ? "%%" : s, *s == '%' ? 2 : 1);
  if (r == 0 && (r = lc__buf_append(&b, "", 0)) == 0) {
    *out = b.data;
    b.data = NULL;
  }
  lc__buf_free(&b);
  return r;
}

/* Replaces each ${NAME} of in with that environment variable, as ssh's dollar_expand. */
static int env_expand(const char *kw, const char *in, char **out, lc__err *err) {
  lc__buf b = {0};
  int r = 0;
  *out = NULL;
  for (const char *s = in; r == 0 && *s;) {
    const char *close, *v;
    char name[256];
    if (s[0] != '$' || s[1] != '{') {
      size_t n = strcspn(s + 1, "$") + 1;
      r = lc__buf_append(&b, s, n);
      s += n;
      continue;
    }
    if ((close = strchr(s + 2, '}')) == NULL || close == s + 2 ||
        (size_t)(close - s - 2) >= sizeof(name)) {
      r = lc__err_set(err, LC_ECONFIG, "%s %s: bad ${NAME}", kw, in);
      break;
    }
    snprintf(name, sizeof(name), "%.*s", (int)(close - s - 2), s + 2);
    if ((v = getenv(name)) == NULL) {
      r = lc__err_set(err, LC_ECONFIG, "%s %s: the environment variable %s is not set", kw, in,
                      name);
      break;
    }
    r = lc__buf_append(&b, v, strlen(v));
    s = close + 1;
  }
  if (r == 0 && (r = lc__buf_append(&b, "", 0)) == 0) {
    *out = b.data;
    b.data = NULL;
  }
  lc__buf_free(&b);
  return r;
}

/* A path value made ready for use: ${VAR}, then ~, then the % tokens. */
static int expand_path(const parse *p, const char *kw, const char *raw, const tokens *t,
                       char **out) {
  cfile f = {.path = "(ssh config)"};
  char *env = NULL, *tilde = NULL;
  int r = LC_EINTERNAL;
  *out = NULL;
  if ((r = env_expand(kw, raw, &env, p->err)) < 0 ||
      (r = tilde_expand(p, &f, kw, env, true, &tilde)) < 0 ||
      (r = expand_tokens(kw, tilde, t, out, p->err)) < 0)
    goto out;
out:
  free(env);
  free(tilde);
  return r;
}

/* Copies a strv into a NULL-terminated array of *n strings, each through expand (or copied). */
static int strv_export(const parse *p, const char *kw, const strv *in, const tokens *t, bool expand,
                       char ***out, size_t *n) {
  int r = 0;
  *out = NULL;
  *n = 0;
  if (in->n == 0)
    goto out;
  if ((*out = lc__calloc(in->n + 1, sizeof(char *))) == NULL) {
    r = -ENOMEM;
    goto out;
  }
  for (size_t i = 0; i < in->n; i++) {
    if (expand)
      r = expand_path(p, kw, in->v[i], t, &(*out)[i]);
    else
      r = ((*out)[i] = lc__strdup(in->v[i])) == NULL ? -ENOMEM : 0;
    if (r < 0)
      goto out;
    (*n)++;
  }
out:
  return r;
}

/* Whether s is an IPv4 or IPv6 address (ssh does not lowercase those). */
static bool is_address(const char *s) {
  unsigned char buf[16];
  return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

int lc__sshconfig_resolve(lc__ssh_host *out, const char *config_path, const char *spec,
                          lc__err *err) {
  parse p = {.err = err, .resolving = true};
  lc__ssh_host h = {0};
  tokens t;
  char *spec_user = NULL, *joined = NULL;
  int spec_port = 0;
  strv list = {0};
  int r = LC_EINTERNAL;

  if (out == NULL || spec == NULL) {
    r = lc__err_set(err, -EINVAL, "no host spec given");
    goto out;
  }
  memset(out, 0, sizeof(*out));
  if ((r = parse_spec(spec, &spec_user, &h.alias, &spec_port, err)) < 0)
    goto out;
  p.alias = h.alias;
  p.spec_user = spec_user;
  p.spec_port = spec_port;
  if ((r = env_init(&p)) < 0 || (r = read_all(&p, config_path)) < 0)
    goto out;
  kept_mark(&p);

  if (p.hostname != NULL) {
    memset(&t, 0, sizeof(t));
    t.host = h.alias;
    if ((r = expand_tokens("HostName", p.hostname, &t, &h.hostname, err)) < 0)
      goto out;
  } else if ((h.hostname = lc__strdup(h.alias)) == NULL) {
    r = -ENOMEM;
    goto out;
  }
  if (!is_address(h.hostname))
    for (char *c = h.hostname; *c; c++)
      *c = (char)tolower((unsigned char)*c);
  if (spec_user != NULL) {
    h.user = spec_user;
    spec_user = NULL;
  } else {
    h.user = p.user;
    p.user = NULL;
  }
  if (p.local_user != NULL && (h.local_user = lc__strdup(p.local_user)) == NULL) {
    r = -ENOMEM;
    goto out;
  }
  h.port = spec_port ? spec_port : (p.seen & SEEN_PORT) ? p.port : 22;
  if (p.hostkey_alias != NULL) {
    h.hostkey_alias = p.hostkey_alias;
    p.hostkey_alias = NULL;
    for (char *c = h.hostkey_alias; *c; c++)
      *c = (char)tolower((unsigned char)*c);
  }
  tokens_init(&t, &p, h.hostname, h.user, h.port);
  t.key_alias = h.hostkey_alias;

  /* identities: as written (ssh's defaults when none), and expanded */
  if ((r = strv_export(&p, "IdentityFile", &p.ids, &t, true, &h.identity_files,
                       &h.identity_count)) < 0)
    goto out;
  for (size_t i = 0; h.identity_count == 0 && i < LC_ARRAY_SIZE(default_identities); i++)
    if ((r = strv_add_unique(&p.ids, default_identities[i])) < 0)
      goto out;
  if ((r = strv_export(&p, "IdentityFile", &p.ids, &t, false, &h.identity_raw,
                       &h.identity_raw_count)) < 0 ||
      (r = strv_export(&p, "CertificateFile", &p.certs, &t, true, &h.certificate_files,
                       &h.certificate_count)) < 0 ||
      (r = strv_export(&p, "CertificateFile", &p.certs, &t, false, &h.certificate_raw,
                       &h.certificate_count)) < 0)
    goto out;

  /* known hosts: the user's files (default ~/.ssh/known_hosts{,2}), the global ones */
  if (p.known_hosts.n == 0 && ((r = strv_add_unique(&p.known_hosts, "~/.ssh/known_hosts")) < 0 ||
                               (r = strv_add_unique(&p.known_hosts, "~/.ssh/known_hosts2")) < 0))
    goto out;
  if (strcasecmp(p.known_hosts.v[0], "none") == 0) {
    strv_clear(&p.known_hosts);
    if ((r = strv_add_unique(&p.known_hosts, "/dev/null")) < 0)
      goto out;
  }
  if ((r = strv_export(&p, "UserKnownHostsFile", &p.known_hosts, &t, true, &h.known_hosts_files,
                       &h.known_hosts_count)) < 0)
    goto out;
  if ((h.known_hosts = lc__strdup(h.known_hosts_files[0])) == NULL) {
    r = -ENOMEM;
    goto out;
  }
  if (p.global_known_hosts.n == 0 &&
      ((r = strv_add_unique(&p.global_known_hosts, "/etc/ssh/ssh_known_hosts")) < 0 ||
       (r = strv_add_unique(&p.global_known_hosts, "/etc/ssh/ssh_known_hosts2")) < 0))
    goto out;
  {
    lc__buf b = {0};
    for (size_t i = 0; i < p.global_known_hosts.n; i++)
      if ((r = lc__buf_printf(&b, "%s%s", i ? " " : "", p.global_known_hosts.v[i])) < 0)
        break;
    h.global_known_hosts_raw = b.data;
    if (r < 0)
      goto out;
  }
  for (size_t i = 0; i < p.global_known_hosts.n; i++) {
    cfile f = {.path = "(ssh config)"};
    char *x = NULL;
    if (strcasecmp(p.global_known_hosts.v[i], "none") == 0)
      continue;
    if ((r = tilde_expand(&p, &f, "GlobalKnownHostsFile", p.global_known_hosts.v[i], false, &x)) <
            0 ||
        (r = strv_push(&list, x)) < 0) {
      free(x);
      goto out;
    }
  }
  if ((r = strv_export(&p, "GlobalKnownHostsFile", &list, &t, false, &h.global_known_hosts,
                       &h.global_known_hosts_count)) < 0)
    goto out;

  /* the agent: none, $SSH_AUTH_SOCK (NULL here), $VAR, or a path */
  if (p.identity_agent != NULL) {
    const char *ia = p.identity_agent;
    h.identity_agent_raw = lc__strdup(ia);
    if (strcasecmp(ia, "none") == 0) {
      h.identity_agent = lc__strdup("none");
    } else if (strcmp(ia, "SSH_AUTH_SOCK") == 0) {
      h.identity_agent = NULL;
    } else if (ia[0] == '$' && ia[1] != '{') {
      const char *v = getenv(ia + 1);
      if (v == NULL || *v == '\0') {
        r = lc__err_set(err, LC_ECONFIG, "IdentityAgent %s: the environment variable %s is not set",
                        ia, ia + 1);
        goto out;
      }
      h.identity_agent = lc__strdup(v);
    } else if ((r = expand_path(&p, "IdentityAgent", ia, &t, &h.identity_agent)) < 0) {
      goto out;
    }
  }

  /* the proxy: ProxyJump or ProxyCommand, whichever came first; "none" for neither */
  if (p.proxy_jump != NULL && strcasecmp(p.proxy_jump, "none") != 0) {
    h.proxy_jump = p.proxy_jump;
    p.proxy_jump = NULL;
  }
  if (p.proxy_command != NULL && strcasecmp(p.proxy_command, "none") != 0) {
    tokens pt;
    memset(&pt, 0, sizeof(pt));
    pt.host = h.hostname;
    pt.alias = h.alias;
    pt.remote_user = t.remote_user;
    memcpy(pt.port, t.port, sizeof(pt.port));
    if ((r = expand_tokens("ProxyCommand", p.proxy_command, &pt, &h.proxy_command, err)) < 0)
      goto out;
    h.proxy_command_raw = p.proxy_command;
    p.proxy_command = NULL;
  }

  h.identities_only = p.identities_only;
  h.strict = p.strict;
  if ((h.strict_raw = lc__strdup(p.strict_name ? p.strict_name : "ask")) == NULL) {
    r = -ENOMEM;
    goto out;
  }
  h.connect_timeout_s = p.connect_timeout_s;
  h.connection_attempts = (p.seen & SEEN_CONNECTION_ATTEMPTS) ? p.connection_attempts : 1;
  /* as ssh: BatchMode yes turns on a keepalive of 300 s where none is set */
  h.server_alive_interval_s = (p.seen & SEEN_ALIVE_INTERVAL) ? p.alive_interval_s
                              : p.batch_mode                 ? 300
                                                             : 0;
  h.server_alive_given = (p.seen & SEEN_ALIVE_INTERVAL) != 0;
  h.server_alive_count_max = (p.seen & SEEN_ALIVE_COUNT) ? p.alive_count : 3;
  h.address_family = p.family;
  h.batch_mode = p.batch_mode;
  h.ciphers = p.ciphers;
  p.ciphers = NULL;
  h.kex_algorithms = p.kex;
  p.kex = NULL;
  h.hostkey_algorithms = p.hostkey_algs;
  p.hostkey_algs = NULL;
  h.pubkey_algorithms = p.pubkey_algs;
  p.pubkey_algs = NULL;
  if ((r = strv_export(&p, "", &p.warnings, &t, false, &h.warnings, &h.warning_count)) < 0)
    goto out;
  if (h.identity_raw == NULL || h.known_hosts == NULL || h.global_known_hosts_raw == NULL ||
      (p.identity_agent != NULL && h.identity_agent_raw == NULL)) {
    r = -ENOMEM;
    goto out;
  }
  *out = h;
  memset(&h, 0, sizeof(h));
  r = 0;
out:
  if (r == -ENOMEM)
    lc__err_set(err, r, "out of memory reading the ssh config");
  lc__ssh_host_clear(&h);
  free(spec_user);
  free(joined);
  strv_clear(&list);
  parse_free(&p);
  return r;
}

void lc__ssh_host_clear(lc__ssh_host *h) {
  if (h == NULL)
    return;
  free(h->alias);
  free(h->hostname);
  free(h->user);
  free(h->local_user);
  lc__strv_free(h->identity_files, h->identity_count);
  lc__strv_free(h->identity_raw, h->identity_raw_count);
  lc__strv_free(h->certificate_files, h->certificate_count);
  lc__strv_free(h->certificate_raw, h->certificate_count);
  free(h->identity_agent);
  free(h->identity_agent_raw);
  free(h->proxy_jump);
  free(h->proxy_command);
  free(h->proxy_command_raw);
  free(h->known_hosts);
  lc__strv_free(h->known_hosts_files, h->known_hosts_count);
  lc__strv_free(h->global_known_hosts, h->global_known_hosts_count);
  free(h->global_known_hosts_raw);
  free(h->hostkey_alias);
  free(h->strict_raw);
  free(h->ciphers);
  free(h->kex_algorithms);
  free(h->hostkey_algorithms);
  free(h->pubkey_algorithms);
  lc__strv_free(h->warnings, h->warning_count);
  memset(h, 0, sizeof(*h));
}

/* Copies h (for a second connection to the same host). */
int lc__ssh_host_copy(lc__ssh_host *out, const lc__ssh_host *h) {
  lc__ssh_host c = *h;
  int r = 0;
/* each copy is tried, whatever failed before it: '|', not '||' (int: clang's
 * -Wbitwise-instead-of-logical) */
#define DUP(field) (c.field = h->field ? lc__strdup(h->field) : NULL, (int)(h->field && !c.field))
#define DUPV(field, n)                                                                             \
  (c.field = h->field ? lc__calloc(h->n + 1, sizeof(char *)) : NULL, (int)(h->field && !c.field))
  bool bad = DUP(alias) | DUP(hostname) | DUP(user) | DUP(local_user) | DUP(identity_agent) |
             DUP(identity_agent_raw) | DUP(proxy_jump) | DUP(proxy_command) |
             DUP(proxy_command_raw) | DUP(known_hosts) | DUP(global_known_hosts_raw) |
             DUP(hostkey_alias) | DUP(strict_raw) | DUP(ciphers) | DUP(kex_algorithms) |
             DUP(hostkey_algorithms) | DUP(pubkey_algorithms) |
             DUPV(identity_files, identity_count) | DUPV(identity_raw, identity_raw_count) |
             DUPV(certificate_files, certificate_count) | DUPV(certificate_raw, certificate_count) |
             DUPV(known_hosts_files, known_hosts_count) |
             DUPV(global_known_hosts, global_known_hosts_count) | DUPV(warnings, warning_count);
#undef DUP
#undef DUPV
  for (size_t i = 0; !bad && i < h->identity_count; i++)
    bad = (c.identity_files[i] = lc__strdup(h->identity_files[i])) == NULL;
  for (size_t i = 0; !bad && i < h->identity_raw_count; i++)
    bad = (c.identity_raw[i] = lc__strdup(h->identity_raw[i])) == NULL;
  for (size_t i = 0; !bad && i < h->certificate_count; i++)
    bad = (c.certificate_files[i] = lc__strdup(h->certificate_files[i])) == NULL ||
          (c.certificate_raw[i] = lc__strdup(h->certificate_raw[i])) == NULL;
  for (size_t i = 0; !bad && i < h->known_hosts_count; i++)
    bad = (c.known_hosts_files[i] = lc__strdup(h->known_hosts_files[i])) == NULL;
  for (size_t i = 0; !bad && i < h->global_known_hosts_count; i++)
    bad = (c.global_known_hosts[i] = lc__strdup(h->global_known_hosts[i])) == NULL;
  for (size_t i = 0; !bad && i < h->warning_count; i++)
    bad = (c.warnings[i] = lc__strdup(h->warnings[i])) == NULL;
  if (bad) {
    lc__ssh_host_clear(&c);
    r = -ENOMEM;
  }
  *out = c;
  return r;
}

void lc__ssh_host_warn(const lc__ssh_host *h) {
  for (size_t i = 0; i < h->warning_count; i++)
    lc__warn(h->warnings[i]);
}

int lc_sshconfig_print(char **out, const char *ssh_config, const char *host) {
  lc__ssh_host h = {0};
  lc__buf b = {0};
  lc__err err = {0};
  int r = LC_EINTERNAL;
  *out = NULL;
  if ((r = lc__sshconfig_resolve(&h, ssh_config, host, &err)) < 0) {
    r = lc__err_raise(&err);
    goto out;
  }
  lc__ssh_host_warn(&h);
  if ((r = lc__ssh_host_print(&b, &h)) < 0 || (r = lc__buf_append(&b, "", 0)) < 0) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  *out = b.data;
  b.data = NULL;
  r = 0;
out:
  lc__buf_free(&b);
  lc__ssh_host_clear(&h);
  return r;
}

int lc__ssh_host_print(lc__buf *b, const lc__ssh_host *h) {
  static const char *const families[] = {"any", "inet", "inet6"};
  int r = 0;
#define P(...)                                                                                     \
  do {                                                                                             \
    if (r == 0)                                                                                    \
      r = lc__buf_printf(b, __VA_ARGS__);                                                          \
  } while (0)
  P("host %s\n", h->alias);
  P("hostname %s\n", h->hostname);
  P("user %s\n", h->user ? h->user : h->local_user ? h->local_user : "");
  P("port %d\n", h->port);
  P("addressfamily %s\n", families[h->address_family]);
  P("batchmode %s\n", h->batch_mode ? "yes" : "no");
  P("identitiesonly %s\n", h->identities_only ? "yes" : "no");
  P("stricthostkeychecking %s\n", h->strict_raw ? h->strict_raw : "ask");
  P("connectionattempts %d\n", h->connection_attempts);
  P("serveralivecountmax %d\n", h->server_alive_count_max);
  P("serveraliveinterval %d\n", h->server_alive_interval_s);
  if (h->connect_timeout_s > 0)
    P("connecttimeout %d\n", h->connect_timeout_s);
  else
    P("connecttimeout none\n");
  if (h->hostkey_alias)
    P("hostkeyalias %s\n", h->hostkey_alias);
  if (h->identity_agent_raw)
    P("identityagent %s\n",
      strcasecmp(h->identity_agent_raw, "none") == 0 ||
              strcmp(h->identity_agent_raw, "SSH_AUTH_SOCK") == 0 ||
              (h->identity_agent_raw[0] == '$' && h->identity_agent_raw[1] != '{')
          ? h->identity_agent_raw
          : h->identity_agent);
  if (h->proxy_jump)
    P("proxyjump %s\n", h->proxy_jump);
  if (h->proxy_command_raw)
    P("proxycommand %s\n", h->proxy_command_raw);
  for (size_t i = 0; i < h->identity_raw_count; i++)
    P("identityfile %s\n", h->identity_raw[i]);
  for (size_t i = 0; i < h->certificate_count; i++)
    P("certificatefile %s\n", h->certificate_raw[i]);
  P("globalknownhostsfile %s\n", h->global_known_hosts_raw);
  P("userknownhostsfile");
  if (h->known_hosts_count == 1 && strcmp(h->known_hosts_files[0], "/dev/null") == 0)
    P(" none");
  else
    for (size_t i = 0; i < h->known_hosts_count; i++)
      P(" %s", h->known_hosts_files[i]);
  P("\n");
  P("ciphers %s\n", h->ciphers ? h->ciphers : LC__SSH_CIPHERS_DEFAULT);
  P("kexalgorithms %s\n", h->kex_algorithms ? h->kex_algorithms : LC__SSH_KEX_DEFAULT);
  P("hostkeyalgorithms %s\n",
    h->hostkey_algorithms ? h->hostkey_algorithms : LC__SSH_HOSTKEYS_DEFAULT);
  P("pubkeyacceptedalgorithms %s\n",
    h->pubkey_algorithms ? h->pubkey_algorithms : LC__SSH_PUBKEYS_DEFAULT);
#undef P
  return r;
}

int lc__sshconfig_aliases(char ***out, size_t *count, const char *config_path, lc__err *err) {
  parse p = {.err = err};
  int r = LC_EINTERNAL;

  *out = NULL;
  *count = 0;
  if ((r = env_init(&p)) < 0 || (r = read_all(&p, config_path)) < 0)
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
