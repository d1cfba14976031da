/* coll_emu_ref.c — plain-C reference of the emulated TP all-reduce (coll_emu.h). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_emu.h"
#include "fp8_plain.h"
#include "taco_fp8.h"
#include "taco_ref.h"

static char emu_err[256];
const char *coll_emu_last_error(void) { return emu_err; }
int coll_emu_fail(const char *fmt, ...);
int coll_emu_fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(emu_err, sizeof emu_err, fmt, ap);
  va_end(ap);
  return -1;
}

size_t coll_emu_caat_shared(size_t cols, double p) {
  if (!(p > 0)) return 0;
  if (p >= 1) return cols;
  return (size_t)floor(p * (double)cols);
}

static size_t up256(size_t b) { return (b + 255) / 256 * 256; }

size_t coll_emu_scratch_bytes(int k, size_t n, size_t elem_bytes) {
  size_t blk = taco_wire_bytes(n, 32); /* the largest of the codecs' blocks (G = 32: 40 bytes per 32) */
  size_t f8 = fp8_plain_block_bytes(n), ab = fp8_ablate_block_bytes(n, 32);
  if (f8 > blk) blk = f8;
  if (ab > blk) blk = ab;
  /* CAAT-Net packs, k + 1 blocks, the absmax word */
  return up256((size_t)k * n * elem_bytes) + (size_t)(k + 1) * up256(blk) + 256;
}

static float load(const void *x, taco_dtype dt, size_t i) {
  return dt == TACO_DTYPE_BF16 ? taco_bf16_to_float(((const uint16_t *)x)[i]) : ((const float *)x)[i];
}
static void store(void *y, taco_dtype dt, size_t i, float v) {
  if (dt == TACO_DTYPE_BF16) ((uint16_t *)y)[i] = taco_bf16_from_float(v);
  else ((float *)y)[i] = v;
}

int coll_emu_plain_ref(const void *const *in, void *const *out, int k, size_t n, taco_dtype dt, coll_emu_op op) {
  if (k < 1 || k > COLL_EMU_MAX_RANKS) return coll_emu_fail("coll_emu: %d ranks", k);
  const float inv = 1.0f / (float)k;
  for (size_t i = 0; i < n; i++) {
    float acc = op == COLL_EMU_AVG ? load(in[0], dt, i) * inv : load(in[0], dt, i);
    for (int r = 1; r < k; r++) {
      float v = load(in[r], dt, i);
      if (op == COLL_EMU_MAX) acc = fmaxf(acc, v);
      else acc = acc + (op == COLL_EMU_AVG ? v * inv : v);
    }
    for (int r = 0; r < k; r++) store(out[r], dt, i, acc);
  }
  return 0;
}

static int codec_ok(int k, size_t n, taco_dtype dt, const coll_emu_opts *o) {
  if (k < 1 || k > COLL_EMU_MAX_RANKS) return coll_emu_fail("coll_emu: %d ranks", k);
  if (o->codec == COLL_EMU_FP8_TENSOR && dt != TACO_DTYPE_BF16)
    return coll_emu_fail("coll_emu: per-tensor FP8 runs on BF16 only");
  if ((o->codec == COLL_EMU_TACO || o->codec == COLL_EMU_FP8_GROUP || o->codec == COLL_EMU_FP8_HADAMARD) &&
      n % (2 * (size_t)o->taco.group))
    return coll_emu_fail("coll_emu: %zu elements are not a whole, even number of groups of %d", n, o->taco.group);
  return 0;
}

int coll_emu_allreduce_ref(void *const *bufs, int k, size_t n, taco_dtype dt, const coll_emu_opts *o) {
  if (codec_ok(k, n, dt, o)) return -1;
  if (o->codec == COLL_EMU_PLAIN) return coll_emu_plain_ref((const void *const *)bufs, bufs, k, n, dt, COLL_EMU_SUM);
  const size_t es = dt == TACO_DTYPE_BF16 ? 2 : 4;
  size_t bb = o->codec == COLL_EMU_TACO         ? taco_wire_bytes(n, o->taco.group)
              : o->codec == COLL_EMU_FP8_TENSOR ? fp8_plain_block_bytes(n)
                                                : fp8_ablate_block_bytes(n, o->taco.group);
  unsigned char *wire = calloc((size_t)(k + 1), bb);
  if (!wire) return coll_emu_fail("coll_emu_ref: out of memory");
  unsigned char *red = wire + (size_t)k * bb;
  fp8_ablate_kind ak = o->codec == COLL_EMU_FP8_GROUP ? FP8_ABLATE_GROUP : FP8_ABLATE_HADAMARD;
  for (int r = 0; r < k; r++) {
    if (o->codec == COLL_EMU_TACO) taco_ref_encode(bufs[r], dt, n, o->taco, wire + (size_t)r * bb, NULL);
    else if (o->codec == COLL_EMU_FP8_TENSOR) fp8_plain_ref_encode(bufs[r], n, wire + (size_t)r * bb);
    else fp8_ablate_ref_encode(ak, bufs[r], dt, n, o->taco, wire + (size_t)r * bb);
  }
  if (o->codec == COLL_EMU_FP8_TENSOR) fp8_plain_ref_decode_sum(wire, k, n, bufs[0]);
  else if (o->codec == COLL_EMU_TACO && o->one_shot) taco_ref_decode_sum(wire, k, n, o->taco, bufs[0], dt);
  else if (o->codec == COLL_EMU_TACO) {
    taco_ref_decode_sum_encode(wire, k, n, o->taco, red);
    taco_ref_decode(red, n, o->taco, bufs[0], dt);
  } else if (o->one_shot) fp8_ablate_ref_decode_sum(ak, wire, k, n, o->taco, bufs[0], dt);
  else {
    fp8_ablate_ref_decode_sum_encode(ak, wire, k, n, o->taco, red);
    fp8_ablate_ref_decode_sum(ak, red, 1, n, o->taco, bufs[0], dt);
  }
  for (int r = 1; r < k; r++) memcpy(bufs[r], bufs[0], n * es);
  free(wire);
  return 0;
}

int coll_emu_caat_ref(void *const *bufs, int k, size_t rows, size_t cols, double p, taco_dtype dt,
                      const coll_emu_opts *o) {
  const size_t shared = coll_emu_caat_shared(cols, p), es = dt == TACO_DTYPE_BF16 ? 2 : 4;
  const float scale = (float)sqrt((double)k);
  if (k < 1 || k > COLL_EMU_MAX_RANKS) return coll_emu_fail("coll_emu: %d ranks", k);
  unsigned char *pack = malloc((size_t)k * rows * shared * es + 16);
  void *packs[COLL_EMU_MAX_RANKS];
  if (!pack) return coll_emu_fail("coll_emu_ref: out of memory");
  for (int r = 0; r < k; r++) {
    packs[r] = pack + (size_t)r * rows * shared * es;
    if (shared) caat_ref_gather_shared(bufs[r], dt, rows, cols, shared, packs[r]);
    if (shared < cols) caat_ref_scale_private(bufs[r], dt, rows, cols, shared, scale);
  }
  int rc = 0;
  if (shared) {
    rc = coll_emu_allreduce_ref(packs, k, rows * shared, dt, o);
    for (int r = 0; r < k && !rc; r++) caat_ref_scatter_shared(packs[r], dt, rows, cols, shared, bufs[r]);
  }
  free(pack);
  return rc;
}
