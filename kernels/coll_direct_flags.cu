/* coll_direct_flags.cu — the signal-and-wait kernel of the direct exchange
 * (coll_direct.h). One warp: lane p signals peer p and waits for peer p.
 *
 * Ordering: the encodes that wrote into the peers' staging ran as earlier
 * kernels on the same stream, so they have completed (their stores
 * performed) before this kernel starts; the system-scope fence and the
 * release store then publish the sequence number after them. The waiting
 * side's acquire load orders the decode kernels that follow it on its stream
 * after the peer's data.
 *
 * Plain-C reference: the protocol has no arithmetic to mirror; the CPU test
 * (tests/test_coll_layout.c) checks the slot and staging arithmetic and the
 * GPU test checks the results end to end. */
#include "coll_direct.h"

static __device__ __forceinline__ unsigned long long global_ns(void) {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

static __device__ __forceinline__ unsigned long long load_acquire_sys(const unsigned long long *p) {
  unsigned long long v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

static __device__ __forceinline__ void store_release_sys(unsigned long long *p, unsigned long long v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__global__ void coll_direct_flags_kernel(coll_direct_flag_args a) {
  int p = threadIdx.x;
  if (p >= COLL_DIRECT_MAX) return;
  if (a.signal[p]) {
    __threadfence_system();
    store_release_sys(a.signal[p], a.seq);
  }
  if (!a.wait[p]) return;
  if (a.fault->code) return; /* an earlier wait timed out: the team is broken, do not wait again */
  unsigned long long start = global_ns();
  for (;;) {
    unsigned long long v = load_acquire_sys(a.wait[p]);
    if (v >= a.seq) return;
    if (global_ns() - start > a.timeout_ns) {
      a.fault->src = (unsigned)p;
      a.fault->seq = a.seq;
      a.fault->seen = v;
      __threadfence_system();
      a.fault->code = 1;
      __threadfence_system();
      return;
    }
    __nanosleep(64);
  }
}

extern "C" int coll_direct_flags_launch(const coll_direct_flag_args *a, cudaStream_t stream) {
  coll_direct_flags_kernel<<<1, 32, 0, stream>>>(*a);
  return (int)cudaGetLastError();
}
