/* coll_host.c — pinned host memory that every rank of a team maps
 * (coll_host.h): shared memory registered with CUDA, or cudaHostAlloc.
 *
 * The shared object is an anonymous memory file (memfd_create), not a file
 * in /dev/shm: containers often mount /dev/shm with 64 MiB, too small for the
 * staging, and an anonymous file leaves nothing behind when a process dies.
 * Peers open it through /proc/<pid>/fd/<fd> of the creating process while
 * the creator keeps the descriptor open; "unlink" closes that descriptor
 * (the mappings stay). The space is reserved up front (fallocate), so a
 * shortage is an error here, not a SIGBUS at the first touch. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coll_direct_team.h"
#include "coll_host.h"


static size_t whole_pages(size_t bytes) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  return (bytes + pg - 1) / pg * pg;
}

int coll_host_alloc(coll_host_mem *m, size_t bytes) {
  memset(m, 0, sizeof *m);
  m->fd = -1;
  bytes = whole_pages(bytes);
  CK_CUDA(cudaHostAlloc(&m->host, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
  m->bytes = bytes;
  memset(m->host, 0, bytes);
  CK_CUDA(cudaHostGetDevicePointer(&m->dev, m->host, 0));
  return 0;
}

/* Maps fd and registers the mapping; closes fd. */
static int map_and_register(coll_host_mem *m, int fd, size_t bytes) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  if (fd != m->fd) close(fd);
  if (p == MAP_FAILED) return coll_set_error(__FILE__, __LINE__, "mmap", strerror(err));
  m->host = p;
  m->bytes = bytes;
  m->shm = 1;
  cudaError_t ce = cudaHostRegister(p, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable);
  if (ce != cudaSuccess) {
    munmap(p, bytes);
    m->host = NULL;
    return coll_set_error(__FILE__, __LINE__, "cudaHostRegister", cudaGetErrorString(ce));
  }
  ce = cudaHostGetDevicePointer(&m->dev, p, 0);
  if (ce != cudaSuccess) {
    cudaHostUnregister(p);
    munmap(p, bytes);
    m->host = NULL;
    return coll_set_error(__FILE__, __LINE__, "cudaHostGetDevicePointer", cudaGetErrorString(ce));
  }
  return 0;
}

int coll_host_create_shared(coll_host_mem *m, size_t bytes) {
  memset(m, 0, sizeof *m);
  m->fd = -1;
  bytes = whole_pages(bytes);
  int fd = memfd_create("tacosim-coll-staging", MFD_CLOEXEC);
  if (fd < 0) return coll_set_error(__FILE__, __LINE__, "memfd_create", strerror(errno));
  int err = ftruncate(fd, (off_t)bytes) != 0 ? errno : posix_fallocate(fd, 0, (off_t)bytes); /* zeros */
  if (err) {
    close(fd);
    return coll_set_error(__FILE__, __LINE__, "reserving the shared staging", strerror(err));
  }
  m->fd = fd;
  snprintf(m->name, sizeof m->name, "/proc/%ld/fd/%d", (long)getpid(), fd);
  if (map_and_register(m, fd, bytes)) {
    close(fd);
    m->fd = -1;
    m->name[0] = 0;
    return -1;
  }
  return 0;
}

int coll_host_open_shared(coll_host_mem *m, const char *name, size_t bytes) {
  memset(m, 0, sizeof *m);
  m->fd = -1;
  bytes = whole_pages(bytes);
  int fd = open(name, O_RDWR | O_CLOEXEC);
  if (fd < 0) return coll_set_error(__FILE__, __LINE__, "open (a peer's shared staging)", strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || (size_t)st.st_size < bytes) {
    close(fd);
    return coll_set_error(__FILE__, __LINE__, "open (a peer's shared staging)", "smaller than agreed");
  }
  return map_and_register(m, fd, bytes);
}

int coll_host_unlink(coll_host_mem *m) {
  m->name[0] = 0;
  if (m->fd < 0) return 0;
  int rc = close(m->fd);
  m->fd = -1;
  if (rc != 0) return coll_set_error(__FILE__, __LINE__, "close of the shared staging", strerror(errno));
  return 0;
}

void coll_host_free(coll_host_mem *m) {
  if (m->host) {
    if (m->shm) {
      cudaHostUnregister(m->host);
      munmap(m->host, m->bytes);
    } else {
      cudaFreeHost(m->host);
    }
  }
  if (m->shm && m->fd >= 0) close(m->fd);
  memset(m, 0, sizeof *m);
  m->fd = -1;
}
