/* taco_dispatch.cuh — host helpers of the CUDA files: checked CUDA calls and
 * the switch from run-time (group, fp8) to compile-time kernel templates. */
#ifndef TACO_DISPATCH_CUH
#define TACO_DISPATCH_CUH

#include <cuda_runtime.h>

#include <type_traits>

#include "taco_codec.h"
#include "taco_internal.h"
#include "gpu_check.h"

#define TACO_CUDA_CHECK(call)                                                                      \
  GPU_CHECK(cudaError_t, cudaSuccess, call, return TACO_FAIL("%s: %s", #call, cudaGetErrorString(gpu_s_)))

/* Calls f(integral_constant<int, G>, bool_constant<E5M2>) for p's values. */
template <typename F> static int with_group_fp8(taco_params p, F &&f) {
  auto with_fp8 = [&](auto gc) {
    return p.fp8 == TACO_FP8_E5M2 ? f(gc, std::true_type{}) : f(gc, std::false_type{});
  };
  switch (p.group) {
  case 32: return with_fp8(std::integral_constant<int, 32>{});
  case 64: return with_fp8(std::integral_constant<int, 64>{});
  case 128: return with_fp8(std::integral_constant<int, 128>{});
  case 256: return with_fp8(std::integral_constant<int, 256>{});
  case 512: return with_fp8(std::integral_constant<int, 512>{});
  default: return TACO_FAIL("group %d: want 32, 64, 128, 256 or 512", p.group);
  }
}

#endif
