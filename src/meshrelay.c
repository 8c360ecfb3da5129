/*
 * meshrelay.c - a host's listens for the tunnel mesh, through one helper there instead of sshd.
 *
 * A mesh of W workers on H hosts listens on every worker's port on every other host: W listens
 * per host. As sshd's -R listens each is a global request and its answer, one at a time per
 * connection (libssh 0.10), and a port listing that checks it: our CPU and memory grew with
 * W x H (37 us and ~690 B per listen, docs/benchmarks.md), 262,144 listens for 1,024 workers on
 * 256 hosts. The relay makes it W + 1 per host, and the W are the host's own work:
 *
 *   - a helper on the host (perl: Debian's perl-base is always there; under a lifeline, with a
 *     stdin that we feed) listens on 127.0.0.1 for the ports we send it, in lines of
 *     "+ SEQ PORT..." (answered "ok SEQ", or "fail SEQ PORT why" with none of that line's ports
 *     kept) and "- SEQ PORT..." (no answer);
 *   - each connection it accepts on PORT it carries to ONE -R forward of ours, the carrier,
 *     connecting from 127.1.HI.LO (PORT = HI * 256 + LO): the address sshd reports for the
 *     forwarded connection says which port it was made to, so no byte of the stream is ours;
 *   - the carrier routes it to 127.0.0.1:PORT here, as a -R forward of PORT would (route), and
 *     only for the ports this relay listens on (any other address is refused).
 *
 * The helper picks the carrier's port (a bind to port 0 on the host's loopback) and says
 * "port P" once it knows its loopback takes 127.1.0.1; it ends at its lifeline's end like any
 * other process (the connection lost, the heartbeat silent, the runtime freed). A host without
 * perl, or whose loopback does not take 127.1.0.1 (not Linux), or whose helper does not answer
 * in time, is served with sshd's listens by the caller instead, as before the relay.
 */
#include "engine.h"
#include "runtime_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RELAY_START_MS 30000  /* the helper says its carrier's port, and the carrier is up */
#define RELAY_ANSWER_MS 30000 /* an answer to a line of ports */
#define RELAY_LINE_PORTS 512  /* ports per line (a line of at most ~3 KiB) */
#define RELAY_SLICE_MS 50     /* waits look at the helper's end this often */

/* The connections a carrier takes at once: those of all the host's mesh ports. */
#define RELAY_MAX_CONNS (LC_FORWARD_MAX_CONNECTIONS * 8)

/* The helper: sh for perl's place and the descriptor limit, then perl on descriptor 3. */
static const char helper_sh[] =
    "ulimit -n \"$(ulimit -Hn)\" 2>/dev/null\n"
    "command -v perl >/dev/null 2>&1 || { echo 'fail 0 0 no perl on this host'; exit 127; }\n"
    "exec perl /dev/fd/3 3<<'LC_MESH_RELAY'\n"
    "use strict;\n"
    "use Socket qw(:DEFAULT IPPROTO_IPV6 IPV6_V6ONLY inet_pton pack_sockaddr_in6);\n"
    "use Errno qw(EINPROGRESS);\n"
    "use Fcntl qw(F_GETFL F_SETFL O_NONBLOCK);\n"
    "$SIG{PIPE} = 'IGNORE';\n"
    "$| = 1;\n"
    "sub lsock {\n"
    "  my ($fam, $addr, $port) = @_;\n"
    "  my $s;\n"
    "  socket($s, $fam, SOCK_STREAM, 0) or return (undef, \"$!\");\n"
    "  setsockopt($s, SOL_SOCKET, SO_REUSEADDR, 1);\n"
    "  setsockopt($s, IPPROTO_IPV6, IPV6_V6ONLY, 1) if $fam == AF_INET6;\n"
    "  my $sa = $fam == AF_INET ? pack_sockaddr_in($port, inet_aton($addr))\n"
    "                           : pack_sockaddr_in6($port, inet_pton(AF_INET6, $addr));\n"
    "  bind($s, $sa) or return (undef, \"$!\");\n"
    "  return ($s, '');\n"
    "}\n"
    "sub nb { fcntl($_[0], F_SETFL, fcntl($_[0], F_GETFL, 0) | O_NONBLOCK) }\n"
    "my ($t, $e) = lsock(AF_INET, '127.1.0.1', 0);\n"
    "if (!$t) { print \"fail 0 0 cannot bind 127.1.0.1 ($e)\\n\"; exit 3 }\n"
    "close $t;\n"
    "my ($c, $ce) = lsock(AF_INET, '127.0.0.1', 0);\n"
    "if (!$c) { print \"fail 0 0 cannot bind 127.0.0.1 ($ce)\\n\"; exit 3 }\n"
    "my ($cport) = unpack_sockaddr_in(getsockname($c));\n"
    "close $c;\n"
    "my $carrier = pack_sockaddr_in($cport, inet_aton('127.0.0.1'));\n"
    "print \"port $cport\\n\";\n";

/* The rest of it (one C string may not be longer than 4,095 bytes): the carrying, in this one
 * process, with non-blocking sockets and a select loop (no process per connection). */
static const char helper_pl[] =
    /* %L: port -> listening socket. %E: fd -> one end of a carried connection: its socket (s), what
     * waits to be written to it (out, at most ~128 KiB: its peer is not read while 64 KiB wait),
     * whether it said EOF (eof), whether its write side is shut (shut), its other end (peer), and
     * whether it is still connecting to the carrier (wait). */
    "my (%L, %E, $in);\n"
    "sub drop {\n"
    "  my ($x) = @_;\n"
    "  for my $y ($x, $x->{peer}) { delete $E{$y->{fd}}; close $y->{s} }\n"
    "}\n"
    "sub flush {\n"
    "  my ($x) = @_;\n"
    "  return 1 if $x->{wait};\n"
    "  if (length $x->{out}) {\n"
    "    my $w = syswrite($x->{s}, $x->{out});\n"
    "    return $!{EAGAIN} ? 1 : 0 unless defined $w;\n"
    "    substr($x->{out}, 0, $w, '');\n"
    "  }\n"
    "  return 1 if length $x->{out} || !$x->{peer}{eof} || $x->{shut};\n"
    "  shutdown($x->{s}, 1);\n"
    "  $x->{shut} = 1;\n"
    "  return 1;\n"
    "}\n"
    "sub carry {\n"
    "  my ($port) = @_;\n"
    "  for (1 .. 64) {\n"
    "    my $cl;\n"
    /* out of descriptors: the port stays readable, so a pause, not a spin, until some close */
    "    if (!accept($cl, $L{$port})) {\n"
    "      select(undef, undef, undef, 0.05) if $!{EMFILE} || $!{ENFILE};\n"
    "      return;\n"
    "    }\n"
    "    my ($o) = lsock(AF_INET, '127.1.' . ($port >> 8) . '.' . ($port & 255), 0);\n"
    "    if (!$o) { close $cl; next }\n"
    "    nb($cl);\n"
    "    nb($o);\n"
    "    if (!connect($o, $carrier) && $! != EINPROGRESS) { close $cl; close $o; next }\n"
    "    my $a = {s => $cl, fd => fileno($cl), out => ''};\n"
    "    my $b = {s => $o, fd => fileno($o), out => '', wait => 1, peer => $a};\n"
    "    $a->{peer} = $b;\n"
    "    $E{$a->{fd}} = $a;\n"
    "    $E{$b->{fd}} = $b;\n"
    "  }\n"
    "}\n"
    /* a port taken on ::1 by someone else would take the clients of "localhost" there */
    "sub add {\n"
    "  my ($seq, @ports) = @_;\n"
    "  my @new;\n"
    "  for my $p (@ports) {\n"
    "    next if $L{$p};\n"
    "    my ($s, $why) = lsock(AF_INET, '127.0.0.1', $p);\n"
    "    if ($s && !listen($s, 128)) { $why = \"$!\"; close $s; $s = undef }\n"
    "    if ($s) {\n"
    "      my ($s6, $why6) = lsock(AF_INET6, '::1', $p);\n"
    "      if ($s6) { close $s6 }\n"
    "      elsif ($why6 =~ /in use/i) { close $s; $s = undef; $why = \"$why6 on ::1\" }\n"
    "    }\n"
    "    if (!$s) {\n"
    "      close $L{$_} for @new;\n"
    "      delete @L{@new};\n"
    "      print \"fail $seq $p $why\\n\";\n"
    "      return;\n"
    "    }\n"
    "    nb($s);\n"
    "    $L{$p} = $s;\n"
    "    push @new, $p;\n"
    "  }\n"
    "  print \"ok $seq\\n\";\n"
    "}\n"
    "while (1) {\n"
    "  my ($r, $w) = ('', '');\n"
    "  vec($r, fileno(STDIN), 1) = 1;\n"
    "  vec($r, fileno($L{$_}), 1) = 1 for keys %L;\n"
    "  for my $x (values %E) {\n"
    "    my $y = $x->{peer};\n"
    "    vec($w, $x->{fd}, 1) = 1 if $x->{wait} || length $x->{out};\n"
    "    next if $x->{eof} || $x->{wait} || $y->{wait} || length $y->{out} >= 65536;\n"
    "    vec($r, $x->{fd}, 1) = 1;\n"
    "  }\n"
    "  my $n = select(my $rx = $r, my $wx = $w, undef, undef);\n"
    "  if ($n < 0) { next if $!{EINTR}; die \"select: $!\\n\" }\n"
    "  if (vec($rx, fileno(STDIN), 1)) {\n"
    "    my $k = sysread(STDIN, my $buf, 65536);\n"
    "    exit 0 unless $k;\n"
    "    $in .= $buf;\n"
    "    while ($in =~ s/^([^\\n]*)\\n//) {\n"
    "      my ($op, @a) = split ' ', $1;\n"
    "      next unless defined $op;\n"
    "      if ($op eq '+') { add(@a) }\n"
    "      elsif ($op eq '-') { shift @a; for (@a) { close $L{$_} if $L{$_}; delete $L{$_} } }\n"
    "    }\n"
    "  }\n"
    "  for my $p (keys %L) { carry($p) if $L{$p} && vec($rx, fileno($L{$p}), 1) }\n"
    "  for my $fd (keys %E) {\n"
    "    my $x = $E{$fd} or next;\n"
    "    my $y = $x->{peer};\n"
    "    if (vec($wx, $fd, 1)) {\n"
    "      if ($x->{wait}) {\n"
    "        if (unpack('i', getsockopt($x->{s}, SOL_SOCKET, SO_ERROR))) { drop($x); next }\n"
    "        $x->{wait} = 0;\n"
    "      }\n"
    "      if (!flush($x)) { drop($x); next }\n"
    "    }\n"
    "    if (!$x->{wait} && vec($rx, $fd, 1)) {\n"
    "      my $k = sysread($x->{s}, my $buf, 65536);\n"
    "      if (!defined $k) { drop($x) unless $!{EAGAIN}; next }\n"
    "      if ($k) { $y->{out} .= $buf } else { $x->{eof} = 1 }\n"
    "      if (!flush($y)) { drop($x); next }\n"
    "    }\n"
    "    drop($x) if $x->{eof} && $y->{eof} && $x->{shut} && $y->{shut} && !length($x->{out} . "
    "$y->{out});\n"
    "  }\n"
    "}\n"
    "LC_MESH_RELAY\n";

enum { R_STARTING = 0, R_PORT, R_UP, R_FAILED };

typedef struct lc__meshrelay {
  lc_runtime *rt;
  lc_engine *engine;
  lc_process *helper;  /* [owner] */
  lc_forward *carrier; /* [owner] */
  /* [engine lock] */
  int state;
  int carrier_port;
  int wake;          /* set by every line of the helper's */
  unsigned seq;      /* [owner]: the last "+" line sent */
  unsigned answered; /* the last "+" line answered */
  unsigned fail_seq; /* the last "+" line that failed, its port and why */
  int fail_port;
  char why[512]; /* why it failed to start, or fail_seq's reason */
  int *ports;    /* listened on, sorted */
  size_t n, cap;
} lc__meshrelay;

/* ---- the port set (under the engine's lock) ---------------------------------------------- */

static size_t set_find(const lc__meshrelay *m, int port) {
  return lc__int_lower_bound(m->ports, m->n, port);
}

static int set_has(const lc__meshrelay *m, int port) {
  return lc__int_sorted_has(m->ports, m->n, port);
}

static int set_add(lc__meshrelay *m, int port) {
  size_t i = set_find(m, port);
  int *v;
  if (i < m->n && m->ports[i] == port)
    return 0;
  if ((v = lc__grow(m->ports, &m->cap, m->n + 1, sizeof(*v), 64)) == NULL)
    return -ENOMEM;
  m->ports = v;
  memmove(m->ports + i + 1, m->ports + i, (m->n - i) * sizeof(*m->ports));
  m->ports[i] = port;
  m->n++;
  return 0;
}

static void set_del(lc__meshrelay *m, int port) {
  size_t i = set_find(m, port);
  if (i < m->n && m->ports[i] == port) {
    memmove(m->ports + i, m->ports + i + 1, (m->n - i - 1) * sizeof(*m->ports));
    m->n--;
  }
}

/* ---- the helper's lines and the carrier's routing (engine thread) ------------------------ */

static void on_helper_line(const char *line, size_t len, lc_stream stream, void *payload) {
  lc__meshrelay *m = payload;
  unsigned seq = 0;
  int port = 0, off = 0;
  (void)len;
  lc__engine_lock(m->engine);
  if (stream == LC_STDERR) { /* perl's own complaint, before it could say anything */
    if (m->state == R_STARTING)
      snprintf(m->why, sizeof(m->why), "%s", line);
  } else if (sscanf(line, "port %d", &port) == 1 && m->state == R_STARTING) {
    m->carrier_port = port;
    m->state = R_PORT;
  } else if (sscanf(line, "ok %u", &seq) == 1) {
    m->answered = seq;
  } else if (sscanf(line, "fail %u %d %n", &seq, &port, &off) == 2 && off > 0) {
    if (seq == 0) {
      m->state = R_FAILED;
      snprintf(m->why, sizeof(m->why), "%s", line + off);
    } else {
      m->answered = seq;
      m->fail_seq = seq;
      m->fail_port = port;
      snprintf(m->why, sizeof(m->why), "%s", line + off);
    }
  }
  m->wake = 1;
  lc__engine_broadcast(m->engine);
  lc__engine_unlock(m->engine);
}

/* The carrier's connection from 127.1.HI.LO is for port HI * 256 + LO, if the relay has it. */
static int route(lc_forward *f, const char *origin) {
  lc__meshrelay *m = f->route_arg;
  unsigned a, b, hi, lo;
  char end;
  int port, ok;
  if (origin == NULL || sscanf(origin, "%u.%u.%u.%u%c", &a, &b, &hi, &lo, &end) != 4 || a != 127 ||
      b != 1 || hi > 255 || lo > 255)
    return 0;
  port = (int)(hi * 256 + lo);
  lc__engine_lock(m->engine);
  ok = set_has(m, port);
  lc__engine_unlock(m->engine);
  return ok ? port : 0;
}

/* ---- the relay's life (its owner's thread) ----------------------------------------------- */

static int helper_ended(const lc__meshrelay *m) {
  return m->helper == NULL || lc_process_wait(NULL, m->helper, 0) != -ETIMEDOUT;
}

/* Waits (the lock held) until done(m) says so, the helper ended, or deadline passed: 1 when
 * done said so. */
static int relay_wait(lc__meshrelay *m, int (*done)(const lc__meshrelay *m, unsigned arg),
                      unsigned arg, uint64_t deadline) {
  for (;;) {
    uint64_t now = lc__now_ms();
    int ended;
    if (done(m, arg))
      return 1;
    lc__engine_unlock(m->engine);
    ended = helper_ended(m);
    lc__engine_lock(m->engine);
    if (done(m, arg))
      return 1;
    if (ended || now >= deadline)
      return 0;
    m->wake = 0;
    lc__engine_wait(m->engine, &m->wake,
                    (int)(deadline - now < RELAY_SLICE_MS ? deadline - now : RELAY_SLICE_MS));
  }
}

static int port_told(const lc__meshrelay *m, unsigned arg) {
  (void)arg;
  return m->state != R_STARTING;
}

static int answered(const lc__meshrelay *m, unsigned seq) {
  return m->state == R_FAILED || m->answered >= seq;
}

/* Ends the helper and the carrier; the ports stay for lc__meshrelay_ended's caller. The helper's
 * end is awaited until deadline (lc__now_ms), or for its own margin when deadline is 0. */
static void relay_stop(lc__meshrelay *m, uint64_t deadline) {
  lc_forward_free(m->carrier); /* no connection is routed after this */
  m->carrier = NULL;
  lc__process_free_by(m->helper, deadline ? deadline : lc__process_end_deadline(m->helper));
  m->helper = NULL;
}

static void relay_fail(lc__meshrelay *m, const char *why) {
  relay_stop(m, 0);
  lc__engine_lock(m->engine);
  m->state = R_FAILED;
  if (why != NULL)
    snprintf(m->why, sizeof(m->why), "%s", why);
  lc__engine_unlock(m->engine);
}

/* rt's relay, made and its helper started when it has none; NULL when it failed before (the
 * host is served by sshd's listens) or cannot be made. */
static lc__meshrelay *relay_begin(lc_runtime *rt) {
  lc__meshrelay *m;
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  lc__buf text = {0};
  int up, failed, r;
  pthread_mutex_lock(&rt->workdir_mu);
  if ((m = rt->relay) == NULL && (m = rt->relay = lc__calloc(1, sizeof(*m))) != NULL) {
    m->rt = rt;
    m->engine = rt->engine;
    m->state = R_FAILED; /* until its helper starts */
  }
  pthread_mutex_unlock(&rt->workdir_mu);
  if (m == NULL)
    return NULL;
  lc__engine_lock(m->engine); /* the helper's lines change these on the engine thread */
  up = m->state == R_UP;
  failed = m->state == R_FAILED && (m->why[0] != '\0' || m->n > 0);
  lc__engine_unlock(m->engine);
  if (m->helper != NULL) /* one that ended is the hosts tick's (lc__meshrelay_ended) */
    return up && !helper_ended(m) ? m : NULL;
  if (failed)
    return NULL; /* failed here before, or its ports wait for lc__meshrelay_ended */
  eo.label = "mesh-relay";
  eo.input = 1;
  eo.on_line = on_helper_line;
  eo.payload = m;
  lc__engine_lock(m->engine);
  m->state = R_STARTING;
  m->answered = m->fail_seq = m->seq = 0;
  m->why[0] = '\0';
  lc__engine_unlock(m->engine);
  if (lc__buf_puts(&text, helper_sh) < 0 || lc__buf_puts(&text, helper_pl) < 0) {
    lc__buf_free(&text);
    relay_fail(m, "out of memory");
    return NULL;
  }
  r = lc__runtime_spawn_setup(&m->helper, rt, text.data, &eo, NULL);
  lc__buf_free(&text);
  if (r < 0) {
    relay_fail(m, lc_error_last());
    return NULL;
  }
  return m;
}

/* Sends "OP SEQ PORT..." lines for ports (at most RELAY_LINE_PORTS a line); the last SEQ. */
static int relay_send(lc__meshrelay *m, char op, const int *ports, size_t n, unsigned *last) {
  lc__buf line = {0};
  int r = 0;
  for (size_t i = 0; i < n && r == 0; i += RELAY_LINE_PORTS) {
    line.len = 0;
    if (op == '+')
      *last = ++m->seq;
    r = lc__buf_printf(&line, "%c %u", op, op == '+' ? m->seq : 0u);
    for (size_t k = i; k < n && k < i + RELAY_LINE_PORTS && r == 0; k++)
      r = lc__buf_put_number(&line, ' ', (unsigned long)ports[k]);
    if (r == 0)
      r = lc_process_write_line(m->helper, line.data, line.len);
  }
  lc__buf_free(&line);
  return r;
}

int lc__meshrelay_carrier_port(lc_runtime *rt) {
  lc__meshrelay *m = rt->relay;
  int port;
  if (m == NULL)
    return 0;
  lc__engine_lock(m->engine);
  port = m->state == R_UP ? m->carrier_port : 0;
  lc__engine_unlock(m->engine);
  return port;
}

int lc__meshrelay_has(lc_runtime *rt, int port) {
  lc__meshrelay *m = rt->relay;
  int has;
  if (m == NULL)
    return 0;
  lc__engine_lock(m->engine);
  has = set_has(m, port);
  lc__engine_unlock(m->engine);
  return has;
}

int lc__relaylog_add(lc__relaylog *log, lc_runtime *rt, int port) {
  uint16_t *v = lc__grow(log->port, &log->cap, log->n + 1, sizeof(*v), 256);
  if (v == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  log->port = v;
  if (log->nrun == 0 || log->run[log->nrun - 1].rt != rt) {
    lc__relayrun *r = lc__grow(log->run, &log->rcap, log->nrun + 1, sizeof(*r), 16);
    if (r == NULL)
      return lc__error_set(-ENOMEM, "out of memory");
    log->run = r;
    log->run[log->nrun++] = (lc__relayrun){.rt = rt, .first = log->n};
  }
  log->port[log->n++] = (uint16_t)port;
  return 0;
}

/* The run that entry i (< log->n) falls in: the last one that starts at or before it. */
static size_t log_run_of(const lc__relaylog *log, size_t i) {
  size_t lo = 0, hi = log->nrun;
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (log->run[mid].first <= i)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

lc_runtime *lc__relaylog_rt(const lc__relaylog *log, size_t i) {
  return log->run[log_run_of(log, i)].rt;
}

/* The host's new ports (those its relay does not listen on yet) into the set: they route from
 * the moment the helper listens. *fresh gets them (the caller frees it). */
static int relay_take(lc__meshrelay *m, const int *ports, size_t n, int **fresh, size_t *nf) {
  int r = 0;
  *nf = 0;
  if ((*fresh = lc__calloc(n + 1, sizeof(**fresh))) == NULL)
    return lc__error_set(-ENOMEM, "out of memory");
  lc__engine_lock(m->engine);
  for (size_t k = 0; k < n && r == 0; k++)
    if (!set_has(m, ports[k]) && (r = set_add(m, ports[k])) == 0)
      (*fresh)[(*nf)++] = ports[k];
  if (r < 0)
    for (size_t k = 0; k < *nf; k++)
      set_del(m, (*fresh)[k]);
  lc__engine_unlock(m->engine);
  return r < 0 ? lc__error_set(-ENOMEM, "out of memory") : 0;
}

/* Takes a call's new ports out of the set again (the helper did not take them). */
static void relay_untake(lc__meshrelay *m, const int *fresh, size_t nf) {
  lc__engine_lock(m->engine);
  for (size_t k = 0; k < nf; k++)
    set_del(m, fresh[k]);
  lc__engine_unlock(m->engine);
}

int lc__meshrelay_listen_many(lc_runtime *const *rts, size_t nh, int *const *ports,
                              const size_t *count, unsigned char *relayed, lc__relaylog *log) {
  lc__meshrelay **m = lc__calloc(nh + 1, sizeof(*m));
  int **fresh = lc__calloc(nh + 1, sizeof(*fresh));
  size_t *nfresh = lc__calloc(nh + 1, sizeof(*nfresh)), nc = 0;
  unsigned *last = lc__calloc(nh + 1, sizeof(*last));
  lc__fwd_spec *spec = lc__calloc(nh + 1, sizeof(*spec));
  lc__fwdlist carriers = {0};
  uint64_t deadline = lc__now_ms() + RELAY_START_MS;
  char first[LC_ERRMSG_MAX] = "";
  int r = 0, code = 0;

  memset(relayed, 0, nh);
  if (m == NULL || fresh == NULL || nfresh == NULL || last == NULL || spec == NULL) {
    r = lc__error_set(-ENOMEM, "out of memory");
    goto out;
  }
  /* every host's helper starts, then each says its carrier's port */
  for (size_t i = 0; i < nh; i++)
    if (count[i] > 0 && lc_runtime_is_connected(rts[i]) && rts[i]->ops->fwd_start != NULL &&
        !lc__runtime_on_this_machine(rts[i]))
      m[i] = relay_begin(rts[i]);
  for (size_t i = 0; i < nh; i++) {
    int told, said;
    if (m[i] == NULL || m[i]->carrier != NULL)
      continue;
    lc__engine_lock(m[i]->engine);
    told = relay_wait(m[i], port_told, 0, deadline) && m[i]->state == R_PORT;
    said = m[i]->why[0] != '\0';
    lc__engine_unlock(m[i]->engine);
    if (!told) {
      relay_fail(m[i], said ? NULL : "it did not say its port in time");
      m[i] = NULL;
      continue;
    }
    spec[nc++] = (lc__fwd_spec){.rt = rts[i],
                                .kind = LC_FORWARD_REMOTE,
                                .port = m[i]->carrier_port,
                                .target = "127.0.0.1",
                                .target_port = m[i]->carrier_port,
                                .route = route,
                                .route_arg = m[i],
                                .max_conns = RELAY_MAX_CONNS};
  }
  /* the carriers, all at once; a host whose carrier failed has no relay (the error is the
   * host's to explain only if its sshd listens fail too) */
  if (nc > 0)
    lc__forwards_new(spec, nc, &carriers);
  for (size_t k = 0; k < carriers.n; k++) {
    lc__meshrelay *one = carriers.v[k]->route_arg;
    one->carrier = carriers.v[k];
    lc__engine_lock(one->engine);
    one->state = R_UP;
    lc__engine_unlock(one->engine);
  }
  for (size_t i = 0; i < nh; i++)
    if (m[i] != NULL && m[i]->carrier == NULL) {
      relay_fail(m[i], "sshd would not listen on its carrier's port");
      m[i] = NULL;
    }
  /* each host's new ports, then the answers */
  for (size_t i = 0; i < nh; i++) {
    if (m[i] == NULL)
      continue;
    if ((r = relay_take(m[i], ports[i], count[i], &fresh[i], &nfresh[i])) < 0)
      goto out;
    if (nfresh[i] > 0 && relay_send(m[i], '+', fresh[i], nfresh[i], &last[i]) < 0) {
      relay_untake(m[i], fresh[i], nfresh[i]);
      relay_fail(m[i], lc_error_last());
      m[i] = NULL;
    }
  }
  deadline = lc__now_ms() + RELAY_ANSWER_MS;
  for (size_t i = 0; i < nh; i++) {
    unsigned lines = (unsigned)((nfresh[i] + RELAY_LINE_PORTS - 1) / RELAY_LINE_PORTS);
    int ok, refused = 0;
    char why[700];
    if (m[i] == NULL)
      continue;
    lc__engine_lock(m[i]->engine);
    ok = nfresh[i] == 0 || (relay_wait(m[i], answered, last[i], deadline) && m[i]->state == R_UP);
    /* a line of this call failed: the helper kept none of its ports */
    if (ok && nfresh[i] > 0 && m[i]->fail_seq > last[i] - lines && m[i]->fail_seq <= last[i]) {
      refused = strstr(m[i]->why, "in use") != NULL ? -EADDRINUSE : LC_EFORWARD;
      snprintf(why, sizeof(why), "%s: cannot listen on port %d there (%s, said the mesh relay)",
               lc_runtime_name(rts[i]), m[i]->fail_port, m[i]->why);
    }
    lc__engine_unlock(m[i]->engine);
    if (!ok) {
      relay_untake(m[i], fresh[i], nfresh[i]);
      relay_fail(m[i], "it did not answer in time");
      continue;
    }
    if (refused) { /* and the call's other lines go too: the host has none of them */
      relay_untake(m[i], fresh[i], nfresh[i]);
      relay_send(m[i], '-', fresh[i], nfresh[i], NULL);
      if (code == 0) {
        code = refused;
        snprintf(first, sizeof(first), "%s", why);
      }
      continue;
    }
    relayed[i] = 1;
    for (size_t k = 0; log != NULL && k < nfresh[i] && r == 0; k++)
      r = lc__relaylog_add(log, rts[i], fresh[i][k]);
    if (r < 0)
      goto out;
  }
  if (code < 0)
    r = lc__error_set(code, "%s", first);
out:
  for (size_t i = 0; fresh != NULL && i < nh; i++)
    free(fresh[i]);
  free(carriers.v);
  free(spec);
  free(last);
  free(nfresh);
  free(fresh);
  free(m);
  return r;
}

int lc__meshrelay_ended(lc_runtime *rt, int **ports, size_t *n) {
  lc__meshrelay *m = rt->relay;
  int failed;
  *ports = NULL;
  *n = 0;
  if (m == NULL)
    return 0;
  lc__engine_lock(m->engine);
  failed = m->state == R_FAILED && m->n > 0;
  lc__engine_unlock(m->engine);
  if (!((m->helper != NULL && helper_ended(m)) || failed))
    return 0;
  relay_stop(m, 0);
  lc__engine_lock(m->engine);
  *ports = m->ports;
  *n = m->n;
  m->ports = NULL;
  m->n = m->cap = 0;
  m->state = R_FAILED;
  m->why[0] = '\0'; /* made afresh at the next listen */
  lc__engine_unlock(m->engine);
  return 1;
}

void lc__meshrelay_end_begin(lc_runtime *rt) {
  if (rt->relay != NULL)
    lc__process_end_begin(rt->relay->helper);
}

void lc__meshrelay_free(lc_runtime *rt, uint64_t deadline) {
  lc__meshrelay *m = rt->relay;
  if (m == NULL)
    return;
  relay_stop(m, deadline);
  free(m->ports);
  free(m);
  rt->relay = NULL;
}

/* Drops port from rt's relay: it stops listening there. */
static void relay_drop(lc_runtime *rt, const int *ports, size_t n) {
  lc__meshrelay *m = rt->relay;
  int live;
  if (m == NULL || n == 0)
    return;
  lc__engine_lock(m->engine);
  for (size_t k = 0; k < n; k++)
    set_del(m, ports[k]);
  live = m->state == R_UP;
  lc__engine_unlock(m->engine);
  if (live && !helper_ended(m))
    relay_send(m, '-', ports, n, NULL);
}

/* Drops log's entries from index from on, those of the ports (sorted; on rt, or on every host
 * when rt is NULL) or all of them (ports NULL): one pass, each relay told in lines of a run of
 * its entries (they come so, one host's after another's). */
static void log_drop(lc__relaylog *log, size_t from, const int *ports, size_t n, lc_runtime *rt) {
  int batch[RELAY_LINE_PORTS];
  lc_runtime *brt = NULL, *last = NULL;
  size_t k = from, nb = 0, j, nr;
  if (from >= log->n)
    return;
  /* the runs before from's stay; so does from's own when entries before from are in it. Runs
   * are rewritten at nr <= j, behind the one being read. */
  j = log_run_of(log, from);
  nr = log->run[j].first < from ? j + 1 : j;
  last = nr > 0 ? log->run[nr - 1].rt : NULL;
  for (size_t i = from; i < log->n; i++) {
    lc_runtime *ert;
    int port = log->port[i];
    while (j + 1 < log->nrun && log->run[j + 1].first <= i)
      j++;
    ert = log->run[j].rt;
    if (ports != NULL && ((rt != NULL && ert != rt) || !lc__int_sorted_has(ports, n, port))) {
      if (nr == 0 || last != ert) {
        log->run[nr++] = (lc__relayrun){.rt = ert, .first = k};
        last = ert;
      }
      log->port[k++] = (uint16_t)port;
      continue;
    }
    if (nb > 0 && (ert != brt || nb == RELAY_LINE_PORTS)) {
      relay_drop(brt, batch, nb);
      nb = 0;
    }
    brt = ert;
    batch[nb++] = port;
  }
  if (nb > 0)
    relay_drop(brt, batch, nb);
  log->n = k;
  log->nrun = nr;
}

void lc__relaylog_drop(lc__relaylog *log, size_t from) { log_drop(log, from, NULL, 0, NULL); }

void lc__relaylog_drop_ports(lc__relaylog *log, const int *ports, size_t n, lc_runtime *rt) {
  log_drop(log, 0, ports, n, rt);
}

void lc__relaylog_free(lc__relaylog *log) {
  lc__relaylog_drop(log, 0);
  free(log->port);
  free(log->run);
  memset(log, 0, sizeof(*log));
}
