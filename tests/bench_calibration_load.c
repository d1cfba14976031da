/* bench_calibration_load — how long schema_calibration_load takes on large
 * calibration files: a benchmark that prints figures, not a timed test.
 *
 *   bench_calibration_load [N...]        (default 100000 200000 1000000)
 *
 * For each N it writes a calibration of N distinct GEMM shapes, then one of
 * N kernel points (one table, distinct sizes) and one of N collective points
 * (one table), each in the layout the writer uses, loads each file once and
 * prints the file size, the load time (wall and CPU), the CPU time of the JSON
 * parse alone and the process's peak memory so far.
 * The figures in calibration/README.md come from this program. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "calibration.h"
#include "ts_json.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double peak_mib(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)u.ru_maxrss / 1024.0; /* ru_maxrss is in KiB on Linux */
}

static void header(FILE *f) {
  fprintf(f, "{\n \"schema\": 1,\n \"gpu\": \"bench\",\n \"driver\": \"-\",\n \"cuda\": \"-\",\n \"nccl\": \"-\",\n"
             " \"transport\": \"nvlink\",\n \"measured_at\": \"-\",\n \"derived\": true,\n");
}

/* Distinct (m, n, k) for i < 10^8: m from i's last three digits, n and k from the rest. */
static void write_gemm(FILE *f, long n) {
  header(f);
  fprintf(f, " \"gemm\": [\n");
  for (long i = 0; i < n; i++)
    fprintf(f, "  {\n   \"m\": %ld,\n   \"n\": %ld,\n   \"k\": %ld,\n   \"us\": %.6f\n  }%s\n", 1 + i % 1000,
            64 * (1 + (i / 1000) % 100), 64 * (1 + i / 100000), 1.0 + 1e-3 * (double)(i % 9973), i + 1 < n ? "," : "");
  fprintf(f, " ]\n}\n");
}

static void write_kernels(FILE *f, long n) {
  header(f);
  fprintf(f, " \"kernels\": {\n  \"elementwise\": [\n");
  for (long i = 0; i < n; i++)
    fprintf(f, "   {\n    \"bytes\": %ld,\n    \"us\": %.6f\n   }%s\n", 1024 * (i + 1), 2.0 + 1e-3 * (double)(i % 997),
            i + 1 < n ? "," : "");
  fprintf(f, "  ]\n }\n}\n");
}

static void write_colls(FILE *f, long n) {
  header(f);
  fprintf(f, " \"collectives\": {\n  \"allreduce\": {\n   \"8\": [\n");
  for (long i = 0; i < n; i++)
    fprintf(f, "    {\n     \"bytes\": %ld,\n     \"us\": %.6f\n    }%s\n", 256 * (i + 1), 5.0 + 1e-3 * (double)(i % 991),
            i + 1 < n ? "," : "");
  fprintf(f, "   ]\n  }\n }\n}\n");
}

static int bench(const char *what, void (*write)(FILE *, long), long n) {
  char path[] = "/tmp/bench_calibration_load_XXXXXX";
  int fd = mkstemp(path);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (!f) {
    perror("bench_calibration_load: temporary file");
    return -1;
  }
  write(f, n);
  long bytes = ftell(f);
  fclose(f);
  schema_calibration c;
  ts_err e = {0};
  double p0 = cpu_s();
  json_t *parsed = tsj_load_file(path, &e); /* the JSON parse alone, for the loader's own share */
  double parse = cpu_s() - p0;
  json_decref(parsed);
  double t0 = now_s(), c0 = cpu_s();
  int rc = parsed ? schema_calibration_load(path, &c, &e) : -1;
  double dt = now_s() - t0, dc = cpu_s() - c0;
  unlink(path);
  if (rc) {
    fprintf(stderr, "bench_calibration_load: %s\n", e.msg);
    return -1;
  }
  long loaded = strcmp(what, "gemm") == 0 ? c.n_gemm : strcmp(what, "kernels") == 0 ? c.kernels[0].n : c.colls[0].n;
  schema_calibration_free(&c);
  printf("%-12s %9ld %9.1f %9.3f %9.3f %9.3f %9.0f\n", what, loaded, (double)bytes / 1048576.0, dt, dc, parse,
         peak_mib());
  fflush(stdout);
  return loaded == n ? 0 : -1;
}

int main(int argc, char **argv) {
  long sizes[16] = {100000, 200000, 1000000};
  int count = 3;
  if (argc > 1) {
    count = 0;
    for (int i = 1; i < argc && count < 16; i++) {
      char *end;
      long v = strtol(argv[i], &end, 10);
      if (*end || v < 1 || v > 100000000) {
        fprintf(stderr, "usage: bench_calibration_load [N...]   (N points per table, 1..10^8)\n");
        return 2;
      }
      sizes[count++] = v;
    }
  }
  printf("# schema_calibration_load on generated files (one table of N points each)\n");
  printf("# load_s: wall time of schema_calibration_load; cpu_s: its CPU time; parse_s: CPU time of the JSON\n"
         "# parse alone (tsj_load_file); peak_MiB: the process's peak resident memory so far\n");
  printf("# %-10s %9s %9s %9s %9s %9s %9s\n", "table", "points", "file_MiB", "load_s", "cpu_s", "parse_s", "peak_MiB");
  for (int i = 0; i < count; i++)
    if (bench("gemm", write_gemm, sizes[i]) || bench("kernels", write_kernels, sizes[i]) ||
        bench("collectives", write_colls, sizes[i]))
      return 1;
  return 0;
}
