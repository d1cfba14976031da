/* rt_idmsg.c — rank 0's NCCL id or its failure, for every rank (rt_idmsg.h). */
#define _GNU_SOURCE
#include "rt_idmsg.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void rt_id_msg_ok(rt_id_msg *m, const void *id) {
  memset(m, 0, sizeof *m);
  memcpy(m->id, id, RT_ID_BYTES);
}

void rt_id_msg_fail(rt_id_msg *m, const char *reason) {
  memset(m, 0, sizeof *m);
  m->status = 1;
  snprintf(m->reason, sizeof m->reason, "%s", reason && *reason ? reason : "(no reason given)");
}

int rt_id_msg_take(const rt_id_msg *m, void *id, ts_err *e) {
  if (m->status) return ts_fail_sys(e, "rank 0 could not create the NCCL id: %.*s", (int)sizeof m->reason, m->reason);
  memcpy(id, m->id, RT_ID_BYTES);
  return 0;
}

int rt_id_file_write(const char *path, const rt_id_msg *m, ts_err *e) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f) return ts_fail_sys(e, "%s: cannot write: %s", tmp, strerror(errno));
  size_t ok = fwrite(m, sizeof *m, 1, f);
  if (fclose(f) != 0 || ok != 1) return ts_fail_sys(e, "%s: write failed", tmp);
  if (rename(tmp, path) != 0) return ts_fail_sys(e, "%s: rename failed: %s", path, strerror(errno));
  return 0;
}

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int rt_id_file_read(const char *path, double timeout_s, rt_id_msg *m, ts_err *e) {
  double until = mono_s() + timeout_s;
  for (;;) {
    FILE *f = fopen(path, "rb");
    if (f) {
      size_t ok = fread(m, sizeof *m, 1, f);
      fclose(f);
      if (ok == 1) return 0;
    }
    if (mono_s() > until) return ts_fail_sys(e, "%s: no NCCL id from rank 0 within %.0f s", path, timeout_s);
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}
