/* plan_loss.c — the vocabulary-parallel cross-entropy a plan's run executes
 * ("cross_entropy_loss_fusion"): the kernels of the unfused path and their
 * bytes, for the program (op bytes, launches), the memory model and the
 * simulator's pricing.
 *
 * Unfused (false) is Megatron's default: Megatron-Core r0.8.0
 * (NVIDIA/Megatron-LM baf94af3, megatron/core/tensor_parallel/cross_entropy.py,
 * _VocabParallelCrossEntropy, called by LanguageModule.compute_language_model_loss
 * unless config.cross_entropy_loss_fusion, default False, flag
 * --cross-entropy-loss-fusion) and Megatron-LM 2021 (de7dc40f,
 * megatron/mpu/cross_entropy.py, called by gpt_model.py on output.float()
 * unless --fp16-lm-cross-entropy) run the same sequence of PyTorch kernels
 * over this rank's N tokens x V/tp logits, in fp32 after a cast of the
 * 16-bit logits. Bytes per logit / per token of each kernel (logits 2 bytes
 * in, 4 in fp32; targets and indices int64, masks bool, per-token values
 * fp32); the three TP all-reduces between them are the program's (one
 * all-reduce of 3 values per token there).
 * Fused (true, tacosim's default) is one pass that writes the loss and the
 * logits' gradient (the executor's kernel, the calibration's "loss" table):
 * no kernel list here. */
#include "plan.h"

static const plan_ce_kernel ce_fwd[] = {
    {"cast_fp32", 6, 0},          /* .float(): read 2, write 4 */
    {"max", 4, 12},               /* torch.max(dim=-1): read 4; write values fp32 + indices int64 */
    {"sub_max", 8, 4},            /* logits -= max: read-modify-write 4 + 4; read the max */
    {"target_lt", 0, 9},          /* target < vocab_start: read int64, write bool */
    {"target_ge", 0, 9},          /* target >= vocab_end */
    {"mask_or", 0, 3},            /* |: two bools in, one out */
    {"target_clone", 0, 16},      /* target.clone() */
    {"target_shift", 0, 16},      /* - vocab_start_index */
    {"target_fill", 0, 17},       /* masked_target[target_mask] = 0 (masked_fill_: self, mask, self) */
    {"arange", 0, 8},             /* torch.arange */
    {"pick_target", 0, 24},       /* logits_2d[arange, masked_target]: two indices, the picked logit, out */
    {"pick_clone", 0, 8},         /* .clone().contiguous() */
    {"pick_fill", 0, 9},          /* predicted_logits[target_mask] = 0.0 */
    {"exp", 8, 0},                /* torch.exp(out=): read 4, write 4 */
    {"sum", 4, 4},                /* sum(dim=-1): read 4; write the per-token sum */
    {"log", 0, 8},                /* torch.log(sum_exp_logits) */
    {"loss_sub", 0, 12},          /* - predicted_logits */
    {"div_sum", 8, 4},            /* exp_logits.div_(sum): read-modify-write, read the sum */
};
static const plan_ce_kernel ce_bwd[] = {
    {"arange", 0, 8},             /* torch.arange */
    {"mask_float", 0, 5},         /* target_mask.float(): bool in, fp32 out */
    {"one_minus", 0, 8},          /* 1.0 - ... */
    {"pick_grad", 0, 24},         /* grad_2d[arange, masked_target] (the read of -=) */
    {"pick_sub", 0, 12},          /* - softmax_update */
    {"put_grad", 0, 24},          /* grad_2d[arange, masked_target] = (index_put_: two indices, value, target) */
    {"mul_grad", 8, 4},           /* grad_input.mul_(grad_output): read-modify-write, read the per-token grad */
    {"cast_back", 6, 0},          /* the fp32 gradient back to the logits' 16 bits: read 4, write 2 */
};

int plan_ce_kernels(const plan *p, int phase, const plan_ce_kernel **k) {
  *k = NULL;
  if (!p->ce_unfused) return 0;
  if (phase == PLAN_PHASE_BWD) {
    *k = ce_bwd;
    return (int)(sizeof ce_bwd / sizeof *ce_bwd);
  }
  *k = ce_fwd;
  return (int)(sizeof ce_fwd / sizeof *ce_fwd);
}

double plan_ce_tokens(const plan *p) { return (double)p->micro_batch * plan_local_seq(p); }

double plan_ce_logits(const plan *p) {
  return plan_ce_tokens(p) * (double)model_vocab_per_gpu(&p->model, p->tp);
}

double plan_ce_kernel_bytes(const plan *p, const plan_ce_kernel *k) {
  return k->per_logit * plan_ce_logits(p) + k->per_token * plan_ce_tokens(p);
}

double plan_ce_unfused_bytes(const plan *p, int phase) {
  const plan_ce_kernel *k;
  int n = plan_ce_kernels(p, phase, &k);
  double b = 0;
  for (int i = 0; i < n; i++) b += plan_ce_kernel_bytes(p, &k[i]);
  return b;
}
