/*
 * fuzz_ports.c - port lists as users write them (lc_ports_parse, src/ports/set.c): a list that
 * parses formats to text that parses back to the same set.
 */
#include "fuzz_util.h"

#include "lazycluster/ports.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *spec = fuzz_strndup(data, size), *text = NULL;
  lc_ports *p = NULL, *again = NULL;

  if (lc_ports_parse(&p, spec) == 0) {
    size_t n = lc_ports_count(p);
    if (n == 0 || n > 65535)
      abort();
    if (lc_ports_format(&text, p) == 0) {
      if (lc_ports_parse(&again, text) != 0 || lc_ports_count(again) != n)
        abort();
      for (size_t i = 0; i < n; i += 1 + n / 64) {
        int port = lc_ports_at(p, i);
        if (port < 1 || port > 65535 || !lc_ports_contains(p, port) ||
            lc_ports_at(again, i) != port)
          abort();
      }
      lc_ports_free(again);
      lc_free(text);
    }
    lc_ports_free(p);
  }
  free(spec);
  return 0;
}
