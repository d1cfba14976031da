/* plan_layout.c — where each rank sits in the (dp, tp, pp, cp) grid and which
 * ranks form its groups. Rank r runs on GPU r of the cluster; TP varies
 * fastest, so a TP group is consecutive GPUs inside one node; CP comes next
 * (Megatron-Core's tp-cp-ep-dp-pp), then the plan's order says whether DP or
 * PP (Megatron-LM's default: tp-dp-pp). */
#include "plan.h"
#include "plan_internal.h"

plan_coord plan_coord_of(const plan *p, int rank) {
  plan_coord c;
  c.tp = rank % p->tp;
  int rest = rank / p->tp;
  c.cp = rest % plan_cp(p);
  rest /= plan_cp(p);
  if (p->order == PLAN_ORDER_TP_DP_PP) {
    c.dp = rest % p->dp;
    c.pp = rest / p->dp;
  } else {
    c.pp = rest % p->pp;
    c.dp = rest / p->pp;
  }
  return c;
}

int plan_rank_of(const plan *p, plan_coord c) {
  const int cp = plan_cp(p);
  if (c.tp < 0 || c.tp >= p->tp || c.dp < 0 || c.dp >= p->dp || c.pp < 0 || c.pp >= p->pp || c.cp < 0 || c.cp >= cp)
    return -1;
  if (p->order == PLAN_ORDER_TP_DP_PP) return c.tp + p->tp * (c.cp + cp * (c.dp + p->dp * c.pp));
  return c.tp + p->tp * (c.cp + cp * (c.pp + p->pp * c.dp));
}

int plan_group_members(const plan *p, int rank, plan_group_kind g, int *members, int cap) {
  if (rank < 0 || rank >= plan_world_size(p)) return -1;
  plan_coord c = plan_coord_of(p, rank);
  int n = 0;
  switch (g) {
  case PLAN_GROUP_TP:
    for (int i = 0; i < p->tp; i++, n++)
      if (n < cap) members[n] = plan_rank_of(p, (plan_coord){c.dp, i, c.pp, c.cp});
    break;
  case PLAN_GROUP_DP: /* with context parallelism: dp x cp ranks, cp fastest */
    for (int i = 0; i < p->dp; i++)
      for (int j = 0; j < plan_cp(p); j++, n++)
        if (n < cap) members[n] = plan_rank_of(p, (plan_coord){i, c.tp, c.pp, j});
    break;
  case PLAN_GROUP_CP:
    for (int j = 0; j < plan_cp(p); j++, n++)
      if (n < cap) members[n] = plan_rank_of(p, (plan_coord){c.dp, c.tp, c.pp, j});
    break;
  case PLAN_GROUP_PP:
    for (int i = 0; i < p->pp; i++, n++)
      if (n < cap) members[n] = plan_rank_of(p, (plan_coord){c.dp, c.tp, i, c.cp});
    break;
  case PLAN_GROUP_EMBEDDING:
    if (n < cap) members[n] = plan_rank_of(p, (plan_coord){c.dp, c.tp, 0, c.cp});
    n++;
    if (p->pp > 1) {
      if (n < cap) members[n] = plan_rank_of(p, (plan_coord){c.dp, c.tp, p->pp - 1, c.cp});
      n++;
    }
    break;
  case PLAN_GROUP_EP:
  case PLAN_GROUP_ETP:
  case PLAN_GROUP_EDP:
  case PLAN_GROUP_EP_RAIL:
  case PLAN_GROUP_EP_NODE: return plan_moe_group_members(p, rank, g, members, cap);
  default:
    return -1;
  }
  return n;
}

int plan_group_index(const plan *p, int rank, plan_group_kind g) {
  if (rank < 0 || rank >= plan_world_size(p)) return -1;
  plan_coord c = plan_coord_of(p, rank);
  switch (g) {
  case PLAN_GROUP_TP: return c.tp;
  case PLAN_GROUP_DP: return c.cp + plan_cp(p) * c.dp;
  case PLAN_GROUP_CP: return c.cp;
  case PLAN_GROUP_PP: return c.pp;
  case PLAN_GROUP_EMBEDDING: return c.pp == 0 ? 0 : c.pp == p->pp - 1 ? 1 : -1; /* -1: not a member */
  case PLAN_GROUP_EP:
  case PLAN_GROUP_ETP:
  case PLAN_GROUP_EDP:
  case PLAN_GROUP_EP_RAIL:
  case PLAN_GROUP_EP_NODE: return plan_moe_group_index(p, rank, g);
  default: return -1;
  }
}
