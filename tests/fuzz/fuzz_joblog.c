/*
 * fuzz_joblog.c - GNU parallel's joblog as resume reads it (src/jobs/joblog.c): the input is a
 * whole joblog for lc__joblog_parse and lc__joblog_skips. Checks, besides the sanitizers: what
 * parses is sorted, one entry per job, every entry skipped by resume 1; and a line our formatter
 * makes from the input's bytes (host and command from its text) parses back to the same job and
 * the same success.
 */
#include "jobs/jobs_internal.h"

#include "fuzz_util.h"

static void check_record(const lc__joblog_record *rec) {
  for (size_t i = 0; i < rec->n; i++) {
    if (rec->v[i].seq == 0 || rec->v[i].seq > rec->max_seq)
      abort();
    if (i > 0 && rec->v[i - 1].seq >= rec->v[i].seq)
      abort();
    if (!lc__joblog_skips(rec, rec->v[i].seq, 1) ||
        lc__joblog_skips(rec, rec->v[i].seq, 2) != rec->v[i].ok)
      abort();
  }
  if ((rec->n == 0) != (rec->max_seq == 0) || lc__joblog_skips(rec, rec->max_seq + 1, 1))
    abort();
}

/* A line made from the input: numbers from its first bytes, host and command from the rest. */
static void check_round_trip(const uint8_t *data, size_t size) {
  lc__joblog_entry e = {0};
  lc__joblog_record rec = {0};
  lc__buf b = {0};
  uint64_t w[3] = {0};
  char *rest;
  size_t skip = size < sizeof(w) ? size : sizeof(w);
  memcpy(w, data, skip);
  rest = fuzz_strndup(data + skip, size - skip);
  e.seq = 1 + (unsigned long)(w[0] % 1000000000);
  e.exitval = (int)(int32_t)(w[0] >> 32);
  e.signal = (int)(w[1] & 0x7f) * (int)((w[1] >> 8) & 1);
  e.send = w[1] >> 16;
  e.receive = w[2];
  memcpy(&e.start, &w[2], sizeof(e.start)); /* any double: NaN, infinities, negatives */
  e.runtime = (double)(w[1] >> 20) / 1024.0;
  e.host = rest;
  e.command = rest + strcspn(rest, " ");
  lc__buf_puts(&b, LC__JOBLOG_HEADER "\n");
  if (lc__joblog_format(&b, &e) < 0)
    abort();
  if (lc__joblog_parse(&rec, b.data, b.len, "fuzz.jl") < 0 || rec.n != 1 || rec.v[0].seq != e.seq ||
      rec.v[0].ok != (e.exitval == 0 && e.signal == 0))
    abort();
  lc__joblog_record_free(&rec);
  lc__buf_free(&b);
  free(rest);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lc__joblog_record rec = {0};
  if (lc__joblog_parse(&rec, (const char *)data, size, "fuzz.jl") == 0)
    check_record(&rec);
  else if (rec.v != NULL || rec.n != 0)
    abort();
  lc__joblog_record_free(&rec);
  check_round_trip(data, size);
  return 0;
}
