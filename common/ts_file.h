/* ts_file.h — the one reader of input files: every loader (plans, models,
 * clusters, calibrations, results) reads its file through it, so that a
 * directory, a missing file and a file over the size cap are named the same
 * way everywhere ("FILE: is a directory", exit status 2). */
#ifndef TS_FILE_H
#define TS_FILE_H

#include <stddef.h>

#include "ts_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The largest input file any loader reads: 128 MiB. The largest file shipped
 * is a calibration of 0.4 MB; a calibration of a million GEMM points is 64 MiB
 * (calibration/README.md, "Limits"). Parsed JSON takes about 12 times its text
 * in memory (0.76 GB for that file), so the cap also bounds what a loader can
 * be made to allocate: about 1.5 GB. */
#define TS_MAX_INPUT_BYTES (128ul << 20)

/* Reads the whole file at path into a NUL-terminated buffer the caller
 * free()s; *len is its length without the NUL. Fails (NULL, e filled, bad
 * input) with "PATH: cannot read file (REASON)", "PATH: is a directory",
 * "PATH: is N bytes, over the limit of M bytes (...)". max_bytes 0 means
 * TS_MAX_INPUT_BYTES. */
char *ts_read_file(const char *path, size_t max_bytes, size_t *len, ts_err *e);

#ifdef __cplusplus
}
#endif

#endif
