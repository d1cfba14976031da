/* calibrate_clock_spin.cu — the idle time of the clock section's patterns.
 *
 * One thread of one block waits until `ns` nanoseconds of %globaltimer (wall
 * time, independent of the SM clock) have passed, sleeping between looks.
 * Why a GPU-side idle rather than a host-side sleep: the pattern stays queued
 * on the stream (no host synchronisation and launch jitter of 10-50 us in
 * every 1 ms period), and the GPU does what it does while a plan waits for a
 * slow collective: one tiny kernel resident, the rest of the SMs idle, the
 * GPU not dropped to an idle power state as it may be after a long host
 * sleep. Plain-C reference: there is no arithmetic; calibrate_clock.c checks
 * the length of a spin against CUDA events before it uses it. */
#include <cuda_runtime_api.h>

#include "rt_ops_check.h"

static __device__ __forceinline__ unsigned long long clock_spin_now_ns(void) {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void clock_spin_kernel(unsigned long long ns) {
  unsigned long long t0 = clock_spin_now_ns();
  while (clock_spin_now_ns() - t0 < ns) __nanosleep(2000);
}

extern "C" int calib_clock_spin(double us, void *stream, ts_err *e) {
  if (us <= 0) return 0;
  clock_spin_kernel<<<1, 1, 0, (cudaStream_t)stream>>>((unsigned long long)(us * 1e3));
  RT_CHECK_LAUNCH(e);
  return 0;
}
