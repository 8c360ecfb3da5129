/*
 * fuzz_json.c - the JSON the library reads: the object that `lazyclusterctl probe --json` prints
 * on a host (src/hostfacts/json.c, lc__probe_json_parse). What it accepts is written back with
 * lc_hostinfo_to_json and read again: the round trip keeps every GPU.
 */
#include "hostfacts.h"

#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lc_hostinfo *info = calloc(1, sizeof(*info)), *again = calloc(1, sizeof(*again));
  char *json = NULL;
  if (info == NULL || again == NULL)
    abort();
  if (lc__probe_json_parse(info, (const char *)data, size) == 0 &&
      lc_hostinfo_to_json(&json, info) == 0) {
    if (lc__probe_json_parse(again, json, strlen(json)) != 0 || again->gpu_count != info->gpu_count)
      abort();
    for (size_t i = 0; i < info->gpu_count; i++)
      if (again->gpus[i].index != info->gpus[i].index ||
          again->gpus[i].memory_bytes != info->gpus[i].memory_bytes)
        abort();
    lc_free(json);
  }
  lc_hostinfo_free(info);
  lc_hostinfo_free(again);
  return 0;
}
