/*
 * test_connect.c - connecting to real SSH test hosts and losing them: unknown and changed host
 * keys, a wrong and an encrypted user key, unreachable, refusing and unresolvable hosts,
 * ProxyJump over one and two hops, a host that goes silent, an sshd that dies, a runtime freed
 * while its command runs, a host that takes only a cipher outside the default list, and the ssh
 * config keywords that decide how a host is reached (ProxyCommand, GlobalKnownHostsFile,
 * HostKeyAlias, IdentitiesOnly, IdentityAgent, KexAlgorithms, HostKeyAlgorithms,
 * PubkeyAcceptedAlgorithms, AddressFamily, ConnectionAttempts, ServerAliveInterval/CountMax,
 * CertificateFile, BatchMode). Every refusal is checked for its code and for a detail that names
 * the host and says why.
 *
 * The variant configs, known_hosts files and keys live in a mkdtemp directory made from the
 * fixture's DIR/ssh_config, DIR/known_hosts and DIR/id_ed25519. Tests that take a host down
 * (link-down, stop-sshd) always bring it back before they return.
 */
#include "collect.h"
#include "lc_test.h"

#include "testenv.h"
#include <arpa/inet.h>
#include <dirent.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#define NVALUES(a) (sizeof(a) / sizeof((a)[0]))

static lc_engine *engine;
static char fixture[4096];                            /* the test hosts' DIR, absolute */
static char tmpdir[] = "/tmp/lc-test-connect-XXXXXX"; /* this test's files */

/* ---- helpers -------------------------------------------------------------------------------- */

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* out = tmpdir/name */
static const char *tpath(char *out, size_t size, const char *name) {
  snprintf(out, size, "%s/%s", tmpdir, name);
  return out;
}

static int write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  int r = 0;
  if (f == NULL)
    return -errno;
  if (fputs(text, f) < 0)
    r = -EIO;
  if (fclose(f) != 0)
    r = -EIO;
  return r;
}

/* The whole file, NUL-terminated; NULL if unreadable. Free with free(). */
static char *read_text(const char *path) {
  FILE *f = fopen(path, "r");
  char *buf = NULL;
  size_t len = 0, cap = 0, n;
  if (f == NULL)
    return NULL;
  do {
    if (len + 4096 + 1 > cap) {
      char *nb = realloc(buf, cap = (len + 4096 + 1) * 2);
      if (nb == NULL) {
        free(buf);
        fclose(f);
        return NULL;
      }
      buf = nb;
    }
    n = fread(buf + len, 1, 4096, f);
    len += n;
  } while (n > 0);
  fclose(f);
  buf[len] = '\0';
  return buf;
}

/* Runs a shell command with stdin from /dev/null and its output discarded; returns its status. */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...) {
  char cmd[4096], full[4200];
  va_list ap;
  int st;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof(cmd), fmt, ap);
  va_end(ap);
  snprintf(full, sizeof(full), "( %s ) </dev/null >/dev/null 2>&1", cmd);
  st = system(full); /* NOLINT(cert-env33-c): ssh-keygen and cp, as a user would run them */
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* The ssh config block of a lab-like host; identity and known_hosts default to the fixture's. */
static void host_block(char *out, size_t size, const char *alias, const char *hostname, int port,
                       const char *identity, const char *known_hosts, const char *strict,
                       const char *extra) {
  snprintf(out, size,
           "Host %s\n"
           "  HostName %s\n"
           "  User root\n"
           "  Port %d\n"
           "  IdentityFile %s%s\n"
           "  IdentitiesOnly yes\n"
           "  UserKnownHostsFile %s%s\n"
           "  GlobalKnownHostsFile /dev/null\n"
           "  StrictHostKeyChecking %s\n"
           "%s\n",
           alias, hostname, port, identity ? "" : fixture, identity ? identity : "/id_ed25519",
           known_hosts ? "" : fixture, known_hosts ? known_hosts : "/known_hosts",
           strict ? strict : "yes", extra ? extra : "");
}

/* Writes path: a config with one host block (base_too: after a copy of the fixture's config). */
static int write_config(const char *path, int base_too, const char *blocks) {
  char *base = base_too ? read_text(th_config()) : NULL;
  char *text;
  int r;
  if (base_too && base == NULL)
    return -ENOENT;
  if ((text = malloc((base ? strlen(base) : 0) + strlen(blocks) + 2)) == NULL) {
    free(base);
    return -ENOMEM;
  }
  sprintf(text, "%s\n%s", base ? base : "", blocks);
  r = write_text(path, text);
  free(text);
  free(base);
  return r;
}

/* Connects to alias through config; *took_ms is how long the call took. */
static int connect_with(lc_runtime **out, const char *config, const char *alias,
                        lc_hostkey_policy policy, int connect_timeout_ms, uint64_t *took_ms) {
  lc_runtime_options o = LC_RUNTIME_OPTIONS_INIT;
  uint64_t t0 = now_ms();
  int r;
  o.ssh_config = config;
  o.hostkey_policy = policy;
  o.connect_timeout_ms = connect_timeout_ms;
  *out = NULL;
  r = lc_runtime_new_ssh(out, engine, alias, &o);
  if (took_ms != NULL)
    *took_ms = now_ms() - t0;
  fprintf(stderr, "  connect %s: %s (%d ms)%s%s\n", alias, r ? lc_err_name(r) : "ok",
          (int)(now_ms() - t0), r ? ": " : "", r ? lc_error_last() : "");
  return r;
}

/* Runs true on rt; 0 when the host ran it. */
static int runs_true(lc_runtime *rt) {
  lc_exec_result res = {.exit_status = -1};
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  int r;
  eo.timeout_ms = 30000;
  if ((r = lc_runtime_exec(&res, rt, "true", &eo)) < 0)
    return r;
  return res.exit_status == 0 ? 0 : -1;
}

/*
 * Polls until host's processes matching pattern are there (running non-zero) or gone (running
 * zero), or ms pass; returns the last count. The lifeline's own shells carry the command in their
 * arguments, so one running command counts several times.
 */
static int wait_procs(int host, const char *pattern, int running, int ms) {
  uint64_t end = now_ms() + (uint64_t)ms;
  int n;
  while (((n = th_count_procs(host, pattern)) > 0) != (running != 0) && now_ms() < end)
    usleep(100 * 1000);
  return n;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static void rm_tree(const char *path) { nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

/* ---- host keys ------------------------------------------------------------------------------ */

/* An empty known_hosts: refused with how to accept; accepted by policy or by the config. */
static void test_unknown_host_key_refused(void) {
  char kh[4096], kh2[4096], cfg[4096], cfg2[4096], block[4096], want[128], *text;
  lc_runtime *rt = NULL;
  tpath(kh, sizeof(kh), "known_hosts.empty");
  tpath(kh2, sizeof(kh2), "known_hosts.empty2");
  tpath(cfg, sizeof(cfg), "unknown.conf");
  tpath(cfg2, sizeof(cfg2), "unknown-accept-new.conf");
  LC_REQUIRE(write_text(kh, "") == 0 && write_text(kh2, "") == 0);
  host_block(block, sizeof(block), "lab1", th_addr(1), 22, NULL, kh, "yes", NULL);
  LC_REQUIRE(write_config(cfg, 0, block) == 0);
  host_block(block, sizeof(block), "lab1", th_addr(1), 22, NULL, kh2, "accept-new", NULL);
  LC_REQUIRE(write_config(cfg2, 0, block) == 0);

  LC_CHECK(connect_with(&rt, cfg, "lab1", LC_HOSTKEY_DEFAULT, 0, NULL) == LC_EHOSTKEYUNKNOWN);
  LC_CHECK(rt == NULL);
  LC_CHECK_CONTAINS(lc_error_last(), "lab1");
  LC_CHECK_CONTAINS(lc_error_last(), "not known");
  LC_CHECK_CONTAINS(lc_error_last(), "ssh-keyscan");
  LC_CHECK_CONTAINS(lc_error_last(), kh);
  /* an explicit STRICT wins over a config that would accept */
  LC_CHECK(connect_with(&rt, cfg2, "lab1", LC_HOSTKEY_STRICT, 0, NULL) == LC_EHOSTKEYUNKNOWN);
  LC_CHECK_CONTAINS(lc_error_last(), "lab1");
  text = read_text(kh);
  LC_CHECK(text != NULL && text[0] == '\0'); /* refusing wrote nothing */
  free(text);

  /* the policy accepts it and records it in the config's known_hosts */
  LC_CHECK_OK(connect_with(&rt, cfg, "lab1", LC_HOSTKEY_ACCEPT_NEW, 0, NULL));
  if (rt != NULL) {
    LC_CHECK(lc_runtime_is_connected(rt));
    LC_CHECK_OK(runs_true(rt));
    lc_runtime_free(rt);
    rt = NULL;
  }
  snprintf(want, sizeof(want), "%s ssh-ed25519 ", th_addr(1));
  text = read_text(kh);
  LC_CHECK_CONTAINS(text, want);
  free(text);
  /* what it recorded is lab1's real key: strict checking now passes */
  LC_CHECK_OK(connect_with(&rt, cfg, "lab1", LC_HOSTKEY_DEFAULT, 0, NULL));
  lc_runtime_free(rt);
  rt = NULL;

  /* StrictHostKeyChecking accept-new in the config, default policy */
  LC_CHECK_OK(connect_with(&rt, cfg2, "lab1", LC_HOSTKEY_DEFAULT, 0, NULL));
  if (rt != NULL)
    LC_CHECK_OK(runs_true(rt));
  lc_runtime_free(rt);
  text = read_text(kh2);
  LC_CHECK_CONTAINS(text, want);
  free(text);
}

/* known_hosts lists lab1's address with lab2's key: always refused, known_hosts untouched. */
static void test_changed_host_key_refused(void) {
  char kh[4096], cfg[4096], cfg_no[4096], block[4096], fixture_kh[4200], prefix[128], *all, *line,
      *end, *before, *after;
  lc_runtime *rt = NULL;
  tpath(kh, sizeof(kh), "known_hosts.changed");
  tpath(cfg, sizeof(cfg), "changed.conf");
  tpath(cfg_no, sizeof(cfg_no), "changed-strict-no.conf");
  snprintf(fixture_kh, sizeof(fixture_kh), "%s/known_hosts", fixture);
  LC_REQUIRE((all = read_text(fixture_kh)) != NULL);
  snprintf(prefix, sizeof(prefix), "%s ", th_addr(2));
  line = strstr(all, prefix);
  LC_REQUIRE(line != NULL && (line == all || line[-1] == '\n'));
  end = strchr(line, '\n');
  if (end != NULL)
    *end = '\0';
  snprintf(block, sizeof(block), "%s %s\n", th_addr(1), line + strlen(prefix));
  free(all);
  LC_REQUIRE(write_text(kh, block) == 0);
  before = read_text(kh);
  host_block(block, sizeof(block), "lab1", th_addr(1), 22, NULL, kh, "yes", NULL);
  LC_REQUIRE(write_config(cfg, 0, block) == 0);
  host_block(block, sizeof(block), "lab1", th_addr(1), 22, NULL, kh, "no", NULL);
  LC_REQUIRE(write_config(cfg_no, 0, block) == 0);

  LC_CHECK(connect_with(&rt, cfg, "lab1", LC_HOSTKEY_DEFAULT, 0, NULL) == LC_EHOSTKEYCHANGED);
  LC_CHECK(rt == NULL);
  LC_CHECK_CONTAINS(lc_error_last(), "lab1");
  LC_CHECK_CONTAINS(lc_error_last(), "CHANGED");
  LC_CHECK_CONTAINS(lc_error_last(), "ssh-keygen -R");
  LC_CHECK_CONTAINS(lc_error_last(), th_addr(1));
  /* accepting new keys does not accept a changed one */
  LC_CHECK(connect_with(&rt, cfg, "lab1", LC_HOSTKEY_ACCEPT_NEW, 0, NULL) == LC_EHOSTKEYCHANGED);
  LC_CHECK_CONTAINS(lc_error_last(), "lab1");
  LC_CHECK_CONTAINS(lc_error_last(), "CHANGED");
  /* nor does StrictHostKeyChecking no */
  LC_CHECK(connect_with(&rt, cfg_no, "lab1", LC_HOSTKEY_DEFAULT, 0, NULL) == LC_EHOSTKEYCHANGED);
  LC_CHECK_CONTAINS(lc_error_last(), "CHANGED");
  lc_runtime_free(rt);
  after = read_text(kh);
  LC_CHECK_STR(after, before);
  free(before);
  free(after);
}

/* ---- user keys ------------------------------------------------------------------------------ */

/* A key the hosts do not authorize: LC_EAUTH naming the host and the key. */
static void test_wrong_user_key_refused(void) {
  char key[4096], cfg[4096], block[4096];
  lc_runtime *rt = NULL;
  tpath(key, sizeof(key), "wrong_key");
  tpath(cfg, sizeof(cfg), "wrong-key.conf");
  LC_REQUIRE(sh("ssh-keygen -q -t ed25519 -N '' -C lc-wrong -f '%s'", key) == 0);
  host_block(block, sizeof(block), "lab1", th_addr(1), 22, key, NULL, "yes", NULL);
  LC_REQUIRE(write_config(cfg, 0, block) == 0);

  LC_CHECK(connect_with(&rt, cfg, "lab1", LC_HOSTKEY_DEFAULT, 0, NULL) == LC_EAUTH);
  LC_CHECK(rt == NULL);
  LC_CHECK_CONTAINS(lc_error_last(), "lab1");
  LC_CHECK_CONTAINS(lc_error_last(), "authentication");
  LC_CHECK_CONTAINS(lc_error_last(), key);
  lc_runtime_free(rt);
}

/* Expects LC_EKEYLOCKED for key through cfg, promptly, with stdin /dev/null. */
static void expect_locked(const char *cfg, const char *key) {
  lc_runtime *rt = NULL;
  uint64_t took = 0;
  int saved = dup(0), null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  LC_REQUIRE(saved >= 0 && null >= 0);
  dup2(null, 0);
  close(null);
  LC_CHECK(connect_with(&rt, cfg, "lab1", LC_HOSTKEY_DEFAULT, 10000, &took) == LC_EKEYLOCKED);
  dup2(saved, 0);
  close(saved);
  LC_CHECK(rt == NULL);
  LC_CHECK(took < 8000); /* no prompt, no wait for the connect timeout */
  LC_CHECK_CONTAINS(lc_error_last(), "lab1");
  LC_CHECK_CONTAINS(lc_error_last(), key);
  LC_CHECK_CONTAINS(lc_error_last(), "ssh-add");
  lc_runtime_free(rt);
}

/*
 * An encrypted key and no agent: LC_EKEYLOCKED naming the key and ssh-add, at once. Both a fresh
 * key the hosts do not know and the fixture's own (authorized) key with a passphrase added.
 */
static void test_encrypted_key_without_agent(void) {
  char key[4096], key2[4096], cfg[4096], cfg2[4096], block[4096];
  tpath(key, sizeof(key), "locked_key");
  tpath(key2, sizeof(key2), "locked_authorized_key");
  tpath(cfg, sizeof(cfg), "locked.conf");
  tpath(cfg2, sizeof(cfg2), "locked-authorized.conf");
  LC_REQUIRE(getenv("SSH_AUTH_SOCK") == NULL);
  LC_REQUIRE(sh("ssh-keygen -q -t ed25519 -N secret -C lc-locked -f '%s'", key) == 0);
  LC_REQUIRE(sh("cp '%s/id_ed25519' '%s' && cp '%s/id_ed25519.pub' '%s.pub' && chmod 600 '%s' && "
                "ssh-keygen -q -p -P '' -N secret -f '%s'",
                fixture, key2, fixture, key2, key2, key2) == 0);
  host_block(block, sizeof(block), "lab1", th_addr(1), 22, key, NULL, "yes", NULL);
  LC_REQUIRE(write_config(cfg, 0, block) == 0);
  host_block(block, sizeof(block), "lab1", th_addr(1), 22, key2, NULL, "yes", NULL);
  LC_REQUIRE(write_config(cfg2, 0, block) == 0);
  expect_locked(cfg, key);
  expect_locked(cfg2, key2);
}

/* ---- reaching the host ---------------------------------------------------------------------- */

/* A host whose link is down: -ETIMEDOUT after the connect timeout, not a hang. */
static void test_unreachable_host_times_out(void) {
  lc_runtime *rt = NULL;
  uint64_t took = 0;
  int r;
  LC_REQUIRE(th_run("link-down 3") == 0);
  r = connect_with(&rt, th_config(), "lab3", LC_HOSTKEY_DEFAULT, 2000, &took);
  LC_CHECK(th_run("link-up 3") == 0);
  LC_CHECK(r == -ETIMEDOUT);
  LC_CHECK(rt == NULL);
  LC_CHECK(took >= 1500);
  LC_CHECK(took <= 2000 + 8000);
  LC_CHECK_CONTAINS(lc_error_last(), "lab3");
  LC_CHECK_CONTAINS(lc_error_last(), "timed out");
  lc_runtime_free(rt);
  rt = NULL;
  /* back: later tests find it as it was */
  LC_CHECK_OK(connect_with(&rt, th_config(), "lab3", LC_HOSTKEY_DEFAULT, 0, NULL));
  lc_runtime_free(rt);
}

/* A port nothing listens on: -ECONNREFUSED at once. */
static void test_connection_refused(void) {
  char cfg[4096], block[4096];
  lc_runtime *rt = NULL;
  uint64_t took = 0;
  tpath(cfg, sizeof(cfg), "closedport.conf");
  host_block(block, sizeof(block), "closedport", th_addr(4), 2, NULL, NULL, "yes", NULL);
  LC_REQUIRE(write_config(cfg, 1, block) == 0);
  LC_CHECK(connect_with(&rt, cfg, "closedport", LC_HOSTKEY_DEFAULT, 0, &took) == -ECONNREFUSED);
  LC_CHECK(rt == NULL);
  LC_CHECK(took < 5000);
  LC_CHECK_CONTAINS(lc_error_last(), "closedport");
  LC_CHECK_CONTAINS(lc_error_last(), "refused");
  lc_runtime_free(rt);
}

/* A "host" that sends an SSH banner, reads what comes and closes the connection without a word,
 * as sshd does when no algorithm is common (or over MaxStartups): the error names the host and
 * says what such a close means and which settings choose ours. */
static void *banner_then_close(void *arg) {
  int lfd = *(int *)arg, fd;
  char buf[4096];
  if ((fd = accept(lfd, NULL, NULL)) < 0)
    return NULL;
  /* our banner and the start of our KEXINIT (one read or two: CI once had both in one read,
   * and a second read waited for bytes that never came), left unanswered */
  if (write(fd, "SSH-2.0-OpenSSH_9.2p1 lc-test\r\n", 31) == 31) {
    size_t have = 0;
    ssize_t n;
    const char *nl = NULL;
    while (have < sizeof(buf) && (n = read(fd, buf + have, sizeof(buf) - have)) > 0) {
      have += (size_t)n;
      if ((nl = memchr(buf, '\n', have)) != NULL && (size_t)(nl - buf) + 1 < have)
        break;
    }
  }
  close(fd);
  return NULL;
}
static void test_closed_in_key_exchange(void) {
  char cfg[4096], block[4096];
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof(a);
  lc_runtime *rt = NULL;
  pthread_t th;
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  LC_REQUIRE(lfd >= 0 && bind(lfd, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(lfd, 1) == 0 &&
             getsockname(lfd, (struct sockaddr *)&a, &alen) == 0);
  LC_REQUIRE(pthread_create(&th, NULL, banner_then_close, &lfd) == 0);
  tpath(cfg, sizeof(cfg), "closedkex.conf");
  host_block(block, sizeof(block), "closedkex", "127.0.0.1", ntohs(a.sin_port), NULL, NULL, "yes",
             NULL);
  LC_CHECK(write_config(cfg, 1, block) == 0 &&
           connect_with(&rt, cfg, "closedkex", LC_HOSTKEY_DEFAULT, 0, NULL) == LC_ESSH);
  LC_CHECK(rt == NULL);
  LC_CHECK_CONTAINS(lc_error_last(), "closedkex");
  LC_CHECK_CONTAINS(lc_error_last(), "SSH handshake failed");
  LC_CHECK_CONTAINS(lc_error_last(), "closed the connection during the key exchange");
  LC_CHECK_CONTAINS(lc_error_last(), "Ciphers, KexAlgorithms and HostKeyAlgorithms");
  pthread_join(th, NULL);
  close(lfd);
  lc_runtime_free(rt);
}

/*
 * A name that does not resolve: -EHOSTUNREACH saying so. Not "no-such-host.invalid": glibc sends
 * that to the configured DNS server. A name with an empty label cannot be put in a query, so
 * getaddrinfo fails on this machine without sending anything.
 */
static void test_unknown_name(void) {
  char cfg[4096], block[4096];
  lc_runtime *rt = NULL;
  uint64_t took = 0;
  tpath(cfg, sizeof(cfg), "nosuchname.conf");
  host_block(block, sizeof(block), "nosuchname", "no-such-host..invalid", 22, NULL, NULL, "yes",
             NULL);
  LC_REQUIRE(write_config(cfg, 1, block) == 0);
  LC_CHECK(connect_with(&rt, cfg, "nosuchname", LC_HOSTKEY_DEFAULT, 0, &took) == -EHOSTUNREACH);
  LC_CHECK(rt == NULL);
  LC_CHECK(took < 5000);
  LC_CHECK_CONTAINS(lc_error_last(), "nosuchname");
  LC_CHECK_CONTAINS(lc_error_last(), "resolve");
  LC_CHECK_CONTAINS(lc_error_last(), "no-such-host..invalid");
  lc_runtime_free(rt);
}

/* ---- ProxyJump ------------------------------------------------------------------------------ */

/* The first field of $SSH_CONNECTION on rt (the client address as the host sees it). */
static int client_addr(char *out, size_t size, lc_runtime *rt, char *hostname, size_t hsize) {
  collect c;
  lc_exec_result res = {.exit_status = -1};
  int r;
  out[0] = hostname[0] = '\0';
  if ((r = collect_exec(&c, &res, rt, "echo \"$SSH_CONNECTION\"; hostname", NULL)) == 0 &&
      c.text[0] != NULL) {
    char *sp = strchr(c.text[0], ' '), *nl = strchr(c.text[0], '\n');
    if (sp != NULL)
      snprintf(out, size, "%.*s", (int)(sp - c.text[0]), c.text[0]);
    if (nl != NULL)
      snprintf(hostname, hsize, "%.*s", (int)strcspn(nl + 1, "\n"), nl + 1);
  }
  collect_free(&c);
  return r;
}

/* One hop (lab0) and two (lab0, lab1) to lab2: the host sees the last hop as its client. */
static void test_proxy_jump(void) {
  char cfg[4096], blocks[8192], *b = blocks, addr[64], host[64];
  lc_runtime *rt = NULL;
  tpath(cfg, sizeof(cfg), "jump.conf");
  host_block(b, sizeof(blocks), "jumped", th_addr(2), 22, NULL, NULL, "yes", "  ProxyJump lab0\n");
  b += strlen(b);
  host_block(b, sizeof(blocks) - (size_t)(b - blocks), "jumped2", th_addr(2), 22, NULL, NULL, "yes",
             "  ProxyJump lab0,lab1\n");
  LC_REQUIRE(write_config(cfg, 1, blocks) == 0);

  /* one hop: lab2 sees lab0 as the client; a command and 1 MB of output pass */
  LC_CHECK_OK(connect_with(&rt, cfg, "jumped", LC_HOSTKEY_DEFAULT, 0, NULL));
  if (rt != NULL) {
    collect c;
    lc_exec_result res = {.exit_status = -1};
    LC_CHECK_STR(lc_runtime_name(rt), "jumped");
    LC_CHECK(lc_runtime_is_connected(rt));
    LC_CHECK_OK(client_addr(addr, sizeof(addr), rt, host, sizeof(host)));
    LC_CHECK_STR(addr, th_addr(0));
    LC_CHECK_STR(host, "lab2");
    LC_CHECK_OK(
        collect_exec(&c, &res, rt, "head -c 1000000 /dev/zero | tr '\\0' x | fold -w 1000", NULL));
    LC_CHECK(res.exit_status == 0);
    LC_CHECK(c.bytes[0] == 1000000);
    LC_CHECK(c.lines[0] == 1000);
    collect_free(&c);
    LC_CHECK_OK(lc_runtime_exec(&res, rt, "exit 9", NULL));
    LC_CHECK(res.exit_status == 9);
    lc_runtime_free(rt);
    rt = NULL;
  }

  /* two hops: lab0, then lab1, then lab2, which sees lab1 */
  LC_CHECK_OK(connect_with(&rt, cfg, "jumped2", LC_HOSTKEY_DEFAULT, 0, NULL));
  if (rt != NULL) {
    LC_CHECK_OK(client_addr(addr, sizeof(addr), rt, host, sizeof(host)));
    LC_CHECK_STR(addr, th_addr(1));
    LC_CHECK_STR(host, "lab2");
    LC_CHECK_OK(runs_true(rt));
    lc_runtime_free(rt);
  }
}

/*
 * The jump host cannot reach the target (a port nothing listens on): the error says so and names
 * the jump host. Last in the list: should this crash the program, the other results are in.
 */
static void test_proxy_jump_target_refused(void) {
  char cfg[4096], block[4096];
  lc_runtime *rt = NULL;
  uint64_t took = 0;
  tpath(cfg, sizeof(cfg), "jump-closed.conf");
  host_block(block, sizeof(block), "jumpclosed", th_addr(2), 2, NULL, NULL, "yes",
             "  ProxyJump lab0\n");
  LC_REQUIRE(write_config(cfg, 1, block) == 0);
  LC_CHECK(connect_with(&rt, cfg, "jumpclosed", LC_HOSTKEY_DEFAULT, 0, &took) == -ECONNREFUSED);
  LC_CHECK(rt == NULL);
  LC_CHECK(took < 8000);
  LC_CHECK_CONTAINS(lc_error_last(), "jumpclosed");
  LC_CHECK_CONTAINS(lc_error_last(), "lab0");
  LC_CHECK_CONTAINS(lc_error_last(), th_addr(2));
  lc_runtime_free(rt);
}

/* ---- ssh config keywords that decide how a host is reached --------------------------------- */

/*
 * ProxyCommand through the real OpenSSH client: lab2 reached with `ssh -F <fixture config> -W
 * %h:%p lab0`, so lab2 sees lab0 as its client. A ProxyCommand that fails (false) is refused with
 * an error that names the host and the command.
 */
/* How many children of this process are called ssh or sh (running or zombies), after waiting up
 * to 5 s for them to go. */
static int proxy_children(void) {
  int n = 0;
  for (int tries = 0; tries < 50; tries++) {
    DIR *d = opendir("/proc");
    struct dirent *e;
    n = 0;
    while (d != NULL && (e = readdir(d)) != NULL) {
      char path[300], buf[512], *close_paren;
      FILE *f;
      long ppid = 0;
      if (e->d_name[0] < '1' || e->d_name[0] > '9')
        continue;
      snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
      if ((f = fopen(path, "r")) == NULL)
        continue;
      if (fgets(buf, sizeof(buf), f) != NULL && (close_paren = strrchr(buf, ')')) != NULL &&
          sscanf(close_paren + 2, "%*c %ld", &ppid) == 1 && ppid == (long)getpid() &&
          (strstr(buf, "(ssh)") != NULL || strstr(buf, "(sh)") != NULL))
        n++;
      fclose(f);
    }
    if (d != NULL)
      closedir(d);
    if (n == 0)
      break;
    usleep(100 * 1000);
  }
  return n;
}

static void test_proxy_command(void) {
  char cfg[4096], blocks[8192], extra[4400], *b = blocks, addr[64], host[64];
  lc_runtime *rt = NULL;
  uint64_t took = 0;
  int r;
  tpath(cfg, sizeof(cfg), "proxycommand.conf");
  snprintf(extra, sizeof(extra), "  ProxyCommand ssh -F %s -o BatchMode=yes -W %%h:%%p lab0\n",
           th_config());
  host_block(b, sizeof(blocks), "proxied", th_addr(2), 22, NULL, NULL, "yes", extra);
  b += strlen(b);
  host_block(b, sizeof(blocks) - (size_t)(b - blocks), "proxyfails", th_addr(2), 22, NULL, NULL,
             "yes", "  ProxyCommand echo lc-proxy-broke >&2; false\n");
  LC_REQUIRE(write_config(cfg, 1, blocks) == 0);

  LC_CHECK_OK(connect_with(&rt, cfg, "proxied", LC_HOSTKEY_DEFAULT, 0, NULL));
  if (rt != NULL) {
    lc_exec_result res = {.exit_status = -1};
    LC_CHECK_OK(client_addr(addr, sizeof(addr), rt, host, sizeof(host)));
    LC_CHECK_STR(addr, th_addr(0));
    LC_CHECK_STR(host, "lab2");
    LC_CHECK_OK(lc_runtime_exec(&res, rt, "exit 7", NULL));
    LC_CHECK(res.exit_status == 7);
    lc_runtime_free(rt);
    rt = NULL;
    LC_CHECK(proxy_children() == 0); /* the ProxyCommand ended and was reaped: no zombie */
  }
  r = connect_with(&rt, cfg, "proxyfails", LC_HOSTKEY_DEFAULT, 0, &took);
  LC_CHECK(r < 0 && rt == NULL);
  LC_CHECK(took < 8000);
  LC_CHECK_CONTAINS(lc_error_last(), "proxyfails");
  LC_CHECK_CONTAINS(lc_error_last(), "ProxyCommand");
  LC_CHECK_CONTAINS(lc_error_last(), "false");
  lc_runtime_free(rt);
  LC_CHECK(proxy_children() == 0);
}

/*
 * A host whose key is only in a file named by GlobalKnownHostsFile is accepted (the user's file
 * is empty); with the global file gone it is refused as unknown. HostKeyAlias: the key is looked
 * up under the alias, not the address.
 */
static void test_global_known_hosts_and_alias(void) {
  char kh_empty[4096], global[4096], aliased[4096], cfg[4096], block[8192], extra[4400],
      fixture_kh[4200], prefix[128], *all, *line, *end;
  lc_runtime *rt = NULL;
  tpath(kh_empty, sizeof(kh_empty), "known_hosts.user-empty");
  tpath(global, sizeof(global), "known_hosts.global");
  tpath(aliased, sizeof(aliased), "known_hosts.aliased");
  tpath(cfg, sizeof(cfg), "global-kh.conf");
  snprintf(fixture_kh, sizeof(fixture_kh), "%s/known_hosts", fixture);
  LC_REQUIRE((all = read_text(fixture_kh)) != NULL);
  snprintf(prefix, sizeof(prefix), "%s ", th_addr(3));
  line = strstr(all, prefix);
  LC_REQUIRE(line != NULL);
  if ((end = strchr(line, '\n')) != NULL)
    *end = '\0';
  LC_REQUIRE(write_text(kh_empty, "") == 0);
  snprintf(block, sizeof(block), "%s\n", line);
  LC_REQUIRE(write_text(global, block) == 0);
  snprintf(block, sizeof(block), "lab3-alias %s\n", line + strlen(prefix));
  LC_REQUIRE(write_text(aliased, block) == 0);
  free(all);

  snprintf(extra, sizeof(extra), "  GlobalKnownHostsFile /nonexistent/lc %s\n", global);
  /* host_block writes GlobalKnownHostsFile /dev/null after extra: first value wins */
  snprintf(block, sizeof(block),
           "Host globalkh\n  HostName %s\n  User root\n  IdentityFile %s/id_ed25519\n"
           "  IdentitiesOnly yes\n  UserKnownHostsFile %s\n%s  StrictHostKeyChecking yes\n"
           "Host nogloballkh\n  HostName %s\n  User root\n  IdentityFile %s/id_ed25519\n"
           "  UserKnownHostsFile %s\n  GlobalKnownHostsFile /dev/null\n"
           "Host aliased\n  HostName %s\n  User root\n  IdentityFile %s/id_ed25519\n"
           "  HostKeyAlias LAB3-alias\n  UserKnownHostsFile %s\n  GlobalKnownHostsFile /dev/null\n",
           th_addr(3), fixture, kh_empty, extra, th_addr(3), fixture, kh_empty, th_addr(3), fixture,
           aliased);
  LC_REQUIRE(write_config(cfg, 0, block) == 0);
  LC_CHECK_OK(connect_with(&rt, cfg, "globalkh", LC_HOSTKEY_DEFAULT, 0, NULL));
  LC_CHECK(rt != NULL && runs_true(rt) == 0);
  lc_runtime_free(rt);
  rt = NULL;
  LC_CHECK(connect_with(&rt, cfg, "nogloballkh", LC_HOSTKEY_DEFAULT, 0, NULL) ==
           LC_EHOSTKEYUNKNOWN);
  LC_CHECK_CONTAINS(lc_error_last(), kh_empty);
  lc_runtime_free(rt);
  rt = NULL;
  LC_CHECK_OK(connect_with(&rt, cfg, "aliased", LC_HOSTKEY_DEFAULT, 0, NULL));
  LC_CHECK(rt != NULL && runs_true(rt) == 0);
  lc_runtime_free(rt);
}

/*
 * IdentitiesOnly yes with a real ssh-agent holding 6 keys the hosts do not know (sshd's
 * MaxAuthTries is 6): offering the agent's keys first fails ("too many authentication
 * failures"), IdentitiesOnly yes offers only the IdentityFile and connects. The agent is named
 * by IdentityAgent (SSH_AUTH_SOCK is unset in this test); IdentityAgent none leaves it out.
 */
static void test_identities_only_with_agent(void) {
  char sock[4096], pidfile[4096], key[4096], cfg[4096], block[8192], *pidtext;
  lc_runtime *rt = NULL;
  int r;
  tpath(sock, sizeof(sock), "agent.sock");
  tpath(pidfile, sizeof(pidfile), "agent.pid");
  LC_REQUIRE(sh("ssh-agent -a '%s' | sed -n 's/^SSH_AGENT_PID=\\([0-9]*\\).*/\\1/p' > '%s'", sock,
                pidfile) == 0);
  for (int i = 0; i < 6; i++) {
    snprintf(key, sizeof(key), "%s/agentkey%d", tmpdir, i);
    LC_CHECK(sh("ssh-keygen -q -t ed25519 -N '' -C lc-agent%d -f '%s' && SSH_AUTH_SOCK='%s' "
                "ssh-add '%s'",
                i, key, sock, key) == 0);
  }
  tpath(cfg, sizeof(cfg), "agent.conf");
  snprintf(block, sizeof(block),
           "Host only\n  HostName %s\n  User root\n  IdentityFile %s/id_ed25519\n"
           "  IdentitiesOnly yes\n  IdentityAgent %s\n  UserKnownHostsFile %s/known_hosts\n"
           "Host all\n  HostName %s\n  User root\n  IdentityFile %s/id_ed25519\n"
           "  IdentitiesOnly no\n  IdentityAgent %s\n  UserKnownHostsFile %s/known_hosts\n"
           "Host noagent\n  HostName %s\n  User root\n  IdentityFile %s/id_ed25519\n"
           "  IdentityAgent none\n  UserKnownHostsFile %s/known_hosts\n"
           "Host onlyenv\n  HostName %s\n  User root\n  IdentityFile %s/id_ed25519\n"
           "  IdentitiesOnly yes\n  UserKnownHostsFile %s/known_hosts\n",
           th_addr(4), fixture, sock, fixture, th_addr(4), fixture, sock, fixture, th_addr(4),
           fixture, fixture, th_addr(4), fixture, fixture);
  LC_REQUIRE(write_config(cfg, 0, block) == 0);
  r = connect_with(&rt, cfg, "all", LC_HOSTKEY_DEFAULT, 0, NULL);
  LC_CHECK(r == LC_EAUTH && rt == NULL); /* the agent's 6 wrong keys use up MaxAuthTries */
  LC_CHECK_CONTAINS(lc_error_last(), "all");
  lc_runtime_free(rt);
  rt = NULL;
  LC_CHECK_OK(connect_with(&rt, cfg, "only", LC_HOSTKEY_DEFAULT, 0, NULL));
  LC_CHECK(rt != NULL && runs_true(rt) == 0);
  lc_runtime_free(rt);
  rt = NULL;
  LC_CHECK_OK(connect_with(&rt, cfg, "noagent", LC_HOSTKEY_DEFAULT, 0, NULL));
  lc_runtime_free(rt);
  rt = NULL;
  /* the agent from SSH_AUTH_SOCK, as a user has it: IdentitiesOnly yes still connects */
  setenv("SSH_AUTH_SOCK", sock, 1);
  LC_CHECK_OK(connect_with(&rt, cfg, "onlyenv", LC_HOSTKEY_DEFAULT, 0, NULL));
  lc_runtime_free(rt);
  rt = NULL;
  /* IdentityAgent none: the agent of SSH_AUTH_SOCK is not used */
  LC_CHECK_OK(connect_with(&rt, cfg, "noagent", LC_HOSTKEY_DEFAULT, 0, NULL));
  unsetenv("SSH_AUTH_SOCK");
  lc_runtime_free(rt);
  if ((pidtext = read_text(pidfile)) != NULL && atoi(pidtext) > 0)
    kill(atoi(pidtext), SIGTERM);
  free(pidtext);
}

/* KexAlgorithms that the host does not offer: refused, saying which keyword sets ours. */
static void test_kex_mismatch(void) {
  char cfg[4096], block[4096];
  lc_runtime *rt = NULL;
  tpath(cfg, sizeof(cfg), "kex.conf");
  host_block(block, sizeof(block), "kexhost", th_addr(1), 22, NULL, NULL, "yes",
             "  KexAlgorithms diffie-hellman-group1-sha1\n");
  LC_REQUIRE(write_config(cfg, 0, block) == 0);
  LC_CHECK(connect_with(&rt, cfg, "kexhost", LC_HOSTKEY_DEFAULT, 0, NULL) == LC_ESSH);
  LC_CHECK_CONTAINS(lc_error_last(), "kexhost");
  LC_CHECK_CONTAINS(lc_error_last(), "KexAlgorithms");
  lc_runtime_free(rt);
}

/*
 * HostKeyAlgorithms reaches the handshake. The hosts have only an ed25519 host key: a list of
 * ecdsa alone is refused, naming the host, the keyword and what the host offers; ssh-ed25519
 * alone connects.
 */
static void test_hostkey_algorithms(void) {
  char cfg[4096], blocks[8192], *b = blocks;
  lc_runtime *rt = NULL;
  tpath(cfg, sizeof(cfg), "hostkeyalgs.conf");
  host_block(b, sizeof(blocks), "hkecdsa", th_addr(1), 22, NULL, NULL, "yes",
             "  HostKeyAlgorithms ecdsa-sha2-nistp256\n");
  b += strlen(b);
  host_block(b, sizeof(blocks) - (size_t)(b - blocks), "hked25519", th_addr(1), 22, NULL, NULL,
             "yes", "  HostKeyAlgorithms ssh-ed25519\n");
  LC_REQUIRE(write_config(cfg, 0, blocks) == 0);
  LC_CHECK(connect_with(&rt, cfg, "hkecdsa", LC_HOSTKEY_DEFAULT, 0, NULL) == LC_ESSH);
  LC_CHECK(rt == NULL);
  LC_CHECK_CONTAINS(lc_error_last(), "hkecdsa");
  LC_CHECK_CONTAINS(lc_error_last(), "HostKeyAlgorithms");
  LC_CHECK_CONTAINS(lc_error_last(), "ssh-ed25519"); /* what the host offers */
  lc_runtime_free(rt);
  rt = NULL;
  LC_CHECK_OK(connect_with(&rt, cfg, "hked25519", LC_HOSTKEY_DEFAULT, 0, NULL));
  LC_CHECK(rt != NULL && runs_true(rt) == 0);
  lc_runtime_free(rt);
}

/*
 * PubkeyAcceptedAlgorithms decides which keys are offered. The test key is ed25519: a list of
 * rsa-sha2-512 alone leaves it out, and authentication fails saying so; ssh-ed25519 connects.
 */
static void test_pubkey_accepted_algorithms(void) {
  char cfg[4096], blocks[8192], *b = blocks;
  lc_runtime *rt = NULL;
  tpath(cfg, sizeof(cfg), "pubkeyalgs.conf");
  host_block(b, sizeof(blocks), "pkrsa", th_addr(2), 22, NULL, NULL, "yes",
             "  PubkeyAcceptedAlgorithms rsa-sha2-512\n");
  b += strlen(b);
  host_block(b, sizeof(blocks) - (size_t)(b - blocks), "pked25519", th_addr(2), 22, NULL, NULL,
             "yes", "  PubkeyAcceptedAlgorithms ssh-ed25519\n");
  LC_REQUIRE(write_config(cfg, 0, blocks) == 0);
  LC_CHECK(connect_with(&rt, cfg, "pkrsa", LC_HOSTKEY_DEFAULT, 0, NULL) == LC_EAUTH);
  LC_CHECK(rt == NULL);
  LC_CHECK_CONTAINS(lc_error_last(), "pkrsa");
  LC_CHECK_CONTAINS(lc_error_last(), "authentication");
  LC_CHECK_CONTAINS(lc_error_last(), "PubkeyAcceptedAlgorithms");
  LC_CHECK_CONTAINS(lc_error_last(), "ssh-ed25519");
  lc_runtime_free(rt);
  rt = NULL;
  LC_CHECK_OK(connect_with(&rt, cfg, "pked25519", LC_HOSTKEY_DEFAULT, 0, NULL));
  LC_CHECK(rt != NULL && runs_true(rt) == 0);
  lc_runtime_free(rt);
}

/*
 * AddressFamily sets the family of the lookup: a host given by its IPv4 address with
 * AddressFamily inet6 has no address to connect to, and the error names the host and the
 * keyword; AddressFamily inet connects.
 */
static void test_address_family(void) {
  char cfg[4096], blocks[8192], *b = blocks;
  lc_runtime *rt = NULL;
  uint64_t took = 0;
  tpath(cfg, sizeof(cfg), "family.conf");
  host_block(b, sizeof(blocks), "only6", th_addr(3), 22, NULL, NULL, "yes",
             "  AddressFamily inet6\n");
  b += strlen(b);
  host_block(b, sizeof(blocks) - (size_t)(b - blocks), "only4", th_addr(3), 22, NULL, NULL, "yes",
             "  AddressFamily inet\n");
  LC_REQUIRE(write_config(cfg, 0, blocks) == 0);
  LC_CHECK(connect_with(&rt, cfg, "only6", LC_HOSTKEY_DEFAULT, 0, &took) == -EHOSTUNREACH);
  LC_CHECK(rt == NULL);
  LC_CHECK(took < 5000);
  LC_CHECK_CONTAINS(lc_error_last(), "only6");
  LC_CHECK_CONTAINS(lc_error_last(), th_addr(3));
  LC_CHECK_CONTAINS(lc_error_last(), "AddressFamily inet6");
  lc_runtime_free(rt);
  rt = NULL;
  LC_CHECK_OK(connect_with(&rt, cfg, "only4", LC_HOSTKEY_DEFAULT, 0, NULL));
  LC_CHECK(rt != NULL && runs_true(rt) == 0);
  lc_runtime_free(rt);
}

/* TCP resets that host i has sent ("Tcp: ... OutRsts" of its network namespace); -1 if unknown. */
static long host_out_rsts(int i) {
  char path[4200], *pidtext, *snmp, *names, *values;
  long n = -1;
  snprintf(path, sizeof(path), "%s/hosts/%d/sshd.pid", fixture, i);
  if ((pidtext = read_text(path)) == NULL)
    return -1;
  snprintf(path, sizeof(path), "/proc/%ld/net/snmp", th_pid_here(i, atol(pidtext)));
  free(pidtext);
  if ((snmp = read_text(path)) == NULL)
    return -1;
  /* two lines "Tcp: Name...", "Tcp: value...": the column of OutRsts */
  if ((names = strstr(snmp, "\nTcp: ")) != NULL &&
      (values = strstr(names + 1, "\nTcp: ")) != NULL) {
    char *nl = strchr(names + 1, '\n'), *ns, *vs, *nsave = NULL, *vsave = NULL;
    *nl = '\0';
    if ((nl = strchr(values + 1, '\n')) != NULL)
      *nl = '\0';
    ns = strtok_r(names + 6, " ", &nsave);
    vs = strtok_r(values + 6, " ", &vsave);
    while (ns != NULL && vs != NULL && strcmp(ns, "OutRsts") != 0) {
      ns = strtok_r(NULL, " ", &nsave);
      vs = strtok_r(NULL, " ", &vsave);
    }
    if (ns != NULL && vs != NULL)
      n = atol(vs);
  }
  free(snmp);
  return n;
}

/*
 * ConnectionAttempts 3 against a port of lab4 that nothing listens on: three connects, each
 * answered by a reset that lab4's TCP counters record, and an error that says how many attempts
 * were made. Without the keyword: one attempt.
 */
static void test_connection_attempts(void) {
  char cfg[4096], blocks[8192], *b = blocks;
  lc_runtime *rt = NULL;
  uint64_t took = 0;
  long before, after;
  tpath(cfg, sizeof(cfg), "attempts.conf");
  host_block(b, sizeof(blocks), "tries3", th_addr(4), 2, NULL, NULL, "yes",
             "  ConnectionAttempts 3\n");
  b += strlen(b);
  host_block(b, sizeof(blocks) - (size_t)(b - blocks), "tries1", th_addr(4), 2, NULL, NULL, "yes",
             NULL);
  LC_REQUIRE(write_config(cfg, 0, blocks) == 0);
  LC_REQUIRE((before = host_out_rsts(4)) >= 0);
  LC_CHECK(connect_with(&rt, cfg, "tries3", LC_HOSTKEY_DEFAULT, 0, &took) == -ECONNREFUSED);
  after = host_out_rsts(4);
  fprintf(stderr, "  lab4 sent %ld resets\n", after - before);
  LC_CHECK(rt == NULL);
  LC_CHECK(after - before >= 3);
  LC_CHECK(took < 20000);
  LC_CHECK_CONTAINS(lc_error_last(), "tries3");
  LC_CHECK_CONTAINS(lc_error_last(), "after 3 attempts");
  LC_CHECK_CONTAINS(lc_error_last(), "refused");
  lc_runtime_free(rt);
  rt = NULL;
  before = host_out_rsts(4);
  LC_CHECK(connect_with(&rt, cfg, "tries1", LC_HOSTKEY_DEFAULT, 0, NULL) == -ECONNREFUSED);
  after = host_out_rsts(4);
  LC_CHECK(after - before >= 1 && after - before < 3);
  LC_CHECK(strstr(lc_error_last(), "attempts") == NULL);
  lc_runtime_free(rt);
}

/*
 * BatchMode yes with an encrypted key and no agent: the same prompt-free LC_EKEYLOCKED as
 * without it (the backend never prompts), at once.
 */
static void test_batch_mode_encrypted_key(void) {
  char key[4096], cfg[4096], block[4096];
  tpath(key, sizeof(key), "batch_locked_key");
  tpath(cfg, sizeof(cfg), "batch-locked.conf");
  LC_REQUIRE(getenv("SSH_AUTH_SOCK") == NULL);
  LC_REQUIRE(sh("cp '%s/id_ed25519' '%s' && chmod 600 '%s' && ssh-keygen -q -p -P '' -N secret "
                "-f '%s'",
                fixture, key, key, key) == 0);
  host_block(block, sizeof(block), "lab1", th_addr(1), 22, key, NULL, "yes", "  BatchMode yes\n");
  LC_REQUIRE(write_config(cfg, 0, block) == 0);
  expect_locked(cfg, key);
}

/* Whether rt reports itself disconnected within ms (lc_runtime_is_connected becomes 0). */
static int runtime_disconnects(lc_runtime *rt, int ms) {
  uint64_t end = now_ms() + (uint64_t)ms;
  while (lc_runtime_is_connected(rt) && now_ms() < end)
    usleep(10 * 1000);
  return !lc_runtime_is_connected(rt);
}

/* ---- losing the host ------------------------------------------------------------------------ */

/* A host that goes silent: keepalive reports the connection lost; the lifeline ends the command. */
static void test_keepalive_notices_dead_host(void) {
  lc_runtime_options o = th_options();
  lc_runtime *rt = NULL;
  lc_process *p = NULL, *p2 = NULL;
  lc_exec_result res = {.exit_status = -1};
  uint64_t t0, took;
  int r, connected;
  o.keepalive_timeout_ms = 3000;
  o.heartbeat_timeout_ms = 3000;
  LC_REQUIRE_OK(lc_runtime_new_ssh(&rt, engine, "lab5", &o));
  LC_CHECK_OK(lc_runtime_spawn(&p, rt, "sleep 4247", NULL));
  LC_CHECK(wait_procs(5, "sleep 4247", 1, 10000) > 0);
  if (p == NULL || th_run("link-down 5") != 0) {
    LC_CHECK(!"could not set up the dead host");
    th_run("link-up 5");
    lc_process_free(p);
    lc_runtime_free(rt);
    return;
  }
  t0 = now_ms();
  r = lc_process_wait(&res, p, 20000);
  /* read at once: the process has been told the connection is gone, so it is */
  connected = lc_runtime_is_connected(rt);
  took = now_ms() - t0;
  fprintf(stderr, "  wait after link-down: %s after %d ms: %s\n", lc_err_name(r), (int)took,
          lc_error_last());
  LC_CHECK(r == LC_ECLOSED);
  LC_CHECK_CONTAINS(lc_error_last(), "lab5");
  LC_CHECK(!connected);
  LC_CHECK(runtime_disconnects(rt, 2000));
  LC_CHECK(lc_runtime_spawn(&p2, rt, "true", NULL) == LC_ECLOSED);
  LC_CHECK(p2 == NULL);
  LC_CHECK(th_run("link-up 5") == 0);
  /* on the host, the lifeline misses its heartbeat (3 s) and ends the command */
  LC_CHECK(wait_procs(5, "sleep 4247", 0, 20000) == 0);
  lc_process_free(p);
  lc_runtime_free(rt);
}

/*
 * ServerAliveInterval 1 and ServerAliveCountMax 2 in the config set the keepalive timeout (2 s,
 * against the default 30 s): with lab2's link down, a running command's wait reports the
 * connection lost well within 15 s. The host is brought back whatever happens.
 */
static void test_server_alive_from_config(void) {
  char cfg[4096], block[4096];
  lc_runtime_options o = LC_RUNTIME_OPTIONS_INIT;
  lc_runtime *rt = NULL;
  lc_process *p = NULL;
  lc_exec_result res = {.exit_status = -1};
  uint64_t t0, took;
  int r;
  tpath(cfg, sizeof(cfg), "serveralive.conf");
  host_block(block, sizeof(block), "alive", th_addr(2), 22, NULL, NULL, "yes",
             "  ServerAliveInterval 1\n  ServerAliveCountMax 2\n");
  LC_REQUIRE(write_config(cfg, 0, block) == 0);
  o.ssh_config = cfg;
  o.heartbeat_timeout_ms = 3000; /* the lifeline ends the command soon after the link is back */
  LC_REQUIRE_OK(lc_runtime_new_ssh(&rt, engine, "alive", &o));
  LC_CHECK_OK(lc_runtime_spawn(&p, rt, "sleep 4251", NULL));
  LC_CHECK(wait_procs(2, "sleep 4251", 1, 10000) > 0);
  if (p == NULL || th_run("link-down 2") != 0) {
    LC_CHECK(!"could not set up the dead host");
    th_run("link-up 2");
    lc_process_free(p);
    lc_runtime_free(rt);
    return;
  }
  t0 = now_ms();
  r = lc_process_wait(&res, p, 15000);
  took = now_ms() - t0;
  fprintf(stderr, "  wait after link-down: %s after %d ms: %s\n", lc_err_name(r), (int)took,
          lc_error_last());
  LC_CHECK(th_run("link-up 2") == 0);
  LC_CHECK(r == LC_ECLOSED); /* -ETIMEDOUT if the 30 s default were still in force */
  LC_CHECK_CONTAINS(lc_error_last(), "alive");
  LC_CHECK_CONTAINS(lc_error_last(), "connection lost");
  LC_CHECK(!lc_runtime_is_connected(rt));
  LC_CHECK(wait_procs(2, "sleep 4251", 0, 20000) == 0);
  lc_process_free(p);
  lc_runtime_free(rt);
}

/* The host's sshd, listener and sessions, is killed: the wait reports the connection lost. */
static void test_sshd_killed(void) {
  lc_runtime *rt = NULL;
  lc_process *p = NULL;
  lc_exec_result res = {.exit_status = -1};
  lc_runtime_options o = th_options();
  uint64_t t0, took;
  int r, killed, connected;
  LC_REQUIRE_OK(lc_runtime_new_ssh(&rt, engine, "lab6", &o));
  LC_CHECK_OK(lc_runtime_spawn(&p, rt, "sleep 4248", NULL));
  LC_CHECK(wait_procs(6, "sleep 4248", 1, 10000) > 0);
  LC_CHECK(th_run("stop-sshd 6") == 0);
  killed = th_kill_procs(6, "sshd", SIGKILL);
  fprintf(stderr, "  killed %d sshd session processes on lab6\n", killed);
  LC_CHECK(killed >= 1);
  t0 = now_ms();
  r = p != NULL ? lc_process_wait(&res, p, 20000) : LC_EINTERNAL;
  connected = lc_runtime_is_connected(rt);
  took = now_ms() - t0;
  fprintf(stderr, "  wait after killing sshd: %s after %d ms: %s\n", lc_err_name(r), (int)took,
          lc_error_last());
  LC_CHECK(r == LC_ECLOSED);
  LC_CHECK_CONTAINS(lc_error_last(), "lab6");
  LC_CHECK(!connected);
  LC_CHECK(runtime_disconnects(rt, 2000));
  LC_CHECK(th_run("start-sshd 6") == 0);
  /* the lifeline lost its stdin with the session: the command is gone */
  LC_CHECK(wait_procs(6, "sleep 4248", 0, 15000) == 0);
  lc_process_free(p);
  lc_runtime_free(rt);
  rt = NULL;
  LC_CHECK_OK(connect_with(&rt, th_config(), "lab6", LC_HOSTKEY_DEFAULT, 0, NULL));
  lc_runtime_free(rt);
}

/* lc_runtime_free ends a running command on the host; the process handle stays safe to use. */
static void test_free_runtime_while_command_runs(void) {
  lc_runtime_options o = th_options();
  lc_runtime *rt = NULL;
  lc_process *p = NULL;
  lc_exec_result res = {.exit_status = -1};
  uint64_t t0, took;
  int r;
  LC_REQUIRE_OK(lc_runtime_new_ssh(&rt, engine, "lab7", &o));
  LC_REQUIRE_OK(lc_runtime_spawn(&p, rt, "sleep 4246", NULL));
  LC_CHECK(wait_procs(7, "sleep 4246", 1, 10000) > 0);
  t0 = now_ms();
  lc_runtime_free(rt);
  took = now_ms() - t0;
  fprintf(stderr, "  lc_runtime_free with a running command took %d ms\n", (int)took);
  LC_CHECK(took < 10000);
  /* the handle outlives its runtime: it reports the end, and freeing it is safe */
  r = lc_process_wait(&res, p, 5000);
  fprintf(stderr, "  wait after the runtime was freed: %s: %s\n", lc_err_name(r), lc_error_last());
  LC_CHECK(r != -ETIMEDOUT);
  (void)lc_process_stop(p); /* must be harmless; what it returns here is not specified */
  lc_process_free(p);
  LC_CHECK(wait_procs(7, "sleep 4246", 0, 10000) == 0);
}

/* ---- ciphers -------------------------------------------------------------------------------- */

static char remove_extra_host[8192]; /* "testhosts down" of an extra instance, while it is up */

static void remove_extra_hosts(void) {
  if (remove_extra_host[0] != '\0' && system(remove_extra_host) != 0) /* NOLINT */
    fprintf(stderr, "  %s: failed\n", remove_extra_host);
  remove_extra_host[0] = '\0';
}

/* Connects to lab0 of the extra instance through its config with first_line put before it. */
static int connect_extra(lc_runtime **rt, const char *dir, const char *first_line) {
  char base[4200], cfg[4096], *text, *all = NULL;
  int r = -ENOMEM;
  snprintf(base, sizeof(base), "%s/ssh_config", dir);
  tpath(cfg, sizeof(cfg), "ciphers.conf");
  if ((text = read_text(base)) == NULL)
    return -ENOENT;
  if (asprintf(&all, "%s%s", first_line, text) >= 0)
    r = write_text(cfg, all);
  free(all);
  free(text);
  return r < 0 ? r : connect_with(rt, cfg, "lab0", LC_HOSTKEY_DEFAULT, 0, NULL);
}

/*
 * Ciphers from the config reach the handshake. A host whose sshd takes only aes192-ctr, which is
 * not in the backend's default list, is refused with the default (naming the host and the cipher
 * the host offers) and reached with "Ciphers +aes192-ctr" and with "Ciphers aes192-ctr"; a list
 * without it is refused again. The host is an extra instance, DIR-ciphers beside the fixture's.
 */
static void test_ciphers(void) {
  char dir[4096], cmd[8400];
  lc_runtime *rt = NULL;
  int st, r;
  snprintf(dir, sizeof(dir), "%s-ciphers", fixture);
  snprintf(cmd, sizeof(cmd), "%s up 1 --dir %s --sshd-option 'Ciphers aes192-ctr' >/dev/null",
           th_script(), dir);
  snprintf(remove_extra_host, sizeof(remove_extra_host), "%s down --dir %s", th_script(), dir);
  st = system(cmd); /* NOLINT(cert-env33-c): the testhosts script */
  LC_CHECK(st == 0);
  if (st == 0) {
    r = connect_extra(&rt, dir, "# the backend's default ciphers\n");
    LC_CHECK(r < 0 && rt == NULL);
    LC_CHECK_CONTAINS(lc_error_last(), "lab0");
    /* the host's offer, when libssh read it before sshd's close (a loaded machine can reset the
     * connection first: then the hint of test_closed_in_key_exchange) */
    if (strstr(lc_error_last(), "closed the connection during the key exchange") == NULL) {
      LC_CHECK_CONTAINS(lc_error_last(), "aes192-ctr");
      LC_CHECK_CONTAINS(lc_error_last(), "Ciphers in the ssh config");
    } else {
      LC_CHECK_CONTAINS(lc_error_last(), "Ciphers, KexAlgorithms and HostKeyAlgorithms");
    }
    lc_runtime_free(rt);
    rt = NULL;
    LC_CHECK_OK(connect_extra(&rt, dir, "Ciphers +aes192-ctr\n"));
    LC_CHECK(rt != NULL && runs_true(rt) == 0);
    lc_runtime_free(rt);
    rt = NULL;
    LC_CHECK_OK(connect_extra(&rt, dir, "Ciphers aes192-ctr\n"));
    LC_CHECK(rt != NULL && runs_true(rt) == 0);
    lc_runtime_free(rt);
    rt = NULL;
    r = connect_extra(&rt, dir, "Ciphers chacha20-poly1305@openssh.com,aes256-ctr\n");
    LC_CHECK(r < 0 && rt == NULL);
    LC_CHECK_CONTAINS(lc_error_last(), "aes192-ctr");
    lc_runtime_free(rt);
  }
  LC_CHECK(system(remove_extra_host) == 0); /* NOLINT(cert-env33-c) */
  remove_extra_host[0] = '\0';
}

/*
 * CertificateFile: an extra instance whose sshd also listens on port 2222, where no
 * authorized_keys file is read and only certificates signed by a throw-away user CA
 * (TrustedUserCAKeys) are accepted. The user key signed by that CA into a certificate at a path
 * of its own (not KEY-cert.pub, which is tried without the keyword): with CertificateFile it
 * connects, without it authentication fails. Port 22 of the same host still takes the plain key.
 */
static void test_certificate_file(void) {
  char dir[4096], ca[4200], pub[4096], cert[4096], cmd[16384], line[8400], addr[64] = "", *hosts;
  lc_runtime *rt = NULL;
  int st;
  snprintf(dir, sizeof(dir), "%s-cert", fixture);
  snprintf(ca, sizeof(ca), "%s-cert-ca", fixture);
  tpath(pub, sizeof(pub), "certuser.pub");
  tpath(cert, sizeof(cert), "certuser.cert"); /* not certuser-cert.pub */
  LC_REQUIRE(sh("rm -f '%s' '%s.pub' && ssh-keygen -q -t ed25519 -N '' -C lc-user-ca -f '%s'", ca,
                ca, ca) == 0);
  snprintf(cmd, sizeof(cmd),
           "%s up 1 --dir %s --sshd-option 'Port 2222' --sshd-option 'AuthorizedKeysFile "
           "%s/authorized_keys' --sshd-option 'Match LocalPort 2222' --sshd-option "
           "'AuthorizedKeysFile none' --sshd-option 'TrustedUserCAKeys %s/user_ca.pub' >/dev/null",
           th_script(), dir, dir, dir);
  snprintf(remove_extra_host, sizeof(remove_extra_host), "%s down --dir %s", th_script(), dir);
  st = system(cmd); /* NOLINT(cert-env33-c): the testhosts script */
  LC_CHECK(st == 0);
  if (st == 0) {
    /* the CA's key inside the host's directory, made by `up`: a host whose directory lies under
     * /tmp (a CI clone's build tree) sees only that directory of the real /tmp. sshd reads the
     * file when a certificate is offered, not when it starts. */
    LC_CHECK(sh("cp '%s.pub' '%s/user_ca.pub'", ca, dir) == 0);
    LC_CHECK(sh("cp '%s/id_ed25519.pub' '%s' && ssh-keygen -q -s '%s' -I lc-test -n root "
                "-V -5m:+1h '%s' && mv '%s/certuser-cert.pub' '%s'",
                dir, pub, ca, pub, tmpdir, cert) == 0);
    /* known_hosts names the host by its address for port 22: the alias finds it for 2222 */
    snprintf(line, sizeof(line), "%s/hosts.txt", dir);
    LC_CHECK((hosts = read_text(line)) != NULL && sscanf(hosts, "%*s %63s", addr) == 1);
    free(hosts);
    snprintf(line, sizeof(line), "Port 2222\nHostKeyAlias %s\nCertificateFile %s\n", addr, cert);
    LC_CHECK_OK(connect_extra(&rt, dir, line));
    LC_CHECK(rt != NULL && runs_true(rt) == 0);
    lc_runtime_free(rt);
    rt = NULL;
    snprintf(line, sizeof(line), "Port 2222\nHostKeyAlias %s\n", addr);
    LC_CHECK(connect_extra(&rt, dir, line) == LC_EAUTH);
    LC_CHECK(rt == NULL);
    LC_CHECK_CONTAINS(lc_error_last(), "lab0");
    LC_CHECK_CONTAINS(lc_error_last(), "authentication");
    lc_runtime_free(rt);
    rt = NULL;
    LC_CHECK_OK(connect_extra(&rt, dir, "# port 22: authorized_keys\n"));
    lc_runtime_free(rt);
  }
  LC_CHECK(system(remove_extra_host) == 0); /* NOLINT(cert-env33-c) */
  remove_extra_host[0] = '\0';
  sh("rm -f '%s' '%s.pub'", ca, ca);
}

static const lc_test_case tests[] = {
    LC_TEST(test_unknown_host_key_refused),
    LC_TEST(test_changed_host_key_refused),
    LC_TEST(test_wrong_user_key_refused),
    LC_TEST(test_encrypted_key_without_agent),
    LC_TEST(test_unreachable_host_times_out),
    LC_TEST(test_connection_refused),
    LC_TEST(test_closed_in_key_exchange),
    LC_TEST(test_unknown_name),
    LC_TEST(test_proxy_jump),
    LC_TEST(test_keepalive_notices_dead_host),
    LC_TEST(test_sshd_killed),
    LC_TEST(test_free_runtime_while_command_runs),
    LC_TEST(test_proxy_jump_target_refused),
    LC_TEST(test_ciphers),
    LC_TEST(test_proxy_command),
    LC_TEST(test_global_known_hosts_and_alias),
    LC_TEST(test_identities_only_with_agent),
    LC_TEST(test_kex_mismatch),
    LC_TEST(test_hostkey_algorithms),
    LC_TEST(test_pubkey_accepted_algorithms),
    LC_TEST(test_address_family),
    LC_TEST(test_connection_attempts),
    LC_TEST(test_batch_mode_encrypted_key),
    LC_TEST(test_server_alive_from_config),
    LC_TEST(test_certificate_file),
};

int main(int argc, char **argv) {
  int r;
  signal(SIGPIPE, SIG_IGN);
  unsetenv("SSH_AUTH_SOCK"); /* no agent: the keys tested are the ones the configs name */
  if (realpath(th_dir(), fixture) == NULL || mkdtemp(tmpdir) == NULL ||
      lc_engine_new(&engine, NULL) < 0) {
    fprintf(stderr, "FATAL: setup failed: %s\n", strerror(errno));
    return 2;
  }
  atexit(remove_extra_hosts);
  r = lc_test_run(tests, NVALUES(tests), argc, argv);
  lc_engine_free(engine);
  rm_tree(tmpdir);
  return r;
}
