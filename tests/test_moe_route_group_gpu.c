/* test_moe_route_group_gpu.c — DeepSeek-V3's routing kernels (kernels/moe_route_group.cu) against their
 * plain-C references on one GPU: the check `tacorun execute --check-moe` runs first
 * (runtime/exec/exec_check_route.c), alone. Exit status: 0 pass, 1 fail, 77 no CUDA device (CTest's skip). */
#include <cuda_runtime.h>
#include <stdio.h>

#include "exec_check.h"

int main(void) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("no CUDA device: skipped\n");
    return 77;
  }
  cudaStream_t s;
  if (cudaStreamCreate(&s) != cudaSuccess) {
    printf("cudaStreamCreate failed\n");
    return 1;
  }
  int failures = 0;
  ts_err e = {{0}, 0};
  if (exec_check_route_group(s, stdout, &failures, &e)) {
    printf("error: %s\n", e.msg);
    return 1;
  }
  cudaStreamDestroy(s);
  printf("%s\n", failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
}
