/*
 * fake_cudart.c - a stand-in CUDA runtime for test_hostinfo, loaded through LC_CUDART_PATH.
 *
 * LC_FAKE_CUDA picks what it answers: "2" (two devices, the default), "0" (success with none),
 * "35" (cudaErrorInsufficientDriver), "100" (cudaErrorNoDevice), "999" (an error it has no name
 * for). LC_FAKE_CUDA_VERSION sets cudaRuntimeGetVersion's answer (default 12040). The properties
 * it writes follow cudaDeviceProp's leading fields and then fill 1 KiB with junk, as a real one
 * would fill fields the probe must not read.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

int cudaGetDeviceCount(int *count);
const char *cudaGetErrorString(int err);
const char *cudaGetErrorName(int err);
int cudaRuntimeGetVersion(int *version);
int cudaGetDeviceProperties(void *prop, int device);
int cudaDeviceGetPCIBusId(char *bus_id, int len, int device);

static int mode(void) {
  const char *m = getenv("LC_FAKE_CUDA");
  return m ? atoi(m) : 2;
}

EXPORT int cudaGetDeviceCount(int *count) {
  int m = mode();
  if (m == 35 || m == 100 || m == 999)
    return m; /* like the real runtime: count left untouched */
  *count = m;
  return 0;
}

EXPORT const char *cudaGetErrorString(int err) {
  switch (err) {
  case 35:
    return "CUDA driver version is insufficient for CUDA runtime version";
  case 100:
    return "no CUDA-capable device is detected";
  default:
    return "unrecognized error code";
  }
}

EXPORT const char *cudaGetErrorName(int err) {
  switch (err) {
  case 35:
    return "cudaErrorInsufficientDriver";
  case 100:
    return "cudaErrorNoDevice";
  default:
    return "cudaErrorUnknown";
  }
}

EXPORT int cudaRuntimeGetVersion(int *version) {
  const char *v = getenv("LC_FAKE_CUDA_VERSION");
  *version = v ? atoi(v) : 12040;
  return 0;
}

EXPORT int cudaGetDeviceProperties(void *prop, int device) {
  unsigned char *p = prop;
  size_t mem = (size_t)(device + 1) * 16u * 1024u * 1024u * 1024u;
  if (device < 0 || device >= mode())
    return 101; /* cudaErrorInvalidDevice */
  memset(p, 0x5a, 1024);
  memset(p, 0, 256);
  strcpy((char *)p, device == 0 ? "Fake GPU \"Zero\"" : "Fake GPU One");
  for (int i = 0; i < 16; i++)
    p[256 + i] = (unsigned char)(0x10 * device + i);
  memcpy(p + 288, &mem, sizeof(mem));
  return 0;
}

EXPORT int cudaDeviceGetPCIBusId(char *bus_id, int len, int device) {
  snprintf(bus_id, (size_t)len, "00000000:%02X:00.0", 0x10 + device);
  return 0;
}
