/* sim_host.c — the host clock (sim_host.h). */
#include "sim_host.h"

#include <math.h>

void sim_host_setup(sim_host *h, const plan *p, const schema_calibration *cal) {
  *h = (sim_host){0};
  h->cal = cal;
  const bool has = cal && cal->has_host;
  if (p->host_launch_us > 0) {
    h->launch_s = h->gemm_s = h->event_s = p->host_launch_us * 1e-6;
  } else if (has) {
    h->launch_s = cal->host_launch_us * 1e-6;
    h->gemm_s = cal->host_gemm_launch_us * 1e-6;
    h->event_s = cal->host_event_us > 0 ? cal->host_event_us * 1e-6 : h->launch_s;
  } else {
    return; /* off */
  }
  h->sync_s = p->host_sync_us > 0 ? p->host_sync_us * 1e-6 : 0;
  h->on = true;
}

double sim_host_sync_gap_s(const sim_host *h, double wait_s) {
  if (h->sync_s > 0) return h->sync_s;
  if (!h->cal || !h->cal->has_host) return 0;
  return schema_host_sync_gap(h->cal, wait_s * 1e6) * 1e-6;
}

double sim_host_op(const sim_host *h, double *host_t, int kernels, int gemms, int events, int sync, double gpu_free,
                   double d, double *start) {
  const int n = kernels + gemms + events;
  if (!h->on || n == 0) {
    if (start) *start = gpu_free;
    return gpu_free + d;
  }
  const double h0 = *host_t, cost = kernels * h->launch_s + gemms * h->gemm_s + events * h->event_s;
  const double c = cost / n;
  double end = fmax(gpu_free + d, fmax(h0 + d, h0 + (n - 1) * c + d / n));
  if (start) *start = fmax(gpu_free, h0);
  const double issued = h0 + cost;
  *host_t = issued;
  if (sync) {
    double wait = end > issued ? end - issued : 0;
    *host_t = fmax(issued, end + sim_host_sync_gap_s(h, wait));
  }
  return end;
}

void sim_host_wait_before(const sim_host *h, double *host_t, double gpu_free, int n, int m) {
  if (!h->on || n <= 0) return;
  const double wait = gpu_free > *host_t ? gpu_free - *host_t : 0;
  *host_t = fmax(*host_t, gpu_free) + sim_host_sync_gap_s(h, wait) + (n - 1) * sim_host_sync_gap_s(h, 0) +
            (m > 0 ? m : 0) * h->launch_s;
}
