/* fp8_ablate_ref.c — plain-C reference of the ablation codecs (fp8_ablate.h). */
#include "fp8_ablate_group.h"

void fp8_ablate_ref_encode(fp8_ablate_kind k, const void *x, taco_dtype dt, size_t n, taco_params p, void *block) {
  for (size_t gi = 0; gi < taco_groups(n, p.group); gi++) fa_encode_one(k, x, dt, n, p, block, gi);
}
void fp8_ablate_ref_decode_sum(fp8_ablate_kind k, const void *in, int nblocks, size_t n, taco_params p, void *y,
                               taco_dtype dt) {
  for (size_t gi = 0; gi < taco_groups(n, p.group); gi++) fa_decode_sum_one(k, in, nblocks, n, p, y, dt, gi);
}
void fp8_ablate_ref_decode_sum_encode(fp8_ablate_kind k, const void *in, int nblocks, size_t n, taco_params p,
                                      void *block) {
  for (size_t gi = 0; gi < taco_groups(n, p.group); gi++) fa_decode_sum_encode_one(k, in, nblocks, n, p, block, gi);
}
