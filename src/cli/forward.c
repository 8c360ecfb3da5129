/*
 * forward.c - `lazyclusterctl forward HOST -L ... -R ...`: holds port forwards in the foreground,
 * like `ssh -N`, until SIGINT, SIGTERM or SIGHUP, and reports every forward's state changes on
 * stderr, one line each.
 *
 * Signals: SIGINT, SIGTERM, SIGHUP and SIGUSR1 are blocked in every thread before the engine
 * starts (its thread inherits the mask) and the main thread takes them with sigwait; no work runs
 * in a signal handler. SIGUSR1 is our own wake-up: the state callback runs on the engine thread,
 * where it must not block on stderr, so it queues the line and sends SIGUSR1 to the main thread,
 * which prints it.
 */
#include "cli.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CMD "forward"

typedef struct fwd_event fwd_event;
typedef struct fwd_ctx fwd_ctx;

/* One -L or -R argument, parsed. */
typedef struct fwd_spec {
  lc_forward_kind kind;
  const char *arg; /* as given, for messages */
  char name[600];  /* "-L 127.0.0.1:8080:web:80", how lines name the forward */
  char bind[16];   /* "127.0.0.1" or "::1" */
  int port;
  char target[256];  /* as given */
  char connect[256]; /* what the library connects to: target, or its address when resolved here */
  int target_port;
  const char *listens; /* "this machine" or the host's name */
  lc_forward *fwd;
  fwd_ctx *ctx;
} fwd_spec;

/* A state change (or, with spec NULL, a notice of the engine), queued by the engine thread for
 * the main thread to print. */
struct fwd_event {
  fwd_event *next;
  const fwd_spec *spec;
  lc_forward_state state;
  char detail[];
};

struct fwd_ctx {
  pthread_mutex_t lock;
  fwd_event *head, **tail;
  pthread_t main_thread;
};

static void forward_usage(FILE *f) {
  fprintf(f,
          "Usage: " CLI_NAME " forward HOST [-F SSHCONFIG] [--accept-new-host-keys]\n"
          "                      [--connect-timeout S] [--peers WHO] FORWARD...\n"
          "       " CLI_NAME " forward --local [--peers WHO] FORWARD...\n"
          "\n"
          "Hold port forwards through HOST in the foreground, like `ssh -N`, until Ctrl-C or\n"
          "SIGTERM; then close them and exit 0. Each forward's state changes (up, down and why)\n"
          "are reported on stderr, one line each. A lost connection is retried with backoff and\n"
          "the forwards come back up with it.\n"
          "\n"
          "HOST is an alias of the ssh config or [user@]hostname[:port]; --local uses this\n"
          "machine instead (a forward is then a plain relay).\n"
          "\n"
          "Forwards (at least one; repeat them as needed):\n"
          "  -L [BIND:]PORT:TARGET:TPORT  listen on this machine, connect to TARGET:TPORT as\n"
          "                               HOST sees it\n"
          "  -R [BIND:]PORT:TARGET:TPORT  listen on HOST, connect to TARGET:TPORT as this machine\n"
          "                               sees it (a name is resolved once, at start)\n"
          "  BIND is 127.0.0.1 (default), localhost or ::1 (also written [::1]): forwards listen\n"
          "  on loopback only. Ports are 1-65535. An IPv6 TARGET is written in brackets.\n"
          "\n"
          "Options:\n"
          "  -F SSHCONFIG             OpenSSH client config (default ~/.ssh/config)\n"
          "  --accept-new-host-keys   add unknown host keys to known_hosts (a changed key is\n"
          "                           still refused)\n"
          "  --connect-timeout S      connect and log in within S seconds (default 10)\n"
          "  --local                  forward on this machine, without SSH\n"
          "  --peers WHO              who may connect to the listeners on this machine: owner\n"
          "                           (default: only you), owner+root, or any (every local\n"
          "                           user); others are refused at once and reported here\n"
          "  -h, --help               this help\n"
          "\n"
          "Exit status: 0 when stopped by a signal, 1 when the connection or a forward fails,\n"
          "2 for a bad command line.\n");
}

/* ---- parsing -------------------------------------------------------------------------------- */

/*
 * Splits s at ':' into at most max fields; a field in brackets ("[::1]") may hold ':'.
 * Returns the number of fields, or -1 when s has more, or an unclosed or misplaced bracket.
 */
static int split_fields(char *s, char **fields, int max) {
  int n = 0;
  for (;;) {
    char *end;
    if (n == max)
      return -1;
    if (*s == '[') {
      if ((end = strchr(s, ']')) == NULL || (end[1] != ':' && end[1] != '\0'))
        return -1;
      fields[n++] = s + 1;
      *end = '\0';
      s = end + 1;
      if (*s == '\0')
        return n;
      s++; /* the ':' */
      continue;
    }
    fields[n++] = s;
    if ((end = strchr(s, ':')) == NULL)
      return n;
    *end = '\0';
    s = end + 1;
  }
}

/* A port 1-65535, digits only; -1 otherwise. */
static int parse_port(const char *s) {
  long v = 0;
  if (*s == '\0' || strlen(s) > 5)
    return -1;
  for (const char *p = s; *p; p++) {
    if (*p < '0' || *p > '9')
      return -1;
    v = v * 10 + (*p - '0');
  }
  return v >= 1 && v <= 65535 ? (int)v : -1;
}

/* Fills spec from a -L or -R argument; on error prints the message and returns CLI_EXIT_USAGE. */
static int parse_spec(fwd_spec *spec, lc_forward_kind kind, const char *arg) {
  const char *flag = kind == LC_FORWARD_LOCAL ? "-L" : "-R";
  char buf[600], *f[4];
  const char *bind = "127.0.0.1";
  int n, off = 0;

  memset(spec, 0, sizeof(*spec));
  spec->kind = kind;
  spec->arg = arg;
  if (strlen(arg) >= sizeof(buf))
    return cli_usage_error(CMD, "%s '%.40s...': too long", flag, arg);
  snprintf(buf, sizeof(buf), "%s", arg);
  /* "::1:PORT:..." without brackets: the one IPv6 bind address there is */
  if (strncmp(buf, "::1:", 4) == 0) {
    f[0] = buf;
    buf[3] = '\0';
    off = 1;
  }
  n = split_fields(buf + (off ? 4 : 0), f + off, 4 - off);
  if (n > 0)
    n += off;
  if (n != 3 && n != 4)
    return cli_usage_error(CMD, "%s '%s': expected [BIND:]PORT:TARGET:TPORT", flag, arg);
  if (n == 4) {
    bind = f[0];
    memmove(f, f + 1, 3 * sizeof(f[0]));
  }
  if (strcmp(bind, "localhost") == 0 || strcmp(bind, "127.0.0.1") == 0)
    bind = "127.0.0.1";
  else if (strcmp(bind, "::1") != 0)
    return cli_usage_error(CMD,
                           "%s '%s': refusing to listen on '%s': forwards listen on loopback "
                           "only (127.0.0.1, localhost or ::1)",
                           flag, arg, bind);
  if ((spec->port = parse_port(f[0])) < 0)
    return cli_usage_error(CMD, "%s '%s': bad port '%s' (ports are 1-65535)", flag, arg, f[0]);
  if (f[1][0] == '\0' || strlen(f[1]) >= sizeof(spec->target))
    return cli_usage_error(CMD, "%s '%s': bad target host '%s'", flag, arg, f[1]);
  if ((spec->target_port = parse_port(f[2])) < 0)
    return cli_usage_error(CMD, "%s '%s': bad target port '%s' (ports are 1-65535)", flag, arg,
                           f[2]);
  snprintf(spec->bind, sizeof(spec->bind), "%s", bind);
  snprintf(spec->target, sizeof(spec->target), "%s", f[1]);
  snprintf(spec->connect, sizeof(spec->connect), "%s", f[1]);
  snprintf(spec->name, sizeof(spec->name), "%s %s%s%s:%d:%s%s%s:%d", flag,
           strchr(bind, ':') ? "[" : "", bind, strchr(bind, ':') ? "]" : "", spec->port,
           strchr(spec->target, ':') ? "[" : "", spec->target, strchr(spec->target, ':') ? "]" : "",
           spec->target_port);
  return CLI_EXIT_OK;
}

/*
 * A target this process connects to (a remote forward's, or any on the local runtime) must be an
 * address for the library: resolve a name once, here.
 */
static int resolve_target(fwd_spec *spec) {
  struct addrinfo hints, *ai = NULL;
  unsigned char bin[sizeof(struct in6_addr)];
  int r;
  if (strcmp(spec->target, "localhost") == 0 || inet_pton(AF_INET, spec->target, bin) == 1 ||
      inet_pton(AF_INET6, spec->target, bin) == 1)
    return 0;
  memset(&hints, 0, sizeof(hints));
  hints.ai_socktype = SOCK_STREAM;
  if ((r = getaddrinfo(spec->target, NULL, &hints, &ai)) != 0) {
    fprintf(stderr, CLI_NAME " " CMD ": %s: cannot resolve %s: %s\n", spec->name, spec->target,
            gai_strerror(r));
    return -1;
  }
  r = getnameinfo(ai->ai_addr, ai->ai_addrlen, spec->connect, sizeof(spec->connect), NULL, 0,
                  NI_NUMERICHOST);
  freeaddrinfo(ai);
  if (r != 0) {
    fprintf(stderr, CLI_NAME " " CMD ": %s: cannot resolve %s: %s\n", spec->name, spec->target,
            gai_strerror(r));
    return -1;
  }
  return 0;
}

/* ---- state changes -------------------------------------------------------------------------- */

/* Engine thread: queue the line, wake the main thread. */
static void queue_event(fwd_ctx *ctx, const fwd_spec *spec, lc_forward_state state,
                        const char *detail) {
  size_t len = strlen(detail);
  fwd_event *ev = malloc(sizeof(*ev) + len + 1);
  if (ev == NULL)
    return;
  ev->next = NULL;
  ev->spec = spec;
  ev->state = state;
  memcpy(ev->detail, detail, len + 1);
  pthread_mutex_lock(&ctx->lock);
  *ctx->tail = ev;
  ctx->tail = &ev->next;
  pthread_mutex_unlock(&ctx->lock);
  pthread_kill(ctx->main_thread, SIGUSR1);
}

static void on_state(lc_forward *fwd, lc_forward_state state, const char *detail, void *payload) {
  fwd_spec *spec = payload;
  (void)fwd;
  queue_event(spec->ctx, spec, state, detail);
}

/* A refused connection to one of our listeners. */
static void on_notice(const char *message, void *payload) {
  queue_event(payload, NULL, LC_FORWARD_UP, message);
}

static void print_state(const fwd_spec *spec, lc_forward_state state, const char *detail) {
  if (spec == NULL)
    fprintf(stderr, CLI_NAME " " CMD ": %s\n", detail);
  else if (state == LC_FORWARD_UP && (detail[0] == '\0' || strcmp(detail, "up") == 0))
    fprintf(stderr, CLI_NAME " " CMD ": %s up: listening on %s\n", spec->name, spec->listens);
  else
    fprintf(stderr, CLI_NAME " " CMD ": %s %s: %s\n", spec->name,
            state == LC_FORWARD_UP ? "up" : "down", detail[0] ? detail : "no reason given");
}

/* Main thread: prints the queued state changes, oldest first. */
static void drain_events(fwd_ctx *ctx) {
  fwd_event *ev;
  pthread_mutex_lock(&ctx->lock);
  ev = ctx->head;
  ctx->head = NULL;
  ctx->tail = &ctx->head;
  pthread_mutex_unlock(&ctx->lock);
  while (ev != NULL) {
    fwd_event *next = ev->next;
    print_state(ev->spec, ev->state, ev->detail);
    free(ev);
    ev = next;
  }
}

/* A stop signal already waiting, taken without blocking; 0 if none. */
static int stop_pending(const sigset_t *stops) {
  struct timespec zero = {0, 0};
  int sig = sigtimedwait(stops, NULL, &zero);
  return sig > 0 ? sig : 0;
}

/* ---- the command ---------------------------------------------------------------------------- */

int cli_forward(int argc, char **argv) {
  lc_runtime_options ro = LC_RUNTIME_OPTIONS_INIT;
  lc_engine_options eo = LC_ENGINE_OPTIONS_INIT;
  fwd_ctx ctx = {.lock = PTHREAD_MUTEX_INITIALIZER};
  fwd_spec *specs = NULL;
  lc_engine *engine = NULL;
  lc_runtime *rt = NULL;
  sigset_t stops, waits, old;
  const char *host = NULL, *where;
  int nspecs = 0, local = 0, masked = 0, sig = 0, r, rc = CLI_EXIT_FAIL;

  ctx.tail = &ctx.head;
  if ((specs = calloc((size_t)argc, sizeof(*specs))) == NULL) {
    fprintf(stderr, CLI_NAME " " CMD ": out of memory\n");
    return CLI_EXIT_FAIL;
  }
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (cli_is_help(a)) {
      forward_usage(stdout);
      rc = CLI_EXIT_OK;
      goto out;
    }
    if (a[0] == '-' && (a[1] == 'L' || a[1] == 'R' || a[1] == 'F')) {
      const char *val = a[2] ? a + 2 : (i + 1 < argc ? argv[++i] : NULL);
      if (val == NULL) {
        rc = cli_usage_error(CMD, "option '%s' needs a value", a);
        goto out;
      }
      if (a[1] == 'F') {
        ro.ssh_config = val;
        continue;
      }
      if ((rc = parse_spec(&specs[nspecs], a[1] == 'L' ? LC_FORWARD_LOCAL : LC_FORWARD_REMOTE,
                           val)) != CLI_EXIT_OK)
        goto out;
      specs[nspecs].ctx = &ctx;
      nspecs++;
    } else if (strcmp(a, "--accept-new-host-keys") == 0) {
      ro.hostkey_policy = LC_HOSTKEY_ACCEPT_NEW;
    } else if (strcmp(a, "--connect-timeout") == 0) {
      char *end = NULL;
      double secs = i + 1 < argc ? strtod(argv[++i], &end) : 0;
      if (end == NULL || *end != '\0' || secs <= 0 || secs > 3600) {
        rc = cli_usage_error(CMD, "--connect-timeout '%s': want seconds, e.g. 5 or 0.5",
                             end == NULL ? "" : argv[i]);
        goto out;
      }
      ro.connect_timeout_ms = (int)(secs * 1000);
    } else if (strcmp(a, "--local") == 0) {
      local = 1;
    } else if (strcmp(a, "--peers") == 0) {
      if (i + 1 >= argc) {
        rc = cli_usage_error(CMD, "option '%s' needs a value", a);
        goto out;
      }
      if (cli_parse_peers(CMD, argv[++i], &eo.peers) < 0) {
        rc = CLI_EXIT_USAGE;
        goto out;
      }
    } else if (a[0] == '-') {
      rc = cli_usage_error(CMD, "unknown option '%s'", a);
      goto out;
    } else if (host != NULL) {
      rc = cli_usage_error(CMD, "one host only: '%s' after '%s'", a, host);
      goto out;
    } else {
      host = a;
    }
  }
  if (host == NULL && !local) {
    rc = cli_usage_error(CMD, "no host given (or --local)");
    goto out;
  }
  if (host != NULL && local) {
    rc = cli_usage_error(CMD, "give a host or --local, not both ('%s')", host);
    goto out;
  }
  if (nspecs == 0) {
    rc = cli_usage_error(CMD, "no forward given (-L or -R)");
    goto out;
  }
  rc = CLI_EXIT_FAIL;
  for (int i = 0; i < nspecs; i++)
    if ((local || specs[i].kind == LC_FORWARD_REMOTE) && resolve_target(&specs[i]) < 0)
      goto out;

  /* Before the engine thread exists, so that it inherits the mask. */
  sigemptyset(&stops);
  sigaddset(&stops, SIGINT);
  sigaddset(&stops, SIGTERM);
  sigaddset(&stops, SIGHUP);
  waits = stops;
  sigaddset(&waits, SIGUSR1);
  if ((r = pthread_sigmask(SIG_BLOCK, &waits, &old)) != 0) {
    fprintf(stderr, CLI_NAME " " CMD ": cannot block signals: %s\n", strerror(r));
    goto out;
  }
  masked = 1;
  ctx.main_thread = pthread_self();

  eo.on_notice = on_notice;
  eo.payload = &ctx;
  if ((r = lc_engine_new(&engine, &eo)) < 0) {
    rc = cli_fail(CMD, r, "cannot start the engine");
    goto out;
  }
  r = local ? lc_runtime_new_local(&rt, engine, &ro) : lc_runtime_new_ssh(&rt, engine, host, &ro);
  if (r < 0) {
    rc = cli_fail(CMD, r, local ? "cannot start the local runtime" : "cannot connect");
    goto out;
  }
  where = local ? "this machine" : lc_runtime_name(rt);
  for (int i = 0; i < nspecs && (sig = stop_pending(&stops)) == 0; i++) {
    fwd_spec *s = &specs[i];
    lc_forward_options fo = LC_FORWARD_OPTIONS_INIT;
    s->listens = s->kind == LC_FORWARD_LOCAL ? "this machine" : where;
    fo.bind_address = s->bind;
    fo.on_state = on_state;
    fo.payload = s;
    if ((r = lc_forward_new(&s->fwd, rt, s->kind, s->port, s->connect, s->target_port, &fo)) < 0) {
      rc = cli_fail(CMD, r, s->name);
      goto out;
    }
    print_state(s, LC_FORWARD_UP, "");
  }
  if (sig == 0)
    fprintf(stderr, CLI_NAME " " CMD ": %d forward%s through %s; Ctrl-C or SIGTERM stops\n", nspecs,
            nspecs == 1 ? "" : "s", where);

  while (sig == 0) {
    int got;
    if ((r = sigwait(&waits, &got)) != 0) {
      fprintf(stderr, CLI_NAME " " CMD ": sigwait: %s\n", strerror(r));
      goto out;
    }
    drain_events(&ctx);
    if (got != SIGUSR1)
      sig = got;
  }
  fprintf(stderr, CLI_NAME " " CMD ": %s: closing the forwards\n", strsignal(sig));
  rc = CLI_EXIT_OK;
out:
  for (int i = 0; specs != NULL && i < nspecs; i++)
    lc_forward_free(specs[i].fwd);
  lc_runtime_free(rt);
  lc_engine_free(engine);
  drain_events(&ctx); /* no callback runs any more */
  if (masked) {
    /* a wake-up still pending must not kill us once unblocked */
    while (stop_pending(&waits) > 0)
      ;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
  }
  free(specs);
  return rc;
}
