/* membw_probe.c — one CPU core's memcpy bandwidth, sampled over time.
 *
 * Why: NCCL's socket transport over loopback is a chain of host memcpys
 * (pinned staging -> socket buffer -> pinned staging) done by one or two CPU
 * threads, and its speed moves 10-30 % within minutes on the 2 x H200 machine
 * (experiments/validation/README.md, socket_drift.sh). If one core's memcpy
 * moves with it, the host is what drifts. Prints one line per sample:
 * unix time, GB/s of a 64 MiB memcpy (read + write counted once, as memcpy
 * bandwidth is usually quoted).
 * usage: membw_probe SECONDS [INTERVAL_MS]   (run it pinned: taskset -c N) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: membw_probe SECONDS [INTERVAL_MS]\n");
    return 2;
  }
  double seconds = atof(argv[1]), interval = argc > 2 ? atof(argv[2]) * 1e-3 : 0.25;
  if (!(seconds > 0) || !(interval > 0)) {
    fprintf(stderr, "membw_probe: SECONDS and INTERVAL_MS must be positive numbers\n");
    return 2;
  }
  const size_t bytes = 64u << 20;
  char *a = malloc(bytes), *b = malloc(bytes);
  if (!a || !b) {
    fprintf(stderr, "membw_probe: out of memory\n");
    return 1;
  }
  memset(a, 1, bytes), memset(b, 2, bytes);
  double end = now_s() + seconds;
  for (double t = now_s(); t < end; t = now_s()) {
    double t0 = now_s();
    memcpy(b, a, bytes);
    double t1 = now_s();
    a[t1 > t0 ? 0 : 1] ^= b[bytes / 2]; /* keep the copy observable */
    printf("%.3f\t%.2f\n", t1, (double)bytes / (t1 - t0) * 1e-9);
    fflush(stdout);
    struct timespec nap = {0, (long)(interval * 1e9)};
    nanosleep(&nap, NULL);
  }
  free(b), free(a);
  return 0;
}
