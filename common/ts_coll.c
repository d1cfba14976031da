/* ts_coll.c — the collective and codec tables (see ts_coll.h). */
#include "ts_coll.h"

#include <math.h>
#include <string.h>

/* One row per collective; the table and the name list are made from it. */
#define TS_COLL_ROWS(X)                                                                                        \
  /* enum                  name             steps/peer fixed bus_num bus_fixed per_rank segmented one_block */ \
  X(TS_COLL_ALLREDUCE, "allreduce", 2.0, 0, 2.0, 0.0, 0, 1, 0)                                                \
  X(TS_COLL_ALLGATHER, "allgather", 1.0, 0, 1.0, 0.0, 1, 0, 0)                                                \
  X(TS_COLL_REDUCESCATTER, "reducescatter", 1.0, 0, 1.0, 0.0, 1, 0, 0)                                        \
  X(TS_COLL_ALLTOALL, "alltoall", 1.0, 0, 1.0, 0.0, 1, 0, 0)                                                  \
  X(TS_COLL_SENDRECV, "sendrecv", 0.0, 1, 0.0, 1.0, 0, 0, 1)

#define TS_COLL_DESC(id, name, steps, fixed, num, bfix, per_rank, seg, one) [id] = {name, steps, fixed, num, bfix, per_rank, seg, one},
#define TS_COLL_NAME(id, name, ...) [id] = name,
const ts_coll_desc ts_colls[TS_COLL_COUNT] = {TS_COLL_ROWS(TS_COLL_DESC)};
const char *const ts_coll_names[TS_COLL_COUNT + 1] = {TS_COLL_ROWS(TS_COLL_NAME)[TS_COLL_COUNT] = NULL};

const char *ts_coll_name(ts_coll c) { return (unsigned)c < TS_COLL_COUNT ? ts_colls[c].name : "?"; }

int ts_coll_parse(const char *name, ts_coll *c) {
  for (int i = 0; i < TS_COLL_COUNT; i++)
    if (!strcmp(name, ts_colls[i].name)) {
      *c = (ts_coll)i;
      return 0;
    }
  return -1;
}

int ts_coll_of_key(const char *key, ts_coll *c) {
  for (int i = 0; i < TS_COLL_COUNT; i++) {
    size_t n = strlen(ts_colls[i].name);
    if (!strncmp(key, ts_colls[i].name, n) && (key[n] == '\0' || key[n] == '.')) {
      *c = (ts_coll)i;
      return 0;
    }
  }
  return -1;
}

double ts_coll_busbw_factor(ts_coll c, int nranks) {
  if ((unsigned)c >= TS_COLL_COUNT || nranks < 1) return 0.0;
  const ts_coll_desc *d = &ts_colls[c];
  if (d->bus_fixed > 0) return d->bus_fixed;
  double n = nranks;
  return d->bus_num * (n - 1.0) / n;
}

double ts_coll_steps(ts_coll c, int nranks) {
  if ((unsigned)c >= TS_COLL_COUNT) return 0.0;
  const ts_coll_desc *d = &ts_colls[c];
  if (d->fixed_steps > 0) return d->fixed_steps;
  return d->steps_per_peer * (double)(nranks - 1);
}

#define TS_CODEC_ROWS(X)                                                                                       \
  /* enum                 name      taco caat */                                                               \
  X(TS_CODEC_NONE, "none", 0, 0)                                                                               \
  X(TS_CODEC_TACO, "taco", 1, 0)                                                                               \
  X(TS_CODEC_CAAT, "caat", 0, 1)                                                                               \
  X(TS_CODEC_TACO_CAAT, "taco+caat", 1, 1)

#define TS_CODEC_DESC(id, name, taco, caat) [id] = {name, taco, caat},
#define TS_CODEC_NAME(id, name, ...) [id] = name,
const ts_codec_desc ts_codecs[TS_CODEC_COUNT] = {TS_CODEC_ROWS(TS_CODEC_DESC)};
const char *const ts_codec_names[TS_CODEC_COUNT + 1] = {TS_CODEC_ROWS(TS_CODEC_NAME)[TS_CODEC_COUNT] = NULL};

const char *ts_codec_name(ts_codec k) { return (unsigned)k < TS_CODEC_COUNT ? ts_codecs[k].name : "?"; }

double ts_taco_wire_elements(double n, int g) {
  if (g < 1) return n;
  return n + 8.0 * ceil(n / g);
}
