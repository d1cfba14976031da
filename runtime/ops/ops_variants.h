/* ops_variants.h — the variants of the executor's kernels and schedule, as
 * options: one table row each (name, values with the default first, what it
 * does), set on the command line by `--variant NAME=VALUE` (tacorun execute,
 * train, calibrate), printed with its default in their --help, and recorded in
 * every result and calibration file ("variants: attn=fused ..."). Until set,
 * every variant has its default (the winners: runtime/RESULTS-exec.md), so a
 * run without --variant behaves as the executor always did.
 *
 * The values are process-wide (the kernels read them at launch); set them
 * before the first launch. */
#ifndef OPS_VARIANTS_H
#define OPS_VARIANTS_H

#include <stddef.h>
#include <stdio.h>

#include "ts_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  OPS_V_ATTN,                 /* attention: fused (flash) where supported | unfused (batched GEMMs) */
  OPS_V_FLASH_FWD,            /* fused attention forward kernel */
  OPS_V_FLASH_BWD,            /* fused attention backward kernel */
  OPS_V_FLASH_BWD_WARPS,      /* warps of the backward kernel */
  OPS_V_FLASH_BWD_PARTS,      /* CTAs sharing a key/value head's query heads in the backward (a number; 0 automatic) */
  OPS_V_FLASH_ORDER,          /* launch order of the attention tiles */
  OPS_V_CE,                   /* vocabulary-parallel cross-entropy: fused | unfused */
  OPS_V_NORM_BWD,             /* norm backward: one kernel | three */
  OPS_V_SOFTMAX,              /* unfused attention's softmax: causal lower triangle | full */
  OPS_V_WGRAD_OVERLAP,        /* backward TP all-reduce beside the weight-gradient GEMM: on | off */
  OPS_V_CAAT_BWD,             /* CAAT-Net backward accumulation: fp32 | bf16 */
  OPS_V_TP_OVERLAP_SM_MARGIN, /* SMs left free for the overlapped TP all-reduce (a number) */
  OPS_V_GEMM_ALGO,            /* an MoE expert GEMM's new shape: bucket (reuse a cached algorithm, checked) | exact */
  OPS_V_GEMM_CACHE,           /* the GEMM plan cache's lookup: hash | scan (linear, before 2026-12-04) */
  OPS_V_REDUCE,               /* sums over rows and tokens: atomic adds | a fixed order (bit-reproducible) */
  OPS_V_PP_SLOTS,             /* activation slots of a walked program: program (its in-flight peak) | per-micro */
  OPS_V_COUNT
} ops_variant_id;

/* The value of a variant (its default until ops_variant_set changed it). */
const char *ops_variant(ops_variant_id id);
/* 1 when the variant's value is `value`. */
int ops_variant_is(ops_variant_id id, const char *value);
/* Sets one variant from "NAME=VALUE" (the argument of --variant); a name or
 * value not in the table fails naming it and the choices (exit status 2). */
int ops_variant_set(const char *name_eq_value, ts_err *e);
/* Back to every default. */
void ops_variant_reset(void);
/* The --variant lines of a usage text: each name, its values, its default. */
void ops_variant_usage(FILE *out);
/* "variants: NAME=VALUE ..." of every variant (a result or calibration note). */
void ops_variant_note(char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
