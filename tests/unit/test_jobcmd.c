/*
 * test_jobcmd.c - the pure parts of the job queue (src/jobs/command.c, src/jobs/joblog.c) and the
 * template scanner under them (src/template.c): a job's command with its placeholders, quoting
 * checked by running the command through this machine's /bin/sh; the append rule; a worker's
 * command; a pool job's line; and GNU parallel's joblog, compared with lines GNU parallel itself
 * writes here, read back by it (--resume, --resume-failed) and read from it.
 */
#include "jobs/jobs_internal.h"
#include "lc_test.h"

#include "../launchers/launchers.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------------------------ */

/* Runs cmd with /bin/sh -c (through popen) and returns its stdout (at most 8 KiB), or NULL. */
static char *sh_out(const char *cmd) {
  static char buf[8192];
  size_t n = 0, got;
  FILE *f = popen(cmd, "r");
  if (f == NULL)
    return NULL;
  while (n < sizeof(buf) - 1 && (got = fread(buf + n, 1, sizeof(buf) - 1 - n, f)) > 0)
    n += got;
  buf[n] = '\0';
  if (pclose(f) != 0)
    return NULL;
  return buf;
}

/* The whole of a file (*len bytes, NUL-terminated), or NULL. */
static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  char *s = NULL;
  long n;
  if (f == NULL)
    return NULL;
  if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
      (s = malloc((size_t)n + 1)) != NULL) {
    *len = fread(s, 1, (size_t)n, f);
    s[*len] = '\0';
  }
  fclose(f);
  return s;
}

static int spit(const char *path, const char *data, size_t len) {
  FILE *f = fopen(path, "wb");
  int ok;
  if (f == NULL)
    return -1;
  ok = fwrite(data, 1, len, f) == len;
  return fclose(f) == 0 && ok ? 0 : -1;
}

static char tmpdir[64];

static const char *tmp_path(const char *name) {
  static char path[4][128];
  static int i;
  if (tmpdir[0] == '\0') {
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/lc_jobcmd_XXXXXX");
    if (mkdtemp(tmpdir) == NULL)
      abort();
  }
  i = (i + 1) % 4;
  snprintf(path[i], sizeof(path[i]), "%s/%s", tmpdir, name);
  return path[i];
}

/* Runs GNU parallel (it must be installed: .ci/deps) with args in the test's directory, its
 * stdout returned (its exit status counts the jobs that failed: some fail on purpose). */
static char *parallel(const char *args) {
  char cmd[2048];
  snprintf(cmd, sizeof(cmd), "cd %s && { parallel --will-cite %s; } 2>/dev/null; true", tmpdir,
           args);
  return sh_out(cmd);
}

static const lc__job_place lab2 = {.host = "lab'2", .slot = 3, .gpu = 1, .workdir = "/tmp/w $x"};

/* ---- commands ----------------------------------------------------------------------------- */

static void test_placeholders_quoted(void) {
  const char *args[] = {"a b", "it's", "$HOME `id`", "back\\slash \\n", "", "\"dq\""};
  lc__buf b = {0};
  char *out;
  LC_REQUIRE_OK(lc__job_command(&b, "x {1} {#} {gpu} {host} {slot} {workdir}", args, 2, 5, &lab2));
  LC_CHECK_STR(b.data, "x 'a b' '5' '1' 'lab'\\''2' '3' '/tmp/w $x'");
  lc__buf_free(&b);

  /* each value reaches the command as one word, whatever it holds */
  LC_REQUIRE_OK(lc__job_command(&b, "printf '[%s]\\n' {1} {2} {3} {4} {5} {6} {host} {workdir}",
                                args, 6, 1, &lab2));
  out = sh_out(b.data);
  LC_CHECK_STR(out, "[a b]\n[it's]\n[$HOME `id`]\n[back\\slash \\n]\n[]\n[\"dq\"]\n[lab'2]\n"
                    "[/tmp/w $x]\n");
  lc__buf_free(&b);

  /* {} is the arguments joined by single blanks, one word; none is one empty word */
  LC_REQUIRE_OK(lc__job_command(&b, "printf '[%s]\\n' {}", args, 3, 1, &lab2));
  LC_CHECK_STR(sh_out(b.data), "[a b it's $HOME `id`]\n");
  lc__buf_free(&b);
  LC_REQUIRE_OK(lc__job_command(&b, "printf '[%s]\\n' {}", args, 0, 1, &lab2));
  LC_CHECK_STR(sh_out(b.data), "[]\n");
  lc__buf_free(&b);

  /* a place without a GPU or a working directory */
  lc__job_place none = {.host = "h", .slot = 0, .gpu = -1, .workdir = NULL};
  LC_REQUIRE_OK(lc__job_command(&b, "{gpu}:{workdir}", NULL, 0, 1, &none));
  LC_CHECK_STR(b.data, "'-1':''");
  lc__buf_free(&b);

  /* literal braces, and what out held before stays */
  lc__buf_puts(&b, "pre ");
  LC_REQUIRE_OK(lc__job_command(&b, "awk '{{print $1}}' {1}", args, 1, 1, &lab2));
  LC_CHECK_STR(b.data, "pre awk '{print $1}' 'a b'");
  lc__buf_free(&b);
}

static void test_placeholder_errors(void) {
  const char *args[] = {"a", "b"};
  lc__buf b = {0};
  lc__buf_puts(&b, "kept");

  LC_CHECK(lc__job_command(&b, "run {3} now", args, 2, 5, &lab2) == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "\"run {3} now\"");
  LC_CHECK_CONTAINS(lc_error_last(), "{3}: job 5 has 2 arguments");
  /* checking a template only (no place) still counts the arguments */
  LC_CHECK(lc__job_command(&b, "run {2}", args, 1, 3, NULL) == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "{2}: job 3 has 1 argument");
  LC_CHECK(lc__job_command(&b, "run {1}", NULL, 0, 7, NULL) == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "{1}: job 7 has 0 arguments");

  LC_CHECK(lc__job_command(&b, "run {gpus} x", args, 2, 1, &lab2) == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "template \"run {gpus} x\": unknown placeholder {gpus}");
  LC_CHECK(lc__job_command(&b, "run {0}", args, 2, 1, &lab2) == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "unknown placeholder {0}");
  LC_CHECK(lc__job_command(&b, "run {01}", args, 2, 1, &lab2) == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "unknown placeholder {01}");
  LC_CHECK(lc__job_command(&b, "run { 1}", args, 2, 1, &lab2) == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "unknown placeholder { 1}");

  LC_CHECK(lc__job_command(&b, "echo } x", args, 2, 1, &lab2) == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "template \"echo } x\": a lone }");
  LC_CHECK(lc__job_command(&b, "echo {1 x", args, 2, 1, &lab2) == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "template \"echo {1 x\": { without }");
  LC_CHECK(lc__job_command(&b, "echo {", args, 2, 1, &lab2) == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "{ without }");
  /* a failed call leaves out as it was */
  LC_CHECK_STR(b.data, "kept");
  LC_CHECK(b.len == 4);
  lc__buf_free(&b);
}

/* lc_jobs_new checks a template's placeholder names before it looks at a host: an unknown one is
 * an error that quotes it; {N} passes (only a job can say whether it has N arguments). */
static void test_template_checked_at_new(void) {
  lc_engine *e = NULL;
  lc_group *g = NULL;
  lc_jobs *q = NULL;
  lc_jobs_options o = LC_JOBS_OPTIONS_INIT;

  LC_CHECK_OK(lc__job_command_check("run {1} {2} {} {#} {gpu} {host} {slot} {workdir} {{x}}"));
  LC_CHECK(lc__job_command_check("run {1} {nope}") == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "template \"run {1} {nope}\": unknown placeholder {nope}");
  LC_REQUIRE_OK(lc_engine_new(&e, NULL));
  LC_REQUIRE_OK(lc_group_new(&g, e, NULL)); /* no host: past the templates, lc_jobs_new fails */
  o.command = "echo {1} {nope}";
  LC_CHECK(lc_jobs_new(&q, g, &o) == -EINVAL && q == NULL);
  LC_CHECK_CONTAINS(lc_error_last(), "unknown placeholder {nope}");
  o.command = "echo {7}";
  LC_CHECK(lc_jobs_new(&q, g, &o) == -EINVAL && q == NULL);
  LC_CHECK_CONTAINS(lc_error_last(), "no host");
  o.command = NULL;
  o.worker_cmd = "work --on {gpu} {1}";
  LC_CHECK(lc_jobs_new(&q, g, &o) == -EINVAL && q == NULL);
  LC_CHECK_CONTAINS(lc_error_last(), "unknown placeholder {1}");
  o.worker_cmd = "work --on {gpu} {host}";
  LC_CHECK(lc_jobs_new(&q, g, &o) == -EINVAL && q == NULL);
  LC_CHECK_CONTAINS(lc_error_last(), "no host");
  lc_group_free(g);
  lc_engine_free(e);
}

static void test_append_rule(void) {
  const char *args[] = {"a", "b c", "it's"};
  lc__buf b = {0};
  /* no {} nor {N}: each argument follows, quoted */
  LC_REQUIRE_OK(lc__job_command(&b, "echo", args, 3, 1, &lab2));
  LC_CHECK_STR(b.data, "echo 'a' 'b c' 'it'\\''s'");
  LC_CHECK_STR(sh_out(b.data), "a b c it's\n");
  lc__buf_free(&b);
  /* {#} and the place placeholders are not arguments */
  LC_REQUIRE_OK(lc__job_command(&b, "echo {#} {gpu}", args, 1, 4, &lab2));
  LC_CHECK_STR(b.data, "echo '4' '1' 'a'");
  lc__buf_free(&b);
  /* {} or any {N} takes the arguments where it stands */
  LC_REQUIRE_OK(lc__job_command(&b, "echo {} .", args, 2, 1, &lab2));
  LC_CHECK_STR(b.data, "echo 'a b c' .");
  lc__buf_free(&b);
  LC_REQUIRE_OK(lc__job_command(&b, "echo {2} .", args, 3, 1, &lab2));
  LC_CHECK_STR(b.data, "echo 'b c' .");
  lc__buf_free(&b);
  /* {{}} is a literal {}, not the arguments: they are appended */
  LC_REQUIRE_OK(lc__job_command(&b, "find . -exec x {{}} ;", args, 1, 1, &lab2));
  LC_CHECK_STR(b.data, "find . -exec x {} ; 'a'");
  lc__buf_free(&b);
  /* nothing to append: the template alone */
  LC_REQUIRE_OK(lc__job_command(&b, "true", NULL, 0, 1, &lab2));
  LC_CHECK_STR(b.data, "true");
  lc__buf_free(&b);
  LC_REQUIRE_OK(lc__job_command(&b, "", NULL, 0, 1, &lab2));
  LC_CHECK_STR(b.data, "");
  lc__buf_free(&b);
}

static void test_worker_command(void) {
  lc__buf b = {0};
  LC_REQUIRE_OK(lc__job_worker_command(
      &b, "python w.py --gpu {gpu} --host {host} --slot {slot} --dir {workdir}", &lab2));
  LC_CHECK_STR(b.data, "python w.py --gpu '1' --host 'lab'\\''2' --slot '3' --dir '/tmp/w $x'");
  lc__buf_free(&b);
  /* checked without a place */
  LC_REQUIRE_OK(lc__job_worker_command(&b, "w {gpu} {{x}}", NULL));
  LC_CHECK_STR(b.data, "w '0' {x}");
  lc__buf_free(&b);
  /* a worker has no job: its placeholders are unknown, and no argument is appended */
  LC_CHECK(lc__job_worker_command(&b, "w {}", &lab2) == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "template \"w {}\": unknown placeholder {}");
  LC_CHECK_CONTAINS(lc_error_last(), "a worker command knows {gpu} {host} {slot} {workdir}");
  LC_CHECK(lc__job_worker_command(&b, "w {#}", &lab2) == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "unknown placeholder {#}");
  LC_CHECK(lc__job_worker_command(&b, "w {1}", &lab2) == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "unknown placeholder {1}");
  LC_CHECK(b.len == 0);
  lc__buf_free(&b);
}

static void test_pool_line(void) {
  const char *args[] = {"a", "b c", "", "it's"};
  const char *bad[] = {"ok", "two\nlines"};
  lc__buf b = {0};
  LC_REQUIRE_OK(lc__job_line(&b, args, 4));
  LC_CHECK_STR(b.data, "a b c  it's");
  lc__buf_free(&b);
  LC_REQUIRE_OK(lc__job_line(&b, NULL, 0));
  LC_CHECK_STR(b.data, "");
  lc__buf_free(&b);
  lc__buf_puts(&b, "kept");
  LC_CHECK(lc__job_line(&b, bad, 2) == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "argument 2 \"two\\n...\" holds a newline");
  LC_CHECK(strchr(lc_error_last(), '\n') == NULL);
  LC_CHECK_STR(b.data, "kept");
  lc__buf_free(&b);
}

/* The `command` cluster type's templates (launchers/command.c) go through the same scanner and
 * say what they said before. */
static void test_command_type_templates(void) {
  lc_worker_info w = {.index = 3,
                      .count = 8,
                      .host = "lab'2",
                      .port = 60001,
                      .gpu = 1,
                      .master_port = 60000,
                      .workdir = "/w",
                      .aux_port = 60002};
  char *out = NULL;
  LC_REQUIRE_OK(lc__template_expand(&out, "m {master_port} {host} {{}}", 60000, NULL, "lab1"));
  LC_CHECK_STR(out, "m '60000' 'lab1' {}");
  free(out);
  LC_REQUIRE_OK(lc__template_expand(
      &out, "w {worker_port} {aux_port} {worker_index}/{worker_count} {gpu} {host} {workdir}",
      60000, &w, NULL));
  LC_CHECK_STR(out, "w '60001' '60002' '3'/'8' '1' 'lab'\\''2' '/w'");
  free(out);
  LC_REQUIRE_OK(lc__template_expand(&out, "", 1, NULL, "h"));
  LC_CHECK_STR(out, "");
  free(out);
  LC_CHECK(lc__template_expand(&out, "m {worker_port}", 1, NULL, "h") == -EINVAL);
  LC_CHECK_STR(lc_error_last(), "template \"m {worker_port}\": unknown placeholder {worker_port} "
                                "(a master knows {master_port} and {host})");
  LC_CHECK(out == NULL);
  LC_CHECK(lc__template_expand(&out, "w {x}", 1, &w, NULL) == -EINVAL);
  LC_CHECK_STR(lc_error_last(), "template \"w {x}\": unknown placeholder {x}");
  LC_CHECK(lc__template_expand(&out, "m }", 1, NULL, "h") == -EINVAL);
  LC_CHECK_STR(lc_error_last(), "template \"m }\": a lone } (write }} for a brace)");
  LC_CHECK(lc__template_expand(&out, "m {", 1, NULL, "h") == -EINVAL);
  LC_CHECK_STR(lc_error_last(), "template \"m {\": { without } (write {{ for a brace)");
}

/* ---- joblog ------------------------------------------------------------------------------- */

/* The fields of a joblog line (a copy), split at its first 8 tabs. */
typedef struct jl_fields {
  char *copy;
  const char *f[9];
  size_t command_len;
} jl_fields;

static int split_line(jl_fields *x, const char *line, size_t len) {
  char *p;
  x->copy = malloc(len + 1);
  memcpy(x->copy, line, len);
  x->copy[len] = '\0';
  p = x->copy;
  for (int i = 0; i < 8; i++) {
    char *tab = memchr(p, '\t', (size_t)(x->copy + len - p));
    if (tab == NULL)
      return -1;
    *tab = '\0';
    x->f[i] = p;
    p = tab + 1;
  }
  x->f[8] = p;
  x->command_len = (size_t)(x->copy + len - p);
  return 0;
}

/* Each line GNU parallel wrote, made again by our formatter from its fields, byte for byte. */
static void test_joblog_format_as_parallel(void) {
  const char *jl = tmp_path("parallel.jl");
  char args[512], *text, *p;
  size_t len, lines = 0;
  lc__buf ours = {0};
  /* plain words, blanks and quotes, a tab, a newline in the command, exit 3, a signal */
  snprintf(args, sizeof(args),
           "--joblog %s -k 'case {} in 3) exit 3;; k) kill -9 $$;; esac; echo {}' ::: a 'b c' "
           "\"d'e\" 'f\tg' 3 k; "
           "parallel --will-cite --joblog +%s 'echo x\necho {}' ::: y",
           jl, jl);
  LC_REQUIRE(parallel(args) != NULL);
  LC_REQUIRE((text = slurp(jl, &len)) != NULL);
  LC_REQUIRE(strncmp(text, LC__JOBLOG_HEADER "\n", strlen(LC__JOBLOG_HEADER) + 1) == 0);
  p = text + strlen(LC__JOBLOG_HEADER) + 1;
  while (p < text + len) {
    char *nl = memchr(p, '\n', (size_t)(text + len - p)), *cmd;
    jl_fields x;
    lc__joblog_entry e;
    LC_REQUIRE(nl != NULL);
    LC_REQUIRE(split_line(&x, p, (size_t)(nl - p)) == 0);
    /* the command as it was: parallel wrote its newlines as NUL bytes */
    cmd = malloc(x.command_len + 1);
    memcpy(cmd, x.f[8], x.command_len + 1);
    for (size_t i = 0; i < x.command_len; i++)
      if (cmd[i] == '\0')
        cmd[i] = '\n';
    e = (lc__joblog_entry){.seq = strtoul(x.f[0], NULL, 10),
                           .host = lines % 2 ? NULL : x.f[1],
                           .start = strtod(x.f[2], NULL),
                           /* the run took some fraction of the millisecond parallel wrote */
                           .runtime = strtod(x.f[3], NULL) + 0.0004,
                           .send = strtoull(x.f[4], NULL, 10),
                           .receive = strtoull(x.f[5], NULL, 10),
                           .exitval = atoi(x.f[6]),
                           .signal = atoi(x.f[7]),
                           .command = cmd};
    ours.len = 0;
    LC_CHECK_OK(lc__joblog_format(&ours, &e));
    LC_CHECK(ours.len == (size_t)(nl + 1 - p) && memcmp(ours.data, p, ours.len) == 0);
    if (ours.len != (size_t)(nl + 1 - p) || memcmp(ours.data, p, ours.len) != 0)
      fprintf(stderr, "  parallel: %.*s  ours:     %s", (int)(nl + 1 - p), p, ours.data);
    free(cmd);
    free(x.copy);
    lines++;
    p = nl + 1;
  }
  LC_CHECK(lines == 7);
  /* the fields that vary: Exitval 3; a signal; a newline written as NUL; a tab kept */
  LC_CHECK(memmem(text, len, "\t3\t0\tcase 3 in", 14) != NULL);
  LC_CHECK(memmem(text, len, "\t0\t9\tcase k in", 14) != NULL);
  LC_CHECK(memmem(text, len, "echo x\0echo y\n", 14) != NULL);
  LC_CHECK(memmem(text, len, "f\tg", 3) != NULL);
  lc__buf_free(&ours);
  free(text);
}

static void test_joblog_format_fields(void) {
  lc__buf b = {0};
  lc__joblog_entry e = {.seq = 12,
                        .host = "lab3",
                        .start = 1700000000.12345,
                        .runtime = 1234.5678,
                        .send = 10,
                        .receive = 20,
                        .exitval = -1,
                        .signal = 15,
                        .command = "a\tb\nc"};
  LC_REQUIRE_OK(lc__joblog_format(&b, &e));
  LC_CHECK(b.len == strlen("12\tlab3\t1700000000.123\t  1234.567\t10\t20\t-1\t15\ta\tb") + 3);
  LC_CHECK(memcmp(b.data, "12\tlab3\t1700000000.123\t  1234.567\t10\t20\t-1\t15\ta\tb\0c\n",
                  b.len) == 0);
  /* a run time is cut to the millisecond, not rounded; a host is never empty */
  b.len = 0;
  e = (lc__joblog_entry){.seq = 1, .host = "", .start = 5, .runtime = 0.0019, .command = "x"};
  LC_REQUIRE_OK(lc__joblog_format(&b, &e));
  LC_CHECK_STR(b.data, "1\t:\t5.000\t     0.001\t0\t0\t0\t0\tx\n");
  lc__buf_free(&b);
}

static const char joblog_text[] =
    LC__JOBLOG_HEADER "\n"
                      "1\t:\t1700000000.100\t     0.010\t0\t2\t0\t0\techo a\n"
                      "2\t:\t1700000000.200\t     0.010\t0\t2\t1\t0\techo b\n"
                      "3\tlab1\t1700000000.300\t     0.010\t0\t0\t0\t9\tsleep 9\n"
                      "7\t4/u@lab2\t1700000000.4\t0.5\t1\t2\t-1\t15\tx\ty\n"
                      "2\t:\t1700000001.200\t     0.010\t0\t2\t0\t0\techo b\n"
                      "5\t:\t1700000001.500\t     0.010\t0\t2\t0\t0\t\n"
                      "1\t:\t1700000002.100\t     0.010\t0\t2\t1\t0\techo a\n";

static void test_joblog_parse_and_skips(void) {
  lc__joblog_record rec = {0};
  LC_REQUIRE_OK(lc__joblog_parse(&rec, joblog_text, strlen(joblog_text), "jl"));
  LC_CHECK(rec.n == 5);
  LC_CHECK(rec.max_seq == 7);
  LC_CHECK(rec.max_seq_line == 5);
  /* resume 1: any line; resume 2: a succeeded one, as GNU parallel reads it: any line of the job
   * (2 failed, then succeeded; 1 succeeded, then failed in a run without resume) */
  for (unsigned long s = 0; s <= 9; s++) {
    int any = s == 1 || s == 2 || s == 3 || s == 5 || s == 7;
    int ok = s == 1 || s == 2 || s == 5;
    LC_CHECK(lc__joblog_skips(&rec, s, 1) == any);
    LC_CHECK(lc__joblog_skips(&rec, s, 2) == ok);
    LC_CHECK(lc__joblog_skips(&rec, s, 0) == 0);
  }
  lc__joblog_record_free(&rec);
  lc__joblog_record_free(&rec);

  /* empty text, a header alone, a header cut short: nothing recorded */
  LC_REQUIRE_OK(lc__joblog_parse(&rec, "", 0, "jl"));
  LC_CHECK(rec.n == 0 && rec.max_seq == 0);
  LC_REQUIRE_OK(
      lc__joblog_parse(&rec, LC__JOBLOG_HEADER "\n", strlen(LC__JOBLOG_HEADER) + 1, "jl"));
  LC_CHECK(rec.n == 0);
  LC_REQUIRE_OK(lc__joblog_parse(&rec, "Seq\tHo", 6, "jl"));
  LC_CHECK(rec.n == 0);
  LC_REQUIRE_OK(lc__joblog_parse(&rec, LC__JOBLOG_HEADER, strlen(LC__JOBLOG_HEADER), "jl"));
  LC_CHECK(rec.n == 0);
  lc__joblog_record_free(&rec);
}

static void test_joblog_torn_last_line(void) {
  lc__joblog_record rec = {0};
  char text[1024];
  int n = snprintf(text, sizeof(text), "%s%s", joblog_text, "6\t:\t1700000002.000\t  ");
  LC_REQUIRE_OK(lc__joblog_parse(&rec, text, (size_t)n, "jl"));
  LC_CHECK(rec.n == 5);
  LC_CHECK(!lc__joblog_skips(&rec, 6, 1));
  lc__joblog_record_free(&rec);
  /* a whole last line without its newline is torn too: its job may not have ended */
  n = snprintf(text, sizeof(text), "%s%s", joblog_text,
               "6\t:\t1700000002.000\t     0.010\t0\t2\t0\t0\techo f");
  LC_REQUIRE_OK(lc__joblog_parse(&rec, text, (size_t)n, "jl"));
  LC_CHECK(!lc__joblog_skips(&rec, 6, 1));
  lc__joblog_record_free(&rec);
}

/* Parses text and checks that it fails naming the file, the line and want. */
static void check_parse_error(const char *text, const char *want) {
  lc__joblog_record rec = {0};
  int r = lc__joblog_parse(&rec, text, strlen(text), "/x/run.jl");
  LC_CHECK(r == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), want);
  LC_CHECK(rec.v == NULL && rec.n == 0);
}

static void test_joblog_errors(void) {
  const char *h = LC__JOBLOG_HEADER "\n";
  char text[512];
  check_parse_error("hello\n", "/x/run.jl line 1: not a joblog (its first line is not GNU "
                               "parallel's header");
  check_parse_error("hello", "/x/run.jl line 1: not a joblog");
  check_parse_error("Seq\tHost\n", "/x/run.jl line 1: not a joblog");
  /* CRLF: not GNU parallel's header */
  check_parse_error(LC__JOBLOG_HEADER "\r\n", "/x/run.jl line 1: not a joblog");
#define ERR(line, want)                                                                            \
  do {                                                                                             \
    snprintf(text, sizeof(text), "%s1\t:\t1.0\t0.1\t0\t0\t0\t0\tok\n%s", h, line);                 \
    check_parse_error(text, want);                                                                 \
  } while (0)
  ERR("2\t:\t1.0\t0.1\n", "/x/run.jl line 3: not a joblog line (want 9 tab-separated fields");
  ERR("\n", "/x/run.jl line 3: not a joblog line");
  ERR("0\t:\t1.0\t0.1\t0\t0\t0\t0\tc\n", "/x/run.jl line 3: Seq \"0\" is not a job number");
  ERR("x\t:\t1.0\t0.1\t0\t0\t0\t0\tc\n", "/x/run.jl line 3: Seq \"x\" is not a job number");
  ERR("99999999999999999999\t:\t1\t0\t0\t0\t0\t0\tc\n", "line 3: Seq \"99999999999999999999\"");
  ERR("2\t\t1.0\t0.1\t0\t0\t0\t0\tc\n", "/x/run.jl line 3: Host \"\" is not a host");
  ERR("2\t:\tnow\t0.1\t0\t0\t0\t0\tc\n", "/x/run.jl line 3: Starttime \"now\" is not a number");
  ERR("2\t:\t1.0\t0.1s\t0\t0\t0\t0\tc\n", "/x/run.jl line 3: JobRuntime \"0.1s\"");
  ERR("2\t:\t1.0\t0.1\t-5\t0\t0\t0\tc\n", "/x/run.jl line 3: Send \"-5\" is not a number");
  ERR("2\t:\t1.0\t0.1\t0\t0\tx\t0\tc\n", "/x/run.jl line 3: Exitval \"x\" is not a number");
  ERR("2\t:\t1.0\t0.1\t0\t0\t0\t\tc\n", "/x/run.jl line 3: Signal \"\" is not a number");
  ERR("2\t:\t1.0\t0.1\t0\t0\t0\t9\x01\tc\n", "/x/run.jl line 3: Signal \"9?\"");
#undef ERR
}

/* A joblog our formatter wrote, read by GNU parallel: --resume skips exactly the jobs it records,
 * --resume-failed those it records as succeeded; and what parallel then appended reads back. */
static void test_joblog_read_by_parallel(void) {
  const char *jl = tmp_path("ours.jl"), *jl2 = tmp_path("ours2.jl");
  lc__buf b = {0};
  lc__joblog_record rec = {0};
  lc__joblog_entry e[] = {
      {.seq = 3, .host = NULL, .start = 1700000000.5, .runtime = 0.25, .command = "echo c"},
      {.seq = 1, .host = ":", .start = 1700000000.25, .runtime = 1, .command = "echo a"},
      {.seq = 4,
       .host = NULL,
       .start = 1700000001,
       .runtime = 2,
       .exitval = 1,
       .command = "echo d\nfalse"},
      {.seq = 6,
       .host = NULL,
       .start = 1700000001,
       .runtime = 2,
       .exitval = -1,
       .signal = 15,
       .command = "echo f"},
  };
  char args[512], *out, *text;
  size_t len;

  lc__buf_puts(&b, LC__JOBLOG_HEADER "\n");
  for (size_t i = 0; i < LC_ARRAY_SIZE(e); i++)
    LC_REQUIRE_OK(lc__joblog_format(&b, &e[i]));
  LC_REQUIRE(spit(jl, b.data, b.len) == 0 && spit(jl2, b.data, b.len) == 0);

  snprintf(args, sizeof(args), "--resume --joblog %s -k echo ::: a b c d e f g", jl);
  out = parallel(args);
  LC_CHECK_STR(out, "b\ne\ng\n");
  snprintf(args, sizeof(args), "--resume-failed --joblog %s -k echo ::: a b c d e f g", jl2);
  out = parallel(args);
  LC_CHECK_STR(out, "b\nd\ne\nf\ng\n");

  /* parallel appended to our lines; all of it reads back */
  LC_REQUIRE((text = slurp(jl, &len)) != NULL);
  LC_REQUIRE_OK(lc__joblog_parse(&rec, text, len, jl));
  LC_CHECK(rec.n == 7 && rec.max_seq == 7);
  for (unsigned long s = 1; s <= 7; s++)
    LC_CHECK(lc__joblog_skips(&rec, s, 2) == (s != 4 && s != 6));
  lc__joblog_record_free(&rec);
  free(text);
  LC_REQUIRE((text = slurp(jl2, &len)) != NULL);
  LC_REQUIRE_OK(lc__joblog_parse(&rec, text, len, jl2));
  /* 4 and 6 failed in our lines and succeeded in parallel's: succeeded */
  for (unsigned long s = 1; s <= 7; s++)
    LC_CHECK(lc__joblog_skips(&rec, s, 2));
  lc__joblog_record_free(&rec);
  free(text);
  lc__buf_free(&b);
}

/* A joblog GNU parallel wrote, read by our parser: what it records and how each job ended. */
static void test_joblog_from_parallel(void) {
  const char *jl = tmp_path("theirs.jl");
  lc__joblog_record rec = {0};
  char args[512], *text;
  size_t len;
  snprintf(args, sizeof(args),
           "--joblog %s 'case {} in 2) exit 2;; 4) kill -TERM $$;; esac; echo {}' ::: 1 2 3 4 5",
           jl);
  LC_REQUIRE(parallel(args) != NULL);
  LC_REQUIRE((text = slurp(jl, &len)) != NULL);
  LC_REQUIRE_OK(lc__joblog_parse(&rec, text, len, jl));
  LC_CHECK(rec.n == 5 && rec.max_seq == 5);
  for (unsigned long s = 1; s <= 6; s++) {
    LC_CHECK(lc__joblog_skips(&rec, s, 1) == (s <= 5));
    LC_CHECK(lc__joblog_skips(&rec, s, 2) == (s == 1 || s == 3 || s == 5));
  }
  lc__joblog_record_free(&rec);
  free(text);
}

static void test_cleanup(void) {
  char cmd[128];
  if (tmpdir[0] != '\0') {
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    LC_CHECK(system(cmd) == 0);
  }
}

LC_TEST_MAIN(LC_TEST(test_placeholders_quoted), LC_TEST(test_placeholder_errors),
             LC_TEST(test_template_checked_at_new), LC_TEST(test_append_rule),
             LC_TEST(test_worker_command), LC_TEST(test_pool_line),
             LC_TEST(test_command_type_templates), LC_TEST(test_joblog_format_as_parallel),
             LC_TEST(test_joblog_format_fields), LC_TEST(test_joblog_parse_and_skips),
             LC_TEST(test_joblog_torn_last_line), LC_TEST(test_joblog_errors),
             LC_TEST(test_joblog_read_by_parallel), LC_TEST(test_joblog_from_parallel),
             LC_TEST(test_cleanup))
