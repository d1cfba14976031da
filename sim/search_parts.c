/* search_parts.c — one piece of work split over forked processes: part 0 runs
 * in the calling process, parts 1 .. parts - 1 each in a forked child, and
 * every part writes its answer into memory of its own shared with the caller
 * (the estimate pass of search.c spreads its blocks of layouts this way). A
 * part whose fork fails runs in the caller after part 0; a child that stops
 * without finishing its part is an error naming it. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "search.h"

/* At the head of each part's shared block: how the part ended (a child's error comes back here). */
typedef struct {
  int failed;
  ts_err err;
} part_head;

/* The caller's bytes start after the head, aligned for any type. */
static size_t head_bytes(void) {
  size_t a = _Alignof(max_align_t);
  return (sizeof(part_head) + a - 1) / a * a;
}

static part_head *head_of(void *mem) { return (part_head *)((char *)mem - head_bytes()); }

void sim_search_parts_free(int parts, size_t bytes, void **mem) {
  for (int j = 0; j < parts; j++)
    if (mem[j]) {
      munmap(head_of(mem[j]), head_bytes() + bytes);
      mem[j] = NULL;
    }
}

int sim_search_parts_run(int parts, size_t bytes, sim_search_part_fn fn, void *arg, void **mem, ts_err *e) {
  if (parts < 1 || parts > SIM_SEARCH_PARTS_MAX)
    return ts_fail(e, "search", "parts", "%d is not between 1 and %d", parts, SIM_SEARCH_PARTS_MAX);
  pid_t pid[SIM_SEARCH_PARTS_MAX] = {0};
  for (int j = 0; j < parts; j++) mem[j] = NULL;
  for (int j = 0; j < parts; j++) {
    void *m = mmap(NULL, head_bytes() + bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
      sim_search_parts_free(parts, bytes, mem);
      return ts_fail_sys(e, "search: mmap: %s", strerror(errno));
    }
    mem[j] = (char *)m + head_bytes(); /* (zeroed by mmap) */
  }
  fflush(NULL);
  for (int j = 1; j < parts; j++) {
    pid[j] = fork();
    if (pid[j] == 0) {
      part_head *h = head_of(mem[j]);
      if (fn(j, parts, mem[j], arg, &h->err)) h->failed = 1;
      fflush(NULL); /* (any warning it printed; _exit runs no atexit handlers, they are the parent's) */
      _exit(0);
    }
    if (pid[j] < 0) pid[j] = 0; /* (done in this process below) */
  }
  int rc = fn(0, parts, mem[0], arg, e) ? -1 : 0;
  for (int j = 1; j < parts; j++) {
    part_head *h = head_of(mem[j]);
    if (pid[j] > 0) {
      int status = 0;
      while (waitpid(pid[j], &status, 0) < 0 && errno == EINTR) {
      }
      if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0) && !h->failed) {
        h->failed = 1;
        ts_fail_sys(&h->err, "search: the process of part %d (pid %d) stopped (status %d)", j, (int)pid[j], status);
      }
    } else if (rc == 0 && fn(j, parts, mem[j], arg, e)) {
      rc = -1;
    }
    if (rc == 0 && h->failed) {
      *e = h->err;
      rc = -1;
    }
  }
  if (rc) sim_search_parts_free(parts, bytes, mem);
  return rc;
}
