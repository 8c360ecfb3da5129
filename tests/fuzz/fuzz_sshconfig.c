/*
 * fuzz_sshconfig.c - the OpenSSH client config reader (src/sshconfig.c): resolving a host spec
 * and listing the aliases, with Include.
 *
 * Input: the spec to resolve on the first line ("lab1" when empty), then ~/.ssh/config up to the
 * first NUL byte, then ~/.ssh/inc.conf (the seeds' "Include inc.conf" reaches it; so do globs).
 * $HOME is the target's own directory, and the system-wide config is a file that does not exist.
 *
 * Kept away from the rest of the machine, so that a run reads only its own two files and starts
 * nothing: Match exec runs $SHELL, which is /bin/false here (the criterion is parsed and its
 * tokens expanded, the command never runs); an input that could name a file outside the directory
 * (an absolute path, "~user", "..") is turned down (-1: libFuzzer keeps it out of the corpus).
 * Include of /dev/zero or /dev/stdin would make ssh itself hang too; that is the user's own
 * config, not outside input.
 */
#include "sshconfig.h"

#include "fuzz_util.h"

#include <limits.h>

static char config_path[PATH_MAX], include_path[PATH_MAX];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  char path[PATH_MAX];
  (void)argc;
  (void)argv;
  snprintf(path, sizeof(path), "%s/.ssh", fuzz_dir());
  mkdir(path, 0700);
  snprintf(config_path, sizeof(config_path), "%s/.ssh/config", fuzz_dir());
  snprintf(include_path, sizeof(include_path), "%s/.ssh/inc.conf", fuzz_dir());
  snprintf(path, sizeof(path), "%s/no-system-config", fuzz_dir());
  setenv("LC_SSH_SYSTEM_CONFIG", path, 1);
  setenv("HOME", fuzz_dir(), 1);
  setenv("SHELL", "/bin/false", 1);
  setenv("USER", "fuzz", 1);
  return 0;
}

/* Whether the input could name a file outside the target's directory: a path token that starts
 * with '/', "~" not followed by '/', or "..". */
static int reaches_out(const uint8_t *data, size_t size) {
  for (size_t i = 0; i < size; i++) {
    uint8_t c = data[i], prev = i > 0 ? data[i - 1] : ' ';
    if (c == '/' && (prev <= ' ' || strchr("=\"'\\,", prev) != NULL))
      return 1;
    if (c == '~' && (i + 1 == size || data[i + 1] != '/'))
      return 1;
    if (c == '.' && i + 1 < size && data[i + 1] == '.')
      return 1;
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *nl = memchr(data, '\n', size), *config, *nul;
  size_t spec_len = nl ? (size_t)(nl - data) : size, config_len, inc_len;
  char *spec;
  lc__ssh_host h, copy;
  lc__err err = {0};
  char **aliases = NULL;
  size_t n_aliases = 0;

  if (reaches_out(data, size) || spec_len > 256)
    return -1;
  config = nl ? nl + 1 : data + size;
  config_len = (size_t)(data + size - config);
  nul = memchr(config, '\0', config_len);
  inc_len = nul ? (size_t)(data + size - nul - 1) : 0;
  if (nul)
    config_len = (size_t)(nul - config);
  fuzz_write_file(config_path, config, config_len);
  if (nul)
    fuzz_write_file(include_path, nul + 1, inc_len);
  else
    unlink(include_path);

  spec = spec_len > 0 ? fuzz_strndup(data, spec_len) : fuzz_strndup((const uint8_t *)"lab1", 4);
  memset(&h, 0, sizeof(h));
  if (lc__sshconfig_resolve(&h, NULL, spec, &err) == 0) {
    lc__buf b = {0};
    lc__ssh_host_print(&b, &h);
    lc__buf_free(&b);
    if (lc__ssh_host_copy(&copy, &h) == 0)
      lc__ssh_host_clear(&copy);
  }
  lc__ssh_host_clear(&h);
  memset(&h, 0, sizeof(h));
  if (lc__sshconfig_resolve(&h, config_path, spec, &err) == 0)
    lc__ssh_host_clear(&h);
  if (lc__sshconfig_aliases(&aliases, &n_aliases, config_path, &err) == 0)
    lc__strv_free(aliases, n_aliases);
  free(spec);
  return 0;
}
