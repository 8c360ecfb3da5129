/*
 * fuzz_template.c - the `command` type's command templates with their {placeholders}
 * (launchers/command.c, lc__template_expand), for a master and for a worker.
 */
#include "../../launchers/launchers.h"

#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *tmpl = fuzz_strndup(data, size), *out = NULL;
  lc_worker_info w = {.index = 3,
                      .count = 8,
                      .host = "lab'2",
                      .port = 60001,
                      .gpu = 1,
                      .master_port = 60000,
                      .workdir = "/tmp/lc $(x)/w3",
                      .aux_port = 60002};
  if (lc__template_expand(&out, tmpl, 60000, NULL, "lab1") == 0)
    free(out);
  out = NULL;
  if (lc__template_expand(&out, tmpl, 60000, &w, "lab1") == 0)
    free(out);
  free(tmpl);
  return 0;
}
