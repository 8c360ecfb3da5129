/*
 * test_inventory.c - host ranges as pdsh and ClusterShell write them ("node[01-16],gpu[1-4,7]"):
 * the expander itself (padding, lists, several groups, user and port kept, IPv6 addresses left
 * alone, every bad spec and its message, the cap), and the same ranges in host lists and
 * inventory files, with gpus=N slots=N on every host and repeats dropped.
 */
#include "hostrange.h"
#include "lazycluster/inventory.h"
#include "lc_test.h"

#include <errno.h>

/* Collects the hosts of a spec, joined with blanks; stops with -42 at host number stop_at. */
typedef struct collect {
  lc__buf b;
  size_t n, stop_at;
} collect;

static int take(const char *host, size_t len, void *payload) {
  collect *c = payload;
  if (++c->n == c->stop_at)
    return -42;
  if (c->b.len > 0 && lc__buf_append(&c->b, " ", 1) < 0)
    return -ENOMEM;
  return lc__buf_append(&c->b, host, len);
}

/* The hosts of spec, joined with blanks ("" after an error); r gets what the expander returned. */
static char *expand(const char *spec, int *r, char *why, size_t wn) {
  collect c = {{0}, 0, 0};
  char *s;
  why[0] = '\0';
  *r = lc__hostrange_expand(spec, strlen(spec), take, &c, why, wn);
  s = lc__strndup(c.b.data ? c.b.data : "", c.b.len);
  lc__buf_free(&c.b);
  return s;
}

static void test_expand(void) {
  static const struct {
    const char *spec, *hosts;
  } cases[] = {
      {"lab1", "lab1"},
      {"node[01-03]", "node01 node02 node03"},
      {"n[8-10]", "n8 n9 n10"},
      {"n[0-2]", "n0 n1 n2"},
      {"gpu[1-4,7]", "gpu1 gpu2 gpu3 gpu4 gpu7"},
      {"gpu[7,1-2]", "gpu7 gpu1 gpu2"},
      {"n[007]", "n007"},
      {"n[098-101]", "n098 n099 n100 n101"},
      {"n[9-11,01-02]", "n9 n10 n11 n01 n02"},
      {"r[1-2]n[1-2]", "r1n1 r1n2 r2n1 r2n2"},
      {"a[1-2].b[3].c", "a1.b3.c a2.b3.c"},
      {"[1-2]x", "[1-2]x"}, /* a "[" that starts the host is an address, as before */
      {"user@node[1-3]:2222", "user@node1:2222 user@node2:2222 user@node3:2222"},
      {"u[1-2]@lab", "u1@lab u2@lab"},
      {"[::1]:22", "[::1]:22"},
      {"user@[fe80::1]", "user@[fe80::1]"},
      {"root@[fe80::1]:2222", "root@[fe80::1]:2222"},
      {"[10.0.0.1]", "[10.0.0.1]"},
      {"fe80::1", "fe80::1"},
  };
  char why[200];
  int r;
  for (size_t i = 0; i < LC_ARRAY_SIZE(cases); i++) {
    char *got = expand(cases[i].spec, &r, why, sizeof(why));
    if (r != 0 || strcmp(got, cases[i].hosts) != 0)
      fprintf(stderr, "  case %s: %d '%s' '%s'\n", cases[i].spec, r, got, why);
    LC_CHECK(r == 0);
    LC_CHECK_STR(got, cases[i].hosts);
    free(got);
  }
  {
    /* [01-100]: the low end's padding, then the numbers that are longer */
    char *got = expand("n[01-100]", &r, why, sizeof(why));
    LC_CHECK(r == 0);
    size_t words = 1;
    for (const char *p = got; *p; p++)
      words += *p == ' ';
    LC_CHECK(r == 0 && words == 100);
    LC_CHECK(strncmp(got, "n01 n02 ", 8) == 0);
    LC_CHECK_CONTAINS(got, " n09 n10 ");
    LC_CHECK(strlen(got) > 13 && strcmp(got + strlen(got) - 13, " n98 n99 n100") == 0);
    free(got);
  }
}

static void test_expand_errors(void) {
  static const struct {
    const char *spec, *why;
  } cases[] = {
      {"node[1-3", "'[' is not closed"},
      {"node[1-3:22", "'[' is not closed"},
      {"node[]", "an empty range '[]'"},
      {"node[1,,3]", "an empty item in '[1,,3]'"},
      {"node[1,]", "an empty item in '[1,]'"},
      {"node[5-1]", "'5-1' in '[5-1]' runs backwards"},
      {"node[a-c]", "'a-c' in '[a-c]' is not a number or a range of numbers"},
      {"node[1-]", "'1-' in '[1-]' is not a number"},
      {"node[-3]", "'-3' in '[-3]' is not a number"},
      {"node[1-2-3]", "'1-2-3' in '[1-2-3]' is not a number"},
      {"node[ 1]", "' 1' in '[ 1]' is not a number"},
      {"node[1234567890]", "'1234567890' in '[1234567890]' is not a number"},
      {"node[1-010]", "'1-010' in '[1-010]' pads its two ends differently"},
      {"node[01-010]", "'01-010' in '[01-010]' pads its two ends differently"},
      {"node1]", "']' without '['"},
      {"n[1]]", "']' without '['"},
      {"n[[1]]", "'[' inside '[...]'"},
      {"n[1-100001]", "it names more than 100000 hosts"},
      {"a[1-1000]b[1-101]", "it names more than 100000 hosts"},
      {"a[0-999999999]b[1-999999999]", "it names more than 100000 hosts"},
  };
  char why[200];
  int r;
  for (size_t i = 0; i < LC_ARRAY_SIZE(cases); i++) {
    char *got = expand(cases[i].spec, &r, why, sizeof(why));
    if (r != LC_ECONFIG || strstr(why, cases[i].why) == NULL)
      fprintf(stderr, "  case %s: %d '%s'\n", cases[i].spec, r, why);
    LC_CHECK(r == LC_ECONFIG);
    LC_CHECK_CONTAINS(why, cases[i].why);
    LC_CHECK_STR(got, ""); /* a bad spec names no host at all */
    free(got);
  }
  /* exactly at the cap is fine */
  {
    collect c = {{0}, 0, 0};
    LC_CHECK_OK(lc__hostrange_expand("a[1-1000]b[1-100]", 17, take, &c, why, sizeof(why)));
    LC_CHECK(c.n == 100000);
    lc__buf_free(&c.b);
  }
  /* what the callback returns stops the expansion and comes back; why stays untouched */
  {
    collect c = {{0}, 0, 3};
    why[0] = '\0';
    LC_CHECK(lc__hostrange_expand("n[1-9]", 6, take, &c, why, sizeof(why)) == -42);
    LC_CHECK(c.n == 3);
    LC_CHECK_STR(why, "");
    lc__buf_free(&c.b);
  }
}

static void test_comma(void) {
  const char *s = "node[1,3],gpu[1-2,7],x";
  LC_CHECK(lc__hostrange_comma(s, strlen(s)) == s + 9);
  LC_CHECK(lc__hostrange_comma(s + 10, strlen(s + 10)) == s + 20);
  LC_CHECK(lc__hostrange_comma("lab1", 4) == NULL);
  LC_CHECK(lc__hostrange_comma("n[1,2", 5) == NULL); /* unclosed: the expander says so */
}

static void test_list_ranges(void) {
  lc_inventory *inv = NULL;
  static const char *want[] = {"node01", "node02", "node03", "gpu1", "gpu2", "gpu7", "lab9"};
  LC_REQUIRE_OK(lc_inventory_from_list(&inv, "node[01-03],gpu[1-2,7] gpus=4 slots=2, lab9"));
  LC_REQUIRE(lc_inventory_count(inv) == LC_ARRAY_SIZE(want));
  for (size_t i = 0; i < LC_ARRAY_SIZE(want); i++)
    LC_CHECK_STR(lc_inventory_host(inv, i), want[i]);
  LC_CHECK(lc_inventory_line(inv, 2) == 1 && lc_inventory_line(inv, 3) == 2);
  LC_CHECK(lc_inventory_line(inv, 6) == 3);
  LC_CHECK(lc_inventory_gpus(inv, 0) == -1 && lc_inventory_slots(inv, 0) == 0);
  for (size_t i = 3; i < 6; i++)
    LC_CHECK(lc_inventory_gpus(inv, i) == 4 && lc_inventory_slots(inv, i) == 2);
  lc_inventory_free(inv);

  /* user and port kept on each host; IPv6 addresses are not ranges */
  LC_REQUIRE_OK(
      lc_inventory_from_list(&inv, "root@n[1-2]:2222,[::1]:22,user@[fe80::1],[fe80::2]:2200"));
  LC_REQUIRE(lc_inventory_count(inv) == 5);
  LC_CHECK_STR(lc_inventory_host(inv, 0), "root@n1:2222");
  LC_CHECK_STR(lc_inventory_host(inv, 1), "root@n2:2222");
  LC_CHECK_STR(lc_inventory_host(inv, 2), "[::1]:22");
  LC_CHECK_STR(lc_inventory_host(inv, 3), "user@[fe80::1]");
  LC_CHECK_STR(lc_inventory_host(inv, 4), "[fe80::2]:2200");
  lc_inventory_free(inv);

  /* repeats with the same gpus and slots are dropped, the first place kept, as pdsh does */
  LC_REQUIRE_OK(lc_inventory_from_list(&inv, "n[1-3,2-4],n2,lab1,lab2,lab1"));
  LC_REQUIRE(lc_inventory_count(inv) == 6);
  LC_CHECK_STR(lc_inventory_host(inv, 3), "n4");
  LC_CHECK_STR(lc_inventory_host(inv, 5), "lab2");
  lc_inventory_free(inv);

  {
    static const struct {
      const char *list, *message;
    } cases[] = {
        {"node[1-3", "host list 'node[1-3': item 1: bad host range 'node[1-3': '[' is not closed"},
        {"lab1,node[5-1]",
         "host list 'lab1,node[5-1]': item 2: bad host range 'node[5-1]': '5-1' in '[5-1]' runs "
         "backwards"},
        {"gpu[1-2,x]", "item 1: bad host range 'gpu[1-2,x]': 'x' in '[1-2,x]' is not a number"},
        {"n[]", "item 1: bad host range 'n[]': an empty range '[]'"},
        {"n[1-200000]", "item 1: bad host range 'n[1-200000]': it names more than 100000 hosts"},
        {"n[1-99999],m[1-2]", "host list 'n[1-99999],m[1-2]': item 2: more than 100000 hosts"},
        {"n[1-2]:0", "item 1: bad host 'n1:0' (from 'n[1-2]:0'): bad port '0' (1 to 65535)"},
        {"n[1-2] gpus=1,n[2-3]",
         "item 2: host 'n2' (from 'n[2-3]') is listed twice (first as item 1), with other gpus "
         "or slots"},
        {"u[1]@[::1]", "bad host 'u[1]@[::1]': '[' outside an [address] that starts the host"},
        {"[fe[80]", "bad host '[fe[80]': '[' outside an [address]"},
        {"n[1-2]#x", "item 1: '#' cannot be part of a host"},
        {"n[1, 3]", "item 1: unexpected '3]' after the host (expected gpus=N or slots=N; a range "
                    "has no blanks: n[1,3])"},
    };
    for (size_t i = 0; i < LC_ARRAY_SIZE(cases); i++) {
      int r = lc_inventory_from_list(&inv, cases[i].list);
      if (r != LC_ECONFIG || strstr(lc_error_last(), cases[i].message) == NULL)
        fprintf(stderr, "  case %zu: %d '%s'\n", i, r, lc_error_last());
      LC_CHECK(r == LC_ECONFIG);
      LC_CHECK(inv == NULL);
      LC_CHECK_CONTAINS(lc_error_last(), cases[i].message);
    }
  }

  /* the cap itself, checked for repeats in linear time */
  LC_REQUIRE_OK(lc_inventory_from_list(&inv, "n[1-100000],n[1-9]"));
  LC_CHECK(lc_inventory_count(inv) == 100000);
  LC_CHECK_STR(lc_inventory_host(inv, 99999), "n100000");
  lc_inventory_free(inv);

  /* one host added by hand is not a range */
  LC_REQUIRE_OK(lc_inventory_new(&inv));
  LC_CHECK(lc_inventory_add(inv, "node[1-2]", -1, 0) == LC_ECONFIG);
  LC_CHECK_CONTAINS(lc_error_last(), "bad host 'node[1-2]': '[' outside an [address]");
  LC_CHECK_OK(lc_inventory_add(inv, "[::1]:22", -1, 0));
  lc_inventory_free(inv);
}

static void test_file_ranges(void) {
  static const char text[] = "# the lab\n"
                             "node[01-04] gpus=2 slots=3   # four GPU hosts\n"
                             "lab[8-10]\n"
                             "root@[fe80::1]:2222 gpus=0\n";
  static const char *want[] = {"node01", "node02", "node03", "node04",
                               "lab8",   "lab9",   "lab10",  "root@[fe80::1]:2222"};
  lc_inventory *inv = NULL;
  LC_REQUIRE_OK(lc_inventory_parse_text(&inv, text, strlen(text), "hosts"));
  LC_REQUIRE(lc_inventory_count(inv) == LC_ARRAY_SIZE(want));
  for (size_t i = 0; i < LC_ARRAY_SIZE(want); i++)
    LC_CHECK_STR(lc_inventory_host(inv, i), want[i]);
  for (size_t i = 0; i < 4; i++) {
    LC_CHECK(lc_inventory_gpus(inv, i) == 2 && lc_inventory_slots(inv, i) == 3);
    LC_CHECK(lc_inventory_line(inv, i) == 2);
  }
  LC_CHECK(lc_inventory_gpus(inv, 4) == -1 && lc_inventory_slots(inv, 4) == 0);
  LC_CHECK(lc_inventory_line(inv, 6) == 3);
  LC_CHECK(lc_inventory_gpus(inv, 7) == 0 && lc_inventory_line(inv, 7) == 4);
  lc_inventory_free(inv);

  {
    static const struct {
      const char *text, *message;
    } cases[] = {
        {"lab1\nx[2-1] gpus=1\n", "hosts:2: bad host range 'x[2-1]': '2-1' in '[2-1]' runs "
                                  "backwards"},
        {"node[1-4] gpus=2\nnode3 gpus=1\n",
         "hosts:2: host 'node3' is listed twice (first as line 1), with other gpus or slots"},
        {"node[1,2\n", "hosts:1: bad host range 'node[1,2': '[' is not closed"},
        {"a,b[1-2]\n", "hosts:1: bad host 'a,b1' (from 'a,b[1-2]'): ',' cannot be part of a host"},
    };
    for (size_t i = 0; i < LC_ARRAY_SIZE(cases); i++) {
      int r = lc_inventory_parse_text(&inv, cases[i].text, strlen(cases[i].text), "hosts");
      if (r != LC_ECONFIG || strstr(lc_error_last(), cases[i].message) == NULL)
        fprintf(stderr, "  case %zu: %d '%s'\n", i, r, lc_error_last());
      LC_CHECK(r == LC_ECONFIG);
      LC_CHECK(inv == NULL);
      LC_CHECK_CONTAINS(lc_error_last(), cases[i].message);
    }
  }
  /* the same host on two lines with the same values: kept once, at its first line */
  LC_REQUIRE_OK(lc_inventory_parse_text(&inv, "n[1-2] slots=4\nn2 slots=4\n", 26, "hosts"));
  LC_CHECK(lc_inventory_count(inv) == 2 && lc_inventory_line(inv, 1) == 1);
  lc_inventory_free(inv);
}

LC_TEST_MAIN(LC_TEST(test_expand), LC_TEST(test_expand_errors), LC_TEST(test_comma),
             LC_TEST(test_list_ranges), LC_TEST(test_file_ranges))
