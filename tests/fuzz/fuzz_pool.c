/*
 * fuzz_pool.c - a pool worker's line protocol (src/jobs/pool.c, lc__pool_step) driven by
 * arbitrary worker output and queue events: each input byte is one event (its low 3 bits; the
 * bytes between two newlines of a STDOUT or STDERR event are its line, which the protocol never
 * reads). A model of what the queue expects is kept beside it: a job written gets exactly one
 * answer or is lost with the worker, an update likewise, nothing is written to a worker that is
 * not idle, a dead worker takes nothing but a start. Any mismatch aborts.
 */
#include "../../src/jobs/queue_internal.h"

#include "fuzz_util.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lc__wstate s = LC__W_DEAD;
  int asked_job = 0, asked_update = 0;
  for (size_t i = 0; i < size; i++) {
    lc__wevent ev = (lc__wevent)(data[i] % 6);
    lc__waction act;
    lc__wstate was = s;
    s = lc__pool_step(s, ev, &act);
    if (s < LC__W_IDLE || s > LC__W_DEAD)
      abort();
    if (act == LC__WA_REFUSED && s != was)
      abort(); /* a refused event changes nothing */
    switch (act) {
    case LC__WA_ANSWER:
      if (!asked_job || s != LC__W_IDLE)
        abort();
      asked_job = 0;
      break;
    case LC__WA_UPDATE_ANSWER:
      if (!asked_update || s != LC__W_IDLE)
        abort();
      asked_update = 0;
      break;
    case LC__WA_JOB_LOST:
      if (!asked_job || s != LC__W_DEAD)
        abort();
      asked_job = 0;
      break;
    case LC__WA_UPDATE_LOST:
      if (!asked_update || s != LC__W_DEAD)
        abort();
      asked_update = 0;
      break;
    case LC__WA_JOB_LINE:
      if (!asked_job || ev != LC__WE_STDERR)
        abort();
      break;
    case LC__WA_WORKER_LINE:
      if (asked_job || was == LC__W_DEAD)
        abort();
      break;
    case LC__WA_NONE:
      if (ev == LC__WE_JOB) {
        if (was != LC__W_IDLE || asked_job || asked_update)
          abort();
        asked_job = 1;
      } else if (ev == LC__WE_UPDATE) {
        if (was != LC__W_IDLE || asked_job || asked_update)
          abort();
        asked_update = 1;
      } else if (ev == LC__WE_START) {
        if (was != LC__W_DEAD || s != LC__W_IDLE)
          abort();
      } else if (ev == LC__WE_END) {
        if (asked_job || asked_update || s != LC__W_DEAD)
          abort();
      } else {
        abort(); /* a line is always something */
      }
      break;
    case LC__WA_REFUSED:
      if ((ev == LC__WE_JOB || ev == LC__WE_UPDATE) && was == LC__W_IDLE)
        abort(); /* an idle worker takes a job or an update */
      if (ev == LC__WE_START && was == LC__W_DEAD)
        abort();
      break;
    }
    if (s == LC__W_DEAD && (asked_job || asked_update))
      abort();
  }
  return 0;
}
