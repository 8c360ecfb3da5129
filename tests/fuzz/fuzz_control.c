/*
 * fuzz_control.c - the text the control layer reads (src/control/): request lines from the
 * control socket (lc__control_answer), lines that hosts' processes print, written to the
 * cluster's logs and read back by `lazyclusterctl logs` (lc_control_log_line,
 * lc_control_log_format) and by status (its last events), and an entry's info file
 * (lc__control_read_entry). A supervisor with no cluster attached answers, as it does while the
 * cluster starts; its state directory is the target's own, its logs rotate at 64 KiB.
 *
 * Input: lines. Each is a request, a log line of worker (first byte % 4) - 1 on host "lab1", and
 * a line for the log formatter; the whole input is also the entry's info file.
 */
#include "control/control_internal.h"

#include "fuzz_util.h"

#include <limits.h>

static lc_control *ctl;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  lc_control_options o = LC_CONTROL_OPTIONS_INIT;
  char dir[PATH_MAX];
  (void)argc;
  (void)argv;
  snprintf(dir, sizeof(dir), "%s/state", fuzz_dir());
  mkdir(dir, 0700);
  o.name = "fuzz";
  o.state_dir = dir;
  o.log_max_bytes = 64 << 10;
  o.type_name = "command";
  if (lc_control_new(&ctl, &o) != 0) {
    fprintf(stderr, "fuzz_control: lc_control_new: %s\n", lc_error_last());
    abort();
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data, *end = text + size;
  char info_path[PATH_MAX];
  lc_control_entry e;
  lc__buf reply = {0};

  for (const char *line = text; line < end;) {
    const char *nl = memchr(line, '\n', (size_t)(end - line));
    size_t len = nl ? (size_t)(nl - line) : (size_t)(end - line);
    char *req = fuzz_strndup((const uint8_t *)line, len), out[1024], stream;
    int index = len > 0 ? (unsigned char)line[0] % 4 - 1 : -1;
    if (lc__control_answer(ctl, req, &reply) == 1 && strcmp(req, "stop") != 0)
      abort();
    lc__buf_free(&reply);
    memset(&reply, 0, sizeof(reply));
    lc_control_log_line(ctl, index, "lab1", line, len, len % 2 ? LC_STDERR : LC_STDOUT);
    lc_control_log_format(out, sizeof(out), line, len, 1, (int)(len % 3 == 0), &stream);
    free(req);
    line = nl ? nl + 1 : end;
  }
  lc__control_status_json(ctl, &reply);
  lc__buf_free(&reply);

  snprintf(info_path, sizeof(info_path), "%s/entry", fuzz_dir());
  mkdir(info_path, 0700);
  snprintf(info_path, sizeof(info_path), "%s/entry/info", fuzz_dir());
  fuzz_write_file(info_path, data, size);
  snprintf(info_path, sizeof(info_path), "%s/entry", fuzz_dir());
  memset(&e, 0, sizeof(e));
  lc__control_read_entry(info_path, &e);
  free(e.type);
  free(e.ended);
  return 0;
}
