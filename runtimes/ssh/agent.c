/*
 * agent.c - a host's processes over one channel: one process there (the agent, perl) starts and
 * watches them, instead of one exec channel (and one sshd session, one login) each.
 *
 * Once a runtime has a working directory (a cluster's host: lc__runtime_workdir_begin sets
 * agent_wanted), its processes go through its agent: the working directory's keeper, the
 * cluster's context file, the workers, the mesh relay's helper and the listings. The agent is
 * started as any command is (the user's login shell runs `exec /bin/sh -s`, the script comes
 * through stdin), so its environment is the one the login shell gives a command; each process
 * it starts runs `/bin/sh -c LINE`, LINE being the line that the login shell would have run
 * (the same in every shell: `exec /bin/sh -s lc-lifeline HOST LABEL lc-id=ID`), in a session of
 * its own (setsid, as sshd does), with three pipes for stdin, stdout and stderr. So a process
 * under a lifeline still runs under it, and everything that reaches lc_process (output lines,
 * the mark, the pid line, exit status or signal, stop, input) is what an exec channel gives;
 * only the transport changes, and the layers above do not see it.
 *
 * Records, both ways: "ID T LEN\n" and LEN bytes. From us: s (start: the line), i (stdin
 * bytes), e (stdin's end), k (forget it: its pipes are closed, which ends a lifeline's group;
 * the agent confirms with k), h (ID 0: a script head that it keeps) and S (start, its stdin
 * beginning with that head: slot_spawn). From the agent: r (ready, once), o and e (stdout and
 * stderr bytes), a (stdin bytes written into its pipe, or dropped: a decimal count), x ("STATUS
 * SIGNAL", after its last output: both pipes closed and the process reaped), f (could not start
 * it: why), k (forgotten), q (asks to quit, idle: no process and nothing heard for the heartbeat
 * limit). We answer q with Q (quit) when nothing of ours is on its way to it; else the start on
 * its way cancels the question. An ID is used again only once the agent said x or k for it.
 *
 * What keeps the guarantees of a channel per process:
 *  - the agent holds the write end of every process's stdin: when it ends (its channel closed,
 *    the connection lost, killed), every lifeline reads EOF and ends its group, as a closed
 *    channel made it do;
 *  - one process's output never holds back another's: the agent reads every pipe in one select
 *    loop, 64 KiB at a time each, and we never stop reading its channel;
 *  - a process's stdin that its process does not read is bounded: at most AGENT_WINDOW bytes
 *    sent and not yet acknowledged (a), so the agent holds at most that much for it;
 *  - the agent ends by itself only when it runs nothing and heard nothing for the heartbeat
 *    limit, and we agreed or did not answer for as long again (a connection wedged without a
 *    close).
 *
 * A host where the agent cannot start (no perl: Debian's perl-base is nearly always there, the
 * mesh relay needs it too) gets a channel per process, as before, on that connection from then
 * on. Transfers of files (a send or a fetch: bulk data with a file at our end) keep their own
 * channel, whose window suits bulk data better than AGENT_WINDOW.
 */
#include "ssh_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* stdin bytes of one process sent to the agent and not yet written into its pipe */
#define AGENT_WINDOW (128 * 1024)
/* stdin bytes per record: as exec channels write them (EXEC_PUT_MAX, ssh.c) */
#define AGENT_PUT_MAX 3584
#define AGENT_HDR_MAX 48

/* sh: perl's place; the agent's descriptor limit raised to the hard one (three descriptors a
 * process: a login's soft limit of 1,024 would stop it near 330), the login's own kept for the
 * processes it starts; then perl on descriptor 4 with the heartbeat limit (s) and that limit. */
static const char agent_sh[] =
    "command -v perl >/dev/null 2>&1 || { echo 'lc-agent: no perl on this host' >&2; exit 127; }\n"
    "lc_nofile=$(ulimit -n)\n"
    "ulimit -n \"$(ulimit -Hn)\" 2>/dev/null\n"
    "exec perl /dev/fd/4 %d \"$lc_nofile\" 4<<'LC_AGENT'\n";

/* The agent (one C string may not be longer than 4,095 bytes: two parts). %K: id -> a process
 * ({id, pid, in, out, err: its pipes, undef once closed; buf: stdin not yet written; eof: close
 * stdin once buf is out; st: "STATUS SIGNAL" once reaped}); %P: pid -> the same, until reaped. */
static const char agent_pl1[] =
    "use strict;\n"
    "use POSIX qw(setsid WNOHANG _exit);\n"
    "use Fcntl qw(F_GETFL F_SETFL O_NONBLOCK);\n"
    "$0 = 'lc-agent';\n"
    /* the heredoc's descriptor: not for the processes it starts */
    "POSIX::close(4);\n"
    "$SIG{PIPE} = 'IGNORE';\n"
    "$SIG{CHLD} = sub {};\n"
    "my $limit = $ARGV[0] > 0 ? $ARGV[0] : 60;\n"
    /* each process gets the login's descriptor limit back */
    "my $pre = $ARGV[1] =~ /^(\\d+|unlimited)$/ ? \"ulimit -n $1 2>/dev/null; \" : '';\n"
    "my (%K, %P, $asked, $head);\n"
    "my ($ib, $ob) = ('', '');\n"
    "binmode STDIN;\n"
    "binmode STDOUT;\n"
    "sub nb { fcntl($_[0], F_SETFL, fcntl($_[0], F_GETFL, 0) | O_NONBLOCK) }\n"
    "sub rec { $ob .= \"$_[0] $_[1] \" . length($_[2]) . \"\\n\" . $_[2] }\n"
    "sub shut {\n"
    "  my ($k) = @_;\n"
    "  for (qw(in out err)) { close $k->{$_} if $k->{$_}; $k->{$_} = undef }\n"
    "}\n"
    /* every stdin closed: each lifeline ends its group */
    "sub quit { shut($_) for values %K; _exit(0) }\n"
    "sub flush {\n"
    "  while (length $ob) {\n"
    "    my $w = syswrite(STDOUT, $ob);\n"
    "    if (!defined $w) { next if $!{EINTR}; quit() }\n"
    "    substr($ob, 0, $w, '');\n"
    "  }\n"
    "}\n"
    /* stdin bytes written into a pipe, less the head that the agent put there itself */
    "sub ack {\n"
    "  my ($k, $n) = @_;\n"
    "  my $s = $k->{skip} < $n ? $k->{skip} : $n;\n"
    "  $k->{skip} -= $s;\n"
    "  rec($k->{id}, 'a', $n - $s) if $n > $s;\n"
    "}\n"
    "sub spawn {\n"
    "  my ($id, $cmd, $h) = @_;\n"
    "  my ($ir, $iw, $or, $ow, $er, $ew);\n"
    "  if (!(pipe($ir, $iw) && pipe($or, $ow) && pipe($er, $ew))) { rec($id, 'f', \"$!\"); "
    "return }\n"
    "  my $pid = fork;\n"
    "  if (!defined $pid) { rec($id, 'f', \"$!\"); return }\n"
    "  if (!$pid) {\n"
    "    $SIG{PIPE} = 'DEFAULT';\n"
    "    setsid();\n"
    "    open(STDIN, '<&', $ir);\n"
    "    open(STDOUT, '>&', $ow);\n"
    "    open(STDERR, '>&', $ew);\n"
    "    exec('/bin/sh', '-c', $pre . $cmd);\n"
    "    _exit(127);\n"
    "  }\n"
    "  nb($_) for ($iw, $or, $er);\n"
    "  my $k = {id => $id, pid => $pid, in => $iw, out => $or, err => $er, buf => $h, "
    "skip => length $h};\n"
    "  $K{$id} = $P{$pid} = $k;\n"
    "}\n"
    "sub parse {\n"
    "  for (;;) {\n"
    "    my $nl = index($ib, \"\\n\");\n"
    "    return if $nl < 0;\n"
    "    my ($id, $t, $n) = split / /, substr($ib, 0, $nl);\n"
    "    return if length($ib) < $nl + 1 + $n;\n"
    "    my $d = substr($ib, $nl + 1, $n);\n"
    "    substr($ib, 0, $nl + 1 + $n, '');\n"
    "    my $k = $K{$id};\n"
    "    if ($t eq 'h') { $head = $d }\n"
    "    elsif ($t eq 's' || $t eq 'S') {\n"
    "      $asked = undef;\n"
    "      spawn($id, $d, $t eq 'S' ? $head : '');\n"
    "    }\n"
    "    elsif ($t eq 'Q') { flush(); quit() }\n"
    "    elsif ($t eq 'k') { if ($k) { shut($k); delete $K{$id} } rec($id, 'k', '') }\n"
    "    elsif (!$k) { }\n"
    "    elsif ($t eq 'e') { $k->{eof} = 1 }\n"
    "    elsif (!$k->{in}) { rec($id, 'a', $n) }\n"
    "    else { $k->{buf} .= $d }\n"
    "  }\n"
    "}\n";

static const char agent_pl2[] =
    "rec(0, 'r', $$);\n"
    "flush();\n"
    "my $heard = time;\n"
    "for (;;) {\n"
    "  my ($r, $w, $wait) = ('', '', 1);\n"
    "  vec($r, 0, 1) = 1;\n"
    "  for my $k (values %K) {\n"
    "    vec($r, fileno($k->{out}), 1) = 1 if $k->{out};\n"
    "    vec($r, fileno($k->{err}), 1) = 1 if $k->{err};\n"
    "    vec($w, fileno($k->{in}), 1) = 1 if $k->{in} && length $k->{buf};\n"
    /* output over, not reaped yet: SIGCHLD may have come just before the select */
    "    $wait = 0.05 if !$k->{out} && !$k->{err};\n"
    "  }\n"
    "  my ($ro, $wo) = ($r, $w);\n"
    "  if (select($ro, $wo, undef, $wait) > 0) {\n"
    "    if (vec($ro, 0, 1)) {\n"
    "      my $n = sysread(STDIN, $ib, 65536, length $ib);\n"
    "      quit() if defined $n ? $n == 0 : !$!{EINTR};\n"
    "      $heard = time;\n"
    "      parse();\n"
    "    }\n"
    "    for my $k (values %K) {\n"
    "      for my $s (['out', 'o'], ['err', 'e']) {\n"
    "        my $fh = $k->{$s->[0]};\n"
    "        next unless $fh && vec($ro, fileno($fh), 1);\n"
    "        my $n = sysread($fh, my $d, 65536);\n"
    "        if ($n) { rec($k->{id}, $s->[1], $d) }\n"
    "        elsif (defined $n || !($!{EAGAIN} || $!{EINTR})) { close $fh; $k->{$s->[0]} = undef "
    "}\n"
    "      }\n"
    "      next unless $k->{in} && vec($wo, fileno($k->{in}), 1);\n"
    "      my $n = syswrite($k->{in}, $k->{buf});\n"
    "      if (defined $n) { substr($k->{buf}, 0, $n, ''); ack($k, $n) }\n"
    "      elsif (!($!{EAGAIN} || $!{EINTR})) { close $k->{in}; $k->{in} = undef }\n"
    "    }\n"
    "  }\n"
    "  while ((my $pid = waitpid(-1, WNOHANG)) > 0) {\n"
    "    my $k = delete $P{$pid} or next;\n"
    "    $k->{st} = $? & 127 ? '-1 ' . ($? & 127) : ($? >> 8) . ' 0';\n"
    "  }\n"
    "  for my $k (values %K) {\n"
    "    if (!$k->{in} && length $k->{buf}) { ack($k, length $k->{buf}); $k->{buf} = '' }\n"
    "    if ($k->{in} && $k->{eof} && !length $k->{buf}) { close $k->{in}; $k->{in} = undef }\n"
    "    next if $k->{out} || $k->{err} || !defined $k->{st};\n"
    "    shut($k);\n"
    "    rec($k->{id}, 'x', $k->{st});\n"
    "    delete $K{$k->{id}};\n"
    "  }\n"
    /* idle: it asks to quit (q); we agree (Q) unless a start is on its way, which cancels it */
    "  if (!%K && !defined $asked && time - $heard > $limit) { rec(0, 'q', ''); $asked = time }\n"
    /* no answer for the limit: the connection is gone */
    "  quit() if defined $asked && time - $asked > $limit;\n"
    "  flush();\n"
    "}\n"
    "LC_AGENT\n";

struct lc__ssh_agent {
  lc__ssh_conn *c;     /* the runtime's primary connection */
  lc_process *ap;      /* the agent's own process (a plain one: no lifeline) */
  int ready;           /* it said r: records may go */
  int quitting;        /* we answered its q with Q: it reads nothing more */
  const char *head;    /* the script head it holds (h), NULL: none yet */
  size_t head_len;     /* its length */
  const char *fault;   /* what it sent that it should not have: ended at the next pump */
  lc__ssh_chan **slot; /* by ID - 1; NULL: free */
  size_t nslot;
  /* its stdout: the header being read, then the record's payload */
  char hdr[AGENT_HDR_MAX];
  size_t hdr_len;
  unsigned long id;
  char type;
  size_t left;
  lc__buf pay;
};

static void agent_pump(lc__ssh_agent *a);

static lc__ssh_chan *slot_of(const lc__ssh_agent *a, unsigned long id) {
  return id >= 1 && id <= a->nslot ? a->slot[id - 1] : NULL;
}

/* A free ID for k: 0 when out of memory. */
static unsigned long slot_add(lc__ssh_agent *a, lc__ssh_chan *k) {
  size_t i = 0;
  while (i < a->nslot && a->slot[i] != NULL)
    i++;
  if (i == a->nslot) {
    lc__ssh_chan **v = lc__realloc(a->slot, (a->nslot + 1) * sizeof(*v));
    if (v == NULL)
      return 0;
    a->slot = v;
    a->nslot++;
  }
  a->slot[i] = k;
  k->slot_id = i + 1;
  return k->slot_id;
}

static void slot_free(lc__ssh_chan *k) {
  lc__ssh_agent *a = k->agent;
  if (a != NULL && slot_of(a, k->slot_id) == k)
    a->slot[k->slot_id - 1] = NULL;
  free(k->slot_fail);
  free(k);
}

/* One record into the agent's stdin; the agent's channel writes it on the next turn. */
static int put(lc__ssh_agent *a, unsigned long id, char type, const char *data, size_t len) {
  lc_process *ap = a->ap;
  if (lc__buf_printf(&ap->in, "%lu %c %zu\n", id, type, len) < 0 ||
      lc__buf_append(&ap->in, data, len) < 0)
    return -ENOMEM;
  lc__proc_kick_later(ap);
  return 0;
}

/* Sends what p has for stdin, as far as its window allows, and its end when due. */
static void slot_write(lc__ssh_chan *k) {
  lc__ssh_agent *a = k->agent;
  lc_process *p = k->p;
  char packet[AGENT_PUT_MAX];
  const char *data;
  size_t n;
  if (p == NULL || !k->spawn_sent || a->quitting)
    return;
  while (k->unacked < AGENT_WINDOW) {
    size_t room = AGENT_WINDOW - k->unacked;
    if ((n = lc__proc_in_next(p, packet, room < sizeof(packet) ? room : sizeof(packet), &data)) ==
        0)
      break;
    if (put(a, k->slot_id, 'i', data, n) < 0)
      return; /* out of memory: again at the next kick */
    lc__proc_in_consume(p, n);
    k->unacked += n;
  }
  if (lc__proc_in_eof_due(p) && put(a, k->slot_id, 'e', NULL, 0) == 0)
    p->in_eof_sent = 1;
}

/* A process's script begins with a head that is the same for every process of its kind (the
 * lifeline's, 3.9 KB: lc__command_compose_parts); the agent keeps the last one it was sent (h)
 * and puts it into a process's stdin itself (S instead of s), so it crosses the network once per
 * agent, not once per process. Its acknowledgements leave it out. */
#define AGENT_HEAD_MIN 1024

static void slot_spawn(lc__ssh_chan *k) {
  lc__ssh_agent *a = k->agent;
  lc_process *p = k->p;
  size_t head = p->in_head_left >= AGENT_HEAD_MIN ? p->in_head_left : 0;
  if (head > 0 && (a->head != p->in_head || a->head_len != head)) {
    if (put(a, 0, 'h', p->in_head, head) < 0) {
      head = 0; /* out of memory: this process sends its own */
    } else {
      a->head = p->in_head;
      a->head_len = head;
    }
  }
  if (put(a, k->slot_id, head > 0 ? 'S' : 's', p->command, strlen(p->command)) < 0) {
    k->slot_fail = lc__strdup("out of memory");
    k->ended = 1;
    lc__proc_kick_later(k->agent->ap);
    return;
  }
  lc__proc_in_consume(p, head); /* the agent has it */
  k->spawn_sent = 1;
  slot_write(k);
}

/* The agent ended (its process finished: exited, killed, its channel closed, the connection
 * lost): what it runs is told so; when it never became ready (no perl), what waited for it goes
 * on through a channel each (nothing of it was sent yet). */
static void agent_end(lc_process *ap, void *arg) {
  lc__ssh_agent *a = arg;
  lc__ssh_conn *c = a->c;
  lc__err err = {0};
  int again = c->state == C_READY && c->close_done == NULL && !a->ready;
  if (c->agent == a)
    c->agent = NULL;
  if (a->fault != NULL) /* before its own error: ending it for the fault closed its channel */
    lc__err_set(&err, LC_EREMOTE, "%s: the process agent sent %s", c->rt->name, a->fault);
  else if (ap->err_code < 0)
    lc__proc_err(ap, &err);
  else
    lc__err_set(&err, LC_ECLOSED, "%s: the process agent on the host ended (%s %d)%s%.200s",
                c->rt->name, ap->result.signal ? "signal" : "exit status",
                ap->result.signal ? ap->result.signal : ap->result.exit_status,
                ap->err_tail.len > 0 ? ": " : "", ap->err_tail.len > 0 ? ap->err_tail.data : "");
  if (again)
    c->agent_off = 1; /* lc__agent_take says no from now on: a channel per process */
  for (size_t i = 0; i < a->nslot; i++) {
    lc__ssh_chan *k = a->slot[i];
    lc_process *p;
    if (k == NULL)
      continue;
    a->slot[i] = NULL;
    k->agent = NULL;
    p = k->p;
    slot_free(k);
    if (p == NULL)
      continue;
    p->backend = NULL;
    if (again)
      lc__ssh_ops.proc_start(p); /* a channel of its own */
    else
      lc__proc_closed(p, &err);
  }
  free(a->slot);
  lc__buf_free(&a->pay);
  free(a);
  ap->on_raw = NULL;
  lc__proc_release(ap); /* the reference agent_start kept */
}

static lc__ssh_agent *agent_start(lc__ssh_conn *c) {
  lc_runtime *rt = c->rt;
  lc_exec_options eo = LC_EXEC_OPTIONS_INIT;
  lc__ssh_agent *a = NULL;
  lc_process *ap = NULL;
  lc__buf text = {0};
  lc__err err = {0};
  eo.label = "agent";
  if ((a = lc__calloc(1, sizeof(*a))) == NULL ||
      lc__buf_printf(&text, agent_sh, (rt->opts.heartbeat_timeout_ms + 999) / 1000) < 0 ||
      lc__buf_puts(&text, agent_pl1) < 0 || lc__buf_puts(&text, agent_pl2) < 0 ||
      lc__proc_new(&ap, rt, text.data, &eo, 0, NULL, NULL) < 0) {
    lc__buf_free(&text);
    free(a);
    return NULL;
  }
  lc__buf_free(&text);
  a->c = c;
  a->ap = ap;
  ap->tag = NULL; /* no cluster's: a cluster's cancel stops its own processes, not this */
  ap->on_raw = lc__agent_out;
  ap->on_finish = agent_end;
  ap->finish_arg = a;
  c->agent = a;
  if (lc__proc_launch(ap, &err) < 0) { /* not connected: cannot be, proc_start checked it */
    c->agent = NULL;
    ap->rt = NULL; /* never in the runtime's list */
    lc__proc_release(ap);
    free(a);
    return NULL;
  }
  return c->agent; /* NULL when it ended at once (agent_end) */
}

int lc__agent_take(lc__ssh_conn *c, lc_process *p) {
  lc__ssh_agent *a = c->agent;
  lc__ssh_chan *k;
  if (c->agent_off || !__atomic_load_n(&p->rt->agent_wanted, __ATOMIC_ACQUIRE) ||
      (a != NULL && p == a->ap) || p->in_fd >= 0 || p->out_fd >= 0)
    return 0;
  if (a != NULL && a->quitting)
    return 0; /* it reads nothing more: a channel meanwhile */
  if (a == NULL && (a = agent_start(c)) == NULL)
    return 0;
  if ((k = lc__calloc(1, sizeof(*k))) == NULL)
    return 0;
  k->kind = K_SLOT;
  k->c = c;
  k->p = p;
  k->agent = a;
  if (slot_add(a, k) == 0) {
    free(k);
    return 0;
  }
  p->backend = k;
  if (a->ready)
    slot_spawn(k);
  return 1;
}

int lc__agent_is(const lc__ssh_conn *c, const lc_process *p) {
  return c->agent != NULL && c->agent->ap == p;
}

void lc__agent_slot_kick(lc__ssh_chan *k) { slot_write(k); }

void lc__agent_slot_abort(lc__ssh_chan *k) {
  lc_process *p = k->p;
  lc__ssh_agent *a = k->agent;
  k->p = NULL;
  if (p != NULL)
    p->backend = NULL;
  if (a != NULL && k->spawn_sent && !k->ended && put(a, k->slot_id, 'k', NULL, 0) == 0)
    k->killing = 1; /* freed once the agent says k */
  else
    slot_free(k);
  if (p != NULL)
    lc__proc_closed(p, NULL); /* its stdin closed: a lifeline ends its group */
}

void lc__agent_pump(lc__ssh_conn *c) {
  if (c->agent != NULL)
    agent_pump(c->agent);
}

/* Outside libssh's callbacks (the runtime's kick): ends what ended, and the agent itself when it
 * broke the protocol. */
static void agent_pump(lc__ssh_agent *a) {
  lc__ssh_conn *c = a->c;
  if (a->fault != NULL) {
    lc__ssh_ops.proc_abort(a->ap); /* agent_end tells every process */
    return;
  }
  for (size_t i = 0; i < a->nslot; i++) {
    lc__ssh_chan *k = a->slot[i];
    lc_process *p;
    lc__err err = {0};
    if (k == NULL || !k->ended || k->killing)
      continue;
    p = k->p;
    if (k->slot_fail != NULL)
      lc__err_set(&err, LC_EREMOTE, "%s: the process agent could not start the command: %s",
                  a->c->rt->name, k->slot_fail);
    slot_free(k);
    if (p != NULL) {
      p->backend = NULL;
      lc__proc_closed(p, err.code < 0 ? &err : NULL); /* may start others: a->slot moves */
      if (c->agent != a)
        return;
    }
  }
}

static void fault(lc__ssh_agent *a, const char *what) {
  if (a->fault == NULL)
    a->fault = what;
  lc__proc_kick_later(a->ap);
}

/* A whole record with a payload of its own (not output): r, a, x, f, k, q. */
static void record(lc__ssh_agent *a) {
  lc__ssh_chan *k = slot_of(a, a->id);
  char *pay = a->pay.data != NULL ? a->pay.data : "";
  switch (a->type) {
  case 'r':
    a->ready = 1;
    for (size_t i = 0; i < a->nslot; i++)
      if (a->slot[i] != NULL && !a->slot[i]->spawn_sent && a->slot[i]->p != NULL)
        slot_spawn(a->slot[i]);
    return;
  case 'q':
    for (size_t i = 0; i < a->nslot; i++)
      if (a->slot[i] != NULL && a->slot[i]->p != NULL)
        return; /* its start is on its way to the agent: that cancels the question */
    if (put(a, 0, 'Q', NULL, 0) == 0)
      a->quitting = 1; /* what comes now gets a channel, or the next agent once this one ended */
    return;
  default:
    break;
  }
  if (k == NULL)
    return; /* an ID forgotten: what the agent sent before it read our k */
  switch (a->type) {
  case 'a': {
    long long n = lc__decimal(pay, a->pay.len, 18);
    if (n < 0 || (size_t)n > k->unacked) {
      fault(a, "an acknowledgement of more stdin than was sent");
      return;
    }
    k->unacked -= (size_t)n;
    if (k->p != NULL && lc__proc_in_pending(k->p))
      lc__proc_kick_later(k->p);
    return;
  }
  case 'x': {
    char *sp = memchr(pay, ' ', a->pay.len);
    long long st = sp && pay[0] == '-' ? -1 : sp ? lc__decimal(pay, (size_t)(sp - pay), 3) : -2;
    long long sig = sp ? lc__decimal(sp + 1, a->pay.len - (size_t)(sp + 1 - pay), 3) : -1;
    if (st < -1 || sig < 0) {
      fault(a, "an exit record that does not parse");
      return;
    }
    if (k->p != NULL)
      lc__proc_exit(k->p, (int)st, (int)sig);
    break;
  }
  case 'f':
    free(k->slot_fail);
    k->slot_fail = lc__strndup(pay, a->pay.len < 200 ? a->pay.len : 200);
    break;
  case 'k':
    if (k->killing)
      slot_free(k);
    return;
  default:
    fault(a, "a record of a kind it does not send");
    return;
  }
  k->ended = 1; /* x, f: closed at the next pump, outside libssh's callbacks */
  lc__proc_kick_later(a->ap);
}

/* Parses "ID T LEN" (hdr, NUL-terminated): 0, or -1. */
static int header(lc__ssh_agent *a) {
  char *s1 = strchr(a->hdr, ' '), *s2 = s1 ? strchr(s1 + 1, ' ') : NULL;
  long long id, len;
  if (s1 == NULL || s2 != s1 + 2 || (id = lc__decimal(a->hdr, (size_t)(s1 - a->hdr), 9)) < 0 ||
      (len = lc__decimal(s2 + 1, strlen(s2 + 1), 9)) < 0)
    return -1;
  a->id = (unsigned long)id;
  a->type = s1[1];
  a->left = (size_t)len;
  return 0;
}

/* The agent's stdout, after its mark (runtime.c, lc__proc_data): records. Inside libssh's data
 * callback: output goes to its process at once (lines, as from a channel), nothing is closed
 * here (agent_pump does that). */
void lc__agent_out(lc_process *ap, const char *data, size_t len) {
  lc__ssh_conn *c = ap->rt != NULL ? ap->rt->backend : NULL;
  lc__ssh_agent *a = c != NULL ? c->agent : NULL;
  if (a == NULL || a->ap != ap)
    return;
  while (len > 0 && a->fault == NULL) {
    if (a->type == 0) { /* a header */
      const char *nl = memchr(data, '\n', len);
      size_t n = nl ? (size_t)(nl - data) : len;
      if (a->hdr_len + n >= sizeof(a->hdr)) {
        fault(a, "a record header that is too long");
        return;
      }
      memcpy(a->hdr + a->hdr_len, data, n);
      a->hdr_len += n;
      data += n;
      len -= n;
      if (nl == NULL)
        return;
      data++;
      len--;
      a->hdr[a->hdr_len] = '\0';
      a->hdr_len = 0;
      if (header(a) < 0) {
        fault(a, "a record header that does not parse");
        return;
      }
      a->pay.len = 0;
    }
    if (a->type == 'o' || a->type == 'e') { /* output: straight to its process */
      size_t n = len < a->left ? len : a->left;
      lc__ssh_chan *k = slot_of(a, a->id);
      if (k != NULL && k->p != NULL && n > 0) {
        lc__proc_data(k->p, a->type == 'o' ? LC_STDOUT : LC_STDERR, data, n);
        if (lc__proc_in_pending(k->p)) /* its mark may have let its stdin go */
          lc__proc_kick_later(k->p);
      }
      data += n;
      len -= n;
      a->left -= n;
    } else {
      size_t n = len < a->left ? len : a->left;
      if (a->pay.len + n > 4096) {
        fault(a, "a record that is too long");
        return;
      }
      if (lc__buf_append(&a->pay, data, n) < 0) {
        fault(a, "more than memory allows");
        return;
      }
      data += n;
      len -= n;
      a->left -= n;
    }
    if (a->left == 0) {
      if (a->type != 'o' && a->type != 'e')
        record(a);
      a->type = 0;
    }
  }
}
