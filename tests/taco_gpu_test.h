/* taco_gpu_test.h — the checks the codec's GPU tests share: a CUDA call or a
 * codec call (0 on success, taco_last_error() naming the reason) that fails
 * ends the test with the file, line, call and reason. */
#ifndef TACO_GPU_TEST_H
#define TACO_GPU_TEST_H

#include <stdio.h>
#include <stdlib.h>

#include "gpu_check.h"
#include "taco_codec.h"

#define CHECK_CUDA(call) CUDA_CHECK_EXIT(call)
#define CHECK_TACO(call)                                                                                     \
  do {                                                                                                       \
    if ((call) != 0) {                                                                                       \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, taco_last_error());                      \
      exit(1);                                                                                               \
    }                                                                                                        \
  } while (0)

#endif
