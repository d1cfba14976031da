/* coll_layout.c — segment, chunk and wire-buffer arithmetic of the
 * compressed collectives (see coll_layout.h). */
#include "coll_layout.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

const char *coll_op_name(coll_op op) { return ts_coll_name(op); }

int coll_op_parse(const char *name, coll_op *op) { return ts_coll_parse(name, op); }

double coll_busbw_factor(coll_op op, int nranks) { return ts_coll_busbw_factor(op, nranks); }

size_t coll_total_elems(coll_op op, size_t count, int nranks) {
  if ((unsigned)op < COLL_OP_COUNT && ts_colls[op].count_per_rank) return count * (size_t)nranks;
  return count;
}

/* Blocks per chunk: one per rank, except send/recv (one block). */
static int blocks_per_chunk(const coll_layout *l) { return ts_colls[l->op].one_block ? 1 : l->nranks; }

static int group_valid(int g) { return g == 32 || g == 64 || g == 128 || g == 256 || g == 512; }

int coll_layout_make(coll_layout *l, coll_op op, size_t count, int nranks, int group, size_t elem_bytes,
                     size_t chunk_bytes) {
  if ((unsigned)op >= COLL_OP_COUNT || nranks < 1 || !group_valid(group) || elem_bytes == 0) return -1;
  memset(l, 0, sizeof *l);
  l->op = op;
  l->nranks = nranks;
  l->group = group;
  l->count = count;
  l->total = coll_total_elems(op, count, nranks);
  size_t g = (size_t)group;
  if (ts_colls[op].segmented) {
    /* Segments of whole groups, so every block but the message's last is
     * group-aligned; the last segments take what is left (maybe nothing). */
    size_t per = (count + (size_t)nranks - 1) / (size_t)nranks;
    l->seg = (per + g - 1) / g * g;
  } else {
    l->seg = count;
  }
  if (chunk_bytes == 0) chunk_bytes = COLL_DEFAULT_CHUNK_BYTES;
  size_t per_block = chunk_bytes / elem_bytes / (size_t)blocks_per_chunk(l);
  /* Whole pairs of groups (blocks of an even number of groups are multiples
   * of 16 bytes); 16 groups at a time when chunks are large. */
  size_t unit = per_block >= 16 * g ? 16 * g : 2 * g;
  size_t m = per_block / unit * unit;
  if (m < 2 * g) m = 2 * g;
  if (m >= l->seg) m = l->seg;
  l->m = m;
  l->nchunks = m ? (l->seg + m - 1) / m : 0;
  return 0;
}

size_t coll_seg_len(const coll_layout *l, int r) {
  if (!ts_colls[l->op].segmented) return l->seg;
  size_t start = (size_t)r * l->seg;
  if (start >= l->count) return 0;
  size_t left = l->count - start;
  return left < l->seg ? left : l->seg;
}

size_t coll_chunk_elems(const coll_layout *l, int r, size_t j) {
  size_t len = coll_seg_len(l, r), start = j * l->m;
  if (start >= len) return 0;
  size_t left = len - start;
  return left < l->m ? left : l->m;
}

size_t coll_wire_bytes(size_t n, int group) {
  size_t g = (size_t)group;
  return (n + g - 1) / g * (g + 8);
}

size_t coll_block_elems(size_t n, int group) {
  size_t pair = 2 * (size_t)group;
  return (n + pair - 1) / pair * pair;
}

size_t coll_block_wire(size_t n, int group) { return coll_wire_bytes(coll_block_elems(n, group), group); }

size_t coll_chunk_offset(const coll_layout *l, size_t j) {
  return j * (size_t)blocks_per_chunk(l) * coll_block_wire(l->m, l->group);
}

size_t coll_wire_buffer_bytes(const coll_layout *l) { return coll_chunk_offset(l, l->nchunks); }

int coll_use_codec(size_t bytes, size_t min_bytes) { return bytes >= min_bytes; }

size_t coll_threshold_from_sweep(const size_t *sizes, const double *t_plain, const double *t_codec, int n) {
  size_t threshold = SIZE_MAX;
  for (int i = n - 1; i >= 0; i--) {
    if (!(t_codec[i] < t_plain[i])) break;
    threshold = sizes[i];
  }
  return threshold;
}

double coll_error_bound(coll_op op, int nranks, int fp8_mantissa_bits) {
  double eps = ldexp(1.0, -(fp8_mantissa_bits + 1));
  double bf16_out = ldexp(1.0, -8);
  double k = sqrt((double)(nranks > 0 ? nranks : 1));
  switch (op) {
  case COLL_OP_REDUCESCATTER: return eps * 1.5 * k + bf16_out;
  case COLL_OP_ALLREDUCE: return eps * (1.5 * k + 1.1) + bf16_out;
  default: return eps + bf16_out;
  }
}

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

/* The two-shot all-reduce cuts the message as coll_layout does (segments of
 * whole groups); every other call moves `count` elements per slot. */
size_t coll_direct_recv_elems(coll_op op, int one_shot, size_t count, int nranks, int group, int r) {
  if (op != COLL_OP_ALLREDUCE || one_shot) return count;
  coll_layout l;
  if (coll_layout_make(&l, op, count, nranks, group, 2, SIZE_MAX / 4)) return 0;
  return coll_seg_len(&l, r);
}

size_t coll_direct_stride_a(coll_op op, int one_shot, size_t count, int nranks, int group, int r) {
  return coll_block_wire(coll_direct_recv_elems(op, one_shot, count, nranks, group, r), group);
}

void coll_direct_sizes_of(coll_op op, int one_shot, size_t count, int nranks, int group, coll_direct_sizes *s) {
  memset(s, 0, sizeof *s);
  if (nranks < 1) return;
  size_t n = (size_t)nranks;
  /* segment 0 is the longest */
  s->region_a = align256(n * coll_direct_stride_a(op, one_shot, count, nranks, group, 0));
  if (op == COLL_OP_ALLREDUCE && !one_shot) {
    s->stride_b = coll_direct_stride_a(op, one_shot, count, nranks, group, 0);
    s->region_b = align256(n * s->stride_b);
  }
  s->half = s->region_a + s->region_b;
}
