/*
 * list.c - `lazyclusterctl list [--json]`: this user's clusters, one line each as their
 * supervisors summarize them. A cluster whose supervisor is gone is shown once (gone, failed or
 * expired, with why) and its state removed.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* What a cluster that is not alive is called, from why it ended. */
static const char *gone_state(const lc_control_entry *e) {
  if (e->ended == NULL)
    return "gone";
  return strncmp(e->ended, "its time was up", 15) == 0 ? "expired" : "failed";
}

static long long age_s(const lc_control_entry *e) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  long long now = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  return e->created_ms > 0 && now > e->created_ms ? (now - e->created_ms) / 1000 : 0;
}

static void trim(char *s) {
  size_t n = strlen(s);
  while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' '))
    s[--n] = '\0';
}

#define ROW "%-16s %-10s %-10s %-6s %-22s %-8s %s\n"

/* A summary line "NAME STATE UP/WANTED HOSTS MASTER AGE LEFT" in the table's columns. */
static void print_summary(char *line) {
  char *f[7], *save = NULL;
  int n = 0;
  for (char *t = strtok_r(line, " \t", &save); t != NULL && n < 7; t = strtok_r(NULL, " \t", &save))
    f[n++] = t;
  if (n < 7) {
    puts(line);
    return;
  }
  printf(ROW, f[0], f[1], f[2], f[3], f[4], f[5], f[6]);
}

int cli_list(int argc, char **argv) {
  lc_control_entry *e = NULL;
  size_t n = 0;
  int json = 0, r, first = 1;
  for (int i = 1; i < argc; i++) {
    if (cli_is_help(argv[i])) {
      printf(
          "usage: " CLI_NAME " list [--json]\n"
          "Lists this user's clusters: name, state, workers up/wanted, hosts, master address,\n"
          "age, time left. One whose supervisor is gone is shown once (gone, failed or\n"
          "expired, and why), then forgotten.\n\n"
          "  --json    a JSON array of objects: name, state, workers_up, workers_wanted, hosts,\n"
          "            master, age_s, time_left_s, supervisor_pid, type (why for gone ones)\n");
      return CLI_EXIT_OK;
    }
    if (strcmp(argv[i], "--json") == 0)
      json = 1;
    else
      return cli_usage_error("list", "unknown argument %s", argv[i]);
  }
  if ((r = lc_control_list(&e, &n, NULL, 1)) < 0)
    return cli_fail("list", r, "the state directory");
  if (json)
    fputs("[", stdout);
  else
    printf(ROW, "NAME", "STATE", "UP/WANTED", "HOSTS", "MASTER", "AGE", "LEFT");
  for (size_t i = 0; i < n; i++) {
    char *reply = NULL;
    const char *state = NULL, *why = NULL;
    int rr = -1;
    if (e[i].alive) {
      rr = lc_control_request(&reply, NULL, e[i].name, json ? "summary json" : "summary", 3000);
      if (rr < 0) {
        state = "busy"; /* alive, but no answer: starting, or a repair holds it */
        why = lc_error_last();
      }
    } else {
      state = gone_state(&e[i]);
      why = e[i].ended;
    }
    if (json) {
      fputs(first ? "\n  " : ",\n  ", stdout);
      if (rr == 0) {
        trim(reply);
        fputs(reply, stdout);
      } else {
        printf("{\"name\": ");
        cli_json_string(stdout, e[i].name);
        printf(", \"state\": \"%s\", \"why\": ", state);
        if (why != NULL)
          cli_json_string(stdout, why);
        else
          fputs("null", stdout);
        printf(", \"supervisor_pid\": %ld, \"age_s\": %lld, \"type\": ", e[i].pid, age_s(&e[i]));
        cli_json_string(stdout, e[i].type);
        fputs("}", stdout);
      }
    } else if (rr == 0) {
      trim(reply);
      print_summary(reply);
    } else {
      char age[32];
      snprintf(age, sizeof(age), "%llds", age_s(&e[i]));
      printf(ROW, e[i].name, state, "-", "-", "-", age, "-");
      if (why != NULL && why[0] != '\0')
        printf("  %s: %s\n", e[i].name, why);
    }
    first = 0;
    lc_free(reply);
  }
  if (json)
    fputs(first ? "]\n" : "\n]\n", stdout);
  lc_control_entries_free(e, n);
  return CLI_EXIT_OK;
}
