/* bench_nccl_model.c — the NCCL model (sim/sim_nccl.c) against published
 * nccl-tests figures (the CSV files of experiments/nccl/data/, each carrying its source)
 * and against every measured collective point of the three 2 x H200
 * calibration files; at small sizes, the model's time against published
 * per-size times (out-of-place and in-place, or derived from busbw; a file's
 * "algo=" key names an NCCL_ALGO the run forced, "launch=" how it drove its
 * GPUs); prints markdown tables (experiments/nccl/RESULTS.md).
 * Nothing is asserted: the tests are in test_sim_nccl.c.
 *
 *   bench_nccl_model REPO_ROOT            (experiments/nccl/run.sh) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibration.h"
#include "sim_nccl.h"
#include "topo.h"

static double median(double *v, int n) {
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
      double t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  return n ? (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2])) : 0;
}

/* "key=value" from a header line into the fabric and the defaults. */
typedef struct {
  sim_nccl_fabric f;
  sim_nccl_coll coll;
  int nranks, rpn;
  int forced; /* 1: the run set NCCL_ALGO to `algo`; -1: an algo= the model does not know */
  sim_nccl_algo algo;
  char launch[48]; /* how the run drove its GPUs (nccl-tests -g N from one thread, or a process per GPU) */
} file_defaults;

static void parse_keys(const char *line, file_defaults *d) {
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", line);
  for (char *tok = strtok(buf, " \t\r\n"); tok; tok = strtok(NULL, " \t\r\n")) {
    char *eq = strchr(tok, '=');
    if (!eq) continue;
    *eq = 0;
    const char *k = tok, *v = eq + 1;
    if (!strcmp(k, "intra")) {
      static const char *const kinds[] = {"nvswitch", "nvlink", "pcie", "shm", "socket"};
      for (int i = 0; i < 5; i++)
        if (!strcmp(v, kinds[i])) d->f.intra = (topo_intra_kind)i;
    } else if (!strcmp(k, "intra_gbps")) d->f.intra_gbps = atof(v);
    else if (!strcmp(k, "intra_latency_us")) d->f.intra_latency_us = atof(v);
    else if (!strcmp(k, "nvlink_gen")) d->f.nvlink_gen = atoi(v);
    else if (!strcmp(k, "nvls")) d->f.nvls = atoi(v) != 0;
    else if (!strcmp(k, "nics")) d->f.nics_per_node = atoi(v);
    else if (!strcmp(k, "nic_gbps")) d->f.nic_gbps = atof(v);
    else if (!strcmp(k, "net_latency_us")) d->f.net_latency_us = atof(v);
    else if (!strcmp(k, "coll")) sim_nccl_coll_from_name(v, &d->coll);
    else if (!strcmp(k, "nranks")) d->nranks = atoi(v);
    else if (!strcmp(k, "ranks_per_node")) d->rpn = atoi(v);
    else if (!strcmp(k, "launch")) snprintf(d->launch, sizeof d->launch, "%s", v);
    else if (!strcmp(k, "algo")) {
      d->forced = -1; /* not an algorithm of the model: bench_small says so */
      for (int a = 0; a < SIM_NCCL_ALGO_COUNT; a++)
        if (!strcmp(v, sim_nccl_algo_name((sim_nccl_algo)a))) d->forced = 1, d->algo = (sim_nccl_algo)a;
    }
  }
}

/* One published file: a row per size, model against published busbw. */
/* A data file opened for reading, its header's defaults cleared; NULL (said on stderr) if it cannot be. */
static FILE *open_series(const char *path, file_defaults *d) {
  FILE *in = fopen(path, "r");
  if (!in) fprintf(stderr, "%s: cannot open\n", path);
  memset(d, 0, sizeof *d);
  return in;
}

static int bench_published(const char *path, const char *label) {
  file_defaults d;
  FILE *in = open_series(path, &d);
  if (!in) return -1;
  char line[1024];
  double errs[64];
  int ne = 0;
  printf("\n### %s\n\n`%s`\n\n", label, path);
  printf("| coll | ranks (per node) | size | published busbw GB/s | model busbw GB/s | model choice | error | with NVLS off |\n");
  printf("| --- | --- | ---: | ---: | ---: | --- | ---: | --- |\n");
  while (fgets(line, sizeof line, in)) {
    if (line[0] == '#') {
      parse_keys(line + 1, &d);
      continue;
    }
    if (!strncmp(line, "bytes", 5)) continue;
    char *cols[8] = {0};
    int nc = 0;
    for (char *p = line; nc < 8; nc++) {
      cols[nc] = p;
      char *comma = strchr(p, ',');
      if (!comma) {
        nc++;
        break;
      }
      *comma = 0;
      p = comma + 1;
    }
    if (nc < 3) continue;
    file_defaults r = d;
    if (nc >= 7) {
      sim_nccl_coll_from_name(cols[3], &r.coll);
      r.nranks = atoi(cols[4]);
      r.rpn = atoi(cols[5]);
      r.f.nvls = atoi(cols[6]) != 0;
    }
    double bytes = atof(cols[0]), busbw = atof(cols[2]);
    sim_nccl_choice ch;
    ts_err e;
    if (sim_nccl_time(&r.f, r.coll, bytes, r.nranks, r.rpn, NULL, &ch, &e)) {
      fprintf(stderr, "%s: %s\n", path, e.msg);
      fclose(in);
      return -1;
    }
    double model = sim_nccl_busbw(r.coll, bytes, r.nranks, ch.us);
    double err = (model - busbw) / busbw;
    if (ne < 64) errs[ne++] = fabs(err);
    char desc[64];
    sim_nccl_describe(&ch, desc, sizeof desc);
    char alt[96] = "";
    if (ch.algo == SIM_NCCL_NVLS || ch.algo == SIM_NCCL_NVLS_TREE) {
      sim_nccl_fabric off = r.f;
      off.nvls = false;
      sim_nccl_choice c2;
      if (sim_nccl_time(&off, r.coll, bytes, r.nranks, r.rpn, NULL, &c2, &e) == 0) {
        char d2[64];
        sim_nccl_describe(&c2, d2, sizeof d2);
        double b2 = sim_nccl_busbw(r.coll, bytes, r.nranks, c2.us);
        snprintf(alt, sizeof alt, "%.1f GB/s (%s), %+.1f%%", b2, d2, 100 * (b2 - busbw) / busbw);
      }
    }
    printf("| %s | %d (%d) | %.0f | %.1f | %.1f | %s | %+.1f%% | %s |\n", sim_nccl_coll_name(r.coll), r.nranks, r.rpn,
           bytes, busbw, model, desc, 100 * err, alt);
  }
  fclose(in);
  double med = median(errs, ne), mx = 0;
  for (int i = 0; i < ne; i++) mx = fmax(mx, errs[i]);
  printf("\n%d points: median |error| %.1f%%, max %.1f%%\n", ne, 100 * med, 100 * mx);
  return 0;
}

/* The model's time for one row: NCCL's choice, or the best protocol of the
 * algorithm the run forced (NCCL_ALGO); -1 with a message on failure. */
static double model_row_us(const file_defaults *d, double bytes, char *desc, size_t cap) {
  ts_err e;
  if (!d->forced) {
    sim_nccl_choice ch;
    if (sim_nccl_time(&d->f, d->coll, bytes, d->nranks, d->rpn, NULL, &ch, &e)) {
      snprintf(desc, cap, "%.80s", e.msg);
      return -1;
    }
    sim_nccl_describe(&ch, desc, cap);
    return ch.us;
  }
  double best = -1;
  sim_nccl_proto bp = SIM_NCCL_SIMPLE;
  for (int p = 0; p < SIM_NCCL_PROTO_COUNT; p++) {
    double t = sim_nccl_tuner_us(&d->f, d->coll, d->algo, (sim_nccl_proto)p, bytes, d->nranks, d->rpn);
    if (t >= 0 && (best < 0 || t < best)) best = t, bp = (sim_nccl_proto)p;
  }
  if (best < 0) {
    snprintf(desc, cap, "%s: not available on this fabric", sim_nccl_algo_name(d->algo));
    return -1;
  }
  snprintf(desc, cap, "%s/%s (NCCL_ALGO)", sim_nccl_algo_name(d->algo), sim_nccl_proto_name(bp));
  return sim_nccl_algo_us(&d->f, d->coll, d->algo, bp, bytes, d->nranks, d->rpn);
}

/* The published time of one column: the time, else derived from the busbw. */
static double published_us(const char *us, const char *busbw, const file_defaults *d, double bytes) {
  if (us && *us) return atof(us);
  if (busbw && *busbw && atof(busbw) > 0)
    return bytes * ts_coll_busbw_factor((ts_coll)d->coll, d->nranks) / (atof(busbw) * 1e3);
  return 0;
}

static void print_summary(const char *what, double *signed_err, int n) {
  if (!n) return;
  double mag[256], sgn[256], mx = 0;
  for (int i = 0; i < n; i++) {
    sgn[i] = signed_err[i];
    mag[i] = fabs(signed_err[i]);
    mx = fmax(mx, mag[i]);
  }
  printf("- %s: %d points, median |error| %.1f%% (signed median %+.1f%%), max |error| %.1f%%\n", what, n,
         100 * median(mag, n), 100 * median(sgn, n), 100 * mx);
}

/* One published file with per-size times (small sizes): rows
 * "bytes,us,busbw_gbps,us_inplace,busbw_inplace_gbps"; an empty time is
 * derived from its busbw. Error = (model - published) / published time:
 * negative when the model is faster. Summaries at <= 1 MiB and above. */
static int bench_small(const char *path, const char *label) {
  file_defaults d;
  FILE *in = open_series(path, &d);
  if (!in) return -1;
  char line[1024];
  double small[2][256], large[2][256];
  double off_err[2][256];
  int ns[2] = {0, 0}, nl[2] = {0, 0}, noff[2] = {0, 0}, header = 0, rc = 0;
  while (fgets(line, sizeof line, in)) {
    if (line[0] == '#') {
      parse_keys(line + 1, &d);
      continue;
    }
    if (!strncmp(line, "bytes", 5)) continue;
    if (!header) {
      printf("\n### %s\n\n`%s` (%d ranks, %s)\n\n", label, path, d.nranks, d.launch[0] ? d.launch : "launch not stated");
      printf("| size | published us: out-of-place / in-place | model us | model choice | error: out-of-place / in-place | with NVLS off |\n");
      printf("| ---: | ---: | ---: | --- | ---: | --- |\n");
      header = 1;
    }
    char *cols[5] = {0};
    int nc = 0;
    for (char *p = line; nc < 5; nc++) {
      cols[nc] = p;
      char *comma = strpbrk(p, ",\r\n");
      if (!comma) {
        nc++;
        break;
      }
      int end = *comma != ',';
      *comma = 0;
      p = comma + 1;
      if (end) {
        nc++;
        break;
      }
    }
    if (nc < 5) {
      fprintf(stderr, "%s: row \"%s\": needs 5 columns (bytes,us,busbw_gbps,us_inplace,busbw_inplace_gbps)\n", path,
              cols[0]);
      rc = -1;
      break;
    }
    double bytes = atof(cols[0]);
    if (d.forced < 0) {
      fprintf(stderr, "%s: header key algo: not one of ring, tree, nvls, nvls-tree\n", path);
      rc = -1;
      break;
    }
    if (!(bytes > 0)) {
      fprintf(stderr, "%s: row \"%s\": field bytes: must be a size > 0\n", path, cols[0]);
      rc = -1;
      break;
    }
    double pub[2] = {published_us(cols[1], cols[2], &d, bytes), published_us(cols[3], cols[4], &d, bytes)};
    char desc[96];
    double model = model_row_us(&d, bytes, desc, sizeof desc);
    if (model < 0) {
      fprintf(stderr, "%s: %s\n", path, desc);
      rc = -1;
      break;
    }
    char ps[2][24], es[2][24];
    for (int k = 0; k < 2; k++) {
      if (pub[k] <= 0) {
        snprintf(ps[k], sizeof ps[k], "-");
        snprintf(es[k], sizeof es[k], "-");
        continue;
      }
      double err = (model - pub[k]) / pub[k];
      snprintf(ps[k], sizeof ps[k], "%.2f", pub[k]);
      snprintf(es[k], sizeof es[k], "%+.1f%%", 100 * err);
      if (bytes <= 1048576 && ns[k] < 256) small[k][ns[k]++] = err;
      if (bytes > 1048576 && nl[k] < 256) large[k][nl[k]++] = err;
    }
    char alt[200] = "";
    if (!d.forced && d.f.nvls) {
      file_defaults off = d;
      off.f.nvls = false;
      char d2[96];
      double t2 = model_row_us(&off, bytes, d2, sizeof d2);
      double p0 = pub[0] > 0 ? pub[0] : pub[1];
      if (t2 > 0 && p0 > 0) {
        double err = (t2 - p0) / p0;
        if (strcmp(d2, desc)) snprintf(alt, sizeof alt, "%.2f us (%s), %+.1f%%", t2, d2, 100 * err);
        if (bytes <= 1048576 && noff[0] < 256) off_err[0][noff[0]++] = err;
        if (bytes > 1048576 && noff[1] < 256) off_err[1][noff[1]++] = err;
      }
    }
    printf("| %.0f | %s / %s | %.2f | %s | %s / %s | %s |\n", bytes, ps[0], ps[1], model, desc, es[0], es[1], alt);
  }
  fclose(in);
  if (rc) return rc;
  printf("\n");
  print_summary("out-of-place, <= 1 MiB", small[0], ns[0]);
  print_summary("out-of-place, > 1 MiB", large[0], nl[0]);
  print_summary("in-place, <= 1 MiB", small[1], ns[1]);
  print_summary("in-place, > 1 MiB", large[1], nl[1]);
  print_summary("with NVLS off (out-of-place, else in-place), <= 1 MiB", off_err[0], noff[0]);
  print_summary("with NVLS off (out-of-place, else in-place), > 1 MiB", off_err[1], noff[1]);
  return 0;
}

/* Every measured point of one calibration file's five NCCL collectives, at
 * 2 ranks: the model anchored on the curve (reproduces it) and not anchored
 * (the fabric figures alone: how far the model is from this fabric). */
static int bench_calibration(const char *root, const char *transport) {
  char cpath[600], tpath[600];
  snprintf(cpath, sizeof cpath, "%s/calibration/h200-%s.json", root, transport);
  snprintf(tpath, sizeof tpath, "%s/topologies/h200x2-%s.json", root, transport);
  schema_calibration cal;
  topo_cluster cl;
  ts_err e;
  if (schema_calibration_load(cpath, &cal, &e) || topo_load(tpath, NULL, &cl, &e)) {
    fprintf(stderr, "%s\n", e.msg);
    return -1;
  }
  sim_nccl_fabric f;
  sim_nccl_fabric_of_cluster(&cl, &f);
  printf("\n### 2 x H200, %s (`calibration/h200-%s.json`, fabric from `topologies/h200x2-%s.json`: %.4g GB/s, %.3g us)\n\n",
         transport, transport, transport, f.intra_gbps, f.intra_latency_us);
  printf("| coll | points | anchored: median / max abs error | fabric only: median / max abs error | fabric only at 1 KiB / 1 MiB / largest |\n");
  printf("| --- | ---: | ---: | ---: | --- |\n");
  static const char *const names[] = {"allreduce", "allgather", "reducescatter", "alltoall", "sendrecv"};
  for (int k = 0; k < 5; k++) {
    const schema_coll_table *t = NULL;
    for (int i = 0; i < cal.n_colls; i++)
      if (!strcmp(cal.colls[i].name, names[k]) && cal.colls[i].nranks == 2) t = &cal.colls[i];
    if (!t) continue;
    sim_nccl_coll coll;
    sim_nccl_coll_from_name(names[k], &coll);
    double ea[256], eu[256], marks[3] = {0, 0, 0};
    int n = t->n < 256 ? t->n : 256;
    for (int i = 0; i < n; i++) {
      sim_nccl_choice a, u;
      if (sim_nccl_time(&f, coll, t->pts[i].bytes, 2, 2, t, &a, &e) ||
          sim_nccl_time(&f, coll, t->pts[i].bytes, 2, 2, NULL, &u, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        schema_calibration_free(&cal);
        return -1;
      }
      ea[i] = fabs(a.us - t->pts[i].us) / t->pts[i].us;
      double su = (u.us - t->pts[i].us) / t->pts[i].us;
      eu[i] = fabs(su);
      if (t->pts[i].bytes == 1024) marks[0] = su;
      if (t->pts[i].bytes == 1048576) marks[1] = su;
      if (i == n - 1) marks[2] = su;
    }
    double mxa = 0, mxu = 0;
    for (int i = 0; i < n; i++) mxa = fmax(mxa, ea[i]), mxu = fmax(mxu, eu[i]);
    printf("| %s | %d | %.2f%% / %.2f%% | %.0f%% / %.0f%% | %+.0f%% / %+.0f%% / %+.0f%% |\n", names[k], n,
           100 * median(ea, n), 100 * mxa, 100 * median(eu, n), 100 * mxu, 100 * marks[0], 100 * marks[1],
           100 * marks[2]);
  }
  schema_calibration_free(&cal);
  return 0;
}

/* The main job's TP8 all-reduce on one HGX H200 node, anchored on the
 * measured 2-rank NVLink curve, with and without NVLS, against the old
 * scaling (the 2-rank time at that size times the bus-bandwidth factor 7/4). */
static int bench_tp8(const char *root) {
  char cpath[600], tpath[600];
  snprintf(cpath, sizeof cpath, "%s/calibration/h200-nvlink.json", root);
  snprintf(tpath, sizeof tpath, "%s/topologies/h200x8-nvswitch.json", root);
  schema_calibration cal;
  topo_cluster cl;
  ts_err e;
  if (schema_calibration_load(cpath, &cal, &e) || topo_load(tpath, NULL, &cl, &e)) {
    fprintf(stderr, "%s\n", e.msg);
    return -1;
  }
  const schema_coll_table *t = NULL;
  for (int i = 0; i < cal.n_colls; i++)
    if (!strcmp(cal.colls[i].name, "allreduce") && cal.colls[i].nranks == 2) t = &cal.colls[i];
  schema_roofline roof = {1e15, 4.8e12, 450e9, 3, 2};
  schema_lookup lk;
  schema_lookup_init(&lk, &cal, &roof, NULL);
  sim_nccl_fabric f;
  sim_nccl_fabric_of_cluster(&cl, &f);
  printf("\n### 8 x H200 all-reduce (`topologies/h200x8-nvswitch.json`), anchored on the 2-rank NVLink curve\n\n");
  printf("| size | old: 2-rank x 7/4 (us) | model NVLS off (us) | choice | model NVLS on (us) | choice | busbw on GB/s |\n");
  printf("| ---: | ---: | ---: | --- | ---: | --- | ---: |\n");
  static const double sizes[] = {24576, 1048576, 8388608, 50331648, 201326592, 1073741824};
  for (int i = 0; i < 6; i++) {
    double old;
    if (schema_lookup_coll(&lk, "allreduce", 8, sizes[i], &old, &e)) break;
    sim_nccl_choice off, on;
    sim_nccl_fabric foff = f;
    foff.nvls = false;
    if (sim_nccl_time(&foff, SIM_NCCL_ALLREDUCE, sizes[i], 8, 8, t, &off, &e) ||
        sim_nccl_time(&f, SIM_NCCL_ALLREDUCE, sizes[i], 8, 8, t, &on, &e))
      break;
    char d1[64], d2[64];
    sim_nccl_describe(&off, d1, sizeof d1);
    sim_nccl_describe(&on, d2, sizeof d2);
    printf("| %.0f | %.1f | %.1f | %s | %.1f | %s | %.0f |\n", sizes[i], old, off.us, d1, on.us, d2,
           sim_nccl_busbw(SIM_NCCL_ALLREDUCE, sizes[i], 8, on.us));
  }
  schema_calibration_free(&cal);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: bench_nccl_model REPO_ROOT\n");
    return 2;
  }
  const char *root = argv[1];
  static const char *const files[][2] = {
      {"dgx-a100-allreduce-8gpu.csv", "8 x A100 (one node), all-reduce"},
      {"dgx-a100-allreduce-2node.csv", "2 nodes x 8 A100, all-reduce"},
      {"dgx-a100-sendrecv-8gpu.csv", "8 x A100 (one node), send/recv"},
      {"dgx-h100-8gpu-published.csv", "8 x H100 (one node), NCCL developers' figures"},
      {"hgx-h100-allreduce-2node.csv", "2 nodes x 8 H100, all-reduce"},
  };
  int rc = 0;
  printf("## Model against published nccl-tests figures (fabric figures only, no anchor)\n");
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char path[700];
    snprintf(path, sizeof path, "%s/experiments/nccl/data/%s", root, files[i][0]);
    rc |= bench_published(path, files[i][1]);
  }
  static const char *const small_files[][2] = {
      {"a100-sxm4-allreduce-8gpu-small.csv", "8 x A100 SXM4 (one node), all-reduce, 8 B - 128 MiB"},
      {"nd-a100-v4-allreduce-8gpu.csv", "8 x A100 SXM4 (one node, a second machine), all-reduce, 1 KiB - 8 GiB"},
      {"a100-sxm4-allreduce-2gpu-small.csv", "2 x A100 SXM4 (of an 8-GPU node), all-reduce, first sizes"},
      {"hgx-h20-allreduce-8gpu-small.csv", "8 x H20 (one HGX node, the H100's NVLink 4 fabric), all-reduce, 32 KiB - 1 GiB"},
      {"hgx-h100-allreduce-4gpu.csv", "4 x H100 SXM (of an HGX node), all-reduce, nccl-tests -g 4, 8 B - 8 GiB"},
      {"hgx-h100-allreduce-4gpu-graph.csv", "4 x H100 SXM (the same GPUs), all-reduce, nccl-tests -g 4 -G 1 (CUDA graphs), 8 B - 16 MiB"},
      {"hgx-h100-allreduce-4gpu-torch-eager.csv", "4 x H100 SXM (the same node), torch all-reduce, a process per GPU, eager, 1 KiB - 4 MiB"},
      {"hgx-h100-allreduce-4gpu-torch-graph.csv", "4 x H100 SXM (the same node), torch all-reduce, a process per GPU, CUDA graph, 1 KiB - 4 MiB"},
      {"nd-h100-v5-allreduce-nvls.csv", "8 x H100 SXM (one node), all-reduce with NCCL_ALGO=NVLS, 1 KiB - 8 GiB"},
  };
  printf("\n## Small sizes: model time against published nccl-tests times (fabric figures only, no anchor)\n");
  for (size_t i = 0; i < sizeof small_files / sizeof small_files[0]; i++) {
    char path[700];
    snprintf(path, sizeof path, "%s/experiments/nccl/data/%s", root, small_files[i][0]);
    rc |= bench_small(path, small_files[i][1]);
  }
  printf("\n## Model against the measured 2 x H200 curves (every point)\n");
  static const char *const transports[] = {"nvlink", "shm", "socket"};
  for (int i = 0; i < 3; i++) rc |= bench_calibration(root, transports[i]);
  printf("\n## The main job's TP8 all-reduce\n");
  rc |= bench_tp8(root);
  return rc ? 1 : 0;
}
