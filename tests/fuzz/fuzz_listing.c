/*
 * fuzz_listing.c - a host's ports as `ss -tn state listening`, `ss -tnae exclude time-wait` or
 * /proc/net/tcp{,6} print them (src/ports/listing.c, through lc__portscan_text as
 * lc_ports_listening, the free-port listings and the host facts read them).
 */
#include "ports_internal.h"

#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lc__portscan *s = calloc(1, sizeof(*s));
  lc_ports *ports = NULL;
  if (s == NULL)
    abort();
  lc__portscan_text(s, (const char *)data, size);
  if (lc__portscan_to_ports(&ports, s) == 0) {
    /* port 0 never listens */
    if (lc_ports_contains(ports, 0))
      abort();
    lc_ports_free(ports);
  }
  if (lc__portscan_held_to_ports(&ports, s) == 0) {
    /* nor is it held; and a held port is taken */
    if (lc_ports_contains(ports, 0) ||
        (lc_ports_count(ports) > 0 && !lc__portscan_taken(s, lc_ports_at(ports, 0))))
      abort();
    lc_ports_free(ports);
  }
  lc__portscan_free(s);
  return 0;
}
