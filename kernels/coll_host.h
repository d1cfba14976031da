/* coll_host.h — the host-memory flavour of the direct path (coll_direct.h).
 *
 * Where the GPUs of one host do not reach each other's memory (--transport shm:
 * NCCL moves data through host shared memory), the direct path keeps its
 * algorithms and flag protocol, but every rank's receive staging and flag
 * words live in pinned host memory that every rank of the team maps:
 *   - one process per GPU: a shared anonymous memory file per rank
 *     (memfd_create, mmap, cudaHostRegister(Mapped | Portable)); its path
 *     (/proc/<pid>/fd/<fd>) travels in the team's handle exchange, and the
 *     creator closes the descriptor as soon as every peer has mapped it
 *     (nothing stays behind after a crash);
 *   - one process for every GPU: cudaHostAlloc(Mapped | Portable).
 * The encode (or, for plain BF16, a copy) writes a rank's block for peer p
 * straight into p's host staging over PCIe; after the flags, p copies the
 * blocks sent to it into its GPU staging with the copy engine ("pull") and
 * decodes from there, so the own block never crosses PCIe. Chunks pipeline
 * the encode of chunk j + 1 (GPU -> host) with the pull of chunk j (host -> GPU).
 *
 * Also here: the plain sum of k blocks (coll_host_sum), which lets the same
 * path run uncompressed (the "transport only" baseline of bench-comm).
 *
 * The memory functions return 0, or -1 with the reason in coll_last_error(). */
#ifndef COLL_HOST_H
#define COLL_HOST_H

#include <stddef.h>

#include "taco_codec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One mapping of pinned host memory. */
typedef struct {
  void *host;      /* the mapping in this process */
  void *dev;       /* the same bytes as seen by the GPUs (cudaHostGetDevicePointer) */
  size_t bytes;    /* mapped length (whole pages) */
  int shm;         /* 1: a shared-memory mapping (munmap + unregister), 0: cudaHostAlloc */
  int fd;          /* creator: the memory file's descriptor until coll_host_unlink, else -1 */
  char name[64];   /* creator: the path peers open ("/proc/<pid>/fd/<fd>"); "" after unlink */
} coll_host_mem;

/* Pinned, GPU-mapped, zeroed host memory of one process (cudaHostAlloc). */
int coll_host_alloc(coll_host_mem *m, size_t bytes);
/* Creates a new shared memory file of `bytes` (zeroed, reserved), maps it
 * and registers it with CUDA; m->name is the path a peer process opens. */
int coll_host_create_shared(coll_host_mem *m, size_t bytes);
/* Maps and registers another process's memory file by its path. */
int coll_host_open_shared(coll_host_mem *m, const char *name, size_t bytes);
/* Creator: closes the descriptor, so the path no longer opens (the mappings
 * stay valid). Call once every peer has mapped it. */
int coll_host_unlink(coll_host_mem *m);
/* Unregisters and unmaps (or frees), closes a descriptor still open; m zeroed. */
void coll_host_free(coll_host_mem *m);

/* dst[i] = sum over b < k of blocks[b * stride_bytes + i], i < n, in dtype
 * (BF16: summed in float, one rounding to BF16 at the end; FP32: float).
 * blocks and dst 16-byte aligned, stride_bytes a multiple of 16. Returns a
 * cudaError_t (0: enqueued). */
int coll_host_sum(const void *blocks, int k, size_t stride_bytes, size_t n, taco_dtype dtype, void *dst,
                  void *stream);
/* The plain-C reference of coll_host_sum (host memory; kernels/coll_host_sum_ref.c). */
void coll_host_sum_ref(const void *blocks, int k, size_t stride_bytes, size_t n, taco_dtype dtype, void *dst);

#ifdef __cplusplus
}
#endif
#endif
