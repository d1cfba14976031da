/* calibrate_nvml.h — the few NVML calls the power phase makes (calibrate_power.h).
 *
 * NVML comes with the driver (libnvidia-ml.so.1), not with every CUDA toolkit:
 * the toolkit this project builds with has no nvml.h and no libnvidia-ml.so to link.
 * So the library is opened at run time (dlopen) and its entry points looked up
 * by name; tacorun then needs NVML only when the power phase runs. The types
 * below are NVML's C ABI as its documentation gives it: every call returns an
 * nvmlReturn_t (0: success), a device is an opaque handle, and the clock
 * domain of the SM is 1 (NVML_CLOCK_SM).
 *
 * Every call is checked; a failure reads "power: nvmlDeviceGetTotalEnergyConsumption:
 * <nvmlErrorString>". Plain C: the open/close path is tested on a CPU. */
#ifndef CALIBRATE_NVML_H
#define CALIBRATE_NVML_H

#include "ts_error.h"

#define CALIB_NVML_LIB "libnvidia-ml.so.1"
#define CALIB_NVML_CLOCK_SM 1

typedef int calib_nvml_ret;            /* nvmlReturn_t */
typedef struct calib_nvml_dev_ *calib_nvml_dev; /* nvmlDevice_t */

typedef struct {
  void *lib;   /* dlopen handle */
  int inited;  /* nvmlInit_v2 succeeded: nvmlShutdown owed */
  calib_nvml_dev dev;
  calib_nvml_ret (*init)(void);
  calib_nvml_ret (*shutdown)(void);
  const char *(*error_string)(calib_nvml_ret);
  calib_nvml_ret (*by_pci)(const char *, calib_nvml_dev *);
  calib_nvml_ret (*name)(calib_nvml_dev, char *, unsigned);
  calib_nvml_ret (*energy)(calib_nvml_dev, unsigned long long *);  /* mJ since the driver loaded */
  calib_nvml_ret (*power)(calib_nvml_dev, unsigned *);             /* mW, averaged by the driver */
  calib_nvml_ret (*limit)(calib_nvml_dev, unsigned *);             /* enforced power limit, mW */
  calib_nvml_ret (*clock)(calib_nvml_dev, int, unsigned *);        /* current clock, MHz */
  calib_nvml_ret (*max_clock)(calib_nvml_dev, int, unsigned *);    /* max clock, MHz */
} calib_nvml;

/* Opens `lib` (CALIB_NVML_LIB), looks up the entry points, initialises NVML
 * and takes the device at PCI bus id `pci` ("0000:18:00.0", as
 * cudaDeviceGetPCIBusId gives it). On failure everything opened so far is
 * closed again (n is left closed) and e names the step. */
int calib_nvml_open(calib_nvml *n, const char *lib, const char *pci, ts_err *e);
/* nvmlShutdown (when initialised), then dlclose; safe on a closed or zeroed n. */
void calib_nvml_close(calib_nvml *n);

/* The checked calls: 0, or -1 with "power: <nvml function>: <error string>". */
int calib_nvml_name(calib_nvml *n, char *out, unsigned cap, ts_err *e);
int calib_nvml_energy_mj(calib_nvml *n, unsigned long long *mj, ts_err *e);
int calib_nvml_power_mw(calib_nvml *n, unsigned *mw, ts_err *e);
int calib_nvml_limit_mw(calib_nvml *n, unsigned *mw, ts_err *e);
int calib_nvml_sm_mhz(calib_nvml *n, unsigned *mhz, ts_err *e);
int calib_nvml_sm_max_mhz(calib_nvml *n, unsigned *mhz, ts_err *e);
/* "power: <what>: <error string>" for a call that returned r (for callers
 * that check a call themselves, as the sampling thread does). */
int calib_nvml_fail(const calib_nvml *n, const char *what, calib_nvml_ret r, ts_err *e);

#endif
