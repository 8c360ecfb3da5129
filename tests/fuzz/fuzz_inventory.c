/*
 * fuzz_inventory.c - inventory files and host lists (src/inventory.c) with their host ranges
 * (src/hostrange.c): the whole input as an inventory file, as a host list, and as one range spec.
 */
#include "hostrange.h"

#include "fuzz_util.h"

#include "lazycluster/inventory.h"

/* Counts the hosts of a spec and checks each is within the spec's bounds. */
static int count_host(const char *host, size_t len, void *payload) {
  size_t *n = payload;
  if (host == NULL || memchr(host, '\0', len) != NULL)
    abort();
  (*n)++;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lc_inventory *inv = NULL;
  char *text = fuzz_strndup(data, size), why[160];
  size_t n = 0;

  if (lc_inventory_parse_text(&inv, (const char *)data, size, "fuzz") == 0) {
    for (size_t i = 0; i < lc_inventory_count(inv); i++) {
      size_t found;
      const char *h = lc_inventory_host(inv, i);
      /* every host is found again where it stands: the index agrees with the list */
      if (h == NULL || lc_inventory_find(&found, inv, h) != 0 || found != i)
        abort();
      (void)lc_inventory_gpus(inv, i);
      (void)lc_inventory_slots(inv, i);
      (void)lc_inventory_line(inv, i);
    }
    lc_inventory_free(inv);
    inv = NULL;
  }
  if (lc_inventory_from_list(&inv, text) == 0)
    lc_inventory_free(inv);
  (void)lc__hostrange_comma(text, strlen(text));
  why[0] = '\0';
  (void)lc__hostrange_expand(text, strlen(text), count_host, &n, why, sizeof(why));
  if (n > LC__HOSTRANGE_MAX)
    abort();
  free(text);
  return 0;
}
