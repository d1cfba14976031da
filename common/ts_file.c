/* ts_file.c — reads an input file whole, refusing directories and files over
 * the size cap before reading a byte of them. */
#include "ts_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* exact: size is the file's size; else it is what was read before the cap was passed. */
static int too_big(ts_err *e, const char *path, unsigned long long size, size_t cap, int exact) {
  char mib[32] = "";
  if (cap >= 1048576) snprintf(mib, sizeof mib, " (%zu MiB)", cap >> 20);
  return ts_fail(e, path, NULL, "is %s%llu bytes, over the limit of %zu bytes%s on input files", exact ? "" : "more than ",
                 exact ? size : (unsigned long long)cap, cap, mib);
}

/* Reads fd to its end, refusing more than cap bytes; hint is the size fstat
 * gave (0 for pipes and devices, whose size is not known ahead). */
static char *read_all(int fd, const char *path, size_t hint, size_t cap, size_t *len, ts_err *e) {
  const size_t limit = cap + 2; /* room for cap + 1 bytes and the NUL: one byte more than cap is over */
  size_t size = hint + 2 < 4096 ? 4096 : hint + 2, used = 0;
  if (size > limit) size = limit;
  char *buf = malloc(size);
  if (!buf) {
    ts_fail_sys(e, "%s: out of memory reading %zu bytes", path, size);
    return NULL;
  }
  for (;;) {
    if (used + 1 == size) {
      if (size == limit) break; /* cap + 1 bytes read */
      size_t grown = size > limit / 2 ? limit : size * 2;
      char *p = realloc(buf, grown);
      if (!p) {
        free(buf);
        ts_fail_sys(e, "%s: out of memory reading %zu bytes", path, grown);
        return NULL;
      }
      buf = p, size = grown;
    }
    ssize_t n = read(fd, buf + used, size - 1 - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      free(buf);
      if (err == EISDIR) ts_fail(e, path, NULL, "is a directory (a file is expected)");
      else ts_fail(e, path, NULL, "cannot read file (%s)", strerror(err));
      return NULL;
    }
    if (n == 0) break;
    used += (size_t)n;
  }
  if (used > cap) {
    free(buf);
    too_big(e, path, used, cap, 0);
    return NULL;
  }
  buf[used] = '\0';
  *len = used;
  return buf;
}

char *ts_read_file(const char *path, size_t max_bytes, size_t *len, ts_err *e) {
  size_t cap = max_bytes ? max_bytes : TS_MAX_INPUT_BYTES;
  *len = 0;
  if (!path || !*path) {
    ts_fail(e, NULL, NULL, "no file name given");
    return NULL;
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == EISDIR) ts_fail(e, path, NULL, "is a directory (a file is expected)");
    else ts_fail(e, path, NULL, "cannot read file (%s)", strerror(err));
    return NULL;
  }
  struct stat st;
  char *buf = NULL;
  if (fstat(fd, &st)) ts_fail(e, path, NULL, "cannot read file (%s)", strerror(errno));
  else if (S_ISDIR(st.st_mode)) ts_fail(e, path, NULL, "is a directory (a file is expected)");
  else if (S_ISREG(st.st_mode) && (unsigned long long)st.st_size > cap) too_big(e, path, (unsigned long long)st.st_size, cap, 1);
  else buf = read_all(fd, path, S_ISREG(st.st_mode) ? (size_t)st.st_size : 0, cap, len, e);
  close(fd);
  return buf;
}
