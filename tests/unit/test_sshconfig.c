/*
 * test_sshconfig.c - reading the OpenSSH client config: specs, Host patterns, first value wins,
 * Include, Match, tokens, errors with file and line, and the alias listing.
 *
 * Every file lives under a mkdtemp directory that is also $HOME, so ~/.ssh is ours.
 */
#include "sshconfig.h"

#include "lc_test.h"

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[64];

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static void remove_root(void) {
  if (root[0])
    nftw(root, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* The test directory, made once; $HOME points at it. */
static const char *home(void) {
  if (root[0] == '\0') {
    char ssh_dir[PATH_MAX];
    snprintf(root, sizeof(root), "/tmp/lc_sshconfig_XXXXXX");
    if (mkdtemp(root) == NULL) {
      perror("mkdtemp");
      exit(2);
    }
    atexit(remove_root);
    snprintf(ssh_dir, sizeof(ssh_dir), "%s/.ssh", root);
    mkdir(ssh_dir, 0700);
    /* never the machine's /etc/ssh/ssh_config: a test names its own system file */
    snprintf(ssh_dir, sizeof(ssh_dir), "%s/no-system-config", root);
    setenv("LC_SSH_SYSTEM_CONFIG", ssh_dir, 1);
  }
  setenv("HOME", root, 1);
  return root;
}

/* root/rel, in one of a few rotating buffers. */
static const char *tpath(const char *rel) {
  static char bufs[8][PATH_MAX];
  static int next;
  char *b = bufs[next++ % 8];
  snprintf(b, PATH_MAX, "%s/%s", home(), rel);
  return b;
}

/* Writes root/rel (its folder made if need be) and returns its path. */
static const char *write_file(const char *rel, const char *text) {
  const char *path = tpath(rel);
  char dir[PATH_MAX];
  char *slash;
  FILE *f;
  snprintf(dir, sizeof(dir), "%s", path);
  if ((slash = strrchr(dir, '/')) != NULL) {
    *slash = '\0';
    mkdir(dir, 0700);
  }
  if ((f = fopen(path, "w")) == NULL || fputs(text, f) < 0 || fclose(f) != 0) {
    perror(path);
    exit(2);
  }
  return path;
}

/* Resolves spec against the file at path; prints the detail when it fails. */
static int resolve(lc__ssh_host *h, const char *path, const char *spec, lc__err *err) {
  int r;
  memset(err, 0, sizeof(*err));
  r = lc__sshconfig_resolve(h, path, spec, err);
  if (r != 0)
    fprintf(stderr, "  (resolve %s: %s: %s)\n", spec, lc_err_name(r), err->msg);
  return r;
}

/* root/rel as a string for comparisons, in rotating buffers. */
static const char *at_home(const char *rel) {
  static char bufs[8][PATH_MAX];
  static int next;
  char *b = bufs[next++ % 8];
  snprintf(b, PATH_MAX, "%s%s%s", home(), rel[0] ? "/" : "", rel);
  return b;
}

static const char *local_user(void) {
  struct passwd *pw = getpwuid(getuid());
  return pw ? pw->pw_name : getenv("USER");
}

/* Checks that reading path fails with code, and that the detail holds "path:line:" and needle. */
static void check_bad(const char *path, int line, int code, const char *needle) {
  lc__ssh_host h;
  lc__err err = {0};
  char where[PATH_MAX + 16];
  char **names = NULL;
  size_t n = 0;
  int r = lc__sshconfig_resolve(&h, path, "lab1", &err);
  LC_CHECK(r == code);
  snprintf(where, sizeof(where), "%s:%d:", path, line);
  LC_CHECK_CONTAINS(err.msg, where);
  LC_CHECK_CONTAINS(err.msg, needle);
  LC_CHECK(h.alias == NULL && h.hostname == NULL);
  /* The listing reads the same way and fails the same way. */
  memset(&err, 0, sizeof(err));
  LC_CHECK(lc__sshconfig_aliases(&names, &n, path, &err) == code);
  LC_CHECK_CONTAINS(err.msg, where);
  LC_CHECK(names == NULL && n == 0);
}

static void test_spec_forms(void) {
  const char *cfg = write_file("empty", "");
  lc__ssh_host h;
  lc__err err;
  static const struct {
    const char *spec, *user, *alias;
    int port;
  } cases[] = {
      {"lab1", NULL, "lab1", 22},
      {"bob@lab1", "bob", "lab1", 22},
      {"bob@lab1:2222", "bob", "lab1", 2222},
      {"lab1:2200", NULL, "lab1", 2200},
      {"10.0.0.7:65535", NULL, "10.0.0.7", 65535},
      {"[fe80::1]:2201", NULL, "fe80::1", 2201},
      {"[::1]", NULL, "::1", 22},
      {"alice@[::1]:23", "alice", "::1", 23},
      {"fe80::2", NULL, "fe80::2", 22},
      {"me@corp@lab1:1", "me@corp", "lab1", 1},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    LC_CHECK_OK(resolve(&h, cfg, cases[i].spec, &err));
    LC_CHECK_STR(h.alias, cases[i].alias);
    LC_CHECK_STR(h.hostname, cases[i].alias);
    if (cases[i].user)
      LC_CHECK_STR(h.user, cases[i].user);
    else
      LC_CHECK(h.user == NULL);
    LC_CHECK(h.port == cases[i].port);
    lc__ssh_host_clear(&h);
  }
}

static void test_spec_bad(void) {
  const char *cfg = write_file("empty", "");
  static const char *const specs[] = {
      "lab1:0", "lab1:65536", "lab1:22x",         "lab1:",   "lab1:-1", "bob@lab1:99999999999",
      "[::1",   "[::1]x",     "[::1]:",           "[]:22",   "@lab1",   "bob@",
      "",       "lab 1",      "-oProxyCommand=x", "-u@lab1",
  };
  char quoted[256];
  lc__ssh_host h;
  lc__err err;
  for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
    memset(&err, 0, sizeof(err));
    LC_CHECK(lc__sshconfig_resolve(&h, cfg, specs[i], &err) == LC_ECONFIG);
    snprintf(quoted, sizeof(quoted), "'%s'", specs[i]);
    LC_CHECK_CONTAINS(err.msg, quoted);
    LC_CHECK(h.alias == NULL && h.user == NULL);
  }
  memset(&err, 0, sizeof(err));
  LC_CHECK(lc__sshconfig_resolve(&h, cfg, "lab1:0", &err) == LC_ECONFIG);
  LC_CHECK_CONTAINS(err.msg, "port");
  LC_CHECK(lc__sshconfig_resolve(&h, cfg, NULL, &err) == -EINVAL);
  /* A NULL err is allowed. */
  LC_CHECK(lc__sshconfig_resolve(&h, cfg, "lab1:0", NULL) == LC_ECONFIG);
}

static void test_defaults_without_config(void) {
  lc__ssh_host h;
  lc__err err;
  home();
  LC_REQUIRE_OK(resolve(&h, NULL, "lab1", &err)); /* no ~/.ssh/config: fine */
  LC_CHECK_STR(h.alias, "lab1");
  LC_CHECK_STR(h.hostname, "lab1");
  LC_CHECK(h.user == NULL);
  LC_CHECK(h.port == 22);
  LC_CHECK(h.identity_files == NULL && h.identity_count == 0);
  LC_CHECK(h.identities_only == 0);
  LC_CHECK(h.proxy_jump == NULL);
  LC_CHECK(h.proxy_command == NULL);
  LC_CHECK_STR(h.known_hosts, at_home(".ssh/known_hosts"));
  LC_CHECK(h.known_hosts_count == 2);
  LC_CHECK(h.global_known_hosts_count == 2);
  LC_CHECK_STR(h.global_known_hosts[0], "/etc/ssh/ssh_known_hosts");
  LC_CHECK_STR(h.global_known_hosts[1], "/etc/ssh/ssh_known_hosts2");
  LC_CHECK(h.identity_raw_count == 7);
  LC_CHECK(h.strict == LC__STRICT_UNSET);
  LC_CHECK(h.connect_timeout_s == 0);
  lc__ssh_host_clear(&h);
}

static void test_default_config_file(void) {
  const char *path = write_file(".ssh/config", "Host lab1\n  Port 2022\n");
  lc__ssh_host h;
  lc__err err;
  LC_CHECK_OK(resolve(&h, NULL, "lab1", &err));
  LC_CHECK(h.port == 2022);
  lc__ssh_host_clear(&h);
  unlink(path);
}

static void test_missing_file(void) {
  const char *path = tpath("no-such-config");
  const char *dir = tpath(".ssh");
  lc__ssh_host h;
  lc__err err = {0};
  char **names = NULL;
  size_t n = 1;
  LC_CHECK(lc__sshconfig_resolve(&h, path, "lab1", &err) == -ENOENT);
  LC_CHECK_CONTAINS(err.msg, path);
  memset(&err, 0, sizeof(err));
  LC_CHECK(lc__sshconfig_aliases(&names, &n, path, &err) == -ENOENT);
  LC_CHECK_CONTAINS(err.msg, path);
  LC_CHECK(names == NULL && n == 0);
  memset(&err, 0, sizeof(err));
  LC_CHECK(lc__sshconfig_resolve(&h, dir, "lab1", &err) == -EISDIR);
  LC_CHECK_CONTAINS(err.msg, dir);
}

static void test_first_value_wins(void) {
  const char *cfg = write_file("first", "Host lab1\n"
                                        "  User first\n"
                                        "  Port 1111\n"
                                        "  IdentityFile ~/.ssh/id_lab1\n"
                                        "  IdentitiesOnly no\n"
                                        "  ProxyJump none\n"
                                        "  StrictHostKeyChecking no\n"
                                        "  ConnectTimeout 5\n"
                                        "  UserKnownHostsFile ~/kh_lab1\n"
                                        "Host lab1 lab2\n"
                                        "  User second\n"
                                        "  Port 2222\n"
                                        "  HostName second.example\n"
                                        "  IdentityFile ~/.ssh/id_common\n"
                                        "  IdentitiesOnly yes\n"
                                        "  ProxyJump bastion\n"
                                        "  StrictHostKeyChecking yes\n"
                                        "  ConnectTimeout 9\n"
                                        "  UserKnownHostsFile ~/kh_common\n"
                                        "Host *\n"
                                        "  HostName %h.wild\n"
                                        "  IdentityFile ~/.ssh/id_lab1\n"
                                        "  IdentityFile ~/.ssh/id_all\n"
                                        "  Port 3333\n");
  lc__ssh_host h;
  lc__err err;

  LC_REQUIRE_OK(resolve(&h, cfg, "lab1", &err));
  LC_CHECK_STR(h.user, "first");
  LC_CHECK(h.port == 1111);
  LC_CHECK_STR(h.hostname, "second.example");
  LC_REQUIRE(h.identity_count == 3);
  LC_CHECK_STR(h.identity_files[0], at_home(".ssh/id_lab1"));
  LC_CHECK_STR(h.identity_files[1], at_home(".ssh/id_common"));
  LC_CHECK_STR(h.identity_files[2], at_home(".ssh/id_all"));
  LC_CHECK(h.identities_only == 0);
  LC_CHECK(h.proxy_jump == NULL); /* "none" was the first value */
  LC_CHECK(h.strict == LC__STRICT_NO);
  LC_CHECK(h.connect_timeout_s == 5);
  LC_CHECK_STR(h.known_hosts, at_home("kh_lab1"));
  lc__ssh_host_clear(&h);

  LC_REQUIRE_OK(resolve(&h, cfg, "lab2", &err));
  LC_CHECK_STR(h.user, "second");
  LC_CHECK(h.port == 2222);
  LC_CHECK_STR(h.hostname, "second.example");
  LC_REQUIRE(h.identity_count == 3);
  LC_CHECK_STR(h.identity_files[0], at_home(".ssh/id_common"));
  LC_CHECK_STR(h.identity_files[1], at_home(".ssh/id_lab1"));
  LC_CHECK_STR(h.identity_files[2], at_home(".ssh/id_all"));
  LC_CHECK(h.identities_only == 1);
  LC_CHECK_STR(h.proxy_jump, "bastion");
  LC_CHECK(h.strict == LC__STRICT_YES);
  LC_CHECK(h.connect_timeout_s == 9);
  LC_CHECK_STR(h.known_hosts, at_home("kh_common"));
  lc__ssh_host_clear(&h);

  LC_REQUIRE_OK(resolve(&h, cfg, "other", &err));
  LC_CHECK(h.user == NULL);
  LC_CHECK(h.port == 3333);
  LC_CHECK_STR(h.hostname, "other.wild");
  LC_CHECK(h.identity_count == 2);
  LC_CHECK(h.strict == LC__STRICT_UNSET);
  lc__ssh_host_clear(&h);
}

static void test_patterns(void) {
  const char *cfg = write_file("patterns", "Host web? !web9 db-*\n"
                                           "  User pat\n"
                                           "Host !secret.internal *.internal\n"
                                           "  Port 2200\n"
                                           "Host Lab1\n"
                                           "  Port 3300\n"
                                           "Host x y z\n"
                                           "  User xyz\n"
                                           "Host !nothing\n"
                                           "  ConnectTimeout 7\n"
                                           "Host a*b?c\n"
                                           "  HostName star\n");
  static const struct {
    const char *alias, *user;
    int port;
  } cases[] = {
      {"web1", "pat", 22},      {"web9", NULL, 22}, /* negated: the whole line does not match */
      {"web10", NULL, 22},                          /* ? is one character */
      {"db-", "pat", 22},                           /* * may be empty */
      {"db-east-1", "pat", 22}, {"a.internal", NULL, 2200}, {"secret.internal", NULL, 22},
      {"Lab1", NULL, 3300},     {"lab1", NULL, 22}, /* patterns match case-sensitively, as in ssh */
      {"y", "xyz", 22},
  };
  lc__ssh_host h;
  lc__err err;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    LC_CHECK_OK(resolve(&h, cfg, cases[i].alias, &err));
    if (cases[i].user)
      LC_CHECK_STR(h.user, cases[i].user);
    else
      LC_CHECK(h.user == NULL);
    LC_CHECK(h.port == cases[i].port);
    LC_CHECK(h.connect_timeout_s == 0); /* a line of negations alone matches nothing */
    lc__ssh_host_clear(&h);
  }
  LC_CHECK_OK(resolve(&h, cfg, "aXXbYc", &err));
  LC_CHECK_STR(h.hostname, "star");
  lc__ssh_host_clear(&h);
  LC_CHECK_OK(resolve(&h, cfg, "abc", &err));
  LC_CHECK_STR(h.hostname, "abc");
  lc__ssh_host_clear(&h);
}

static void test_syntax(void) {
  const char *cfg =
      write_file("syntax", "# a comment\n"
                           "\n"
                           "   \t# an indented comment\n"
                           "HOST lab1\r\n"
                           "\tpOrT=2001\n"
                           "  user = \"jo smith\"\n"
                           "  IdentityFile \"~/.ssh/my key\"\n"
                           "  IdentityFile ~/.ssh/id#1   # a comment after the value\n"
                           "  HostName\t=\tlab1.example\r\n"
                           "  IdentitiesOnly=yes\n"
                           "  ConnectTimeout 1m30s\n"
                           "  SomeUnknownKeyword whatever you like\n"
                           "  ProxyJump 'jump1,jump2'\n"
                           "  StrictHostKeyChecking  =accept-new  \n"
                           "  UserKnownHostsFile a\\ b\\\"c\n");
  lc__ssh_host h;
  lc__err err;
  LC_REQUIRE_OK(resolve(&h, cfg, "lab1", &err));
  LC_CHECK(h.port == 2001);
  LC_CHECK_STR(h.user, "jo smith");
  LC_REQUIRE(h.identity_count == 2);
  LC_CHECK_STR(h.identity_files[0], at_home(".ssh/my key"));
  LC_CHECK_STR(h.identity_files[1], at_home(".ssh/id#1"));
  LC_CHECK_STR(h.hostname, "lab1.example");
  LC_CHECK(h.identities_only == 1);
  LC_CHECK(h.connect_timeout_s == 90);
  LC_CHECK_STR(h.proxy_jump, "jump1,jump2");
  LC_CHECK(h.strict == LC__STRICT_ACCEPT_NEW);
  LC_CHECK_STR(h.known_hosts, "a b\"c");
  lc__ssh_host_clear(&h);
}

static void test_values(void) {
  const char *cfg =
      write_file("values", "Host s1\n  StrictHostKeyChecking yes\n  ConnectTimeout 10s\n"
                           "Host s2\n  StrictHostKeyChecking ask\n  ConnectTimeout 2h\n"
                           "Host s3\n  StrictHostKeyChecking Accept-New\n  ConnectTimeout 1d\n"
                           "Host s4\n  StrictHostKeyChecking no\n  ConnectTimeout none\n"
                           "Host s5\n  StrictHostKeyChecking off\n  IdentitiesOnly true\n"
                           "Host s6\n  StrictHostKeyChecking true\n  IdentitiesOnly no\n"
                           "Host s7\n  StrictHostKeyChecking false\n  IdentityFile none\n"
                           "Host *\n  ConnectTimeout 4\n  IdentitiesOnly yes\n");
  static const struct {
    const char *alias;
    lc__strict strict;
    int timeout, only;
  } cases[] = {
      {"s1", LC__STRICT_YES, 10, 1},
      {"s2", LC__STRICT_YES, 7200, 1},
      {"s3", LC__STRICT_ACCEPT_NEW, 86400, 1},
      {"s4", LC__STRICT_NO, 0, 1},
      {"s5", LC__STRICT_NO, 4, 1},
      {"s6", LC__STRICT_YES, 4, 0},
      {"s7", LC__STRICT_NO, 4, 1},
  };
  lc__ssh_host h;
  lc__err err;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    LC_CHECK_OK(resolve(&h, cfg, cases[i].alias, &err));
    LC_CHECK(h.strict == cases[i].strict);
    LC_CHECK(h.connect_timeout_s == cases[i].timeout);
    LC_CHECK(h.identities_only == cases[i].only);
    LC_CHECK(h.identity_count == 0); /* IdentityFile none adds nothing */
    lc__ssh_host_clear(&h);
  }
}

/* Ciphers: a list of its own, or the default with +, - (patterns) or ^; the first value wins. */
static void test_ciphers(void) {
  const char *cfg = write_file(
      "ciphers", "Host plain\n  Ciphers aes192-ctr,chacha20-poly1305@openssh.com,aes192-ctr\n"
                 "Host plus\n  Ciphers +aes192-ctr,aes128-ctr,3des-cbc\n"
                 "Host minus\n  Ciphers -aes*-gcm@openssh.com,aes?28-ctr,no-such-cipher\n"
                 "Host caret\n  Ciphers ^aes256-ctr,chacha20-poly1305@openssh.com\n"
                 "Host firstwins\n  Ciphers=\"aes128-cbc\"\n"
                 "Host *\n  Ciphers aes256-gcm@openssh.com\n");
  static const struct {
    const char *alias, *want;
  } cases[] = {
      {"plain", "aes192-ctr,chacha20-poly1305@openssh.com"}, /* duplicates dropped */
      {"plus", LC__SSH_CIPHERS_DEFAULT ",aes192-ctr,3des-cbc"},
      {"minus", "chacha20-poly1305@openssh.com,aes256-ctr"}, /* unknown patterns remove nothing */
      {"caret", "aes256-ctr,chacha20-poly1305@openssh.com,aes128-gcm@openssh.com,"
                "aes256-gcm@openssh.com,aes128-ctr"},
      {"firstwins", "aes128-cbc"},
      {"other", "aes256-gcm@openssh.com"},
  };
  lc__ssh_host h;
  lc__err err;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    LC_CHECK_OK(resolve(&h, cfg, cases[i].alias, &err));
    LC_CHECK_STR(h.ciphers, cases[i].want);
    lc__ssh_host_clear(&h);
  }
  /* No Ciphers: NULL, the backend's default */
  LC_CHECK_OK(resolve(&h, write_file("nociphers", "Host x\n  Port 2\n"), "x", &err));
  LC_CHECK(h.ciphers == NULL);
  lc__ssh_host_clear(&h);
}

static void test_tokens(void) {
  const char *cfg = write_file("tokens", "Host lab1\n"
                                         "  HostName %h.example.%%\n"
                                         "  IdentityFile ~/keys/%h-%r-%u-%%\n"
                                         "  IdentityFile %d/d/%n/%p\n"
                                         "  IdentityFile ~\n"
                                         "  UserKnownHostsFile ~/known/%h \"/second file\"\n"
                                         "Host lab2\n"
                                         "  User remote\n"
                                         "  IdentityFile ~/keys/%r\n"
                                         "  UserKnownHostsFile none\n"
                                         "Host lab3\n"
                                         "  IdentityFile ~root/k\n");
  char expect[PATH_MAX + 128];
  struct passwd *pw;
  lc__ssh_host h;
  lc__err err;

  LC_REQUIRE_OK(resolve(&h, cfg, "bob@lab1:2022", &err));
  LC_CHECK_STR(h.hostname, "lab1.example.%");
  LC_REQUIRE(h.identity_count == 3);
  snprintf(expect, sizeof(expect), "%s/keys/lab1.example.%%-bob-%s-%%", home(), local_user());
  LC_CHECK_STR(h.identity_files[0], expect);
  LC_CHECK_STR(h.identity_files[1], at_home("d/lab1/2022"));
  LC_CHECK_STR(h.identity_files[2], home());
  LC_CHECK_STR(h.known_hosts, at_home("known/lab1.example.%"));
  lc__ssh_host_clear(&h);

  /* %r without a user anywhere is the local user. */
  LC_REQUIRE_OK(resolve(&h, cfg, "lab1", &err));
  LC_REQUIRE(h.identity_count == 3);
  snprintf(expect, sizeof(expect), "%s/keys/lab1.example.%%-%s-%s-%%", home(), local_user(),
           local_user());
  LC_CHECK_STR(h.identity_files[0], expect);
  LC_CHECK_STR(h.identity_files[1], at_home("d/lab1/22"));
  lc__ssh_host_clear(&h);

  LC_REQUIRE_OK(resolve(&h, cfg, "lab2", &err));
  LC_REQUIRE(h.identity_count == 1);
  LC_CHECK_STR(h.identity_files[0], at_home("keys/remote"));
  LC_CHECK_STR(h.known_hosts, "/dev/null");
  lc__ssh_host_clear(&h);

  LC_REQUIRE_OK(resolve(&h, cfg, "someone@lab2", &err));
  LC_REQUIRE(h.identity_count == 1);
  LC_CHECK_STR(h.identity_files[0], at_home("keys/someone"));
  lc__ssh_host_clear(&h);

  if ((pw = getpwuid(0)) != NULL) {
    LC_REQUIRE_OK(resolve(&h, cfg, "lab3", &err));
    LC_REQUIRE(h.identity_count == 1);
    snprintf(expect, sizeof(expect), "%s%sk", pw->pw_dir,
             pw->pw_dir[strlen(pw->pw_dir) - 1] == '/' ? "" : "/");
    LC_CHECK_STR(h.identity_files[0], expect);
    lc__ssh_host_clear(&h);
  }
}

/* A % in the home directory stays as it is: ~ is not a token. */
static void test_tokens_percent_home(void) {
  const char *cfg = write_file("pct%dir/config", "IdentityFile ~/k_%u\n");
  char pct_home[PATH_MAX], expect[PATH_MAX + 64];
  lc__ssh_host h;
  lc__err err;
  snprintf(pct_home, sizeof(pct_home), "%s/pct%%dir", home());
  setenv("HOME", pct_home, 1);
  LC_CHECK_OK(lc__sshconfig_resolve(&h, cfg, "lab1", &err));
  setenv("HOME", root, 1);
  LC_REQUIRE(h.identity_count == 1);
  snprintf(expect, sizeof(expect), "%s/k_%s", pct_home, local_user());
  LC_CHECK_STR(h.identity_files[0], expect);
  lc__ssh_host_clear(&h);
}

/* Without $HOME, the home directory comes from the password database, as for ssh. */
static void test_home_from_passwd(void) {
  const char *cfg = write_file("nohome", "IdentityFile ~/k\nUserKnownHostsFile %d/kh\n");
  struct passwd *pw = getpwuid(getuid());
  char expect[PATH_MAX + 8];
  lc__ssh_host h;
  lc__err err;
  LC_REQUIRE(pw != NULL);
  unsetenv("HOME");
  LC_CHECK_OK(lc__sshconfig_resolve(&h, cfg, "lab1", &err));
  setenv("HOME", root, 1);
  LC_REQUIRE(h.identity_count == 1);
  snprintf(expect, sizeof(expect), "%s/k", strcmp(pw->pw_dir, "/") == 0 ? "" : pw->pw_dir);
  LC_CHECK_STR(h.identity_files[0], expect);
  snprintf(expect, sizeof(expect), "%s/kh", pw->pw_dir);
  LC_CHECK_STR(h.known_hosts, expect);
  lc__ssh_host_clear(&h);
}

static void test_spec_overrides(void) {
  const char *cfg = write_file("overrides", "Host lab1\n  User cfguser\n  Port 2222\n");
  static const struct {
    const char *spec, *user;
    int port;
  } cases[] = {
      {"lab1", "cfguser", 2222},
      {"me@lab1", "me", 2222},
      {"lab1:7", "cfguser", 7},
      {"me@lab1:7", "me", 7},
  };
  lc__ssh_host h;
  lc__err err;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    LC_CHECK_OK(resolve(&h, cfg, cases[i].spec, &err));
    LC_CHECK_STR(h.user, cases[i].user);
    LC_CHECK(h.port == cases[i].port);
    lc__ssh_host_clear(&h);
  }
}

static void test_include_glob(void) {
  char text[2 * PATH_MAX];
  const char *cfg;
  lc__ssh_host h;
  lc__err err;

  write_file(".ssh/conf.d/20-b.conf", "Host b1\n  Port 2002\nHost shared\n  User fromB\n");
  write_file(".ssh/conf.d/10-a.conf",
             "Host a1\n  Port 2001\nHost shared\n  User fromA\n  Port 2010\n");
  write_file(".ssh/conf.d/ignored.txt", "Host a1\n  Port 9999\n");
  write_file(".ssh/abs.conf", "Host abs\n  ConnectTimeout 8\n");
  write_file("elsewhere/other.conf", "Host abs\n  Port 4444\n");
  mkdir(tpath(".ssh/conf.d/dir.conf"), 0700); /* a directory the glob names is passed over */
  snprintf(text, sizeof(text),
           "Include conf.d/*.conf nothere/*.conf nothere.conf\n"
           "User topuser\n"
           "Include ~/.ssh/abs.conf %s/elsewhere/other.conf\n"
           "Host shared\n"
           "  User main\n"
           "  HostName shared.example\n",
           home());
  cfg = write_file("include", text);

  LC_REQUIRE_OK(resolve(&h, cfg, "a1", &err));
  LC_CHECK(h.port == 2001);
  /* After an included file, its Host blocks end: the top-level line applies again. */
  LC_CHECK_STR(h.user, "topuser");
  lc__ssh_host_clear(&h);

  LC_REQUIRE_OK(resolve(&h, cfg, "b1", &err));
  LC_CHECK(h.port == 2002);
  lc__ssh_host_clear(&h);

  LC_REQUIRE_OK(resolve(&h, cfg, "shared", &err));
  LC_CHECK_STR(h.user, "fromA"); /* 10-a.conf sorts first */
  LC_CHECK(h.port == 2010);
  LC_CHECK_STR(h.hostname, "shared.example");
  lc__ssh_host_clear(&h);

  LC_REQUIRE_OK(resolve(&h, cfg, "abs", &err));
  LC_CHECK_STR(h.user, "topuser");
  LC_CHECK(h.connect_timeout_s == 8);
  LC_CHECK(h.port == 4444);
  lc__ssh_host_clear(&h);
}

static void test_include_in_host_block(void) {
  const char *cfg;
  lc__ssh_host h;
  lc__err err;
  write_file(".ssh/hb.conf", "User hbuser\nHost zed\n  Port 999\n");
  cfg = write_file("include_hb", "Host lab1\n  Include hb.conf\nHost *\n  Port 22\n");

  LC_REQUIRE_OK(resolve(&h, cfg, "lab1", &err));
  LC_CHECK_STR(h.user, "hbuser");
  LC_CHECK(h.port == 22);
  lc__ssh_host_clear(&h);

  /* Included from a block that does not apply: nothing in it applies, not even its Host zed. */
  LC_REQUIRE_OK(resolve(&h, cfg, "zed", &err));
  LC_CHECK(h.user == NULL);
  LC_CHECK(h.port == 22);
  lc__ssh_host_clear(&h);
}

static void test_include_depth(void) {
  char name[64], text[128];
  lc__ssh_host h;
  lc__err err = {0};
  const char *loop = write_file(".ssh/loop.conf", "Port 5\nInclude loop.conf\n");
  LC_CHECK(lc__sshconfig_resolve(&h, loop, "lab1", &err) == LC_ECONFIG);
  LC_CHECK_CONTAINS(err.msg, "loop.conf:2:");
  LC_CHECK_CONTAINS(err.msg, "nested");

  /* 16 levels below the top file are fine; 17 are not. */
  for (int i = 0; i <= 17; i++) {
    snprintf(name, sizeof(name), ".ssh/chain%d.conf", i);
    if (i == 17)
      snprintf(text, sizeof(text), "Port 1717\n");
    else
      snprintf(text, sizeof(text), "Include chain%d.conf\n", i + 1);
    write_file(name, text);
  }
  LC_CHECK(lc__sshconfig_resolve(&h, tpath(".ssh/chain0.conf"), "lab1", &err) == LC_ECONFIG);
  LC_CHECK_CONTAINS(err.msg, "chain16.conf:1:");
  LC_REQUIRE_OK(resolve(&h, tpath(".ssh/chain1.conf"), "lab1", &err));
  LC_CHECK(h.port == 1717);
  lc__ssh_host_clear(&h);
}

static void test_match(void) {
  const char *cfg = write_file("match", "Host lab1\n"
                                        "  Port 1001\n"
                                        "Match host lab1\n"
                                        "  User matchuser\n"
                                        "Host lab1\n"
                                        "  IdentitiesOnly yes\n"
                                        "Match all\n"
                                        "  User alluser\n"
                                        "  ConnectTimeout 3\n"
                                        "Match exec \"false\"\n"
                                        "  User execuser\n"
                                        "Match canonical all\n"
                                        "  ProxyJump canon\n"
                                        "Match ALL # any host\n"
                                        "  StrictHostKeyChecking accept-new\n");
  const char *cfg2 =
      write_file("match2", "Host short\n"
                           "  HostName Long.Example.ORG\n"
                           "Match host *.example.org !host bad.example.org\n"
                           "  Port 4242\n"
                           "Match originalhost short user bob\n"
                           "  IdentitiesOnly yes\n"
                           "Match exec \"test %h = long.example.org -a %n = short\"\n"
                           "  ConnectTimeout 9\n"
                           "Match final host long.example.org\n"
                           "  User finaluser\n"
                           "Match !final\n"
                           "  BatchMode yes\n");
  lc__ssh_host h;
  lc__err err;

  LC_REQUIRE_OK(resolve(&h, cfg, "lab1", &err));
  LC_CHECK(h.port == 1001);
  LC_CHECK_STR(h.user, "matchuser");
  LC_CHECK(h.identities_only == 1);
  LC_CHECK(h.connect_timeout_s == 3);
  LC_CHECK(h.proxy_jump == NULL); /* canonical holds only in a final pass, and none was asked */
  LC_CHECK(h.strict == LC__STRICT_ACCEPT_NEW);
  lc__ssh_host_clear(&h);

  LC_REQUIRE_OK(resolve(&h, cfg, "other", &err));
  LC_CHECK(h.port == 22);
  LC_CHECK_STR(h.user, "alluser");
  LC_CHECK(h.identities_only == 0);
  LC_CHECK(h.strict == LC__STRICT_ACCEPT_NEW);
  lc__ssh_host_clear(&h);

  /* Match host sees HostName (lowercased patterns), originalhost the alias, user the spec's */
  LC_REQUIRE_OK(resolve(&h, cfg2, "bob@short", &err));
  LC_CHECK_STR(h.hostname, "long.example.org");
  LC_CHECK(h.port == 4242);
  LC_CHECK(h.identities_only == 1);
  LC_CHECK(h.connect_timeout_s == 9);
  LC_CHECK_STR(h.user, "bob"); /* the spec's user wins over the final pass's */
  LC_CHECK(h.batch_mode == 1); /* !final held in the first pass */
  lc__ssh_host_clear(&h);
  LC_REQUIRE_OK(resolve(&h, cfg2, "short", &err));
  LC_CHECK_STR(h.user, "finaluser");
  LC_CHECK(h.identities_only == 0);
  lc__ssh_host_clear(&h);

  /* (the alias listing passes Match blocks over unchecked, so only resolving fails) */
  LC_CHECK(resolve(&h, write_file("badmatch", "Match host\n"), "x", &err) == LC_ECONFIG);
  LC_CHECK_CONTAINS(err.msg, "badmatch:1:");
  LC_CHECK_CONTAINS(err.msg, "needs a value");
  LC_CHECK(resolve(&h, write_file("badmatch2", "Match localnetwork 10.0.0.0/8\n"), "x", &err) ==
           LC_ECONFIG);
  LC_CHECK_CONTAINS(err.msg, "unsupported criterion");
}

/* The system-wide file is read after the user's, with its Includes; not with an explicit file. */
static void test_system_config(void) {
  const char *sys = write_file("etc/ssh_config", "Include conf.d/*.conf\n"
                                                 "Host *\n"
                                                 "  User sysuser\n"
                                                 "  Port 2200\n");
  lc__ssh_host h;
  lc__err err;
  char *saved = getenv("LC_SSH_SYSTEM_CONFIG") ? strdup(getenv("LC_SSH_SYSTEM_CONFIG")) : NULL;
  write_file("etc/conf.d/10-lab.conf", "Host lab1\n  ProxyCommand nc %h %p\n");
  write_file(".ssh/config", "Host lab1\n  Port 1111\n");
  setenv("LC_SSH_SYSTEM_CONFIG", sys, 1);
  LC_REQUIRE_OK(resolve(&h, NULL, "lab1", &err));
  LC_CHECK(h.port == 1111);
  LC_CHECK_STR(h.user, "sysuser");
  LC_CHECK_STR(h.proxy_command, "nc lab1 1111");
  lc__ssh_host_clear(&h);
  /* -F FILE: that file alone, as ssh -F */
  LC_REQUIRE_OK(resolve(&h, tpath(".ssh/config"), "lab1", &err));
  LC_CHECK(h.user == NULL);
  LC_CHECK(h.proxy_command == NULL);
  lc__ssh_host_clear(&h);
  if (saved)
    setenv("LC_SSH_SYSTEM_CONFIG", saved, 1);
  free(saved);
  unlink(tpath(".ssh/config"));
}

/* ProxyCommand: the rest of the line, tokens expanded; it and ProxyJump share one value. */
static void test_proxy_command(void) {
  const char *cfg =
      write_file("proxy", "Host pc\n"
                          "  HostName Target.Example\n"
                          "  User ruser\n"
                          "  Port 2022\n"
                          "  ProxyCommand ssh -F \"my cfg\" -W %h:%p %r@bastion # %n %%\n"
                          "  ProxyJump ignored\n"
                          "Host pj\n"
                          "  ProxyJump j1,j2\n"
                          "  ProxyCommand ignored\n"
                          "Host none\n"
                          "  ProxyCommand none\n"
                          "Host *\n"
                          "  ProxyCommand nc %h %p\n");
  lc__ssh_host h;
  lc__err err;
  LC_REQUIRE_OK(resolve(&h, cfg, "pc", &err));
  LC_CHECK_STR(h.proxy_command, "ssh -F \"my cfg\" -W target.example:2022 ruser@bastion # pc %");
  LC_CHECK_STR(h.proxy_command_raw, "ssh -F \"my cfg\" -W %h:%p %r@bastion # %n %%");
  LC_CHECK(h.proxy_jump == NULL);
  lc__ssh_host_clear(&h);
  LC_REQUIRE_OK(resolve(&h, cfg, "pj", &err));
  LC_CHECK_STR(h.proxy_jump, "j1,j2");
  LC_CHECK(h.proxy_command == NULL);
  lc__ssh_host_clear(&h);
  LC_REQUIRE_OK(resolve(&h, cfg, "none", &err));
  LC_CHECK(h.proxy_command == NULL && h.proxy_jump == NULL);
  lc__ssh_host_clear(&h);
  check_bad(write_file("badproxy", "ProxyCommand nc %h %d\n"), 1, LC_ECONFIG, "%d");
}

/* The keywords that decide how a host is reached, and the warnings for those not implemented. */
static void test_reach_keywords(void) {
  const char *cfg = write_file("reach", "Host r\n"
                                        "  GlobalKnownHostsFile ~/g1 /etc/g2\n"
                                        "  UserKnownHostsFile ~/u1 ~/u2_%h\n"
                                        "  HostKeyAlias MyAlias\n"
                                        "  CertificateFile ~/c_%h\n"
                                        "  IdentityAgent ~/agent.sock\n"
                                        "  AddressFamily inet6\n"
                                        "  ConnectionAttempts 3\n"
                                        "  ServerAliveInterval 1m\n"
                                        "  ServerAliveCountMax 4\n"
                                        "  KexAlgorithms curve25519-sha256\n"
                                        "  HostKeyAlgorithms -ecdsa*\n"
                                        "  PubkeyAcceptedKeyTypes ssh-ed25519\n"
                                        "  BatchMode yes\n"
                                        "  BindAddress 10.0.0.1\n"
                                        "  PreferredAuthentications password\n"
                                        "  PubkeyAuthentication yes\n"
                                        "Host n\n"
                                        "  IdentityAgent none\n"
                                        "  UserKnownHostsFile none\n"
                                        "  BatchMode yes\n");
  lc__ssh_host h;
  lc__err err;
  LC_REQUIRE_OK(resolve(&h, cfg, "r", &err));
  LC_CHECK(h.global_known_hosts_count == 2);
  LC_CHECK_STR(h.global_known_hosts[0], at_home("g1"));
  LC_CHECK_STR(h.global_known_hosts[1], "/etc/g2");
  LC_CHECK_STR(h.global_known_hosts_raw, "~/g1 /etc/g2");
  LC_CHECK(h.known_hosts_count == 2);
  LC_CHECK_STR(h.known_hosts_files[1], at_home("u2_r"));
  LC_CHECK_STR(h.hostkey_alias, "myalias");
  LC_CHECK(h.certificate_count == 1);
  LC_CHECK_STR(h.certificate_files[0], at_home("c_r"));
  LC_CHECK_STR(h.identity_agent, at_home("agent.sock"));
  LC_CHECK(h.address_family == LC__AF_INET6);
  LC_CHECK(h.connection_attempts == 3);
  LC_CHECK(h.server_alive_interval_s == 60 && h.server_alive_given == 1);
  LC_CHECK(h.server_alive_count_max == 4);
  LC_CHECK_STR(h.kex_algorithms, "curve25519-sha256");
  LC_CHECK(h.hostkey_algorithms != NULL && strstr(h.hostkey_algorithms, "ecdsa") == NULL &&
           strstr(h.hostkey_algorithms, "ssh-ed25519") != NULL);
  LC_CHECK_STR(h.pubkey_algorithms, "ssh-ed25519");
  LC_CHECK(h.batch_mode == 1);
  /* BindAddress and PreferredAuthentications without publickey: warned; PubkeyAuthentication
   * yes is what is done anyway: not */
  LC_CHECK(h.warning_count == 2);
  if (h.warning_count == 2) {
    LC_CHECK_CONTAINS(h.warnings[0], "reach:15:");
    LC_CHECK_CONTAINS(h.warnings[0], "BindAddress");
    LC_CHECK_CONTAINS(h.warnings[1], "PreferredAuthentications");
  }
  lc__ssh_host_clear(&h);
  LC_REQUIRE_OK(resolve(&h, cfg, "n", &err));
  LC_CHECK_STR(h.identity_agent, "none");
  LC_CHECK_STR(h.known_hosts, "/dev/null");
  LC_CHECK(h.server_alive_interval_s == 300); /* as ssh with BatchMode yes */
  LC_CHECK(h.server_alive_given == 0);        /* ... which leaves our keepalive as it is */
  LC_CHECK(h.warning_count == 0);
  lc__ssh_host_clear(&h);
  check_bad(write_file("badreach1", "AddressFamily ipx\n"), 1, LC_ECONFIG, "ipx");
  check_bad(write_file("badreach2", "KexAlgorithms sntrup-nope\n"), 1, LC_ECONFIG,
            "unknown algorithm 'sntrup-nope'");
  check_bad(write_file("badreach3", "ConnectionAttempts 0\n"), 1, LC_ECONFIG, "ConnectionAttempts");
}

static void test_bad_values(void) {
  static const struct {
    const char *text;
    int line;
    const char *needle;
  } cases[] = {
      {"Host lab1\n  Port junk\n", 2, "junk"},
      {"Host other\n\n  Port 0\n", 3, "Port"}, /* checked in a block that does not apply */
      {"Port 65536\n", 1, "65536"},
      {"StrictHostKeyChecking maybe\n", 1, "maybe"},
      {"Host a\n  ConnectTimeout soon\n", 2, "soon"},
      {"ConnectTimeout 5x\n", 1, "5x"},
      {"IdentitiesOnly perhaps\n", 1, "perhaps"},
      {"# c\nUser \"unterminated\n", 2, "quote"},
      {"Port\n", 1, "needs a value"},
      {"Port # only a comment\n", 1, "needs a value"},
      {"Port 22 23\n", 1, "23"},
      {"IdentityFile ~/%C\n", 1, "%C"},
      {"UserKnownHostsFile ~/kh%\n", 1, "token"},
      {"HostName %u.example\n", 1, "%u"},
      {"Host\n", 1, "Host"},
      {"Host \"\"\n", 1, "empty"},
      {"Match\n", 1, "Match"},
      {"IdentityFile ~no_such_user_lc/x\n", 1, "no_such_user_lc"},
      {"Include\n", 1, "Include"},
      {"Host other\n  Ciphers aes128-gcm,aes256-ctr\n", 2, "unknown cipher 'aes128-gcm'"},
      {"Ciphers +aes256-ctr,blowfish-cbc\n", 1, "unknown cipher 'blowfish-cbc'"},
      {"Ciphers ^none\n", 1, "unknown cipher 'none'"},
      {"Ciphers aes*-ctr\n", 1, "unknown cipher 'aes*-ctr'"}, /* patterns only after - */
      {"Ciphers aes128-ctr,,aes256-ctr\n", 1, "empty cipher name"},
      {"Ciphers +\n", 1, "empty cipher name"},
      {"Ciphers aes128-ctr,\n", 1, "empty cipher name"},
      {"Ciphers -*\n", 1, "leaves no cipher"},
      {"Ciphers -aes*,chacha20*\n", 1, "leaves no cipher"},
      {"Ciphers aes128-ctr,aes256-ctr-and-a-name-longer-than-sixty-four-characters-of-it-all\n", 1,
       "'aes256-ctr-and-a-name-longer-than-sixty-four-characters-of-it-all'"},
  };
  char name[32];
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    snprintf(name, sizeof(name), "bad%zu", i);
    check_bad(write_file(name, cases[i].text), cases[i].line, LC_ECONFIG, cases[i].needle);
  }
  /* A bad line in an included file names that file and its line. */
  write_file(".ssh/badinc.conf", "Host x\n\n  StrictHostKeyChecking sometimes\n");
  write_file("badtop", "Host lab1\n  Include badinc.conf\n");
  check_bad(tpath(".ssh/badinc.conf"), 3, LC_ECONFIG, "sometimes");
  {
    lc__ssh_host h;
    lc__err err = {0};
    char where[PATH_MAX + 16];
    LC_CHECK(lc__sshconfig_resolve(&h, tpath("badtop"), "lab1", &err) == LC_ECONFIG);
    snprintf(where, sizeof(where), "%s:3:", tpath(".ssh/badinc.conf"));
    LC_CHECK_CONTAINS(err.msg, where);
  }
}

/* One block per host, 40 hosts, lab30's block including .ssh/kept.conf. Port of labI: 2000 + I;
 * in bad_block "x00I" instead (the same length). */
static const char *write_many(int bad_block, int port17) {
  static char text[8192];
  size_t len = 0;
  for (int i = 0; i < 40; i++) {
    char port[16];
    snprintf(port, sizeof(port), i == bad_block ? "x%03d" : "%d",
             i == bad_block ? i
             : i == 17      ? port17
                            : 2000 + i);
    len += (size_t)snprintf(text + len, sizeof(text) - len,
                            "Host lab%d\n  HostName 10.0.0.%d\n  Port %s\n  User u%02d\n%s\n", i, i,
                            port, i, i == 30 ? "  Include kept.conf\n" : "");
  }
  return write_file("many", text);
}

/* Resolves labI for I in 0..39 (from the end when backwards) and checks each one's values. */
static void check_many(const char *path, int backwards, int port17) {
  for (int k = 0; k < 40; k++) {
    int i = backwards ? 39 - k : k;
    lc__ssh_host h;
    lc__err err;
    char spec[16], name[16], user[8];
    snprintf(spec, sizeof(spec), "lab%d", i);
    snprintf(name, sizeof(name), "10.0.0.%d", i);
    snprintf(user, sizeof(user), "u%02d", i);
    LC_REQUIRE_OK(resolve(&h, path, spec, &err));
    LC_CHECK_STR(h.hostname, name);
    LC_CHECK_STR(h.user, user);
    LC_CHECK(h.port == (i == 17 ? port17 : 2000 + i));
    LC_CHECK(h.strict == (i == 30 ? LC__STRICT_NO : LC__STRICT_UNSET));
    lc__ssh_host_clear(&h);
  }
}

/*
 * A file is kept as read (sshconfig.c, "the files, kept as read"): once read without an error,
 * later resolves jump over the blocks that do not apply. Each host still gets its own values,
 * in any order; a change to a file is seen by the next resolve even when it keeps the length and
 * comes at once (the text is compared, not the times); a bad line, in the file or in a file it
 * includes from a block that does not apply, fails every host with its file and line.
 */
static void test_kept_files(void) {
  const char *path;
  lc__ssh_host h;
  lc__err err = {0};
  write_file(".ssh/kept.conf", "StrictHostKeyChecking no\n");
  path = write_many(-1, 2017);
  check_many(path, 0, 2017); /* read for the first time, then known good */
  check_many(path, 1, 2017);
  LC_REQUIRE_OK(resolve(&h, path, "elsewhere", &err)); /* no block: the defaults */
  LC_CHECK_STR(h.hostname, "elsewhere");
  LC_CHECK(h.port == 22 && h.user == NULL);
  lc__ssh_host_clear(&h);
  /* a value changed, same length, written at once */
  path = write_many(-1, 2917);
  check_many(path, 1, 2917);
  /* a bad line in lab5's block (line 28), the length kept: every host fails, lab39 too */
  path = write_many(5, 2917);
  check_bad(path, 28, LC_ECONFIG, "x005");
  LC_CHECK(lc__sshconfig_resolve(&h, path, "lab39", &err) == LC_ECONFIG);
  LC_CHECK_CONTAINS(err.msg, ":28:");
  /* good again, then the included file goes bad: read from lab30's block, which does not apply
   * to lab2, it still fails lab2's resolve and names its own line */
  path = write_many(-1, 2917);
  check_many(path, 0, 2917);
  write_file(".ssh/kept.conf", "StrictHostKeyChecking no\nPort 0\n");
  memset(&err, 0, sizeof(err));
  LC_CHECK(lc__sshconfig_resolve(&h, path, "lab2", &err) == LC_ECONFIG);
  LC_CHECK_CONTAINS(err.msg, "kept.conf:2:");
  write_file(".ssh/kept.conf", "StrictHostKeyChecking no\n");
  check_many(path, 1, 2917);
}

static void test_aliases(void) {
  char **names = NULL;
  size_t n = 0;
  lc__err err = {0};
  const char *cfg;
  static const char *const want[] = {"lab1", "lab2", "inc1", "inc2", "lab3", "lab4", "lab 5"};
  write_file(".ssh/al.d/a", "Host inc1 lab1\n  Port 1\n");
  write_file(".ssh/al.d/b", "Host inc2 *.x\n");
  cfg = write_file("aliases",
                   "Port 22\n"
                   "Host lab1 lab2 *.wild !neg web? lab1\n"
                   "  Port 1\n"
                   "Host nothing-here-applies-when-listing !nothing-here-applies-when-listing\n"
                   "  Include al.d/*\n"
                   "Host lab2 lab3\n"
                   "Match host skipped\n"
                   "  Include nothere\n"
                   "Host lab4 \"lab 5\" *\n");
  LC_REQUIRE_OK(lc__sshconfig_aliases(&names, &n, cfg, &err));
  LC_REQUIRE(names != NULL);
  /* The negated name on the fourth line is left out, the plain one kept. */
  LC_REQUIRE(n == sizeof(want) / sizeof(want[0]) + 1);
  LC_CHECK_STR(names[0], want[0]);
  LC_CHECK_STR(names[1], want[1]);
  LC_CHECK_STR(names[2], "nothing-here-applies-when-listing");
  for (size_t i = 2; i < sizeof(want) / sizeof(want[0]); i++)
    LC_CHECK_STR(names[i + 1], want[i]);
  LC_CHECK(names[n] == NULL);
  lc__strv_free(names, n);
}

static void test_aliases_none(void) {
  char **names = NULL;
  size_t n = 5;
  lc__err err = {0};
  home();
  LC_REQUIRE_OK(lc__sshconfig_aliases(&names, &n, NULL, &err));
  LC_CHECK(n == 0);
  LC_REQUIRE(names != NULL);
  LC_CHECK(names[0] == NULL);
  lc__strv_free(names, n);
  lc__strv_free(NULL, 0);
}

static void test_clear(void) {
  lc__ssh_host h;
  memset(&h, 0, sizeof(h));
  lc__ssh_host_clear(&h);
  lc__ssh_host_clear(&h);
  lc__ssh_host_clear(NULL);
  LC_CHECK(h.alias == NULL && h.identity_count == 0);
}

LC_TEST_MAIN(LC_TEST(test_spec_forms), LC_TEST(test_spec_bad),
             LC_TEST(test_defaults_without_config), LC_TEST(test_default_config_file),
             LC_TEST(test_missing_file), LC_TEST(test_first_value_wins), LC_TEST(test_patterns),
             LC_TEST(test_syntax), LC_TEST(test_values), LC_TEST(test_ciphers),
             LC_TEST(test_tokens), LC_TEST(test_tokens_percent_home),
             LC_TEST(test_home_from_passwd), LC_TEST(test_spec_overrides),
             LC_TEST(test_include_glob), LC_TEST(test_include_in_host_block),
             LC_TEST(test_include_depth), LC_TEST(test_match), LC_TEST(test_system_config),
             LC_TEST(test_proxy_command), LC_TEST(test_reach_keywords), LC_TEST(test_bad_values),
             LC_TEST(test_kept_files), LC_TEST(test_aliases), LC_TEST(test_aliases_none),
             LC_TEST(test_clear))
