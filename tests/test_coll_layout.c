/* test_coll_layout.c — CPU tests of the compressed collectives' arithmetic:
 * segments and chunks cover every element once, chunks are whole groups,
 * wire offsets never overlap, thresholds from a sweep, busbw factors. */
#include <CUnit/Basic.h>
#include <stdint.h>
#include <stdlib.h>

#include "coll_layout.h"
#include "taco_codec.h"

static const int groups[] = {32, 64, 128, 256, 512};

/* Every element of every segment belongs to exactly one chunk, chunks are
 * whole groups except a segment's last, and each chunk's blocks fit inside
 * its region of the wire buffer. */
static void check_layout(coll_op op, size_t count, int n, int g, size_t chunk_bytes) {
  coll_layout l;
  CU_ASSERT_EQUAL_FATAL(coll_layout_make(&l, op, count, n, g, 2, chunk_bytes), 0);
  size_t covered = 0;
  int nseg = op == COLL_OP_SENDRECV ? 1 : n;
  for (int r = 0; r < nseg; r++) {
    size_t len = coll_seg_len(&l, r), seen = 0;
    CU_ASSERT(len <= l.seg);
    for (size_t j = 0; j < l.nchunks; j++) {
      size_t e = coll_chunk_elems(&l, r, j);
      CU_ASSERT(e <= l.m);
      if (e && seen + e < len) CU_ASSERT_EQUAL(e % (2 * (size_t)g), 0); /* not the last: pairs of groups */
      if (e) CU_ASSERT_EQUAL(seen, j * l.m);                       /* contiguous, in order */
      seen += e;
    }
    CU_ASSERT_EQUAL(seen, len);
    CU_ASSERT_EQUAL(coll_chunk_elems(&l, r, l.nchunks), 0);
    covered += seen;
  }
  size_t expect = op == COLL_OP_ALLREDUCE || op == COLL_OP_SENDRECV ? count : count * (size_t)n;
  CU_ASSERT_EQUAL(covered, expect);
  CU_ASSERT_EQUAL(l.total, expect);
  /* Chunk regions: nseg blocks of at most wire(m) each, back to back. */
  for (size_t j = 0; j < l.nchunks; j++) {
    size_t region = coll_chunk_offset(&l, j + 1) - coll_chunk_offset(&l, j), blocks = 0;
    for (int r = 0; r < nseg; r++) {
      size_t w = coll_block_wire(coll_chunk_elems(&l, r, j), g);
      CU_ASSERT_EQUAL(w % 16, 0);
      blocks += w;
    }
    CU_ASSERT(blocks <= region);
  }
  CU_ASSERT_EQUAL(coll_wire_buffer_bytes(&l), coll_chunk_offset(&l, l.nchunks));
  if (l.seg) CU_ASSERT(l.m > 0);
}

static void test_layout_cover_random(void) {
  srand(12345);
  for (int it = 0; it < 3000; it++) {
    coll_op op = (coll_op)(rand() % COLL_OP_COUNT);
    int n = 1 + rand() % 9, g = groups[rand() % 5];
    size_t count = (size_t)rand() % (it % 3 ? 5000 : 3000000);
    size_t chunk = (size_t)(rand() % 4 ? 1 + rand() % (1 << 22) : 0);
    check_layout(op, count, n, g, chunk);
  }
}

static void test_layout_odd_allreduce(void) {
  coll_layout l;
  CU_ASSERT_EQUAL_FATAL(coll_layout_make(&l, COLL_OP_ALLREDUCE, 1001, 3, 128, 2, 0), 0);
  CU_ASSERT_EQUAL(l.seg, 384); /* ceil(1001/3) = 334, rounded up to whole groups */
  CU_ASSERT_EQUAL(coll_seg_len(&l, 0), 384);
  CU_ASSERT_EQUAL(coll_seg_len(&l, 1), 384);
  CU_ASSERT_EQUAL(coll_seg_len(&l, 2), 233);
  CU_ASSERT_EQUAL(l.nchunks, 1);
  /* Fewer elements than ranks x group: trailing segments are empty. */
  CU_ASSERT_EQUAL_FATAL(coll_layout_make(&l, COLL_OP_ALLREDUCE, 100, 4, 64, 2, 0), 0);
  CU_ASSERT_EQUAL(coll_seg_len(&l, 0), 64);
  CU_ASSERT_EQUAL(coll_seg_len(&l, 1), 36);
  CU_ASSERT_EQUAL(coll_seg_len(&l, 2), 0);
  CU_ASSERT_EQUAL(coll_chunk_elems(&l, 3, 0), 0);
  check_layout(COLL_OP_ALLREDUCE, 100, 4, 64, 0);
  check_layout(COLL_OP_ALLREDUCE, 0, 2, 128, 0);
}

static void test_layout_chunking(void) {
  coll_layout l;
  /* 64 MiB BF16 all-reduce on 2 ranks with 8 MiB chunks: 8 chunks of 2 Mi
   * elements per segment. */
  CU_ASSERT_EQUAL_FATAL(coll_layout_make(&l, COLL_OP_ALLREDUCE, 32u << 20, 2, 128, 2, 8u << 20), 0);
  CU_ASSERT_EQUAL(l.seg, 16u << 20);
  CU_ASSERT_EQUAL(l.m, 2u << 20);
  CU_ASSERT_EQUAL(l.nchunks, 8);
  CU_ASSERT_EQUAL(coll_chunk_offset(&l, 1), 2 * coll_wire_bytes(2u << 20, 128));
  /* A chunk smaller than two groups is raised to two groups. */
  CU_ASSERT_EQUAL_FATAL(coll_layout_make(&l, COLL_OP_SENDRECV, 10000, 2, 256, 2, 10), 0);
  CU_ASSERT_EQUAL(l.m, 512);
  CU_ASSERT_EQUAL(l.nchunks, (10000 + 511) / 512);
  /* Large chunks are multiples of 16 groups, so blocks stay 16-byte aligned. */
  CU_ASSERT_EQUAL_FATAL(coll_layout_make(&l, COLL_OP_ALLGATHER, 1u << 24, 2, 128, 2, 3000000), 0);
  CU_ASSERT_EQUAL(l.m % (16 * 128), 0);
  CU_ASSERT_EQUAL(coll_wire_bytes(l.m, 128) % 16, 0);
  /* A chunk as large as the message: one chunk. */
  CU_ASSERT_EQUAL_FATAL(coll_layout_make(&l, COLL_OP_REDUCESCATTER, 777, 2, 128, 2, 1u << 30), 0);
  CU_ASSERT_EQUAL(l.nchunks, 1);
  CU_ASSERT_EQUAL(l.m, 777);
  /* Bad parameters are refused. */
  CU_ASSERT_EQUAL(coll_layout_make(&l, COLL_OP_ALLREDUCE, 10, 0, 128, 2, 0), -1);
  CU_ASSERT_EQUAL(coll_layout_make(&l, COLL_OP_ALLREDUCE, 10, 2, 100, 2, 0), -1);
  CU_ASSERT_EQUAL(coll_layout_make(&l, COLL_OP_COUNT, 10, 2, 128, 2, 0), -1);
}

static void test_wire_bytes(void) {
  for (int i = 0; i < 5; i++)
    for (size_t n = 0; n < 2000; n += 37) CU_ASSERT_EQUAL(coll_wire_bytes(n, groups[i]), taco_wire_bytes(n, groups[i]));
  CU_ASSERT_EQUAL(coll_wire_bytes(128, 128), 136);
  CU_ASSERT_EQUAL(coll_wire_bytes(129, 128), 272);
  CU_ASSERT_EQUAL(coll_wire_bytes(0, 128), 0);
  /* Blocks are padded to an even number of groups: 16-byte multiples. */
  for (int i = 0; i < 5; i++)
    for (size_t n = 1; n < 5000; n += 111) {
      size_t b = coll_block_elems(n, groups[i]);
      CU_ASSERT(b >= n && b < n + 2 * (size_t)groups[i]);
      CU_ASSERT_EQUAL(coll_block_wire(n, groups[i]) % 16, 0);
    }
  CU_ASSERT_EQUAL(coll_block_elems(0, 128), 0);
  CU_ASSERT_EQUAL(coll_block_elems(256, 128), 256);
  CU_ASSERT_EQUAL(coll_block_elems(129, 128), 256);
}

static void test_busbw(void) {
  CU_ASSERT_DOUBLE_EQUAL(coll_busbw_factor(COLL_OP_ALLREDUCE, 2), 1.0, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(coll_busbw_factor(COLL_OP_ALLREDUCE, 8), 1.75, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(coll_busbw_factor(COLL_OP_ALLGATHER, 8), 0.875, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(coll_busbw_factor(COLL_OP_REDUCESCATTER, 4), 0.75, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(coll_busbw_factor(COLL_OP_ALLTOALL, 2), 0.5, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(coll_busbw_factor(COLL_OP_SENDRECV, 2), 1.0, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(coll_busbw_factor(COLL_OP_ALLREDUCE, 1), 0.0, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(coll_busbw_factor(COLL_OP_ALLREDUCE, 0), 0.0, 1e-12);
  CU_ASSERT_EQUAL(coll_total_elems(COLL_OP_ALLGATHER, 10, 4), 40);
  CU_ASSERT_EQUAL(coll_total_elems(COLL_OP_ALLREDUCE, 10, 4), 10);
}

static void test_threshold(void) {
  size_t sizes[] = {1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20};
  double plain[] = {10, 20, 40, 80, 160};
  double wins_from_4m[] = {15, 25, 39, 50, 90};
  CU_ASSERT_EQUAL(coll_threshold_from_sweep(sizes, plain, wins_from_4m, 5), 4u << 20);
  double noisy[] = {9, 25, 39, 50, 90}; /* a win at 1 MiB, a loss at 2 MiB: threshold stays 4 MiB */
  CU_ASSERT_EQUAL(coll_threshold_from_sweep(sizes, plain, noisy, 5), 4u << 20);
  double never[] = {15, 25, 45, 85, 170};
  CU_ASSERT_EQUAL(coll_threshold_from_sweep(sizes, plain, never, 5), SIZE_MAX);
  double always[] = {1, 2, 3, 4, 5};
  CU_ASSERT_EQUAL(coll_threshold_from_sweep(sizes, plain, always, 5), 1u << 20);
  CU_ASSERT_EQUAL(coll_threshold_from_sweep(sizes, plain, always, 0), SIZE_MAX);
  CU_ASSERT_TRUE(coll_use_codec(8u << 20, 8u << 20));
  CU_ASSERT_FALSE(coll_use_codec((8u << 20) - 1, 8u << 20));
  CU_ASSERT_TRUE(coll_use_codec(1, 0));
}

static void test_error_bound(void) {
  double e4 = coll_error_bound(COLL_OP_ALLGATHER, 2, 3), e5 = coll_error_bound(COLL_OP_ALLGATHER, 2, 2);
  CU_ASSERT(e4 > 1.0 / 16 && e4 < 0.07);
  CU_ASSERT(e5 > e4);
  CU_ASSERT(coll_error_bound(COLL_OP_REDUCESCATTER, 2, 3) > e4);
  CU_ASSERT(coll_error_bound(COLL_OP_ALLREDUCE, 2, 3) > coll_error_bound(COLL_OP_REDUCESCATTER, 2, 3));
  CU_ASSERT(coll_error_bound(COLL_OP_ALLREDUCE, 8, 3) > coll_error_bound(COLL_OP_ALLREDUCE, 2, 3));
}

static void test_op_names(void) {
  for (int i = 0; i < COLL_OP_COUNT; i++) {
    coll_op op;
    CU_ASSERT_EQUAL(coll_op_parse(coll_op_name((coll_op)i), &op), 0);
    CU_ASSERT_EQUAL(op, (coll_op)i);
  }
  coll_op op;
  CU_ASSERT_EQUAL(coll_op_parse("broadcast", &op), -1);
  CU_ASSERT_STRING_EQUAL(coll_op_name(COLL_OP_COUNT), "?");
}


/* Direct-path staging: receiver r's n blocks fit region A back to back at
 * its stride; the two-shot segments cover the message once; region B holds
 * every reduced segment; slots stay 16-byte aligned. */
static void test_direct_sizes(void) {
  const size_t counts[] = {1, 127, 128, 256, 257, 963, 300007, 4456614, 33554432};
  const int groups[] = {32, 128, 512};
  for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++)
    for (int gi = 0; gi < 3; gi++)
      for (int n = 2; n <= 8; n++)
        for (int op = 0; op < COLL_OP_COUNT; op++)
          for (int one = 0; one < 2; one++) {
            if (op == COLL_OP_ALLTOALL) continue;
            size_t count = counts[ci];
            int g = groups[gi];
            coll_direct_sizes s;
            coll_direct_sizes_of((coll_op)op, one, count, n, g, &s);
            CU_ASSERT_EQUAL(s.half % 256, 0);
            CU_ASSERT_EQUAL(s.half, s.region_a + s.region_b);
            size_t covered = 0;
            for (int r = 0; r < n; r++) {
              size_t e = coll_direct_recv_elems((coll_op)op, one, count, n, g, r);
              size_t stride = coll_direct_stride_a((coll_op)op, one, count, n, g, r);
              CU_ASSERT_EQUAL(stride, coll_block_wire(e, g));
              CU_ASSERT_EQUAL(stride % 16, 0);
              CU_ASSERT(stride * (size_t)n <= s.region_a);
              if (op == COLL_OP_ALLREDUCE && !one) CU_ASSERT(stride <= s.stride_b);
              covered += e;
            }
            if (op == COLL_OP_ALLREDUCE && !one) {
              CU_ASSERT_EQUAL(covered, count);
              CU_ASSERT(s.region_b >= (size_t)n * s.stride_b);
              CU_ASSERT_EQUAL(s.stride_b % 16, 0);
            } else {
              CU_ASSERT_EQUAL(covered, (size_t)n * count);
              CU_ASSERT_EQUAL(s.region_b, 0);
            }
          }
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("coll_layout", NULL, NULL);
  CU_add_test(s, "random layouts cover every element once", test_layout_cover_random);
  CU_add_test(s, "odd all-reduce segments", test_layout_odd_allreduce);
  CU_add_test(s, "chunk sizes", test_layout_chunking);
  CU_add_test(s, "wire bytes", test_wire_bytes);
  CU_add_test(s, "busbw factors", test_busbw);
  CU_add_test(s, "threshold from a sweep", test_threshold);
  CU_add_test(s, "error bounds", test_error_bound);
  CU_add_test(s, "op names", test_op_names);
  CU_add_test(s, "direct-path staging", test_direct_sizes);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}
