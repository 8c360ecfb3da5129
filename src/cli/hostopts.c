/*
 * hostopts.c - the host-selection options every subcommand that works on hosts takes:
 * -F FILE, --hosts LIST, --inventory FILE, --accept-new-host-keys, --connect-timeout S,
 * --facts-timeout S, --fanout N, --heartbeat S, --umask MODE.
 */
#include "cli.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_hostopts_take(cli_hostopts *h, const char *cmd, int argc, char **argv, int *i) {
  const char *a = argv[*i];
  const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
  char *end;
  if (strcmp(a, "--accept-new-host-keys") == 0) {
    h->runtime.hostkey_policy = LC_HOSTKEY_ACCEPT_NEW;
    return 1;
  }
  if (strcmp(a, "-F") != 0 && strcmp(a, "--hosts") != 0 && strcmp(a, "--inventory") != 0 &&
      strcmp(a, "--connect-timeout") != 0 && strcmp(a, "--facts-timeout") != 0 &&
      strcmp(a, "--fanout") != 0 && strcmp(a, "--heartbeat") != 0 && strcmp(a, "--umask") != 0)
    return 0;
  if (v == NULL)
    return cli_usage_error(cmd, "%s needs a value", a), -1;
  (*i)++;
  if (strcmp(a, "-F") == 0) {
    h->runtime.ssh_config = v;
  } else if (strcmp(a, "--hosts") == 0) {
    h->discover.hosts = v;
  } else if (strcmp(a, "--inventory") == 0) {
    h->discover.inventory = v;
  } else if (strcmp(a, "--umask") == 0) {
    long m = strtol(v, &end, 8);
    if (*end != '\0' || end == v || m < 0 || m > 0777)
      return cli_usage_error(cmd, "--umask %s: want an octal mode from 000 to 777, e.g. 022", v),
             -1;
    h->runtime.umask = LC_UMASK_SET | (int)m;
  } else if (strcmp(a, "--connect-timeout") == 0 || strcmp(a, "--heartbeat") == 0 ||
             strcmp(a, "--facts-timeout") == 0) {
    double s = strtod(v, &end);
    if (*end != '\0' || s <= 0 || s > 3600)
      return cli_usage_error(cmd, "%s %s: want seconds, e.g. 5 or 0.5", a, v), -1;
    if (strcmp(a, "--connect-timeout") == 0)
      h->runtime.connect_timeout_ms = (int)(s * 1000);
    else if (strcmp(a, "--facts-timeout") == 0)
      h->discover.facts_timeout_ms = (int)(s * 1000);
    else
      h->runtime.heartbeat_timeout_ms = (int)(s * 1000);
  } else {
    long n = strtol(v, &end, 10);
    if (*end != '\0' || n < 1 || n > 100000)
      return cli_usage_error(cmd, "--fanout %s: want a number of hosts, 1 or more", v), -1;
    h->discover.fanout = (int)n;
  }
  return 1;
}

volatile sig_atomic_t cli_discovery_signal;

void cli_hostopts_init(cli_hostopts *h) {
  lc_runtime_options_init(&h->runtime);
  lc_discover_options_init(&h->discover);
  h->discover.runtime = &h->runtime;
  h->discover.cancel = &cli_discovery_signal;
}

static void on_discovery_signal(int signo) { cli_discovery_signal = signo; }

void cli_discovery_catch(int on) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on ? on_discovery_signal : SIG_DFL; /* no SA_RESTART: nothing to restart */
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
}

int cli_discovery_fail(const char *cmd, int err, const char *what) {
  int sig = __atomic_load_n(&cli_discovery_signal, __ATOMIC_RELAXED);
  if (err != LC_ECANCELED || sig == 0)
    return cli_fail(cmd, err, what);
  fprintf(stderr, CLI_NAME " %s: stopped by %s during discovery: nothing was started\n", cmd,
          sig == SIGINT    ? "SIGINT"
          : sig == SIGTERM ? "SIGTERM"
                           : "SIGHUP");
  return 128 + sig;
}

const char *cli_hostopts_help(void) {
  return "  -F FILE                 ssh config file (default ~/.ssh/config)\n"
         "  --hosts LIST            hosts to use: alias,user@host:port,node[01-16],gpu[1-4,7]\n"
         "                          (pdsh-style ranges; a repeated host counts once; default:\n"
         "                          every Host alias of the ssh config)\n"
         "  --inventory FILE        hosts from a file: one a line (or a range), optional gpus=N\n"
         "                          slots=N\n"
         "  --accept-new-host-keys  add unknown host keys to known_hosts (changed keys are\n"
         "                          always refused)\n"
         "  --connect-timeout S     give up on a host after S seconds (default 10)\n"
         "  --facts-timeout S       give up on a host whose facts (host info, GPUs through\n"
         "                          nvidia-smi) take more than S seconds (default 30)\n"
         "  --fanout N              hosts worked on at once (default 64)\n"
         "  --heartbeat S           remote processes end S seconds after this program is gone\n"
         "                          (killed, or the network lost; default 60: twice the\n"
         "                          30 s keepalive, so that a shorter blip ends nothing)\n"
         "  --umask MODE            umask of the processes started on the hosts (default 077:\n"
         "                          what they write is yours alone; e.g. 022)\n";
}

int cli_hosts_connect(const char *cmd, cli_hostopts *h, lc_engine *engine, int slots, lc_group **g,
                      lc_discovery **d) {
  int r, have_hosts = h->discover.hosts || h->discover.inventory;
  size_t ready;
  h->discover.facts = 1;
  if ((r = lc_discover(g, d, engine, &h->discover)) < 0)
    return cli_discovery_fail(cmd, r, "cannot find the hosts");
  if (!have_hosts && lc_discovery_count(*d) == 0) { /* no host configured: this machine */
    lc_runtime *local = NULL;
    if ((r = lc_runtime_new_local(&local, engine, &h->runtime)) < 0 ||
        (r = lc_group_add(*g, local)) < 0) {
      lc_runtime_free(local);
      return cli_fail(cmd, r, "cannot use this machine");
    }
    cli_local_resources(local, slots);
    fprintf(stderr, "no hosts configured: using this machine\n");
    return CLI_EXIT_OK;
  }
  ready = lc_group_count(*g);
  fprintf(stderr, "hosts connected: %zu/%zu\n", ready, lc_discovery_count(*d));
  for (size_t i = 0; i < lc_discovery_count(*d); i++)
    if (lc_discovery_state(*d, i) != LC_HOST_READY)
      fprintf(stderr, "  %s: %s\n", lc_discovery_host(*d, i), lc_discovery_reason(*d, i));
  if (ready == 0)
    return cli_fail(cmd, LC_ECLOSED, "no host is reachable");
  return CLI_EXIT_OK;
}

void cli_local_resources(lc_runtime *rt, int slots) {
  lc_hostinfo *info = NULL;
  if (lc_hostinfo_local(&info) == 0) {
    int cores = (int)lc_hostinfo_cores(info);
    lc_runtime_set_resources(rt, (int)lc_hostinfo_gpu_count(info),
                             slots ? (cores > 0 ? cores : 1) : 0);
  }
  lc_hostinfo_free(info);
}

int cli_parse_peers(const char *cmd, const char *value, int *out) {
  if (strcmp(value, "owner") == 0)
    *out = LC_PEERS_OWNER;
  else if (strcmp(value, "owner+root") == 0)
    *out = LC_PEERS_OWNER_AND_ROOT;
  else if (strcmp(value, "any") == 0)
    *out = LC_PEERS_ANY;
  else
    return cli_usage_error(cmd, "--peers '%s': want owner, owner+root or any", value), -1;
  return 0;
}

char *lc__cli_sprintf(const char *fmt, ...) {
  va_list ap;
  char *s = NULL;
  int n;
  va_start(ap, fmt);
  n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || (s = malloc((size_t)n + 1)) == NULL)
    return NULL;
  va_start(ap, fmt);
  vsnprintf(s, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return s;
}
