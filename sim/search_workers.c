/* search_workers.c — many simulations in parallel: SimGrid can be
 * initialised once per process, so each plan runs in its own forked worker,
 * `jobs` at a time, and sends its headline figures back through a pipe. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "search.h"
#include "sim.h"

/* What a worker sends back: fixed size, well under PIPE_BUF, so one write is
 * atomic and never blocks before the parent reads it. */
typedef struct {
  int ok;
  double iteration_s, tokens_per_s, tflops_per_gpu, mfu, memory_bytes;
  int clock_passes;
  schema_breakdown breakdown;
  char error[200];
} worker_msg;

static bool alltoall_analytic;
void sim_search_set_alltoall_analytic(bool on) { alltoall_analytic = on; }
static sim_clock_model clock_model;
void sim_search_set_clock_model(sim_clock_model m) { clock_model = m; }
sim_clock_model sim_search_clock_model(void) { return clock_model; }

static void run_worker(const plan *p, const schema_calibration *cal, int fd) {
  int devnull = open("/dev/null", O_WRONLY);
  if (devnull >= 0) dup2(devnull, STDOUT_FILENO);
  worker_msg msg;
  memset(&msg, 0, sizeof msg);
  sim_options o = {.mode = SIM_MODE_REDUCED, .cal = cal, .record_ops = false, .warn = NULL,
                   .alltoall_analytic = alltoall_analytic, .clock_model = clock_model};
  schema_result r;
  ts_err e = {0};
  if (sim_run(p, &o, &r, &e) == 0) {
    msg.ok = 1;
    msg.iteration_s = r.iteration_time_s;
    msg.tokens_per_s = r.tokens_per_s;
    msg.tflops_per_gpu = r.tflops_per_gpu;
    msg.mfu = r.mfu;
    msg.memory_bytes = r.memory_per_gpu_bytes;
    msg.breakdown = r.breakdown;
    msg.clock_passes = r.clock_passes;
  } else {
    snprintf(msg.error, sizeof msg.error, "%.199s", e.msg);
  }
  ssize_t w = write(fd, &msg, sizeof msg);
  _exit(w == (ssize_t)sizeof msg ? 0 : 1); /* no atexit handlers: they belong to the parent */
}

typedef struct {
  pid_t pid;
  int fd, index;
} slot;

static void collect(slot *s, schema_result *results, bool *ok, char (*errors)[200], int status) {
  worker_msg msg;
  size_t got = 0;
  while (got < sizeof msg) {
    ssize_t k = read(s->fd, (char *)&msg + got, sizeof msg - got);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    got += (size_t)k;
  }
  close(s->fd);
  int i = s->index;
  schema_result_init(&results[i], SCHEMA_SOURCE_SIMULATED);
  if (got == sizeof msg && msg.ok) {
    ok[i] = true;
    results[i].iteration_time_s = msg.iteration_s;
    results[i].tokens_per_s = msg.tokens_per_s;
    results[i].tflops_per_gpu = msg.tflops_per_gpu;
    results[i].mfu = msg.mfu;
    results[i].memory_per_gpu_bytes = msg.memory_bytes;
    results[i].breakdown = msg.breakdown;
    results[i].clock_passes = msg.clock_passes;
    errors[i][0] = '\0';
  } else {
    ok[i] = false;
    if (got == sizeof msg)
      snprintf(errors[i], 200, "%s", msg.error);
    else if (WIFSIGNALED(status))
      snprintf(errors[i], 200, "simulation worker killed by signal %d", WTERMSIG(status));
    else
      snprintf(errors[i], 200, "simulation worker exited with status %d and no result",
               WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  s->pid = 0;
}

int sim_search_simulate_many(const plan *plans, int n, const schema_calibration *cal, int jobs,
                             schema_result *results, bool *ok, char (*errors)[200],
                             void (*progress)(int done, int total, void *arg), void *arg, ts_err *e) {
  sim_search_hooks h = {.progress = progress, .arg = arg};
  return sim_search_simulate_indexed(plans, NULL, n, cal, jobs, results, ok, errors, &h, e);
}

int sim_search_simulate_indexed(const plan *plans, const int *index, int n, const schema_calibration *cal, int jobs,
                                schema_result *results, bool *ok, char (*errors)[200], const sim_search_hooks *h,
                                ts_err *e) {
  if (jobs < 1) jobs = 1;
  if (jobs > 256) jobs = 256;
  slot slots[256];
  memset(slots, 0, sizeof slots);
  int next = 0, running = 0, done = 0;
  while (done < n) {
    while (running < jobs && next < n) {
      if (h && h->skip && h->skip(next, h->arg)) { /* decided without simulating it */
        next++;
        done++;
        continue;
      }
      int fds[2];
      if (pipe(fds)) return ts_fail_sys(e, "search: pipe: %s", strerror(errno));
      fflush(stdout);
      fflush(stderr);
      pid_t pid = fork();
      if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return ts_fail_sys(e, "search: fork: %s", strerror(errno));
      }
      if (pid == 0) {
        close(fds[0]);
        run_worker(&plans[index ? index[next] : next], cal, fds[1]);
      }
      close(fds[1]);
      int s = 0;
      while (slots[s].pid) s++;
      slots[s] = (slot){pid, fds[0], next};
      next++;
      running++;
    }
    if (running == 0) continue; /* the rest were skipped */
    int status;
    struct rusage ru;
    pid_t pid = wait4(-1, &status, 0, &ru); /* (its CPU: what each simulation costs, for the report) */
    if (pid < 0) {
      if (errno == EINTR) continue;
      return ts_fail_sys(e, "search: waitpid: %s", strerror(errno));
    }
    for (int s = 0; s < jobs; s++)
      if (slots[s].pid == pid) {
        int pos = slots[s].index;
        collect(&slots[s], results, ok, errors, status);
        if (h && h->cpu_s)
          h->cpu_s[pos] = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
        running--;
        done++;
        if (h && h->finished) h->finished(pos, h->arg);
        if (h && h->progress) h->progress(done, n, h->arg);
        break;
      }
  }
  return 0;
}

/* ---- rank correlation ---- */

static void ranks_of(const double *v, int n, double *rank) {
  for (int i = 0; i < n; i++) {
    int less = 0, equal = 0;
    for (int j = 0; j < n; j++) {
      if (v[j] < v[i]) less++;
      if (v[j] == v[i]) equal++;
    }
    rank[i] = less + (equal + 1) / 2.0; /* ties: the mean of the ranks they share */
  }
}

double sim_search_spearman(const double *x, const double *y, int n) {
  if (n < 2) return NAN;
  double *rx = malloc(sizeof(double) * (size_t)n), *ry = malloc(sizeof(double) * (size_t)n);
  if (!rx || !ry) {
    free(rx);
    free(ry);
    return NAN;
  }
  ranks_of(x, n, rx);
  ranks_of(y, n, ry);
  double mx = 0, my = 0;
  for (int i = 0; i < n; i++) mx += rx[i], my += ry[i];
  mx /= n, my /= n;
  double sxy = 0, sxx = 0, syy = 0;
  for (int i = 0; i < n; i++) {
    sxy += (rx[i] - mx) * (ry[i] - my);
    sxx += (rx[i] - mx) * (rx[i] - mx);
    syy += (ry[i] - my) * (ry[i] - my);
  }
  free(rx);
  free(ry);
  return sxx > 0 && syy > 0 ? sxy / sqrt(sxx * syy) : NAN;
}
