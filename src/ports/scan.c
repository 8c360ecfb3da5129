/*
 * scan.c - the reader of a host's listing of listening ports: ss's output or /proc/net/tcp{,6}
 * (lc__portscan_*).
 */
#include "ports_private.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- /proc/net/tcp ------------------------------------------------------------------------ */

static int hex_value(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  return -1;
}

/* Reads hex digits at line[*i]; returns how many there were (value in *v, capped). */
static size_t read_hex(const char *line, size_t len, size_t *i, unsigned long *v) {
  size_t start = *i;
  *v = 0;
  while (*i < len && hex_value(line[*i]) >= 0) {
    if (*i - start < 8)
      *v = *v << 4 | (unsigned long)hex_value(line[*i]);
    (*i)++;
  }
  return *i - start;
}

static int is_tab_or_space(char c) { return c == ' ' || c == '\t'; }

static void skip_blanks(const char *line, size_t len, size_t *i) {
  while (*i < len && is_tab_or_space(line[*i]))
    (*i)++;
}

/* Reads "ADDRESS:PORT" with an 8- (IPv4) or 32-digit (IPv6) address. Returns 0 or -1. */
static int read_endpoint(const char *line, size_t len, size_t *i, unsigned long *port) {
  unsigned long addr;
  size_t n = read_hex(line, len, i, &addr);
  if ((n != 8 && n != 32) || *i >= len || line[*i] != ':')
    return -1;
  (*i)++;
  n = read_hex(line, len, i, port);
  if (n < 1 || n > 4)
    return -1;
  return 0;
}

/*
 * A line of `ss -tn state listening`: "RECVQ SENDQ LOCAL:PORT PEER:PORT", LOCAL being an IPv4
 * address, [IPv6], or *, each with an optional %interface; an older ss may put a state first.
 * The header ("Recv-Q Send-Q Local Address:Port ...") counts as a header. Returns 1 when the line
 * was one of these (and counted), 0 when it is not ss's.
 */
static int ss_line(lc__portscan *s, const char *line, size_t len, size_t i) {
  static const char local[] = "Local Address";
  int q, port = 0;
  size_t start, colon = 0, n = 0;
  int listen = 1;

  if ((len - i >= 6 && memcmp(line + i, "Recv-Q", 6) == 0) ||
      (len - i >= 5 && memcmp(line + i, "State", 5) == 0)) {
    for (size_t k = i; k + sizeof(local) - 1 <= len; k++)
      if (memcmp(line + k, local, sizeof(local) - 1) == 0) {
        s->headers++;
        return 1;
      }
    return 0;
  }
  if (i < len && !lc__ports_is_digit(line[i])) { /* a state column */
    start = i;
    while (i < len && !is_tab_or_space(line[i]))
      i++;
    listen = i - start == 6 && memcmp(line + start, "LISTEN", 6) == 0;
    skip_blanks(line, len, &i);
  }
  for (int k = 0; k < 2; k++) { /* Recv-Q, Send-Q */
    if (lc__ports_read_number(line, len, &i, &q) == 0 || i >= len || !is_tab_or_space(line[i]))
      return 0;
    skip_blanks(line, len, &i);
  }
  for (start = i; i < len && !is_tab_or_space(line[i]); i++)
    if (line[i] == ':')
      colon = i;
  if (colon == 0 || colon == start || i >= len)
    return 0;
  i = colon + 1;
  n = lc__ports_read_number(line, len, &i, &port); /* capped at PORT_MAX + 1 */
  if (n == 0 || n > 5 || port > PORT_MAX || i >= len || !is_tab_or_space(line[i]))
    return 0;
  s->entries++;
  if (listen && port > 0)
    lc__ports_bit_set(s->listening, port);
  return 1;
}

void lc__portscan_line(lc__portscan *s, const char *line, size_t len) {
  unsigned long sl, local_port, remote_port, state;
  size_t i = 0;

  skip_blanks(line, len, &i);
  if (ss_line(s, line, len, i))
    return;
  if (len - i >= 2 && memcmp(line + i, "sl", 2) == 0) {
    static const char want[] = "local_address";
    for (size_t k = i; k + sizeof(want) - 1 <= len; k++)
      if (memcmp(line + k, want, sizeof(want) - 1) == 0) {
        s->headers++;
        return;
      }
    goto skip;
  }
  /* "   0: LOCAL:PORT REMOTE:PORT ST ..." */
  if (read_hex(line, len, &i, &sl) == 0 || i >= len || line[i] != ':')
    goto skip;
  i++;
  skip_blanks(line, len, &i);
  if (read_endpoint(line, len, &i, &local_port) < 0 || i >= len || !is_tab_or_space(line[i]))
    goto skip;
  skip_blanks(line, len, &i);
  if (read_endpoint(line, len, &i, &remote_port) < 0 || i >= len || !is_tab_or_space(line[i]))
    goto skip;
  skip_blanks(line, len, &i);
  if (read_hex(line, len, &i, &state) != 2 || (i < len && !is_tab_or_space(line[i])))
    goto skip;
  s->entries++;
  if (state == 0x0A && local_port > 0)
    lc__ports_bit_set(s->listening, (int)local_port);
  return;
skip:
  s->skipped++;
}

void lc__portscan_text(lc__portscan *s, const char *text, size_t len) {
  size_t start = 0;
  for (size_t i = 0; i <= len; i++) {
    if (i < len && text[i] != '\n')
      continue;
    if (i > start)
      lc__portscan_line(s, text + start, i - start);
    start = i + 1;
  }
}

int lc__portscan_to_ports(lc_ports **out, const lc__portscan *s) {
  lc_ports *p = NULL;
  int r;
  if ((r = lc_ports_new(&p)) < 0)
    return r;
  for (int port = 1; port <= PORT_MAX; port++) {
    int last = port;
    if (!lc__ports_bit_get(s->listening, port))
      continue;
    while (last < PORT_MAX && lc__ports_bit_get(s->listening, last + 1))
      last++;
    if ((r = lc__ports_add_range(p, port, last)) < 0) {
      lc_ports_free(p);
      return r;
    }
    port = last;
  }
  *out = p;
  return 0;
}
