/*
 * status.c - the answers of the control socket: status (text and JSON), summary, env, scale,
 * stop. What they tell of the cluster comes through its public accessors only.
 */
#include "control_internal.h"
#include "hostinfo_internal.h" /* lc__json_append_string */
#include "lazycluster/group.h"
#include "lazycluster/runtime.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EVENTS_SHOWN 10

static const char *worker_state_name(int state) {
  switch (state) {
  case LC_WORKER_STARTING:
    return "starting";
  case LC_WORKER_RUNNING:
    return "running";
  case LC_WORKER_BACKOFF:
    return "backoff";
  case LC_WORKER_WAITING:
    return "waiting";
  case LC_WORKER_STOPPED:
    return "stopped";
  case LC_WORKER_FAILED:
    return "failed";
  default:
    return "unknown";
  }
}

/* How a worker's last end reads ("it exited with status 1"), or "" when it never ended. */
static void last_exit(char *out, size_t size, const lc_worker_status *ws) {
  if (!ws->ended)
    snprintf(out, size, "%s", "");
  else if (ws->last_end != NULL && ws->last_end[0])
    snprintf(out, size, "%s", ws->last_end);
  else if (ws->last_signal)
    snprintf(out, size, "it was ended by signal %d", ws->last_signal);
  else
    snprintf(out, size, "it exited with status %d", ws->last_status);
}

static const char *master_state(lc_control *ctl) {
  if (ctl->cluster == NULL)
    return "starting";
  return lc_cluster_master_process(ctl->cluster) != NULL ? "running" : "down";
}

static long master_pid(lc_control *ctl) {
  lc_process *p = ctl->cluster ? lc_cluster_master_process(ctl->cluster) : NULL;
  return p ? lc_process_pid(p) : 0;
}

static size_t worker_count(lc_control *ctl) {
  return ctl->cluster ? lc_cluster_worker_count(ctl->cluster) : 0;
}

static size_t host_count(lc_control *ctl) {
  lc_group *g = ctl->cluster ? lc_cluster_group(ctl->cluster) : NULL;
  return g ? lc_group_count(g) : 0;
}

static int worker_status(lc_control *ctl, size_t i, lc_worker_status *ws) {
  memset(ws, 0, sizeof(*ws));
  ws->version = LC_WORKER_STATUS_VERSION;
  return lc_cluster_worker_status(ctl->cluster, i, ws);
}

static int host_status(lc_control *ctl, size_t i, lc_host_status *hs) {
  memset(hs, 0, sizeof(*hs));
  hs->version = LC_HOST_STATUS_VERSION;
  return lc_cluster_host_status(ctl->cluster, i, hs);
}

static size_t workers_up(lc_control *ctl) {
  size_t up = 0, n = worker_count(ctl);
  for (size_t i = 0; i < n; i++) {
    lc_worker_status ws;
    if (worker_status(ctl, i, &ws) == 0 && ws.state == LC_WORKER_RUNNING)
      up++;
  }
  return up;
}

static long long time_left_ms(lc_control *ctl) {
  return ctl->cluster ? lc_cluster_time_left_ms(ctl->cluster) : -1;
}

static int json_key(lc__buf *b, const char *key, int first) {
  int r;
  if (!first && (r = lc__buf_puts(b, ",")) < 0)
    return r;
  if ((r = lc__json_append_string(b, key)) < 0)
    return r;
  return lc__buf_puts(b, ":");
}

static int json_str(lc__buf *b, const char *key, const char *value, int first) {
  int r;
  if ((r = json_key(b, key, first)) < 0)
    return r;
  return value ? lc__json_append_string(b, value) : lc__buf_puts(b, "null");
}

static int json_num(lc__buf *b, const char *key, long long value, int first) {
  int r;
  if ((r = json_key(b, key, first)) < 0)
    return r;
  return lc__buf_printf(b, "%lld", value);
}

static int master_json(lc_control *ctl, lc__buf *b) {
  lc_cluster *c = ctl->cluster;
  int r = 0;
  if ((r = lc__buf_puts(b, "{")) < 0 ||
      (r = json_str(b, "host", c ? lc_cluster_master_host(c) : NULL, 1)) < 0 ||
      (r = json_num(b, "port", c ? lc_cluster_master_port(c) : 0, 0)) < 0 ||
      (r = json_num(b, "pid", master_pid(ctl), 0)) < 0 ||
      (r = json_num(b, "restarts", c ? lc_cluster_master_restarts(c) : 0, 0)) < 0 ||
      (r = json_str(b, "state", master_state(ctl), 0)) < 0)
    return r;
  return lc__buf_puts(b, "}");
}

static int summary_json(lc_control *ctl, lc__buf *b) {
  lc_cluster *c = ctl->cluster;
  long long left = time_left_ms(ctl);
  char master[300] = "";
  int r;
  if (c != NULL && lc_cluster_master_port(c) > 0)
    snprintf(master, sizeof(master), "%s:%d", lc_cluster_master_host(c), lc_cluster_master_port(c));
  if ((r = lc__buf_puts(b, "{")) < 0 || (r = json_str(b, "name", ctl->name, 1)) < 0 ||
      (r = json_str(b, "state", ctl->state, 0)) < 0 ||
      (r = json_num(b, "workers_up", (long long)workers_up(ctl), 0)) < 0 ||
      (r = json_num(b, "workers_wanted", (long long)worker_count(ctl), 0)) < 0 ||
      (r = json_num(b, "hosts", (long long)host_count(ctl), 0)) < 0 ||
      (r = json_str(b, "master", master[0] ? master : NULL, 0)) < 0 ||
      (r = json_num(b, "age_s", (lc__control_wall_ms() - ctl->created_ms) / 1000, 0)) < 0 ||
      (r = json_num(b, "time_left_s", left < 0 ? -1 : left / 1000, 0)) < 0 ||
      (r = json_num(b, "supervisor_pid", (long long)getpid(), 0)) < 0 ||
      (r = json_str(b, "type", ctl->type, 0)) < 0)
    return r;
  return lc__buf_puts(b, "}\n");
}

int lc__control_summary(lc_control *ctl, lc__buf *b, int json) {
  lc_cluster *c = ctl->cluster;
  long long left = time_left_ms(ctl);
  char age[32], lefts[32] = "-", master[300] = "-";
  if (json)
    return summary_json(ctl, b);
  lc__control_age(age, sizeof(age), lc__control_wall_ms() - ctl->created_ms, 1);
  if (left >= 0)
    lc__control_age(lefts, sizeof(lefts), left, 1);
  if (c != NULL && lc_cluster_master_port(c) > 0)
    snprintf(master, sizeof(master), "%s:%d", lc_cluster_master_host(c), lc_cluster_master_port(c));
  return lc__buf_printf(b, "%s %s %zu/%zu %zu %s %s %s\n", ctl->name, ctl->state, workers_up(ctl),
                        worker_count(ctl), host_count(ctl), master, age, lefts);
}

int lc__control_status_json(lc_control *ctl, lc__buf *b) {
  lc__buf ev = {0};
  long long now = lc__control_wall_ms(), left = time_left_ms(ctl);
  size_t n = worker_count(ctl), nh = host_count(ctl);
  int r;
  if ((r = lc__buf_puts(b, "{")) < 0 || (r = json_str(b, "name", ctl->name, 1)) < 0 ||
      (r = json_str(b, "state", ctl->state, 0)) < 0 || (r = json_str(b, "why", ctl->why, 0)) < 0 ||
      (r = json_str(b, "type", ctl->type, 0)) < 0 ||
      (r = json_num(b, "supervisor_pid", (long long)getpid(), 0)) < 0 ||
      (r = json_num(b, "age_s", (now - ctl->created_ms) / 1000, 0)) < 0 ||
      (r = json_num(b, "time_left_s", left < 0 ? -1 : left / 1000, 0)) < 0 ||
      (r = json_key(b, "master", 0)) < 0 || (r = master_json(ctl, b)) < 0 ||
      (r = json_key(b, "workers", 0)) < 0 || (r = lc__buf_puts(b, "[")) < 0)
    goto out;
  for (size_t i = 0; i < n; i++) {
    lc_worker_status ws;
    char end[512];
    if (worker_status(ctl, i, &ws) < 0)
      continue;
    last_exit(end, sizeof(end), &ws);
    if ((i > 0 && (r = lc__buf_puts(b, ",")) < 0) || (r = lc__buf_puts(b, "{")) < 0 ||
        (r = json_num(b, "index", (long long)i, 1)) < 0 ||
        (r = json_str(b, "host", ws.host, 0)) < 0 || (r = json_num(b, "port", ws.port, 0)) < 0 ||
        (r = json_key(b, "gpu", 0)) < 0 ||
        (r = ws.gpu >= 0 ? lc__buf_printf(b, "%d", ws.gpu) : lc__buf_puts(b, "null")) < 0 ||
        (r = json_str(b, "state", worker_state_name(ws.state), 0)) < 0 ||
        (r = json_num(b, "pid", ws.pid, 0)) < 0 ||
        (r = json_num(b, "restarts", ws.restarts, 0)) < 0 ||
        (r = json_num(b, "uptime_s", ws.started_ms > 0 ? (now - ws.started_ms) / 1000 : 0, 0)) <
            0 ||
        (r = json_str(b, "last_exit", end[0] ? end : NULL, 0)) < 0 ||
        (r = lc__buf_puts(b, "}")) < 0)
      goto out;
  }
  if ((r = lc__buf_puts(b, "]")) < 0 || (r = json_key(b, "hosts", 0)) < 0 ||
      (r = lc__buf_puts(b, "[")) < 0)
    goto out;
  for (size_t i = 0; i < nh; i++) {
    lc_host_status hs;
    if (host_status(ctl, i, &hs) < 0)
      continue;
    if ((i > 0 && (r = lc__buf_puts(b, ",")) < 0) || (r = lc__buf_puts(b, "{")) < 0 ||
        (r = json_str(b, "name", hs.name, 1)) < 0 || (r = json_key(b, "connected", 0)) < 0 ||
        (r = lc__buf_puts(b, hs.connected ? "true" : "false")) < 0 ||
        (r = json_num(b, "lost_s", hs.lost_ms > 0 ? (now - hs.lost_ms) / 1000 : 0, 0)) < 0 ||
        (r = json_key(b, "reconnecting", 0)) < 0 ||
        (r = lc__buf_puts(b, hs.reconnecting ? "true" : "false")) < 0 ||
        (r = json_num(b, "workers", hs.workers, 0)) < 0 || (r = lc__buf_puts(b, "}")) < 0)
      goto out;
  }
  if ((r = lc__buf_puts(b, "]")) < 0 || (r = json_key(b, "events", 0)) < 0 ||
      (r = lc__buf_puts(b, "[")) < 0 || (r = lc__control_last_events(ctl, &ev, EVENTS_SHOWN)) < 0)
    goto out;
  for (char *line = ev.data, *next; line != NULL && *line; line = next) {
    char *nl = strchr(line, '\n');
    next = nl ? nl + 1 : line + strlen(line);
    if (nl)
      *nl = '\0';
    if ((line != ev.data && (r = lc__buf_puts(b, ",")) < 0) ||
        (r = lc__json_append_string(b, line)) < 0)
      goto out;
  }
  r = lc__buf_puts(b, "]}\n");
out:
  lc__buf_free(&ev);
  return r;
}

int lc__control_status_text(lc_control *ctl, lc__buf *b) {
  lc_cluster *c = ctl->cluster;
  lc__buf ev = {0};
  long long now = lc__control_wall_ms(), left = time_left_ms(ctl);
  size_t n = worker_count(ctl), nh = host_count(ctl);
  char age[32], lefts[32] = "no limit";
  int r;
  lc__control_age(age, sizeof(age), now - ctl->created_ms, 1);
  if (left >= 0)
    lc__control_age(lefts, sizeof(lefts), left, 1);
  if ((r = lc__buf_printf(b, "cluster     %s%s%s%s\nstate       %s%s%s\n", ctl->name,
                          ctl->type[0] ? " (" : "", ctl->type, ctl->type[0] ? ")" : "", ctl->state,
                          ctl->why ? ": " : "", ctl->why ? ctl->why : "")) < 0 ||
      (r = lc__buf_printf(b, "supervisor  pid %ld, up %s\ntime left   %s\n", (long)getpid(), age,
                          lefts)) < 0)
    goto out;
  if (c == NULL || lc_cluster_master_port(c) <= 0)
    r = lc__buf_puts(b, "master      not started yet\n");
  else
    r = lc__buf_printf(b, "master      localhost:%d on %s, pid %ld, %s, restarts %d\n",
                       lc_cluster_master_port(c), lc_cluster_master_host(c), master_pid(ctl),
                       master_state(ctl), lc_cluster_master_restarts(c));
  if (r < 0)
    goto out;
  if ((r = lc__buf_printf(b, "workers     %zu/%zu running\n", workers_up(ctl), n)) < 0)
    goto out;
  if (n > 0 &&
      (r = lc__buf_printf(b, "  %-10s %-16s %-6s %-4s %-9s %-8s %-8s %-7s %s\n", "WORKER", "HOST",
                          "PORT", "GPU", "STATE", "PID", "RESTARTS", "UPTIME", "LAST EXIT")) < 0)
    goto out;
  for (size_t i = 0; i < n; i++) {
    lc_worker_status ws;
    char tag[32], gpu[16] = "-", up[32] = "-", end[512];
    if (worker_status(ctl, i, &ws) < 0)
      continue;
    snprintf(tag, sizeof(tag), "worker-%zu", i);
    if (ws.gpu >= 0)
      snprintf(gpu, sizeof(gpu), "%d", ws.gpu);
    if (ws.started_ms > 0 && (ws.state == LC_WORKER_RUNNING || ws.state == LC_WORKER_STARTING))
      lc__control_age(up, sizeof(up), now - ws.started_ms, 1);
    last_exit(end, sizeof(end), &ws);
    if ((r = lc__buf_printf(b, "  %-10s %-16s %-6d %-4s %-9s %-8ld %-8d %-7s %s\n", tag,
                            ws.host ? ws.host : "-", ws.port, gpu, worker_state_name(ws.state),
                            ws.pid, ws.restarts, up, end[0] ? end : "-")) < 0)
      goto out;
  }
  if (nh > 0 && (r = lc__buf_printf(b, "hosts\n  %-16s %-8s %s\n", "HOST", "WORKERS", "STATE")) < 0)
    goto out;
  for (size_t i = 0; i < nh; i++) {
    lc_host_status hs;
    char lost[32] = "";
    if (host_status(ctl, i, &hs) < 0)
      continue;
    if (hs.lost_ms > 0)
      lc__control_age(lost, sizeof(lost), now - hs.lost_ms, 1);
    if (hs.connected)
      r = lc__buf_printf(b, "  %-16s %-8d connected\n", hs.name, hs.workers);
    else
      r = lc__buf_printf(b, "  %-16s %-8d lost %s%s%s\n", hs.name, hs.workers, lost[0] ? lost : "",
                         lost[0] ? " ago" : "", hs.reconnecting ? ", reconnecting" : "");
    if (r < 0)
      goto out;
  }
  if ((r = lc__control_last_events(ctl, &ev, EVENTS_SHOWN)) < 0)
    goto out;
  if (ev.len > 0 && (r = lc__buf_puts(b, "events\n")) < 0)
    goto out;
  for (char *line = ev.data, *next; line != NULL && *line; line = next) {
    char *nl = strchr(line, '\n'), shown[2048];
    next = nl ? nl + 1 : line + strlen(line);
    if (lc_control_log_format(shown, sizeof(shown), line, nl ? (size_t)(nl - line) : strlen(line),
                              1, 0, NULL) < 0)
      continue;
    if ((r = lc__buf_printf(b, "  %s\n", shown)) < 0)
      goto out;
  }
out:
  lc__buf_free(&ev);
  return r;
}

int lc__control_env(lc_control *ctl, lc__buf *b) {
  lc_cluster *c = ctl->cluster;
  int r = 0;
  if (c != NULL && lc_cluster_master_port(c) > 0 &&
      (r = lc__buf_printf(b,
                          "export LAZYCLUSTER_MASTER_ADDR=localhost\n"
                          "export LAZYCLUSTER_MASTER_PORT=%d\n",
                          lc_cluster_master_port(c))) < 0)
    return r;
  for (size_t i = 0; ctl->env != NULL && ctl->env[i] != NULL; i++) {
    const char *eq = strchr(ctl->env[i], '=');
    if ((r = lc__buf_printf(b, "export %.*s=", (int)(eq - ctl->env[i]), ctl->env[i])) < 0 ||
        (r = lc__buf_shell_quote(b, eq + 1)) < 0 || (r = lc__buf_puts(b, "\n")) < 0)
      return r;
  }
  return r;
}

/* "error TEXT\n" with TEXT on one line. */
static int error_reply(lc__buf *out, const char *text) {
  int r;
  if ((r = lc__buf_puts(out, "error ")) < 0)
    return r;
  for (const char *p = text; *p; p++)
    if ((r = lc__buf_append(out, *p == '\n' || *p == '\r' ? " " : p, 1)) < 0)
      return r;
  return lc__buf_puts(out, "\n");
}

static int scale(lc_control *ctl, const char *arg, lc__buf *out) {
  long long n = lc__decimal(arg, strlen(arg), 6);
  char msg[1400];
  int r;
  if (n < 0) {
    snprintf(msg, sizeof(msg), "scale wants a number of workers (0 or more), not '%.80s'", arg);
    return error_reply(out, msg);
  }
  if (ctl->cluster == NULL)
    return error_reply(out, "the cluster is still starting: it cannot be scaled yet");
  lc_control_log_event(ctl, "scale to %lld workers asked", n);
  if ((r = lc_cluster_scale(ctl->cluster, (int)n)) < 0) {
    snprintf(msg, sizeof(msg), "scaling to %lld workers failed: %s", n, lc_error_last());
    lc_control_log_event(ctl, "%s", msg);
    return error_reply(out, msg);
  }
  lc_control_log_event(ctl, "scaled to %lld workers", n);
  return lc__buf_printf(out, "ok\nscaled to %lld workers\n", n);
}

int lc__control_answer(lc_control *ctl, const char *req, lc__buf *out) {
  int r;
  if (strcmp(req, "stop") == 0)
    return 1;
  if (strcmp(req, "status") == 0 || strcmp(req, "status json") == 0 ||
      strcmp(req, "summary") == 0 || strcmp(req, "summary json") == 0 || strcmp(req, "env") == 0) {
    lc__buf body = {0};
    if (strcmp(req, "status") == 0)
      r = lc__control_status_text(ctl, &body);
    else if (strcmp(req, "status json") == 0)
      r = lc__control_status_json(ctl, &body);
    else if (strcmp(req, "env") == 0)
      r = lc__control_env(ctl, &body);
    else
      r = lc__control_summary(ctl, &body, strcmp(req, "summary json") == 0);
    if (r >= 0 && (r = lc__buf_puts(out, "ok\n")) >= 0 && body.len > 0)
      r = lc__buf_append(out, body.data, body.len);
    lc__buf_free(&body);
    return r < 0 ? r : 0;
  }
  if (strncmp(req, "scale ", 6) == 0)
    return scale(ctl, req + 6, out) < 0 ? -ENOMEM : 0;
  {
    char msg[300], shown[100];
    size_t k = 0;
    for (const char *p = req; *p && k < sizeof(shown) - 4; p++)
      shown[k++] = (unsigned char)*p >= 0x20 && *p != 0x7f ? *p : '?';
    if (*req && strlen(req) > k)
      shown[k++] = '.', shown[k++] = '.', shown[k++] = '.';
    shown[k] = '\0';
    snprintf(msg, sizeof(msg),
             "unknown request '%s' (want: status, status json, summary, summary json, env, "
             "scale N, stop)",
             shown);
    return error_reply(out, msg) < 0 ? -ENOMEM : 0;
  }
}
