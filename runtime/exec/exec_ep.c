/* exec_ep.c — expert parallelism's host arithmetic (see exec_ep.h). */
#include "exec_ep.h"

#include "taco_codec.h"

int exec_ep_place_of(const char *path, int dp, int ep, int dp_rank, int experts, exec_ep_place *pl, ts_err *e) {
  if (ep < 1) ep = 1;
  if (dp < 1 || dp_rank < 0 || dp_rank >= dp) return ts_fail_sys(e, "exec: DP rank %d of %d", dp_rank, dp);
  if (ep > EXEC_EP_MAX)
    return ts_fail(e, path, "layout.ep", "%d: the executor runs EP groups of at most %d ranks", ep, EXEC_EP_MAX);
  if (dp % ep)
    return ts_fail(e, path, "layout.ep", "ep %d does not divide dp %d (the EP group is carved from DP)", ep, dp);
  if (experts < 1 || experts % ep)
    return ts_fail(e, path, "layout.ep", "%d experts do not split over ep %d", experts, ep);
  pl->ep = ep, pl->ep_rank = dp_rank % ep, pl->ep_group = dp_rank / ep;
  pl->edp = dp / ep, pl->edp_rank = dp_rank / ep;
  pl->experts_local = experts / ep, pl->expert_lo = pl->ep_rank * pl->experts_local;
  return 0;
}

int exec_ep_owner(const exec_ep_place *pl, int x) { return x / pl->experts_local; }
int exec_ep_member(const exec_ep_place *pl, int k) { return pl->ep_group * pl->ep + k; }
int exec_edp_member(const exec_ep_place *pl, int j) { return j * pl->ep + pl->ep_rank; }

int exec_ep_route(const exec_ep_place *pl, int experts, const int32_t *all, const int32_t *own, long long *scnt,
                  long long *soff, long long *rcnt, long long *roff, int32_t *seg_ex, long long *seg_cnt, int *nseg,
                  long long *erows) {
  const int E = experts, ep = pl->ep, me = pl->ep_rank, El = pl->experts_local;
  long long so = 0, ro = 0;
  int n = 0;
  for (int p = 0; p < ep; p++) {
    scnt[p] = rcnt[p] = 0;
    soff[p] = so, roff[p] = ro;
    for (int j = 0; j < El; j++) {
      const int32_t sent = all[(size_t)me * E + p * El + j], got = all[(size_t)p * E + me * El + j];
      if (sent < 0 || got < 0 || (own && own[p * El + j] != sent)) return -1;
      scnt[p] += sent, rcnt[p] += got;
      seg_ex[n] = me * El + j, seg_cnt[n++] = got;
    }
    so += scnt[p], ro += rcnt[p];
  }
  *nseg = n, *erows = ro;
  return 0;
}

size_t exec_ep_wire_bytes(long long rows, long long hidden, int taco_group) {
  const size_t n = (size_t)rows * (size_t)hidden;
  return taco_group > 0 ? taco_wire_bytes(n, taco_group) : 2 * n;
}

size_t exec_ep_send_bytes(const exec_ep_place *pl, const long long *rows_to, long long hidden, int taco_group) {
  size_t b = 0;
  for (int p = 0; p < pl->ep; p++)
    if (p != pl->ep_rank && rows_to[p] > 0) b += exec_ep_wire_bytes(rows_to[p], hidden, taco_group);
  return b;
}
