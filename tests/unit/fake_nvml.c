/*
 * fake_nvml.c - a stand-in NVML for test_hostinfo, loaded through LC_NVML_PATH.
 *
 * LC_FAKE_NVML picks what it answers: "3" (three devices, the default), "0" (none), "9"
 * (nvmlInit fails with NVML_ERROR_DRIVER_NOT_LOADED). Device i sits at PCI bus 0x10 + i (as the
 * fake CUDA runtime numbers its devices), is named "Fake NVML i", has the UUID
 * "GPU-f000000i-0000-0000-0000-00000000000i" and (i + 1) * 10 GiB.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
#define NDEV 3

typedef struct fake_dev {
  int index;
} fake_dev;

static fake_dev devs[NDEV] = {{0}, {1}, {2}};

int nvmlInit_v2(void);
int nvmlShutdown(void);
const char *nvmlErrorString(int err);
int nvmlDeviceGetCount_v2(unsigned *count);
int nvmlDeviceGetHandleByIndex_v2(unsigned index, void **device);
int nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, void **device);
int nvmlDeviceGetName(void *device, char *name, unsigned len);
int nvmlDeviceGetUUID(void *device, char *uuid, unsigned len);
int nvmlDeviceGetMemoryInfo(void *device, unsigned long long mem[3]);

static int mode(void) {
  const char *m = getenv("LC_FAKE_NVML");
  return m ? atoi(m) : NDEV;
}

EXPORT int nvmlInit_v2(void) { return mode() == 9 ? 9 : 0; }
EXPORT int nvmlShutdown(void) { return 0; }

EXPORT const char *nvmlErrorString(int err) {
  return err == 9 ? "Driver Not Loaded" : err == 6 ? "Not Found" : "Unknown Error";
}

EXPORT int nvmlDeviceGetCount_v2(unsigned *count) {
  *count = (unsigned)(mode() == 0 ? 0 : NDEV);
  return 0;
}

EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned index, void **device) {
  if (index >= NDEV)
    return 2; /* NVML_ERROR_INVALID_ARGUMENT */
  *device = &devs[index];
  return 0;
}

EXPORT int nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, void **device) {
  for (int i = 0; i < NDEV; i++) {
    char want[32];
    snprintf(want, sizeof(want), "00000000:%02X:00.0", 0x10 + i);
    if (strcmp(bus_id, want) == 0) {
      *device = &devs[i];
      return 0;
    }
  }
  return 6; /* NVML_ERROR_NOT_FOUND */
}

EXPORT int nvmlDeviceGetName(void *device, char *name, unsigned len) {
  snprintf(name, len, "Fake NVML %d", ((fake_dev *)device)->index);
  return 0;
}

EXPORT int nvmlDeviceGetUUID(void *device, char *uuid, unsigned len) {
  int i = ((fake_dev *)device)->index;
  snprintf(uuid, len, "GPU-f000000%d-0000-0000-0000-00000000000%d", i, i);
  return 0;
}

EXPORT int nvmlDeviceGetMemoryInfo(void *device, unsigned long long mem[3]) {
  mem[0] = (unsigned long long)(((fake_dev *)device)->index + 1) * 10 * (1ull << 30);
  mem[1] = mem[0] / 2;
  mem[2] = mem[0] - mem[1];
  return 0;
}
