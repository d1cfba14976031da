/* taco_internal.h — shared by the codec's C and CUDA files, not part of the API. */
#ifndef TACO_INTERNAL_H
#define TACO_INTERNAL_H

#ifdef __cplusplus
extern "C" {
#endif

/* Records "file:line: message" for taco_last_error() and returns -1. */
int taco_fail_at(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define TACO_FAIL(...) taco_fail_at(__FILE__, __LINE__, __VA_ARGS__)

#ifdef __cplusplus
}
#endif
#endif
