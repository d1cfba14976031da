/* test_exec_faults_gpu.cu — the executor's bounded waits, failed on purpose on one machine.
 *
 * 1. The watchdog that cannot start (runtime/nccl/rt_nccl.c rt_watchdog_start): in a child process whose
 *    address space is capped just above what it uses, pthread_create cannot map the thread's stack; the call
 *    must return -1 with the named error, not run unguarded. No GPU needed: this part runs everywhere.
 * 2. The stream wait's timeout (runtime/exec/exec_model.c exec_stream_wait): a kernel that spins until the
 *    host releases it (at most 30 s of GPU time, so the test cannot hang), waited for with a 0.5 s bound:
 *    the wait must end in the named timeout error after 0.5-5 s, and succeed once the kernel is released.
 *    Needs a GPU; without one the test exits 77.
 * Usage: test_exec_faults_gpu --watchdog | --stream-wait (two ctest entries: the first runs on every machine
 * that builds the CUDA half, the second where there is a GPU). */
#include <cuda_runtime.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nccl.h> /* the C headers below include them: C++ headers outside extern "C" */
extern "C" {
#include "exec_model_internal.h"
#include "rt_nccl.h"
}

static int fails = 0;
#define EXPECT(cond, ...)                                                                                    \
  do {                                                                                                       \
    if (!(cond)) {                                                                                           \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                                  \
      fprintf(stderr, __VA_ARGS__);                                                                          \
      fprintf(stderr, "\n");                                                                                 \
      fails++;                                                                                               \
    }                                                                                                        \
  } while (0)

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The virtual memory this process maps now (bytes), from /proc/self/statm; 0 when unreadable. */
static unsigned long long mapped_bytes(void) {
  unsigned long long pages = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f) return 0;
  if (fscanf(f, "%llu", &pages) != 1) pages = 0;
  fclose(f);
  return pages * (unsigned long long)sysconf(_SC_PAGESIZE);
}

/* Part 1. The child caps its address space 1 MiB above its current size (a thread stack is 8 MiB by
 * default), calls rt_watchdog_start and reports through its exit status: 0 refused with the named error,
 * 1 started anyway, 2 refused with another message, 3 the cap could not be set. */
static void watchdog_cannot_start(void) {
  fflush(stdout), fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    EXPECT(0, "fork: %s", strerror(errno));
    return;
  }
  if (pid == 0) {
    unsigned long long vm = mapped_bytes();
    struct rlimit lim = {(rlim_t)(vm + (1ull << 20)), (rlim_t)(vm + (1ull << 20))};
    if (!vm || setrlimit(RLIMIT_AS, &lim)) _exit(3);
    ts_err e = {};
    int rc = rt_watchdog_start(&e);
    if (rc == 0) _exit(1);
    _exit(strstr(e.msg, "watchdog thread cannot start") ? 0 : 2);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 100 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT(code == 0, "rt_watchdog_start under a full address space: child status %d (0: refused, named; 1: started; "
                    "2: other message; 3: no cap; >100: signal)", code);
  if (code == 0) printf("ok: a watchdog that cannot start is refused with its named error\n");
}

/* Spins until *release is set or 30 s of GPU wall time pass. */
__global__ void spin_until_released(volatile int *release) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    __nanosleep(10000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (!*release && t - t0 < 30000000000ull);
}

/* Part 2. */
static void stream_wait_times_out(void) {
  int *release = NULL, *release_dev = NULL;
  cudaStream_t s = NULL;
  if (cudaHostAlloc((void **)&release, sizeof *release, cudaHostAllocMapped) != cudaSuccess ||
      cudaHostGetDevicePointer((void **)&release_dev, release, 0) != cudaSuccess ||
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
    EXPECT(0, "CUDA set-up: %s", cudaGetErrorString(cudaGetLastError()));
    goto fail;
  }
  {
    *(volatile int *)release = 0;
    exec_model m;
    memset(&m, 0, sizeof m); /* no communicators: the wait polls the stream alone */
    m.wait_timeout_s = 0.5;
    spin_until_released<<<1, 1, 0, s>>>(release_dev);
    EXPECT(cudaGetLastError() == cudaSuccess, "launch");
    ts_err e = {};
    double t0 = now_s();
    int rc = exec_stream_wait(&m, s, &e);
    double waited = now_s() - t0;
    EXPECT(rc == -1, "exec_stream_wait on a busy stream with a 0.5 s bound returned %d", rc);
    EXPECT(strstr(e.msg, "not finished after 0.5 s") != NULL, "message: \"%s\"", e.msg);
    EXPECT(waited >= 0.5 && waited < 5.0, "the 0.5 s wait ended after %.3f s", waited);
    printf("ok: the stream wait ended after %.3f s: %s\n", waited, e.msg);

    *(volatile int *)release = 1; /* the kernel ends; the same wait now succeeds */
    ts_err e2 = {};
    m.wait_timeout_s = 30.0;
    t0 = now_s();
    rc = exec_stream_wait(&m, s, &e2);
    EXPECT(rc == 0, "exec_stream_wait after the release: %d (%s)", rc, e2.msg);
    printf("ok: released, the wait returned %d after %.3f s\n", rc, now_s() - t0);
  }
fail:
  if (s) cudaStreamSynchronize(s), cudaStreamDestroy(s);
  if (release) cudaFreeHost(release);
}

int main(int argc, char **argv) {
  const char *part = argc == 2 ? argv[1] : "";
  if (!strcmp(part, "--watchdog")) {
    watchdog_cannot_start();
  } else if (!strcmp(part, "--stream-wait")) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
      printf("SKIP: no CUDA device\n");
      return 77;
    }
    stream_wait_times_out();
  } else {
    fprintf(stderr, "usage: %s --watchdog | --stream-wait\n", argv[0]);
    return 2;
  }
  printf(fails ? "FAILED: %d\n" : "all passed\n", fails);
  return fails ? 1 : 0;
}
