/* calibrate_nvml.c — NVML opened at run time (calibrate_nvml.h). */
#include "calibrate_nvml.h"

#include <dlfcn.h>
#include <string.h>

int calib_nvml_fail(const calib_nvml *n, const char *what, calib_nvml_ret r, ts_err *e) {
  const char *s = n && n->error_string ? n->error_string(r) : NULL;
  return ts_fail_sys(e, "power: %s: %s (NVML error %d)", what, s ? s : "unknown error", r);
}

/* dlsym into a function pointer of any type (POSIX: the cast is defined). */
static int sym(calib_nvml *n, const char *name, void *fp, ts_err *e) {
  void *p = dlsym(n->lib, name);
  if (!p) return ts_fail_sys(e, "power: %s: not found in the NVML library", name);
  memcpy(fp, &p, sizeof p);
  return 0;
}

void calib_nvml_close(calib_nvml *n) {
  if (n->inited && n->shutdown) n->shutdown();
  if (n->lib) dlclose(n->lib);
  memset(n, 0, sizeof *n);
}

int calib_nvml_open(calib_nvml *n, const char *lib, const char *pci, ts_err *e) {
  memset(n, 0, sizeof *n);
  n->lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!n->lib) {
    const char *why = dlerror();
    return ts_fail_sys(e, "power: cannot open %s (NVML, part of the NVIDIA driver): %s", lib, why ? why : "dlopen failed");
  }
  calib_nvml_ret r;
  if (sym(n, "nvmlInit_v2", &n->init, e) || sym(n, "nvmlShutdown", &n->shutdown, e) ||
      sym(n, "nvmlErrorString", &n->error_string, e) || sym(n, "nvmlDeviceGetHandleByPciBusId_v2", &n->by_pci, e) ||
      sym(n, "nvmlDeviceGetName", &n->name, e) || sym(n, "nvmlDeviceGetTotalEnergyConsumption", &n->energy, e) ||
      sym(n, "nvmlDeviceGetPowerUsage", &n->power, e) || sym(n, "nvmlDeviceGetEnforcedPowerLimit", &n->limit, e) ||
      sym(n, "nvmlDeviceGetClockInfo", &n->clock, e) || sym(n, "nvmlDeviceGetMaxClockInfo", &n->max_clock, e))
    goto fail;
  if ((r = n->init()) != 0) {
    calib_nvml_fail(n, "nvmlInit_v2", r, e);
    goto fail;
  }
  n->inited = 1;
  if ((r = n->by_pci(pci, &n->dev)) != 0) {
    calib_nvml_fail(n, "nvmlDeviceGetHandleByPciBusId_v2", r, e);
    goto fail;
  }
  return 0;
fail:
  calib_nvml_close(n);
  return -1;
}

#define NVML_CALL(what, call)                                                                                         \
  do {                                                                                                                \
    calib_nvml_ret r_ = (call);                                                                                       \
    return r_ == 0 ? 0 : calib_nvml_fail(n, what, r_, e);                                                             \
  } while (0)

int calib_nvml_name(calib_nvml *n, char *out, unsigned cap, ts_err *e) {
  NVML_CALL("nvmlDeviceGetName", n->name(n->dev, out, cap));
}
int calib_nvml_energy_mj(calib_nvml *n, unsigned long long *mj, ts_err *e) {
  NVML_CALL("nvmlDeviceGetTotalEnergyConsumption", n->energy(n->dev, mj));
}
int calib_nvml_power_mw(calib_nvml *n, unsigned *mw, ts_err *e) {
  NVML_CALL("nvmlDeviceGetPowerUsage", n->power(n->dev, mw));
}
int calib_nvml_limit_mw(calib_nvml *n, unsigned *mw, ts_err *e) {
  NVML_CALL("nvmlDeviceGetEnforcedPowerLimit", n->limit(n->dev, mw));
}
int calib_nvml_sm_mhz(calib_nvml *n, unsigned *mhz, ts_err *e) {
  NVML_CALL("nvmlDeviceGetClockInfo", n->clock(n->dev, CALIB_NVML_CLOCK_SM, mhz));
}
int calib_nvml_sm_max_mhz(calib_nvml *n, unsigned *mhz, ts_err *e) {
  NVML_CALL("nvmlDeviceGetMaxClockInfo", n->max_clock(n->dev, CALIB_NVML_CLOCK_SM, mhz));
}
