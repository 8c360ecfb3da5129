/*
 * test_ports.c - port lists (parsing, every kind of bad input and its message, merging,
 * iteration, formatting), /proc/net/tcp and /proc/net/tcp6 read from recorded text, the
 * process-wide reservation (also with threads hammering it) and the bind test on this machine.
 * No network beyond loopback sockets of this machine.
 */
#include "lc_test.h"
#include "ports_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

#define NVALUES(a) (sizeof(a) / sizeof((a)[0]))

/* Parses spec and checks its formatted form and count. */
static void check_parse(const char *spec, const char *want, size_t count) {
  lc_ports *p = NULL;
  char *text = NULL;
  LC_REQUIRE_OK(lc_ports_parse(&p, spec));
  LC_CHECK_OK(lc_ports_format(&text, p));
  LC_CHECK_STR(text, want);
  if (lc_ports_count(p) != count)
    fprintf(stderr, "  \"%s\": count %zu, want %zu\n", spec, lc_ports_count(p), count);
  LC_CHECK(lc_ports_count(p) == count);
  lc_free(text);
  lc_ports_free(p);
}

static void test_parse_forms(void) {
  check_parse("8786", "8786", 1);
  check_parse("60000-60199", "60000-60199", 200);
  check_parse("61000-61010,62000", "61000-61010,62000", 12);
  check_parse("61000-61010 , 62000", "61000-61010,62000", 12);
  check_parse("  61000-61010,\t62000  ", "61000-61010,62000", 12);
  check_parse("1", "1", 1);
  check_parse("65535", "65535", 1);
  check_parse("1-65535", "1-65535", 65535);
  check_parse("5-5", "5", 1);
  check_parse("0080", "80", 1); /* leading zeros are still port 80 */
  check_parse("7,5,3", "3,5,7", 3);
}

static void test_parse_merges(void) {
  check_parse("8786,8786", "8786", 1);
  check_parse("10-20,15-25", "10-25", 16);
  check_parse("10-20,21-30", "10-30", 21); /* touching ranges become one */
  check_parse("5,3,1,2,4", "1-5", 5);
  check_parse("10-20,15-25,5,26,30-31,1-3,4", "1-5,10-26,30-31", 24);
  check_parse("100-200,1-1000", "1-1000", 1000); /* swallows an inner range */
  check_parse("1,3,5,7,9,2-8", "1-9", 9);        /* bridges several */
  check_parse("60000-60199,60000", "60000-60199", 200);
}

typedef struct bad_case {
  const char *spec;
  const char *detail; /* a part of the message besides the quoted list */
} bad_case;

static void test_parse_bad_input(void) {
  static const bad_case cases[] = {
      {"200-100", "\"200-100\": the range runs backwards (200 is above 100)"},
      {"0", "\"0\": port 0 is not a port"},
      {"0-5", "\"0-5\": port 0 is not a port"},
      {"65536", "\"65536\": port 65536 is above 65535"},
      {"1-70000", "\"1-70000\": port 70000 is above 65535"},
      {"99999999999999999999", "port 99999999999999999999 is above 65535"},
      {"abc", "\"abc\" is not a port or a range"},
      {"1-", "\"1-\" is not a port or a range"},
      {"-5", "\"-5\" is not a port or a range"},
      {"1--2", "\"1--2\" is not a port or a range"},
      {"1-2-3", "\"1-2-3\" is not a port or a range"},
      {"+5", "\"+5\" is not a port or a range"},
      {"0x50", "\"0x50\" is not a port or a range"},
      {"80 81", "\"80 81\" is not a port or a range"},
      {"5 - 6", "\"5 - 6\" is not a port or a range"},
      {"8786;8787", "\"8786;8787\" is not a port or a range"},
      {"60000-60199,abc", "\"abc\" is not a port or a range"},
      {"60000-60199, 300-200", "\"300-200\": the range runs backwards"},
      {"", "it is empty"},
      {"   ", "it is empty"},
      {",,", "an empty item at character 1"},
      {"1,,2", "an empty item at character 3"},
      {"1,", "an empty item at character 3"},
      {",1", "an empty item at character 1"},
      {"1, ,2", "an empty item at character 4"},
  };
  for (size_t i = 0; i < NVALUES(cases); i++) {
    lc_ports *p = (lc_ports *)&p; /* must come back NULL */
    char whole[256];
    int r = lc_ports_parse(&p, cases[i].spec);
    if (r != -EINVAL)
      fprintf(stderr, "  \"%s\": returned %d\n", cases[i].spec, r);
    LC_CHECK(r == -EINVAL);
    LC_CHECK(p == NULL);
    snprintf(whole, sizeof(whole), "bad port list \"%s\"", cases[i].spec);
    LC_CHECK_CONTAINS(lc_error_last(), whole);
    LC_CHECK_CONTAINS(lc_error_last(), cases[i].detail);
    lc_ports_free(p == (lc_ports *)&p ? NULL : p);
  }
  LC_CHECK(lc_ports_parse(NULL, "1") == -EINVAL);
  {
    lc_ports *p = NULL;
    LC_CHECK(lc_ports_parse(&p, NULL) == -EINVAL);
    LC_CHECK(p == NULL);
    LC_CHECK_CONTAINS(lc_error_last(), "none given");
  }
}

static void test_iterate_contains(void) {
  static const int want[] = {61000, 61001, 61002, 61003, 61004, 61005,
                             61006, 61007, 61008, 61009, 61010, 62000};
  lc_ports *p = NULL;
  LC_REQUIRE_OK(lc_ports_parse(&p, "62000, 61000-61010"));
  LC_REQUIRE(lc_ports_count(p) == NVALUES(want));
  for (size_t i = 0; i < lc_ports_count(p); i++)
    LC_CHECK(lc_ports_at(p, i) == want[i]);
  LC_CHECK(lc_ports_at(p, NVALUES(want)) == 0);
  LC_CHECK(lc_ports_at(p, (size_t)-1) == 0);
  LC_CHECK(lc_ports_contains(p, 61000));
  LC_CHECK(lc_ports_contains(p, 61010));
  LC_CHECK(lc_ports_contains(p, 62000));
  LC_CHECK(!lc_ports_contains(p, 60999));
  LC_CHECK(!lc_ports_contains(p, 61011));
  LC_CHECK(!lc_ports_contains(p, 61999));
  LC_CHECK(!lc_ports_contains(p, 62001));
  LC_CHECK(!lc_ports_contains(p, 0));
  LC_CHECK(!lc_ports_contains(p, -1));
  LC_CHECK(!lc_ports_contains(p, 70000));
  LC_CHECK(!lc_ports_contains(NULL, 61000));
  LC_CHECK(lc_ports_count(NULL) == 0);
  LC_CHECK(lc_ports_at(NULL, 0) == 0);
  lc_ports_free(p);
  lc_ports_free(NULL);
}

static void test_add_and_format(void) {
  lc_ports *p = NULL, *back = NULL;
  char *text = NULL, *again = NULL;
  LC_REQUIRE_OK(lc_ports_new(&p));
  LC_CHECK_OK(lc_ports_format(&text, p));
  LC_CHECK_STR(text, ""); /* empty set */
  lc_free(text);
  text = NULL;
  for (int port = 1001; port <= 1099; port += 2)
    LC_CHECK_OK(lc_ports_add(p, port, port));
  LC_CHECK(lc_ports_count(p) == 50);
  LC_CHECK_OK(lc_ports_add(p, 1002, 1098)); /* fills every gap: one range */
  LC_CHECK_OK(lc_ports_add(p, 40000, 40010));
  LC_CHECK_OK(lc_ports_add(p, 65535, 65535));
  LC_CHECK_OK(lc_ports_format(&text, p));
  LC_CHECK_STR(text, "1001-1099,40000-40010,65535");
  LC_CHECK(lc_ports_count(p) == 99 + 11 + 1);
  LC_CHECK_OK(lc_ports_parse(&back, text)); /* reads back to the same set */
  LC_CHECK_OK(lc_ports_format(&again, back));
  LC_CHECK_STR(again, text);
  LC_CHECK(lc_ports_count(back) == lc_ports_count(p));

  LC_CHECK(lc_ports_add(p, 0, 5) == -EINVAL);
  LC_CHECK(lc_ports_add(p, 5, 65536) == -EINVAL);
  LC_CHECK(lc_ports_add(p, 9, 8) == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "9-8");
  LC_CHECK(lc_ports_add(NULL, 1, 2) == -EINVAL);
  LC_CHECK(lc_ports_count(p) == 111); /* unchanged by the failures */
  LC_CHECK(lc_ports_format(NULL, p) == -EINVAL);
  LC_CHECK(lc_ports_format(&text, NULL) == -EINVAL);
  LC_CHECK(lc_ports_new(NULL) == -EINVAL);
  lc_free(text);
  lc_free(again);
  lc_ports_free(back);
  lc_ports_free(p);
}

/*
 * Recorded on this project's build machine with `cat /proc/net/tcp /proc/net/tcp6` while a
 * listener ran on 0.0.0.0:2024 (07E8), 127.0.0.1:23458 (5BA2), [::]:23456 (5BA0) and
 * [::1]:23457 (5BA1, with a connection to it), next to SSH connections to test hosts in every
 * state (01 ESTABLISHED, 06 TIME_WAIT, 08 CLOSE_WAIT). Trailing blanks are as the kernel writes
 * them.
 */
static const char recorded[] =
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout "
    "inode                                                     \n"
    "   0: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 "
    "623 1 0000000086d9bd51 100 0 0 10 0                       \n"
    "   1: 0100007F:5BA2 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 "
    "306828 1 00000000875d63d1 100 0 0 10 0                    \n"
    "   2: 010012C6:C7E8 0D0012C6:0016 08 00000000:000001BD 02:00000175 00000000     0        0 "
    "306312 2 000000007f40fbf9 20 4 30 18 -1                   \n"
    "   3: 010012C6:ACF8 0B0012C6:0016 06 00000000:00000000 03:000013FC 00000000     0        0 "
    "0 3 00000000a99be34f                                      \n"
    "   4: 010012C6:9712 0F0012C6:0016 01 00000090:00000000 01:00000089 00000003     0        0 "
    "305134 3 00000000ad9fe11e 163 4 18 1 -1                   \n"
    "   5: 010012C6:AD0C 0B0012C6:0016 08 00000000:00000001 02:00000198 00000000     0        0 "
    "304903 2 00000000514c5a5a 20 4 16 22 -1                   \n"
    "  sl  local_address                         remote_address                        st "
    "tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    "   0: 00000000000000000000000000000000:5BA0 00000000000000000000000000000000:0000 0A "
    "00000000:00000000 00:00000000 00000000     0        0 306825 1 000000006732b753 100 0 0 10 "
    "0\n"
    "   1: 00000000000000000000000001000000:5BA1 00000000000000000000000000000000:0000 0A "
    "00000000:00000001 00:00000000 00000000     0        0 306826 2 000000007e217a03 100 0 0 10 "
    "0\n"
    "   2: 00000000000000000000000001000000:AE92 00000000000000000000000001000000:5BA1 01 "
    "00000000:00000000 00:00000000 00000000     0        0 306827 2 000000001279caca 20 0 0 10 "
    "-1\n"
    "   3: 00000000000000000000000001000000:5BA1 00000000000000000000000001000000:AE92 01 "
    "00000000:00000000 00:00000000 00000000     0        0 0 1 000000007a4a94f4 20 0 0 10 -1\n";

static void test_proc_net_tcp_recorded(void) {
  lc__portscan s;
  lc_ports *p = NULL;
  char *text = NULL;
  memset(&s, 0, sizeof(s));
  lc__portscan_text(&s, recorded, strlen(recorded));
  LC_CHECK(s.headers == 2);
  LC_CHECK(s.entries == 10);
  LC_CHECK(s.skipped == 0);
  LC_REQUIRE_OK(lc__portscan_to_ports(&p, &s));
  LC_CHECK_OK(lc_ports_format(&text, p));
  /* 2024 (v4 any), 23456 ([::]), 23457 ([::1]), 23458 (127.0.0.1); nothing that only connects */
  LC_CHECK_STR(text, "2024,23456-23458");
  LC_CHECK(!lc_ports_contains(p, 0xC7E8)); /* CLOSE_WAIT */
  LC_CHECK(!lc_ports_contains(p, 0xACF8)); /* TIME_WAIT */
  LC_CHECK(!lc_ports_contains(p, 0x9712)); /* ESTABLISHED */
  LC_CHECK(!lc_ports_contains(p, 0xAE92)); /* ESTABLISHED, v6 */
  LC_CHECK(!lc_ports_contains(p, 22));     /* remote end of those connections */
  lc_free(text);
  lc_ports_free(p);
  /* held: the local ends of the connections (23457's accepted one, 0xC7E8 and 0xAD0C in
   * CLOSE_WAIT, 0x9712 and 0xAE92 established), not the TIME_WAIT one nor the remote ends */
  LC_REQUIRE_OK(lc__portscan_held_to_ports(&p, &s));
  LC_CHECK_OK(lc_ports_format(&text, p));
  LC_CHECK_STR(text, "23457,38674,44300,44690,51176");
  LC_CHECK(lc__portscan_taken(&s, 0x9712) && lc__portscan_taken(&s, 2024));
  LC_CHECK(!lc__portscan_taken(&s, 0xACF8) && !lc__portscan_taken(&s, 22));
  LC_CHECK(!lc__portscan_listens(&s, 0x9712));
  lc_free(text);
  lc_ports_free(p);
  lc__portscan_clear(&s);
}

static void test_proc_net_tcp_line_by_line(void) {
  /* As lc_ports_listening feeds it: one line at a time, without newlines, last one unended. */
  lc__portscan s;
  const char *line = recorded;
  memset(&s, 0, sizeof(s));
  while (*line) {
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    lc__portscan_line(&s, line, len);
    line += len + (end != NULL);
  }
  LC_CHECK(s.headers == 2 && s.entries == 10 && s.skipped == 0);
  LC_CHECK(lc__portscan_listens(&s, 2024) && !lc__portscan_listens(&s, 2025));
  lc__portscan_clear(&s);
}

static void test_proc_net_tcp_malformed(void) {
  static const char *const lines[] = {
      "garbage",
      "cat: /proc/net/tcp6: No such file or directory",
      "   5: 0100007F:1F90",                                     /* truncated */
      "   6: 0100007F:1F91 00000000:0000",                       /* no state */
      "   7: 0100007F:1F92 00000000:0000 0",                     /* one-digit state */
      "   8: 0100007F:1F93 00000000:0000 0AB 00000000:00000000", /* three-digit state */
      "   9: 0100007F 00000000:0000 0A 00000000:00000000",       /* no port */
      "  10: 0100007G:1F94 00000000:0000 0A 00000000:00000000",  /* not hex */
      "  11: 00007F:1F95 00000000:0000 0A 00000000:00000000",    /* 6-digit address */
      "  12: 0100007F:11F96 00000000:0000 0A 00000000:00000000", /* 5-digit port */
      "  13: 0100007F:1F97 00000000:0000 :A 00000000:00000000",  /* bad state */
      "  14 0100007F:1F98 00000000:0000 0A 00000000:00000000",   /* no colon after sl */
      ": 0100007F:1F99 00000000:0000 0A 00000000:00000000",      /* no sl */
      "  15: 0000000000000000000000000000000:1F9A 00000000000000000000000000000000:0000 0A",
      "  16: 0100007F:1F9B 00000000:0000\t0A", /* a tab before the state */
      "sl",                                    /* a header cut short */
      "\xff\xfe\x01 binary",
  };
  static const char with_nul[] = "   1: 0100007F:1F9C\0 00000000:0000 0A 00000000:00000000";
  lc__portscan s;
  lc_ports *p = NULL;
  char *text = NULL, *huge;
  memset(&s, 0, sizeof(s));
  for (size_t i = 0; i < NVALUES(lines); i++)
    lc__portscan_line(&s, lines[i], strlen(lines[i]));
  lc__portscan_line(&s, with_nul, sizeof(with_nul) - 1);
  lc__portscan_line(&s, "", 0);
  /* 1 MiB without a newline, as a line callback would deliver a piece */
  huge = malloc(1 << 20);
  LC_REQUIRE(huge != NULL);
  memset(huge, 'A', 1 << 20);
  lc__portscan_line(&s, huge, 1 << 20);
  memcpy(huge, "   1: ", 6);
  lc__portscan_line(&s, huge, 1 << 20);
  free(huge);
  /* lowercase hex, a tab before the state and listeners on port 0 */
  {
    static const char lower[] = "   2: 0100007f:1f9d 00000000:0000 0a 00000000:00000000";
    static const char zero[] = "   3: 0100007F:0000 00000000:0000 0A 00000000:00000000";
    lc__portscan_line(&s, lower, strlen(lower));
    lc__portscan_line(&s, zero, strlen(zero));
  }
  LC_CHECK(s.headers == 0);
  LC_CHECK(s.entries == 3);
  LC_CHECK(s.skipped == NVALUES(lines) - 1 + 4);
  LC_REQUIRE_OK(lc__portscan_to_ports(&p, &s));
  LC_CHECK_OK(lc_ports_format(&text, p));
  LC_CHECK_STR(text, "8091,8093"); /* 0x1F9B (tab) and 0x1F9D (lowercase) */
  lc_free(text);
  lc_ports_free(p);

  /* a mixture: headers, garbage and entries in one text, last line without a newline */
  lc__portscan_clear(&s);
  memset(&s, 0, sizeof(s));
  {
    static const char mixed[] =
        "  sl  local_address rem_address   st tx_queue\n"
        "\n\n"
        "noise noise\n"
        "   0: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000\n"
        "   1: C60012C6:0016 010012C6:D2F0 01 00000000:00000000\n"
        "  sl  local_address                         remote_address\n"
        "   0: 00000000000000000000000000000000:0016 00000000000000000000000000000000:0000 0A x";
    lc__portscan_text(&s, mixed, strlen(mixed));
  }
  LC_CHECK(s.headers == 2 && s.entries == 3 && s.skipped == 1);
  LC_REQUIRE_OK(lc__portscan_to_ports(&p, &s));
  LC_CHECK(lc_ports_count(p) == 1 && lc_ports_contains(p, 22));
  lc_ports_free(p);

  /* only headers: nothing listens, and the host did answer */
  lc__portscan_clear(&s);
  memset(&s, 0, sizeof(s));
  lc__portscan_text(&s, recorded, strchr(recorded, '\n') - recorded + 1);
  LC_CHECK(s.headers == 1 && s.entries == 0);
  LC_REQUIRE_OK(lc__portscan_to_ports(&p, &s));
  LC_CHECK(lc_ports_count(p) == 0);
  lc_ports_free(p);
  lc__portscan_clear(&s);
}

/*
 * `ss -tn state listening` as iproute2 6.1.0 (Debian 12) printed it in a network namespace with
 * listeners on 127.0.0.53 bound to lo, 127.0.0.1 (with one connection waiting), 0.0.0.0, [::]
 * bound to lo, [::1] and a dual-stack [::] (shown as *), and one established connection
 * (127.0.0.1:45886 to 8786), which the state filter left out. Note the header's "PortProcess".
 */
static const char recorded_ss[] = "Recv-Q Send-Q Local Address:Port  Peer Address:PortProcess\n"
                                  "0      128    127.0.0.53%lo:53         0.0.0.0:*          \n"
                                  "1      128        127.0.0.1:8786       0.0.0.0:*          \n"
                                  "0      128          0.0.0.0:22         0.0.0.0:*          \n"
                                  "0      128          [::]%lo:60001         [::]:*          \n"
                                  "0      128            [::1]:23457         [::]:*          \n"
                                  "0      128                *:23456            *:*          \n";

static void test_ss_recorded(void) {
  lc__portscan s;
  lc_ports *p = NULL;
  char *text = NULL;
  memset(&s, 0, sizeof(s));
  lc__portscan_text(&s, recorded_ss, strlen(recorded_ss));
  LC_CHECK(s.headers == 1 && s.entries == 6 && s.skipped == 0);
  LC_REQUIRE_OK(lc__portscan_to_ports(&p, &s));
  LC_CHECK_OK(lc_ports_format(&text, p));
  LC_CHECK_STR(text, "22,53,8786,23456-23457,60001");
  LC_CHECK(!lc_ports_contains(p, 45886));
  lc_free(text);
  lc_ports_free(p);

  /* only the header: nothing listens, and the host did answer */
  lc__portscan_clear(&s);
  memset(&s, 0, sizeof(s));
  lc__portscan_text(&s, recorded_ss, strchr(recorded_ss, '\n') - recorded_ss + 1);
  LC_CHECK(s.headers == 1 && s.entries == 0 && s.skipped == 0);
  lc__portscan_clear(&s);
}

/* ss with the state column (every state asked, or an older ss): only LISTEN lines listen, the
 * connections' states but TIME-WAIT and UNCONN hold their local port. Bad lines are skipped. */
static void test_ss_forms_and_malformed(void) {
  static const char *const lines[] = {
      "0 128 127.0.0.1:",                 /* no port */
      "0 128 127.0.0.1:70000 0.0.0.0:*",  /* port out of range */
      "0 128 127.0.0.1:123456 0.0.0.0:*", /* six digits */
      "0 128 127.0.0.1:80",               /* no peer */
      "0 128 :80 0.0.0.0:*",              /* no address */
      "0 128 localhost 0.0.0.0:*",        /* no colon */
      "0 x 127.0.0.1:81 0.0.0.0:*",       /* Send-Q not a number */
      "0 127.0.0.1:82 0.0.0.0:*",         /* one queue only */
      "Recv-Q Send-Q",                    /* a header cut short */
      "LISTEN",                           /* a state alone */
      "0 128 127.0.0.1:8x 0.0.0.0:*",     /* junk in the port */
  };
  static const char with_state[] = "State  Recv-Q Send-Q Local Address:Port Peer Address:Port\n"
                                   "LISTEN 0      128    0.0.0.0:2222        0.0.0.0:*\n"
                                   "ESTAB  0      0      10.0.0.1:2223       10.0.0.2:40000\n"
                                   "LISTEN 0      128    [fe80::1]%eth0:2224 [::]:*\n"
                                   "TIME-WAIT 0   0      127.0.0.1:2225      127.0.0.1:22\n"
                                   "UNCONN 0      0      127.0.0.1:2226      0.0.0.0:*\n"
                                   "SYN-SENT 0    1      [::1]:2227          [::1]:22\n"
                                   "CLOSE-WAIT 1  0      127.0.0.1:2228      127.0.0.1:22 "
                                   "timer:(keepalive,1min,0) ino:4711 sk:1 <->\n";
  lc__portscan s;
  lc_ports *p = NULL;
  char *text = NULL;
  memset(&s, 0, sizeof(s));
  for (size_t i = 0; i < NVALUES(lines); i++)
    lc__portscan_line(&s, lines[i], strlen(lines[i]));
  LC_CHECK(s.headers == 0 && s.entries == 0 && s.skipped == NVALUES(lines));
  lc__portscan_text(&s, with_state, strlen(with_state));
  LC_CHECK(s.headers == 1 && s.entries == 7);
  LC_REQUIRE_OK(lc__portscan_to_ports(&p, &s));
  LC_CHECK_OK(lc_ports_format(&text, p));
  LC_CHECK_STR(text, "2222,2224");
  lc_free(text);
  lc_ports_free(p);
  LC_REQUIRE_OK(lc__portscan_held_to_ports(&p, &s));
  LC_CHECK_OK(lc_ports_format(&text, p));
  LC_CHECK_STR(text, "2223,2227-2228");
  lc_free(text);
  lc_ports_free(p);
  lc__portscan_clear(&s);
}

static void test_proc_net_tcp_every_port(void) {
  /* 65535 listeners become one range; odd ones only become 32768 ranges */
  lc__portscan s;
  lc_ports *p = NULL;
  char line[128];
  memset(&s, 0, sizeof(s));
  for (int port = 1; port <= 65535; port++) {
    int n = snprintf(line, sizeof(line), "%4d: 0100007F:%04X 00000000:0000 %s 00000000:00000000",
                     port, port, port % 2 ? "0A" : "01");
    lc__portscan_line(&s, line, (size_t)n);
  }
  LC_CHECK(s.entries == 65535);
  LC_REQUIRE_OK(lc__portscan_to_ports(&p, &s));
  LC_CHECK(lc_ports_count(p) == 32768);
  LC_CHECK(lc_ports_contains(p, 65535) && !lc_ports_contains(p, 65534));
  lc_ports_free(p);
  lc__portscan_clear(&s);
  for (int port = 0; port <= 65536; port++) /* every port; 0 and 65536 are none */
    lc__portscan_add(&s, port);
  LC_CHECK(s.nlisten == 65535 && !s.nomem);
  LC_REQUIRE_OK(lc__portscan_to_ports(&p, &s));
  LC_CHECK(lc_ports_count(p) == 65535);
  LC_CHECK(lc_ports_at(p, 0) == 1);
  lc_ports_free(p);
  /* out of order and again: kept ascending, once each */
  lc__portscan_clear(&s);
  for (size_t i = 0; i < 7; i++)
    LC_CHECK_OK(lc__portscan_add(&s, (const int[]){9, 3, 5, 3, 65535, 1, 9}[i]));
  LC_CHECK(s.nlisten == 5 && s.listen[0] == 1 && s.listen[1] == 3 && s.listen[2] == 5);
  LC_CHECK(s.listen[3] == 9 && s.listen[4] == 65535);
  LC_CHECK(lc__portscan_listens(&s, 5) && !lc__portscan_listens(&s, 4));
  LC_CHECK(!lc__portscan_listens(&s, 0) && !lc__portscan_listens(&s, 70000));
  lc__portscan_clear(&s);
}

static void test_reserve_release(void) {
  LC_CHECK_OK(lc_port_reserve(40123));
  LC_CHECK(lc_port_is_reserved(40123));
  LC_CHECK(lc_port_reserve(40123) == -EADDRINUSE);
  LC_CHECK_CONTAINS(lc_error_last(), "40123");
  LC_CHECK_OK(lc_port_release(40123));
  LC_CHECK(!lc_port_is_reserved(40123));
  LC_CHECK(lc_port_release(40123) == -ENOENT);
  LC_CHECK_CONTAINS(lc_error_last(), "port 40123 is not reserved");
  LC_CHECK(lc_port_reserve(0) == -EINVAL);
  LC_CHECK(lc_port_reserve(65536) == -EINVAL);
  LC_CHECK(lc_port_release(-3) == -EINVAL);
  LC_CHECK(!lc_port_is_reserved(0) && !lc_port_is_reserved(65536));
  LC_CHECK_OK(lc_port_reserve(65535));
  LC_CHECK_OK(lc_port_release(65535));
  LC_CHECK_OK(lc_port_reserve(1));
  LC_CHECK_OK(lc_port_release(1));
}

/* A listening TCP socket of family on its loopback address, port chosen by the kernel. */
static int listen_loopback(int family, int *port) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  int fd = socket(family, SOCK_STREAM, 0);
  memset(&ss, 0, sizeof(ss));
  if (family == AF_INET6) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
    a->sin6_family = AF_INET6;
    a->sin6_addr = in6addr_loopback;
    len = sizeof(*a);
  } else {
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    len = sizeof(*a);
  }
  if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, 4) != 0 ||
      getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
    if (fd >= 0)
      close(fd);
    return -1;
  }
  *port = ntohs(family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                   : ((struct sockaddr_in *)&ss)->sin_port);
  return fd;
}

static void test_local_bind(void) {
  int port = 0, fd;
  LC_REQUIRE((fd = listen_loopback(AF_INET, &port)) >= 0);
  LC_CHECK(lc_port_is_free_local(port) == 0); /* a 127.0.0.1 listener blocks the wildcard */
  close(fd);
  LC_CHECK(lc_port_is_free_local(port) == 1);
  LC_CHECK(lc_port_is_free_local(port) == 1); /* the test itself leaves nothing behind */

  if ((fd = listen_loopback(AF_INET6, &port)) >= 0) { /* where the machine has IPv6 */
    LC_CHECK(lc_port_is_free_local(port) == 0);       /* [::1] only */
    close(fd);
    LC_CHECK(lc_port_is_free_local(port) == 1);
  } else {
    fprintf(stderr, "  no IPv6 loopback here: the [::1] case is not tested\n");
  }

  /* bound but not listening still takes the port */
  {
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    fd = socket(AF_INET, SOCK_STREAM, 0);
    LC_REQUIRE(fd >= 0);
    LC_REQUIRE(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
    LC_REQUIRE(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    port = ntohs(a.sin_port);
    LC_CHECK(lc_port_is_free_local(port) == 0);
    close(fd);
    LC_CHECK(lc_port_is_free_local(port) == 1);
  }
  LC_CHECK(lc_port_is_free_local(0) == -EINVAL);
  LC_CHECK(lc_port_is_free_local(65536) == -EINVAL);
  LC_CHECK_CONTAINS(lc_error_last(), "65536");
}

/* The first port of range that is free here, reserved by nobody; 0 when there is none. */
static int first_free_port(const lc_ports *range) {
  for (size_t i = 0; i < lc_ports_count(range); i++) {
    int port = lc_ports_at(range, i);
    if (!lc_port_is_reserved(port) && lc_port_is_free_local(port) == 1)
      return port;
  }
  return 0;
}

static void test_common_free_here_only(void) {
  lc_ports *range = NULL, *one = NULL;
  int p1 = 0, p2 = 0, p3 = 0, r, fd;
  char spec[32];
  LC_REQUIRE_OK(lc_ports_parse(&range, "23200-23219"));
  LC_REQUIRE((p1 = first_free_port(range)) != 0);
  LC_CHECK_OK(lc_ports_common_free(&p3, NULL, 0, range));
  LC_CHECK(p3 == p1);
  LC_CHECK(lc_port_is_reserved(p1));
  /* the caller's service failed with "address in use": ask again, get the next one */
  LC_CHECK_OK(lc_ports_common_free(&p2, NULL, 0, range));
  LC_CHECK(p2 != p1 && lc_ports_contains(range, p2) && p2 > p1);
  LC_CHECK_OK(lc_port_release(p1));
  LC_CHECK_OK(lc_ports_common_free(&p3, NULL, 0, range)); /* released: the first again */
  LC_CHECK(p3 == p1);
  LC_CHECK_OK(lc_port_release(p1));
  LC_CHECK_OK(lc_port_release(p2));

  /* the only port reserved: none left */
  snprintf(spec, sizeof(spec), "%d", p1);
  LC_REQUIRE_OK(lc_ports_parse(&one, spec));
  LC_CHECK_OK(lc_port_reserve(p1));
  p3 = -1;
  LC_CHECK((r = lc_ports_common_free(&p3, NULL, 0, one)) == LC_ENOPORTS);
  LC_CHECK(p3 == 0);
  LC_CHECK_CONTAINS(lc_error_last(), spec);
  LC_CHECK_CONTAINS(lc_error_last(), "on 0 hosts");
  LC_CHECK_CONTAINS(lc_error_last(), "reserved in this process: 1");
  LC_CHECK_OK(lc_port_release(p1));
  lc_ports_free(one);

  /* the only port in use here: none left; closed: handed out */
  LC_REQUIRE((fd = listen_loopback(AF_INET, &p1)) >= 0);
  snprintf(spec, sizeof(spec), "%d", p1);
  LC_REQUIRE_OK(lc_ports_parse(&one, spec));
  LC_CHECK(lc_ports_common_free(&p3, NULL, 0, one) == LC_ENOPORTS);
  LC_CHECK_CONTAINS(lc_error_last(), "in use on this machine: 1");
  LC_CHECK_CONTAINS(lc_error_last(), "(1 port)");
  close(fd);
  LC_CHECK_OK(lc_ports_common_free(&p3, NULL, 0, one));
  LC_CHECK(p3 == p1);
  LC_CHECK_OK(lc_port_release(p1));
  lc_ports_free(one);

  /* bad arguments */
  LC_CHECK(lc_ports_common_free(NULL, NULL, 0, range) == -EINVAL);
  LC_CHECK(lc_ports_common_free(&p3, NULL, 0, NULL) == -EINVAL);
  LC_CHECK(lc_ports_common_free(&p3, NULL, 2, range) == -EINVAL);
  {
    lc_runtime *none[2] = {NULL, NULL};
    LC_CHECK(lc_ports_common_free(&p3, none, 2, range) == -EINVAL);
    LC_CHECK_CONTAINS(lc_error_last(), "runtime 0 of 2 is NULL");
  }
  LC_REQUIRE_OK(lc_ports_new(&one));
  LC_CHECK(lc_ports_common_free(&p3, NULL, 0, one) == -EINVAL); /* an empty set */
  LC_CHECK(lc_ports_listening(NULL, NULL, 0) == -EINVAL);
  lc_ports_free(one);
  lc_ports_free(range);
}

/* ---- threads ------------------------------------------------------------------------------ */

#define THREADS 8
#define ROUNDS 1500
#define HOLD 4

static atomic_int owner[65536];
static atomic_int duplicates, exhausted, failures;
static lc_ports *hammer_range;

/* Takes ports through lc_ports_common_free, holds up to HOLD, checks nobody else holds them. */
static void *hammer_common(void *arg) {
  int me = (int)(intptr_t)arg, held[HOLD] = {0};
  for (int round = 0; round < ROUNDS; round++) {
    int slot = round % HOLD, port = 0, r;
    if (held[slot] != 0) {
      atomic_store(&owner[held[slot]], 0);
      if (lc_port_release(held[slot]) != 0)
        atomic_fetch_add(&failures, 1);
      held[slot] = 0;
    }
    r = lc_ports_common_free(&port, NULL, 0, hammer_range);
    if (r == LC_ENOPORTS) {
      atomic_fetch_add(&exhausted, 1);
      continue;
    }
    if (r != 0) {
      atomic_fetch_add(&failures, 1);
      continue;
    }
    if (atomic_exchange(&owner[port], me) != 0)
      atomic_fetch_add(&duplicates, 1);
    held[slot] = port;
  }
  for (int slot = 0; slot < HOLD; slot++)
    if (held[slot] != 0) {
      atomic_store(&owner[held[slot]], 0);
      lc_port_release(held[slot]);
    }
  return NULL;
}

/* Reserves and releases ports of a small range directly, as fast as it can. */
static void *hammer_reserve(void *arg) {
  int me = (int)(intptr_t)arg;
  unsigned int seed = (unsigned int)me * 7919u;
  for (int round = 0; round < ROUNDS * 20; round++) {
    int port = 45000 + (int)(rand_r(&seed) % 16);
    if (lc_port_reserve(port) != 0)
      continue;
    if (atomic_exchange(&owner[port], me) != 0)
      atomic_fetch_add(&duplicates, 1);
    atomic_store(&owner[port], 0);
    if (lc_port_release(port) != 0)
      atomic_fetch_add(&failures, 1);
  }
  return NULL;
}

static void test_reservation_threads(void) {
  pthread_t th[THREADS];
  LC_REQUIRE_OK(lc_ports_parse(&hammer_range, "23300-23363"));
  atomic_store(&duplicates, 0);
  atomic_store(&exhausted, 0);
  atomic_store(&failures, 0);
  for (int i = 0; i < THREADS; i++)
    pthread_create(&th[i], NULL, i % 2 ? hammer_reserve : hammer_common, (void *)(intptr_t)(i + 1));
  for (int i = 0; i < THREADS; i++)
    pthread_join(th[i], NULL);
  LC_CHECK(atomic_load(&duplicates) == 0);
  LC_CHECK(atomic_load(&failures) == 0);
  /* 4 threads x 4 held < 64 ports: only ports in use on this machine could exhaust it */
  if (atomic_load(&exhausted) != 0)
    fprintf(stderr, "  %d calls found no port (are 23300-23363 in use here?)\n",
            atomic_load(&exhausted));
  LC_CHECK(atomic_load(&exhausted) == 0);
  for (int port = 1; port <= 65535; port++)
    if (lc_port_is_reserved(port)) {
      fprintf(stderr, "  port %d is still reserved\n", port);
      LC_CHECK(!lc_port_is_reserved(port));
      break;
    }
  lc_ports_free(hammer_range);
}

/* Whose a watched port is, and on which addresses: ss -e's columns (no uid: column is uid 0),
 * /proc/net/tcp's uid column, "lc-uid N", duplicates kept once, unwatched ports not kept. */
static void test_listener_owners(void) {
  static const char ss_text[] =
      "lc-uid 1000\n"
      "Recv-Q Send-Q Local Address:Port  Peer Address:PortProcess\n"
      "0      128        127.0.0.1:60000      0.0.0.0:*    uid:1000 ino:11 sk:1 cgroup:/ <->\n"
      "0      128            [::1]:60000         [::]:*    uid:1000 ino:12 sk:2 v6only:1 <->\n"
      "0      128          0.0.0.0:60001      0.0.0.0:*    uid:1000 ino:13 sk:3 <->\n"
      "0      128             [::]:60001         [::]:*    uid:1000 ino:14 sk:4 v6only:1 <->\n"
      "0      128        127.0.0.1:60002      0.0.0.0:*    uid:65534 ino:15 sk:5 <->\n"
      "0      128            [::1]:60002         [::]:*    uid:1000 ino:16 sk:6 <->\n"
      "0      128        127.0.0.1:60003      0.0.0.0:*    ino:17 sk:7 cgroup:/uid:5 <->\n"
      "0      128        127.0.0.1:60003      0.0.0.0:*    ino:18 sk:8 <->\n"
      "0      128        127.0.0.1:22         0.0.0.0:*    ino:19 sk:9 <->\n";
  static const char proc_text[] =
      "lc-uid 0\n"
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
      "timeout inode\n"
      "   0: 0100007F:EA60 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        "
      "0 7469637 1 0000000000000000 100 0 0 10 0\n"
      "   1: 00000000:EA61 00000000:0000 0A 00000000:00000000 00:00000000 00000000 65534        "
      "0 7469638 1 0000000000000000 100 0 0 10 0\n"
      "  sl  local_address                         remote_address                        st "
      "tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
      "   0: 00000000000000000000000001000000:EA60 00000000000000000000000000000000:0000 0A "
      "00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0\n"
      "   1: 00000000000000000000000000000000:EA62 00000000000000000000000000000000:0000 0A "
      "00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 100 0 0 10 0\n";
  uint8_t watch[65536 / 8] = {0};
  lc__listener found[16];
  lc__portscan s;
  char text[80];
  const lc__listener *o;
  size_t wide = 0;

  for (int p = 60000; p <= 60003; p++)
    watch[p / 8] |= (uint8_t)(1u << (p % 8));
  memset(&s, 0, sizeof(s));
  s.watch = watch;
  s.found = found;
  s.found_cap = 16;
  lc__portscan_text(&s, ss_text, strlen(ss_text));
  LC_CHECK(s.has_uid && s.uid == 1000);
  LC_CHECK(s.nfound == 7); /* 60003's two sockets are one listener; port 22 is not watched */
  LC_CHECK(s.found_over == 0);
  LC_CHECK(lc__portscan_ours(&s, 60000) && lc__portscan_stranger(&s, 60000) == NULL);
  LC_CHECK(lc__portscan_ours(&s, 60001) && lc__portscan_stranger(&s, 60001) == NULL);
  LC_REQUIRE((o = lc__portscan_stranger(&s, 60002)) != NULL);
  LC_CHECK(o->uid == 65534);
  lc__listener_format(o, text, sizeof(text));
  LC_CHECK_STR(text, "127.0.0.1:60002");
  LC_CHECK(!lc__portscan_ours(&s, 60004));
  /* no uid: column before ino: is uid 0 (a "uid:" in a cgroup path after it does not count) */
  LC_REQUIRE((o = lc__portscan_stranger(&s, 60003)) != NULL);
  LC_CHECK(o->uid == 0);
  for (size_t k = 0; k < s.nfound; k++) {
    if (found[k].port != 60001)
      continue;
    LC_CHECK(!lc__listener_is_loopback(&found[k]));
    lc__listener_format(&found[k], text, sizeof(text));
    LC_CHECK(strcmp(text, "0.0.0.0:60001") == 0 || strcmp(text, "[::]:60001") == 0);
    wide++;
  }
  LC_CHECK(wide == 2);

  lc__portscan_clear(&s);
  memset(&s, 0, sizeof(s));
  s.watch = watch;
  s.found = found;
  s.found_cap = 16;
  lc__portscan_text(&s, proc_text, strlen(proc_text));
  LC_CHECK(s.has_uid && s.uid == 0);
  LC_CHECK(s.nfound == 4);
  LC_CHECK(lc__portscan_ours(&s, 60000) && lc__portscan_stranger(&s, 60000) == NULL);
  for (size_t k = 0; k < s.nfound; k++)
    if (found[k].port == 60000)
      LC_CHECK(lc__listener_is_loopback(&found[k])); /* 127.0.0.1 and ::1 */
  LC_REQUIRE((o = lc__portscan_stranger(&s, 60001)) != NULL);
  LC_CHECK(o->uid == 65534 && !lc__listener_is_loopback(o));
  LC_CHECK(!lc__portscan_ours(&s, 60001));
  LC_CHECK(lc__portscan_ours(&s, 60002));
  lc__listener_format(&found[3], text, sizeof(text));
  LC_CHECK_STR(text, "[::]:60002");

  /* room for fewer than there are: counted, and the owner is then unknown (taken as ours) */
  lc__portscan_clear(&s);
  memset(&s, 0, sizeof(s));
  s.watch = watch;
  s.found = found;
  s.found_cap = 1;
  lc__portscan_text(&s, ss_text, strlen(ss_text));
  LC_CHECK(s.nfound == 1 && s.found_over > 0);
  /* no "lc-uid" line: nobody is a stranger, the bitmap decides */
  lc__portscan_clear(&s);
  memset(&s, 0, sizeof(s));
  s.watch = watch;
  s.found = found;
  s.found_cap = 16;
  lc__portscan_text(&s, ss_text + strlen("lc-uid 1000\n"),
                    strlen(ss_text) - strlen("lc-uid 1000\n"));
  LC_CHECK(!s.has_uid && lc__portscan_stranger(&s, 60002) == NULL && lc__portscan_ours(&s, 60002));
  lc__portscan_clear(&s);
}

/* A host of a large mesh lists thousands of listeners: read and judged through the index by
 * port (linear), with the same answers as the walk of every entry (the index-less scan). */
static void test_listener_index(void) {
  enum { NPORTS = 2000, FIRST = 61000, CAP = 8 * NPORTS + 32 };
  static uint8_t watch[65536 / 8];
  static lc__listener found_a[CAP], found_b[CAP];
  lc__portscan a, b;
  char *text = malloc((size_t)NPORTS * 2 * 100 + 400);
  size_t n = 0;
  LC_REQUIRE(text != NULL);
  n += (size_t)sprintf(text + n, "lc-uid 1000\n");
  for (int p = FIRST; p < FIRST + NPORTS; p++) {
    watch[p / 8] |= (uint8_t)(1u << (p % 8));
    n += (size_t)sprintf(text + n, "0 128 127.0.0.1:%d 0.0.0.0:* uid:1000 ino:1 sk:1 <->\n", p);
    n += (size_t)sprintf(text + n, "0 128 [::1]:%d [::]:* uid:1000 ino:2 sk:2 <->\n", p);
  }
  /* a copy (SO_REUSEPORT) counts once; a stranger listens wide on one port */
  n += (size_t)sprintf(text + n, "0 128 127.0.0.1:%d 0.0.0.0:* uid:1000 ino:3 sk:3 <->\n",
                       FIRST + 500);
  n += (size_t)sprintf(text + n, "0 128 [::]:%d [::]:* uid:65534 ino:4 sk:4 <->\n", FIRST + 1000);
  memset(&a, 0, sizeof(a));
  a.watch = watch;
  a.found = found_a;
  a.found_cap = CAP;
  LC_REQUIRE(lc__portscan_index(&a) == 0);
  b = a;
  b.found = found_b;
  b.heads = b.next = NULL;
  lc__portscan_text(&a, text, n);
  lc__portscan_text(&b, text, n);
  LC_CHECK(a.nfound == 2 * NPORTS + 1 && b.nfound == a.nfound);
  LC_CHECK(a.found_over == 0 && b.found_over == 0);
  for (int p = FIRST - 1; p <= FIRST + NPORTS; p++) {
    size_t ka = 0, kb = 0, loop_a = 0;
    for (size_t k = lc__portscan_first(&a, p); k < a.nfound; k = lc__portscan_next(&a, k)) {
      LC_CHECK(found_a[k].port == p);
      ka++;
      loop_a += !lc__listener_is_loopback(&found_a[k]);
    }
    for (size_t k = lc__portscan_first(&b, p); k < b.nfound; k = lc__portscan_next(&b, k)) {
      LC_CHECK(found_b[k].port == p);
      kb++;
    }
    LC_CHECK(ka == kb);
    /* in the listing's order, as the walk gives them: 127.0.0.1 before [::1] */
    if (ka >= 2)
      LC_CHECK(!found_a[lc__portscan_first(&a, p)].v6);
    LC_CHECK(ka == (p < FIRST || p >= FIRST + NPORTS ? 0u : p == FIRST + 1000 ? 3u : 2u));
    LC_CHECK(loop_a == (p == FIRST + 1000 ? 1u : 0u));
    LC_CHECK((lc__portscan_stranger(&a, p) != NULL) == (p == FIRST + 1000));
    LC_CHECK((lc__portscan_stranger(&b, p) != NULL) == (p == FIRST + 1000));
    LC_CHECK(lc__portscan_ours(&a, p) == lc__portscan_ours(&b, p));
  }
  LC_CHECK(lc__portscan_stranger(&a, FIRST + 1000)->uid == 65534);
  lc__portscan_unindex(&a);
  LC_CHECK(a.heads == NULL && a.next == NULL);
  lc__portscan_clear(&a);
  lc__portscan_clear(&b);
  free(text);
}

/*
 * A listing's watch as listing_watch makes it: a bitmap of the watched range alone (ports from
 * watch_lo to watch_hi), and found growing from a few entries up to found_max as listeners
 * come, with and without the index: every listener of the range kept once, in order, none from
 * outside it (one below, one above), the index right after each growth; past found_max the
 * rest is counted in found_over.
 */
static void test_listener_growth(void) {
  enum { NPORTS = 300, FIRST = 61000 };
  uint8_t watch[NPORTS / 8 + 1] = {0};
  char *text = malloc((size_t)(NPORTS + 2) * 2 * 100 + 100);
  lc__portscan a, b;
  size_t n = 0;
  LC_REQUIRE(text != NULL);
  n += (size_t)sprintf(text + n, "lc-uid 1000\n");
  for (int p = FIRST - 1; p <= FIRST + NPORTS; p++) {
    if (p >= FIRST && p < FIRST + NPORTS)
      watch[(p - FIRST) / 8] |= (uint8_t)(1u << ((p - FIRST) % 8));
    n += (size_t)sprintf(text + n, "0 128 127.0.0.1:%d 0.0.0.0:* uid:1000 ino:1 sk:1 <->\n", p);
    n += (size_t)sprintf(text + n, "0 128 [::1]:%d [::]:* uid:1000 ino:2 sk:2 <->\n", p);
  }
  for (size_t max = 8 * NPORTS + 32; max >= 10; max = max == 10 ? 0 : 10) {
    memset(&a, 0, sizeof(a));
    a.watch = watch;
    a.watch_lo = FIRST;
    a.watch_hi = FIRST + NPORTS - 1;
    a.found_cap = 4;
    a.found_max = max;
    b = a;
    LC_REQUIRE((a.found = calloc(4, sizeof(*a.found))) != NULL);
    LC_REQUIRE((b.found = calloc(4, sizeof(*b.found))) != NULL);
    LC_REQUIRE(lc__portscan_index(&a) == 0);
    lc__portscan_text(&a, text, n);
    lc__portscan_text(&b, text, n);
    if (max == 10) {
      LC_CHECK(a.nfound == 10 && b.nfound == 10);
      LC_CHECK(a.found_over == 2 * NPORTS - 10 && b.found_over == a.found_over);
      LC_CHECK(lc__portscan_ours(&a, FIRST) == 1); /* cannot tell whose: as before */
    } else {
      LC_CHECK(a.nfound == 2 * NPORTS && b.nfound == a.nfound);
      LC_CHECK(a.found_over == 0 && b.found_over == 0);
      LC_CHECK(a.found_cap >= a.nfound && a.found_cap <= max);
      for (int p = FIRST - 1; p <= FIRST + NPORTS; p++) {
        size_t ka = 0, kb = 0;
        for (size_t k = lc__portscan_first(&a, p); k < a.nfound; k = lc__portscan_next(&a, k)) {
          LC_CHECK(a.found[k].port == p && a.found[k].v6 == (ka == 1));
          ka++;
        }
        for (size_t k = lc__portscan_first(&b, p); k < b.nfound; k = lc__portscan_next(&b, k))
          kb++;
        LC_CHECK(ka == kb);
        LC_CHECK(ka == (p < FIRST || p >= FIRST + NPORTS ? 0u : 2u));
      }
    }
    lc__portscan_unindex(&a);
    lc__portscan_clear(&a);
    lc__portscan_clear(&b);
    free(a.found);
    free(b.found);
  }
  free(text);
}

/*
 * "lc-uid N LOOPBACK": the host's boot id and network namespace, as LC__LISTING_WHO prints them.
 * The same text is the same loopback, blanks around it aside; another namespace or another boot
 * is another; no namespace said (not Linux, an old /proc) is "untold", never equal to a told one;
 * a line without it leaves the uid read. This machine's own is told, and equals what the shell
 * command prints here.
 */
static void test_loopback_ids(void) {
  static const char a[] = "3f1c2d8e-0000-4000-8000-000000000001net:[4026531840]";
  static const char b[] = "3f1c2d8e-0000-4000-8000-000000000001net:[4026532111]";
  static const char c[] = "9a9a9a9a-0000-4000-8000-000000000002net:[4026531840]";
  lc__portscan s;
  char line[256], here[256] = "";
  FILE *f;
  uint64_t ia = lc__loopback_id(a, strlen(a));
  LC_CHECK(ia > LC__LOOPBACK_UNTOLD);
  snprintf(line, sizeof(line), "  %s \r", a);
  LC_CHECK(lc__loopback_id(line, strlen(line)) == ia);
  LC_CHECK(lc__loopback_id(b, strlen(b)) != ia);
  LC_CHECK(lc__loopback_id(c, strlen(c)) != ia);
  LC_CHECK(lc__loopback_id("", 0) == LC__LOOPBACK_UNTOLD);
  LC_CHECK(lc__loopback_id("3f1c2d8e-0000", 13) == LC__LOOPBACK_UNTOLD);
  memset(&s, 0, sizeof(s));
  snprintf(line, sizeof(line), "lc-uid 1000 %s", a);
  lc__portscan_line(&s, line, strlen(line));
  LC_CHECK(s.has_uid && s.uid == 1000 && s.loopback == ia);
  memset(&s, 0, sizeof(s));
  lc__portscan_line(&s, "lc-uid 0", 8);
  LC_CHECK(s.has_uid && s.uid == 0 && s.loopback == LC__LOOPBACK_UNTOLD);
  /* this machine: what the listing's own words print here */
  LC_CHECK(lc__loopback_here() > LC__LOOPBACK_UNTOLD);
  f = popen("sh -c '" LC__LISTING_WHO "'", "r");
  LC_REQUIRE(f != NULL);
  LC_CHECK(fgets(here, sizeof(here), f) != NULL);
  pclose(f);
  memset(&s, 0, sizeof(s));
  lc__portscan_line(&s, here, strcspn(here, "\n"));
  LC_CHECK(s.has_uid && s.uid == (unsigned long)getuid());
  LC_CHECK(s.loopback == lc__loopback_here());
}

LC_TEST_MAIN(LC_TEST(test_parse_forms), LC_TEST(test_listener_owners), LC_TEST(test_parse_merges),
             LC_TEST(test_parse_bad_input), LC_TEST(test_iterate_contains),
             LC_TEST(test_add_and_format), LC_TEST(test_proc_net_tcp_recorded),
             LC_TEST(test_proc_net_tcp_line_by_line), LC_TEST(test_proc_net_tcp_malformed),
             LC_TEST(test_ss_recorded), LC_TEST(test_ss_forms_and_malformed),
             LC_TEST(test_proc_net_tcp_every_port), LC_TEST(test_reserve_release),
             LC_TEST(test_local_bind), LC_TEST(test_common_free_here_only),
             LC_TEST(test_reservation_threads), LC_TEST(test_listener_index),
             LC_TEST(test_listener_growth), LC_TEST(test_loopback_ids))
