/*
 * test_files.c - sending, fetching and writing files on real SSH test hosts and on the local
 * runtime: integrity of 100 MB, modes, atomic replacement, and failures that leave nothing behind.
 */
#include "collect.h"
#include "lc_test.h"
#include "testenv.h"

#include "../../src/runtime_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>

static lc_engine *engine;
static lc_runtime *ssh_rt, *local_rt;
static char tmpdir[] = "/tmp/lc-files-XXXXXX";

/* sha256sum of a local file, or of a file on rt. */
static void sha_local(char out[65], const char *path) {
  char cmd[4200];
  FILE *p;
  snprintf(cmd, sizeof(cmd), "sha256sum '%s'", path);
  out[0] = '\0';
  if ((p = popen(cmd, "r")) != NULL) {
    if (fscanf(p, "%64s", out) != 1)
      out[0] = '\0';
    pclose(p);
  }
}

static void sha_remote(char out[65], lc_runtime *rt, const char *path) {
  collect c;
  lc_exec_result res;
  char cmd[4200];
  snprintf(cmd, sizeof(cmd), "sha256sum %s", path);
  out[0] = '\0';
  if (collect_exec(&c, &res, rt, cmd, NULL) == 0 && c.text[0] != NULL)
    sscanf(c.text[0], "%64s", out);
  collect_free(&c);
}

static int remote_count(lc_runtime *rt, const char *cmd) {
  collect c;
  lc_exec_result res;
  int n = -1;
  if (collect_exec(&c, &res, rt, cmd, NULL) == 0 && c.text[0] != NULL)
    n = atoi(c.text[0]);
  collect_free(&c);
  return n;
}

static void make_random_file(const char *path, size_t mb, mode_t mode) {
  char cmd[4200];
  snprintf(cmd, sizeof(cmd), "head -c %zuM /dev/urandom > '%s' && chmod %o '%s'", mb, path,
           (unsigned)mode, path);
  if (system(cmd) != 0)
    fprintf(stderr, "  cannot make %s\n", path);
}

static void run_roundtrip(lc_runtime *rt, const char *rdir, size_t mb) {
  char src[4096], back[4096], rpath[4096], a[65], b[65], c[65];
  struct stat st;
  snprintf(src, sizeof(src), "%s/big-%zu", tmpdir, mb);
  snprintf(back, sizeof(back), "%s/big-%zu.back-%s", tmpdir, mb, lc_runtime_name(rt));
  snprintf(rpath, sizeof(rpath), "%s/big-%zu", rdir, mb);
  if (access(src, R_OK) != 0)
    make_random_file(src, mb, 0640);
  sha_local(a, src);
  LC_REQUIRE(a[0] != '\0');
  LC_REQUIRE_OK(lc_runtime_send_file(rt, src, rpath, 120000));
  sha_remote(b, rt, rpath);
  LC_CHECK_STR(b, a);
  LC_REQUIRE_OK(lc_runtime_get_file(rt, rpath, back, 120000));
  sha_local(c, back);
  LC_CHECK_STR(c, a);
  LC_CHECK(stat(back, &st) == 0 && (st.st_mode & 07777) == 0640);
  unlink(back);
}

static void test_100mb_roundtrip_ssh(void) { run_roundtrip(ssh_rt, "/tmp", 100); }
static void test_100mb_roundtrip_local(void) { run_roundtrip(local_rt, tmpdir, 100); }

/* Modes are kept both ways; write_file writes memory with the mode asked for. */
static void run_modes(lc_runtime *rt, const char *rdir) {
  char src[4096], rpath[4096], back[4096], cmd[4200];
  struct stat st;
  snprintf(src, sizeof(src), "%s/script.sh", tmpdir);
  make_random_file(src, 0, 0750);
  snprintf(rpath, sizeof(rpath), "%s/script.sh", rdir);
  LC_REQUIRE_OK(lc_runtime_send_file(rt, src, rpath, 10000));
  snprintf(cmd, sizeof(cmd), "stat -c %%a %s", rpath);
  LC_CHECK(remote_count(rt, cmd) == 750);
  LC_REQUIRE_OK(lc_runtime_write_file(rt, rpath, "#!/bin/sh\necho hi\n", 18, 0755, 10000));
  LC_CHECK(remote_count(rt, cmd) == 755);
  snprintf(cmd, sizeof(cmd), "%s | wc -c", rpath);
  LC_CHECK(remote_count(rt, cmd) == 3); /* it ran: "hi\n" */
  snprintf(back, sizeof(back), "%s/script.back", tmpdir);
  LC_REQUIRE_OK(lc_runtime_get_file(rt, rpath, back, 10000));
  LC_CHECK(stat(back, &st) == 0 && (st.st_mode & 07777) == 0755 && st.st_size == 18);
  LC_REQUIRE_OK(lc_runtime_write_file(rt, rpath, "", 0, 0600, 10000)); /* empty file */
  LC_REQUIRE_OK(lc_runtime_get_file(rt, rpath, back, 10000));
  LC_CHECK(stat(back, &st) == 0 && st.st_size == 0 && (st.st_mode & 07777) == 0600);
  LC_REQUIRE_OK(lc_runtime_write_file(rt, "~/in-home.txt", "x", 1, 0644, 10000)); /* ~ = home */
  LC_CHECK(remote_count(rt, "wc -c < \"$HOME/in-home.txt\"") == 1);
  /* no mode: 0600 */
  LC_REQUIRE_OK(lc_runtime_write_file(rt, rpath, "x", 1, 0, 10000));
  snprintf(cmd, sizeof(cmd), "stat -c %%a %s", rpath);
  LC_CHECK(remote_count(rt, cmd) == 600);
  /* a fetched setuid, setgid, sticky file arrives without those bits, as OpenSSH fetches it */
  snprintf(cmd, sizeof(cmd), "chmod 7755 %s && stat -c %%a %s", rpath, rpath);
  LC_CHECK(remote_count(rt, cmd) == 7755);
  LC_REQUIRE_OK(lc_runtime_get_file(rt, rpath, back, 10000));
  LC_CHECK(stat(back, &st) == 0 && (st.st_mode & 07777) == 0755);
  unlink(back);
}

static void test_modes_ssh(void) { run_modes(ssh_rt, "/tmp"); }
static void test_modes_local(void) { run_modes(local_rt, tmpdir); }

/* Failures name the file and leave nothing behind, on either side. */
static void run_failures(lc_runtime *rt, const char *rdir) {
  char path[4096], rpath[4096], cmd[4200];
  int r;
  snprintf(path, sizeof(path), "%s/no-such-local-file", tmpdir);
  r = lc_runtime_send_file(rt, path, "/tmp/x", 10000);
  LC_CHECK(r == -ENOENT);
  LC_CHECK_CONTAINS(lc_error_last(), path);

  r = lc_runtime_write_file(rt, "/no/such/dir/f", "x", 1, 0644, 10000);
  LC_CHECK(r == LC_EREMOTE);
  LC_CHECK_CONTAINS(lc_error_last(), "/no/such/dir/f");
  LC_CHECK_CONTAINS(lc_error_last(), lc_runtime_name(rt));

  snprintf(path, sizeof(path), "%s/fetched", tmpdir);
  r = lc_runtime_get_file(rt, "/no/such/remote/file", path, 10000);
  LC_CHECK(r == LC_EREMOTE);
  LC_CHECK_CONTAINS(lc_error_last(), "/no/such/remote/file");
  LC_CHECK(access(path, F_OK) != 0);
  snprintf(cmd, sizeof(cmd), "ls -a '%s' | grep -c lc-tmp", tmpdir);
  {
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p != NULL) {
      if (fscanf(p, "%d", &n) != 1)
        n = -1;
      pclose(p);
    }
    LC_CHECK(n == 0);
  }

  snprintf(path, sizeof(path), "%s/local-dir-missing/x", tmpdir);
  r = lc_runtime_get_file(rt, "/etc/hostname", path, 10000);
  LC_CHECK(r == -ENOENT);
  LC_CHECK_CONTAINS(lc_error_last(), path);

  /* an interrupted send: the target keeps its old content and no temporary file stays */
  snprintf(path, sizeof(path), "%s/big-50", tmpdir);
  if (access(path, R_OK) != 0)
    make_random_file(path, 50, 0644);
  snprintf(rpath, sizeof(rpath), "%s/interrupted", rdir);
  LC_REQUIRE_OK(lc_runtime_write_file(rt, rpath, "old\n", 4, 0644, 10000));
  r = lc_runtime_send_file(rt, path, rpath, 1);
  LC_CHECK(r == -ETIMEDOUT);
  snprintf(cmd, sizeof(cmd), "cat %s", rpath);
  {
    collect c;
    lc_exec_result res;
    LC_CHECK_OK(collect_exec(&c, &res, rt, cmd, NULL));
    LC_CHECK_STR(c.text[0], "old\n");
    collect_free(&c);
  }
  snprintf(cmd, sizeof(cmd), "sleep 0.5; ls -a %s | grep -c 'interrupted.lc-tmp'", rdir);
  LC_CHECK(remote_count(rt, cmd) == 0);
}

static void test_failures_ssh(void) { run_failures(ssh_rt, "/tmp"); }
static void test_failures_local(void) { run_failures(local_rt, tmpdir); }

/* The working directory is made under the cache directory and removed at free unless kept. */
static void test_workdir(void) {
  lc_runtime *rt = NULL;
  lc_runtime_options o = th_options();
  const char *wd = NULL, *wd2 = NULL;
  const int kill_sig = SIGKILL, stop_sig = SIGSTOP;
  char cmd[4200], kept[4096];
  LC_REQUIRE_OK(lc_runtime_new_ssh(&rt, engine, "lab1", &o));
  LC_REQUIRE_OK(lc_runtime_workdir(&wd, rt));
  LC_CHECK_CONTAINS(wd, "/.cache/lazycluster/");
  /* 0700, in a root that is the user's and writable by nobody else */
  snprintf(cmd, sizeof(cmd), "stat -c %%a %s", wd);
  LC_CHECK(remote_count(rt, cmd) == 700);
  LC_REQUIRE_OK(lc_runtime_workdir(&wd2, rt));
  LC_CHECK(wd == wd2);
  snprintf(cmd, sizeof(cmd), "test -d %s && echo 1", wd);
  LC_CHECK(remote_count(rt, cmd) == 1);
  snprintf(kept, sizeof(kept), "%s", wd);
  lc_runtime_free(rt);
  LC_REQUIRE_OK(lc_runtime_new_ssh(&rt, engine, "lab1", &o));
  snprintf(cmd, sizeof(cmd), "test -d %s && echo 1 || echo 0", kept);
  LC_CHECK(remote_count(rt, cmd) == 0);
  /* a keeper killed whole, with no lifeline left to remove the directory: the free does, with a
   * command of its own */
  LC_REQUIRE_OK(lc_runtime_workdir(&wd, rt));
  snprintf(kept, sizeof(kept), "%s", wd);
  LC_CHECK(th_count_procs(1, "lc-lifeline lab1 workdir ") >= 1);
  /* lab1 runs nothing of ours now but the keeper (its wrapper, subshells and sleeps). Stopped
   * first, then killed: killed one by one, a part still alive could act on another's death (the
   * reader, once sshd closes the stdin of the dead wrapper, ends the lifeline and removes the
   * directory; on a host with its own small process table that is quick enough to happen) */
  LC_CHECK(th_each_proc(1, "comm", th_signal_unless_sshd, &stop_sig) >= 2);
  LC_CHECK(th_each_proc(1, "comm", th_signal_unless_sshd, &kill_sig) >= 2);
  for (int k = 0; k < 200 && !lc__runtime_workdir_keeper_ended(rt); k++)
    usleep(50 * 1000);
  LC_REQUIRE(lc__runtime_workdir_keeper_ended(rt));
  snprintf(cmd, sizeof(cmd), "test -d %s && echo 1 || echo 0", kept);
  LC_CHECK(remote_count(rt, cmd) == 1); /* nothing removed it yet */
  lc_runtime_free(rt);
  LC_REQUIRE_OK(lc_runtime_new_ssh(&rt, engine, "lab1", &o));
  LC_CHECK(remote_count(rt, cmd) == 0);
  lc_runtime_free(rt);

  o.keep_workdir = 1;
  o.workdir_root = "/tmp/lc-work root";
  LC_REQUIRE_OK(lc_runtime_new_ssh(&rt, engine, "lab1", &o));
  LC_REQUIRE_OK(lc_runtime_workdir(&wd, rt));
  LC_CHECK_CONTAINS(wd, "/tmp/lc-work root/");
  snprintf(kept, sizeof(kept), "%s", wd);
  lc_runtime_free(rt);
  o.keep_workdir = 0;
  LC_REQUIRE_OK(lc_runtime_new_ssh(&rt, engine, "lab1", &o));
  snprintf(cmd, sizeof(cmd), "test -d '%s' && echo 1 || echo 0", kept);
  LC_CHECK(remote_count(rt, cmd) == 1);
  snprintf(cmd, sizeof(cmd), "stat -c %%a '%s'", kept);
  LC_CHECK(remote_count(rt, cmd) == 700);
  lc_runtime_free(rt);

  /* a root others may write into, or of another user, is refused, naming host and path */
  {
    static const char *const spoil[] = {"chmod 0777 '/tmp/lc-work root'",
                                        "chmod 0775 '/tmp/lc-work root'",
                                        "chmod 0700 '/tmp/lc-work root' && "
                                        "chown 65534 '/tmp/lc-work root'"};
    for (size_t i = 0; i < sizeof(spoil) / sizeof(spoil[0]); i++) {
      LC_REQUIRE_OK(lc_runtime_new_ssh(&rt, engine, "lab1", &o));
      snprintf(cmd, sizeof(cmd), "%s && echo 1", spoil[i]);
      LC_CHECK(remote_count(rt, cmd) == 1);
      LC_CHECK(lc_runtime_workdir(&wd, rt) == -EPERM);
      LC_CHECK_CONTAINS(lc_error_last(), "lab1");
      LC_CHECK_CONTAINS(lc_error_last(), "/tmp/lc-work root is owned by uid");
      LC_CHECK_CONTAINS(lc_error_last(), i == 2 ? "uid 65534" : i == 0 ? "mode 777" : "mode 775");
      lc_runtime_free(rt);
    }
    LC_REQUIRE_OK(lc_runtime_new_ssh(&rt, engine, "lab1", &o));
    LC_CHECK(remote_count(rt, "rm -rf '/tmp/lc-work root' && echo 1") == 1);
    lc_runtime_free(rt);
  }
}

int main(int argc, char **argv) {
  static const lc_test_case tests[] = {
      LC_TEST(test_100mb_roundtrip_ssh), LC_TEST(test_100mb_roundtrip_local),
      LC_TEST(test_modes_ssh),           LC_TEST(test_modes_local),
      LC_TEST(test_failures_ssh),        LC_TEST(test_failures_local),
      LC_TEST(test_workdir),
  };
  lc_runtime_options o = th_options();
  char cmd[4200];
  int r;
  signal(SIGPIPE, SIG_IGN);
  if (mkdtemp(tmpdir) == NULL || lc_engine_new(&engine, NULL) < 0 ||
      lc_runtime_new_ssh(&ssh_rt, engine, "lab0", &o) < 0 ||
      lc_runtime_new_local(&local_rt, engine, NULL) < 0) {
    fprintf(stderr, "FATAL: setup failed: %s\n", lc_error_last());
    return 2;
  }
  r = lc_test_run(tests, sizeof(tests) / sizeof(tests[0]), argc, argv);
  lc_runtime_free(ssh_rt);
  lc_runtime_free(local_rt);
  lc_engine_free(engine);
  snprintf(cmd, sizeof(cmd), "rm -rf '%s' \"$HOME/in-home.txt\"", tmpdir);
  if (system(cmd) != 0)
    fprintf(stderr, "cannot remove %s\n", tmpdir);
  return r;
}
