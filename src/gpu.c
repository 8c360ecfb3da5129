/*
 * gpu.c - this machine's GPUs through the CUDA runtime (libcudart) and NVML (libnvidia-ml), both
 * loaded with dlopen at run time: the library has no link-time CUDA dependency, and one binary
 * serves hosts with and without CUDA.
 *
 * A runtime library that was called into is never dlclose'd: CUDA registers exit handlers and
 * threads that must not outlive its code.
 */
#include "gpu.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The CUDA runtime's error codes that the probe tells apart (driver_types.h). */
enum { CUDA_OK = 0, CUDA_INSUFFICIENT_DRIVER = 35, CUDA_NO_DEVICE = 100 };

/*
 * cudaDeviceProp begins, in every runtime from 10.0 through 13.x, with
 *   char name[256]; cudaUUID_t uuid (16 bytes); char luid[8]; unsigned int luidDeviceNodeMask;
 *   size_t totalGlobalMem;
 * Later fields moved between majors, so only these are read, from a buffer far larger than the
 * structure of any version. The name is the first field in all versions; the UUID and memory are
 * read only from runtimes whose layout is known.
 */
#define PROP_NAME_LEN 256
#define PROP_UUID_OFF 256
#define PROP_MEM_OFF ((256 + 16 + 8 + 4 + sizeof(size_t) - 1) / sizeof(size_t) * sizeof(size_t))
#define PROP_BUF_SIZE 16384
#define PROP_LAYOUT_FIRST 10000
#define PROP_LAYOUT_LAST 13999

#define MAX_RUNTIMES 4 /* distinct CUDA runtimes asked before giving up */
#define MAX_GPUS 1024  /* more than any machine has; guards against a confused library */

typedef struct cudart {
  void *dl;
  int version; /* 1000 * major + 10 * minor, 0 when unknown */
  int (*get_device_count)(int *count);
  const char *(*get_error_string)(int err);
  const char *(*get_error_name)(int err);
  int (*runtime_get_version)(int *version);
  int (*get_device_properties)(void *prop, int device);
  int (*device_get_pci_bus_id)(char *bus_id, int len, int device);
} cudart;

typedef struct nvml {
  void *dl;
  int up; /* nvmlInit succeeded */
  int (*init)(void);
  int (*shutdown)(void);
  const char *(*error_string)(int err);
  int (*get_count)(unsigned *count);
  int (*by_index)(unsigned index, void **device);
  int (*by_pci)(const char *bus_id, void **device);
  int (*get_name)(void *device, char *name, unsigned len);
  int (*get_uuid)(void *device, char *uuid, unsigned len);
  int (*get_memory)(void *device, unsigned long long mem[3]); /* nvmlMemory_t: total, free, used */
} nvml;

_Static_assert(sizeof(int (*)(void)) == sizeof(void *),
               "dlsym needs function pointers as wide as void *");

/* Stores dlsym(dl, name) into the function pointer at fn; -ENOENT when the symbol is missing. */
static int load_sym(void *dl, const char *name, void *fn, size_t size) {
  void *p = dlsym(dl, name);
  if (p == NULL)
    return -ENOENT;
  memcpy(fn, &p, size);
  return 0;
}
#define LOAD(dl, name, fn) load_sym((dl), (name), &(fn), sizeof(fn))

/* Copies src into dst[n], cut to fit. */
static void copy_str(char *dst, size_t n, const char *src) {
  size_t l = strnlen(src, n - 1);
  memcpy(dst, src, l);
  dst[l] = '\0';
}

/* Appends src to the string in dst[n], cut to fit. */
static void append_str(char *dst, size_t n, const char *src) {
  size_t l = strnlen(dst, n - 1);
  copy_str(dst + l, n - l, src);
}

/* ---- errors: the one place CUDA and NVML codes become text, in their own words ------------- */

static void cuda_error_text(const cudart *rt, int err, char *buf, size_t n) {
  const char *name = rt->get_error_name ? rt->get_error_name(err) : NULL;
  const char *text = rt->get_error_string ? rt->get_error_string(err) : NULL;
  if (name && text)
    snprintf(buf, n, "%s: %s", name, text);
  else
    snprintf(buf, n, "CUDA error %d%s%s", err, text ? ": " : "", text ? text : "");
}

/* Why cudaGetDeviceCount gave no devices, for gpu_reason. */
static void cuda_reason(const cudart *rt, int err, char *buf, size_t n) {
  char text[200];
  cuda_error_text(rt, err, text, sizeof(text));
  if (err == CUDA_INSUFFICIENT_DRIVER)
    snprintf(buf, n, "CUDA driver is missing or older than the runtime (%s)", text);
  else if (err == CUDA_NO_DEVICE)
    snprintf(buf, n, "no CUDA device (%s)", text);
  else
    snprintf(buf, n, "CUDA runtime failed (%s)", text);
}

static void nvml_error_text(const nvml *nv, int err, char *buf, size_t n) {
  const char *text = nv->error_string ? nv->error_string(err) : NULL;
  snprintf(buf, n, "NVML error %d: %s", err, text ? text : "unknown");
}

/* ---- small pieces -------------------------------------------------------------------------- */

void lc__gpu_uuid_format(char *buf, size_t n, const unsigned char b[16]) {
  int zero = 1;
  for (int i = 0; i < 16; i++)
    zero &= b[i] == 0;
  if (zero) {
    if (n)
      buf[0] = '\0';
    return;
  }
  snprintf(buf, n, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
           b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
           b[15]);
}

/* The one device whose UUID begins with tok ("GPU-" optional); -1 when none or several. */
static long match_uuid(const char *tok, size_t tl, const char *const *uuids, size_t n) {
  long found = -1;
  if (tl >= 4 && strncmp(tok, "GPU-", 4) == 0) {
    tok += 4;
    tl -= 4;
  }
  if (tl == 0)
    return -1;
  for (size_t i = 0; i < n; i++) {
    const char *u = uuids[i] ? uuids[i] : "";
    if (strncmp(u, "GPU-", 4) == 0)
      u += 4;
    if (strncasecmp(u, tok, tl) != 0)
      continue;
    if (found >= 0)
      return -1;
    found = (long)i;
  }
  return found;
}

/* The next entry of a CUDA_VISIBLE_DEVICES list at *p, blanks trimmed: 0 with *tok and *tl set
 * and *p past its comma (at the end after the last entry), -1 when no entry is left. */
static int visible_next(const char **p, const char **tok, size_t *tl) {
  const char *e;
  if (*p == NULL || **p == '\0')
    return -1;
  e = strchr(*p, ',');
  *tok = *p;
  *tl = e ? (size_t)(e - *p) : strlen(*p);
  *p = e ? e + 1 : NULL;
  while (*tl > 0 && isspace((unsigned char)**tok))
    (*tok)++, (*tl)--;
  while (*tl > 0 && isspace((unsigned char)(*tok)[*tl - 1]))
    (*tl)--;
  return 0;
}

size_t lc__gpu_visible_select(const char *cvd, const char *const *uuids, size_t n, size_t *out) {
  size_t count = 0, tl;
  const char *p = cvd, *tok;
  if (cvd == NULL) {
    for (size_t i = 0; i < n; i++)
      out[i] = i;
    return n;
  }
  while (count < n && visible_next(&p, &tok, &tl) == 0) {
    long dev = -1;
    int digits = tl > 0;
    for (size_t i = 0; i < tl; i++)
      digits &= isdigit((unsigned char)tok[i]) != 0;
    if (digits && tl > 0 && tl < 9)
      dev = strtol(tok, NULL, 10);
    else if (!digits)
      dev = match_uuid(tok, tl, uuids, n);
    if (dev < 0 || (size_t)dev >= n)
      break;
    for (size_t i = 0; i < count; i++)
      if (out[i] == (size_t)dev)
        return count;
    out[count++] = (size_t)dev;
  }
  return count;
}

int lc__gpu_visible_entry(const char *cvd, int k, char *out, size_t n) {
  const char *p = cvd, *tok = NULL;
  size_t tl = 0;
  if (k < 0)
    return -1;
  for (int i = 0; i <= k; i++)
    if (visible_next(&p, &tok, &tl) < 0)
      return -1;
  if (tl == 0 || tl >= n)
    return -1;
  memcpy(out, tok, tl);
  out[tl] = '\0';
  return 0;
}

static int set_source(lc_hostinfo *info, const char *source, const char *reason) {
  copy_str(info->gpu_source, sizeof(info->gpu_source), source);
  copy_str(info->gpu_reason, sizeof(info->gpu_reason), reason);
  return 0;
}

/* ---- NVML ---------------------------------------------------------------------------------- */

/* Loads and initialises NVML; on failure says why in reason (empty when the library is absent). */
static int nvml_open(nvml *nv, char *reason, size_t rn) {
  const char *path = getenv("LC_NVML_PATH");
  int e;
  memset(nv, 0, sizeof(*nv));
  reason[0] = '\0';
  if (path == NULL || *path == '\0')
    path = "libnvidia-ml.so.1";
  if ((nv->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL)) == NULL)
    return -ENOENT;
  if (LOAD(nv->dl, "nvmlInit_v2", nv->init) < 0 || LOAD(nv->dl, "nvmlShutdown", nv->shutdown) < 0 ||
      LOAD(nv->dl, "nvmlDeviceGetCount_v2", nv->get_count) < 0 ||
      LOAD(nv->dl, "nvmlDeviceGetHandleByIndex_v2", nv->by_index) < 0) {
    snprintf(reason, rn, "%s is not an NVML library", path);
    dlclose(nv->dl);
    nv->dl = NULL;
    return -ENOENT;
  }
  LOAD(nv->dl, "nvmlErrorString", nv->error_string);
  LOAD(nv->dl, "nvmlDeviceGetHandleByPciBusId_v2", nv->by_pci);
  LOAD(nv->dl, "nvmlDeviceGetName", nv->get_name);
  LOAD(nv->dl, "nvmlDeviceGetUUID", nv->get_uuid);
  LOAD(nv->dl, "nvmlDeviceGetMemoryInfo", nv->get_memory);
  if ((e = nv->init()) != 0) {
    nvml_error_text(nv, e, reason, rn);
    return -EIO;
  }
  nv->up = 1;
  return 0;
}

static void nvml_close(nvml *nv) {
  if (nv->up)
    nv->shutdown();
  nv->up = 0;
}

/* Copies what NVML knows of device into g, keeping what g already has unless prefer_nvml. */
static void nvml_fill(const nvml *nv, void *device, lc_gpu *g, int prefer_nvml) {
  char text[128];
  unsigned long long mem[3];
  if (nv->get_name && (prefer_nvml || g->name[0] == '\0') &&
      nv->get_name(device, text, sizeof(text)) == 0 && text[0])
    copy_str(g->name, sizeof(g->name), text);
  if (nv->get_uuid && nv->get_uuid(device, text, sizeof(text)) == 0 && text[0])
    copy_str(g->uuid, sizeof(g->uuid), text);
  if (nv->get_memory && (prefer_nvml || g->memory_bytes == 0) && nv->get_memory(device, mem) == 0)
    g->memory_bytes = mem[0];
}

/* Lists NVML's devices, those CUDA_VISIBLE_DEVICES lets CUDA see, numbered as CUDA would. */
static int nvml_list(const nvml *nv, lc_hostinfo *info, char *reason, size_t rn) {
  unsigned count = 0;
  void **devs = NULL;
  char **uuids = NULL;
  size_t *pick = NULL, chosen;
  int e, r = 0;
  if ((e = nv->get_count(&count)) != 0) {
    nvml_error_text(nv, e, reason, rn);
    return 0;
  }
  if (count == 0) {
    snprintf(reason, rn, "NVML lists no GPU");
    return 0;
  }
  if (count > MAX_GPUS)
    count = MAX_GPUS;
  r = -ENOMEM;
  if ((devs = lc__calloc(count, sizeof(*devs))) == NULL ||
      (uuids = lc__calloc(count, sizeof(*uuids))) == NULL ||
      (pick = lc__calloc(count, sizeof(*pick))) == NULL)
    goto out;
  for (unsigned i = 0; i < count; i++) {
    char text[96] = "";
    if (nv->by_index(i, &devs[i]) != 0)
      devs[i] = NULL;
    if (devs[i] && nv->get_uuid)
      nv->get_uuid(devs[i], text, sizeof(text));
    if ((uuids[i] = lc__strdup(text)) == NULL)
      goto out;
  }
  chosen = lc__gpu_visible_select(getenv("CUDA_VISIBLE_DEVICES"), (const char *const *)uuids, count,
                                  pick);
  if (chosen == 0) {
    snprintf(reason, rn, "NVML lists %u GPU(s), none of them in CUDA_VISIBLE_DEVICES", count);
    r = 0;
    goto out;
  }
  if ((info->gpus = lc__calloc(chosen, sizeof(*info->gpus))) == NULL)
    goto out;
  for (size_t i = 0; i < chosen; i++) {
    lc_gpu *g = &info->gpus[i];
    g->index = (int)i;
    if (devs[pick[i]])
      nvml_fill(nv, devs[pick[i]], g, 1);
  }
  info->gpu_count = chosen;
  r = 0;
out:
  for (unsigned i = 0; uuids && i < count; i++)
    free(uuids[i]);
  free(uuids);
  free(devs);
  free(pick);
  return r;
}

/* ---- the CUDA runtime ---------------------------------------------------------------------- */

/* Resolves the runtime's entry points; -ENOENT when dl is not a CUDA runtime. */
static int cudart_bind(cudart *rt, void *dl) {
  memset(rt, 0, sizeof(*rt));
  rt->dl = dl;
  if (LOAD(dl, "cudaGetDeviceCount", rt->get_device_count) < 0)
    return -ENOENT;
  LOAD(dl, "cudaGetErrorString", rt->get_error_string);
  LOAD(dl, "cudaGetErrorName", rt->get_error_name);
  LOAD(dl, "cudaRuntimeGetVersion", rt->runtime_get_version);
  /* CUDA 12 has both; its _v2 is the one its headers call. CUDA 13 has only the plain name. */
  if (LOAD(dl, "cudaGetDeviceProperties_v2", rt->get_device_properties) < 0)
    LOAD(dl, "cudaGetDeviceProperties", rt->get_device_properties);
  LOAD(dl, "cudaDeviceGetPCIBusId", rt->device_get_pci_bus_id);
  if (rt->runtime_get_version == NULL || rt->runtime_get_version(&rt->version) != CUDA_OK)
    rt->version = 0;
  return 0;
}

/* Fills g from the runtime's device properties: the name always, UUID and memory where the
 * runtime's layout is known. */
static void cudart_fill(const cudart *rt, int device, unsigned char *prop, lc_gpu *g) {
  size_t mem;
  if (rt->get_device_properties == NULL)
    return;
  memset(prop, 0, PROP_BUF_SIZE);
  if (rt->get_device_properties(prop, device) != CUDA_OK)
    return;
  snprintf(g->name, sizeof(g->name), "%.*s", (int)strnlen((char *)prop, PROP_NAME_LEN),
           (char *)prop);
  if (rt->version < PROP_LAYOUT_FIRST || rt->version > PROP_LAYOUT_LAST)
    return;
  lc__gpu_uuid_format(g->uuid, sizeof(g->uuid), prop + PROP_UUID_OFF);
  memcpy(&mem, prop + PROP_MEM_OFF, sizeof(mem));
  g->memory_bytes = mem;
}

/* Lists the runtime's devices, with NVML's UUID, name and memory where the runtime lacks them. */
static int cudart_list(const cudart *rt, int count, lc_hostinfo *info) {
  unsigned char *prop = NULL;
  nvml nv;
  char nvreason[LC_ERRMSG_MAX];
  int have_nvml = 0, r = -ENOMEM;
  if ((info->gpus = lc__calloc((size_t)count, sizeof(*info->gpus))) == NULL ||
      (prop = lc__malloc(PROP_BUF_SIZE)) == NULL)
    goto out;
  have_nvml = nvml_open(&nv, nvreason, sizeof(nvreason)) == 0;
  for (int i = 0; i < count; i++) {
    lc_gpu *g = &info->gpus[i];
    char bus[64];
    void *dev;
    g->index = i;
    cudart_fill(rt, i, prop, g);
    if (have_nvml && nv.by_pci && rt->device_get_pci_bus_id &&
        rt->device_get_pci_bus_id(bus, (int)sizeof(bus), i) == CUDA_OK && nv.by_pci(bus, &dev) == 0)
      nvml_fill(&nv, dev, g, 0);
  }
  info->gpu_count = (size_t)count;
  r = set_source(info, "cuda", "");
out:
  if (have_nvml)
    nvml_close(&nv);
  free(prop);
  return r;
}

/* Orders paths newest version first. */
static int version_desc(const void *a, const void *b) {
  return strverscmp(*(const char *const *)b, *(const char *const *)a);
}

typedef struct search {
  void *tried[MAX_RUNTIMES]; /* handles already asked, so one file is asked once */
  size_t ntried;
  int err;      /* first cudaGetDeviceCount error, -1 when none was asked */
  cudart first; /* the runtime that gave err */
  int found;    /* a runtime answered with devices or with "no device" */
  cudart rt;
  int count;
  int not_cuda;    /* a library loaded but had no cudaGetDeviceCount */
  char dlerr[160]; /* the first dlopen failure */
} search;

/* Asks the runtime at path for its devices. Returns 1 when the search is over. */
static int try_runtime(search *s, const char *path) {
  cudart rt;
  int count = 0, e;
  void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (dl == NULL) {
    const char *why = dlerror();
    if (s->dlerr[0] == '\0')
      snprintf(s->dlerr, sizeof(s->dlerr), "%s", why ? why : "dlopen failed");
    return 0;
  }
  for (size_t i = 0; i < s->ntried; i++) {
    if (s->tried[i] == dl) {
      dlclose(dl); /* drops only the reference taken just now */
      return 0;
    }
  }
  if (cudart_bind(&rt, dl) < 0) {
    s->not_cuda = 1;
    dlclose(dl);
    return 0;
  }
  s->tried[s->ntried++] = dl;
  e = rt.get_device_count(&count);
  if (e == CUDA_OK && count > 0) {
    s->found = 1;
    s->rt = rt;
    s->count = count > MAX_GPUS ? MAX_GPUS : count;
    return 1;
  }
  if (e == CUDA_OK)
    e = CUDA_NO_DEVICE;
  if (s->err < 0) {
    s->err = e;
    s->first = rt;
  }
  /* No device is the driver's answer for every runtime; another error may be this runtime's
   * alone (one too new for the driver), so an older runtime is still worth asking. */
  if (e == CUDA_NO_DEVICE) {
    s->found = 1;
    s->rt = rt;
    s->count = 0;
    return 1;
  }
  return s->ntried >= MAX_RUNTIMES;
}

/* Asks the runtimes whose files match pattern, newest first. Returns 1 when the search is over. */
static int try_glob(search *s, const char *pattern) {
  glob_t g;
  const char **paths;
  int done = 0;
  if (glob(pattern, 0, NULL, &g) != 0)
    return 0;
  if ((paths = lc__calloc(g.gl_pathc, sizeof(*paths))) != NULL) {
    for (size_t i = 0; i < g.gl_pathc; i++)
      paths[i] = g.gl_pathv[i];
    qsort(paths, g.gl_pathc, sizeof(*paths), version_desc);
    for (size_t i = 0; i < g.gl_pathc && !done; i++)
      done = try_runtime(s, paths[i]);
    free(paths);
  }
  globfree(&g);
  return done;
}

/* Tries the usual names, then the files of the usual CUDA installations. */
static void search_runtimes(search *s) {
  static const char *const names[] = {
      "libcudart.so",    "libcudart.so.13",   "libcudart.so.12",   "libcudart.so.11.0",
      "libcudart.so.11", "libcudart.so.10.2", "libcudart.so.10.1", "libcudart.so.10.0",
  };
  static const char *const patterns[] = {
      "/usr/local/cuda/lib64/libcudart.so*",
      "/usr/local/cuda/lib/libcudart.so*",
      "/usr/local/cuda/targets/*/lib/libcudart.so*",
      "/usr/local/cuda-*/lib64/libcudart.so*",
      "/usr/local/cuda-*/lib/libcudart.so*",
      "/usr/local/cuda-*/targets/*/lib/libcudart.so*",
      "/opt/cuda/lib64/libcudart.so*",
      "/usr/lib/*-linux-gnu/libcudart.so*",
      "/usr/lib64/libcudart.so*",
  };
  static const char *const homes[] = {"CUDA_HOME", "CUDA_PATH"};
  for (size_t i = 0; i < LC_ARRAY_SIZE(names); i++)
    if (try_runtime(s, names[i]))
      return;
  for (size_t i = 0; i < LC_ARRAY_SIZE(homes); i++) {
    const char *home = getenv(homes[i]);
    char pattern[PATH_MAX];
    if (home == NULL || *home == '\0' ||
        snprintf(pattern, sizeof(pattern), "%s/lib64/libcudart.so*", home) >= (int)sizeof(pattern))
      continue;
    if (try_glob(s, pattern))
      return;
  }
  for (size_t i = 0; i < LC_ARRAY_SIZE(patterns); i++)
    if (try_glob(s, patterns[i]))
      return;
}

int lc__gpu_probe(lc_hostinfo *info) {
  const char *explicit_path = getenv("LC_CUDART_PATH");
  char reason[sizeof(info->gpu_reason)], nvreason[LC_ERRMSG_MAX];
  search s;
  nvml nv;
  free(info->gpus);
  info->gpus = NULL;
  info->gpu_count = 0;
  memset(&s, 0, sizeof(s));
  s.err = -1;
  reason[0] = '\0';

  if (explicit_path && *explicit_path) {
    try_runtime(&s, explicit_path);
    if (s.not_cuda)
      snprintf(reason, sizeof(reason),
               "LC_CUDART_PATH=%s is not a CUDA runtime library (no cudaGetDeviceCount)",
               explicit_path);
    else if (s.ntried == 0)
      snprintf(reason, sizeof(reason), "cannot load the CUDA runtime LC_CUDART_PATH=%s (%s)",
               explicit_path, s.dlerr);
  } else {
    search_runtimes(&s);
  }

  if (s.found && s.count > 0)
    return cudart_list(&s.rt, s.count, info);
  if (s.found) {
    cuda_reason(&s.rt, CUDA_NO_DEVICE, reason, sizeof(reason));
    return set_source(info, "none", reason);
  }
  if (s.err >= 0)
    cuda_reason(&s.first, s.err, reason, sizeof(reason));
  else if (reason[0] == '\0')
    snprintf(reason, sizeof(reason), "no CUDA runtime library found (libcudart.so)");

  /* No runtime works here; the driver's NVML may still see GPUs (a runtime too new for the
   * driver, or none installed), and the programs started on them bring their own runtime. */
  if (nvml_open(&nv, nvreason, sizeof(nvreason)) == 0) {
    int r = nvml_list(&nv, info, nvreason, sizeof(nvreason));
    nvml_close(&nv);
    if (r < 0)
      return r;
    if (info->gpu_count > 0) {
      char why[sizeof(info->gpu_reason)] = "listed by NVML; ";
      append_str(why, sizeof(why), reason);
      return set_source(info, "nvml", why);
    }
  }
  if (nvreason[0]) {
    append_str(reason, sizeof(reason), "; ");
    append_str(reason, sizeof(reason), nvreason);
  }
  return set_source(info, "none", reason);
}
