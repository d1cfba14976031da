/* sim_report.c — printed table, Chrome trace, and running a simulation in a
 * child process (SimGrid initialises once per process). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim_internal.h"

void sim_print_result(const schema_result *r, const plan *p, FILE *out) {
  const schema_breakdown *b = &r->breakdown;
  double T = r->iteration_time_s;
  fprintf(out, "plan          %s\n", r->plan);
  fprintf(out, "calibration   %s\n", r->calibration);
  if (p)
    fprintf(out, "layout        %d GPUs: dp %d x tp %d x pp %d, %d micro-batches of %d, seq %d\n",
            plan_world_size(p), p->dp, p->tp, p->pp, plan_micro_batches(p), p->micro_batch, p->seq);
  fprintf(out, "mode          %s\n", r->mode[0] ? r->mode : "-");
  if (r->attention_backend[0]) fprintf(out, "attention     %s\n", r->attention_backend);
  if (r->host_framework[0]) fprintf(out, "host          %s's layer code (the calibration's framework_host)\n", r->host_framework);
  if (r->cross_entropy_loss_fusion < 0) fprintf(out, "cross-entropy unfused (Megatron's fp32 kernels)\n");
  if (r->hidden_dropout >= 0) fprintf(out, "hidden dropout %g%s\n", r->hidden_dropout, r->hidden_dropout > 0 ? " (mask bytes priced)" : " (no mask)");
  fprintf(out, "iteration     %.4f s\n", T);
  fprintf(out, "tokens/s      %.0f\n", r->tokens_per_s);
  fprintf(out, "TFLOP/s/GPU   %.1f   (MFU %.1f%%)\n", r->tflops_per_gpu, 100.0 * r->mfu);
  fprintf(out, "memory/GPU    %.2f GiB", r->memory_per_gpu_bytes / 1073741824.0);
  if (r->alloc_reserve >= 0) fprintf(out, " (caching-allocator reserve %g x the activations)", r->alloc_reserve);
  fprintf(out, "\n");
  fprintf(out, "breakdown     (mean over %s ranks; parts of the iteration)\n",
          r->mode[0] == 'r' ? "representative" : "all");
  const char *names[] = {"compute", "TP exposed", "PP exposed", "DP exposed", "bubble"};
  double vals[] = {b->compute_s, b->tp_exposed_s, b->pp_exposed_s, b->dp_exposed_s, b->bubble_s};
  for (int i = 0; i < 5; i++)
    fprintf(out, "  %-12s %10.4f s  %5.1f%%\n", names[i], vals[i], T > 0 ? 100.0 * vals[i] / T : 0);
  if (p && model_is_moe(&p->model)) { /* MoE: the token all-to-alls and the wait for the busiest EP rank */
    fprintf(out, "  %-12s %10.4f s  %5.1f%%  (token all-to-alls and expert-TP gathers)\n", "EP exposed",
            b->ep_exposed_s, T > 0 ? 100.0 * b->ep_exposed_s / T : 0);
    fprintf(out, "  %-12s %10.4f s  %5.1f%%  (waiting for the busiest EP rank: moe_imbalance %.2f)\n", "imbalance",
            b->imbalance_s, T > 0 ? 100.0 * b->imbalance_s / T : 0, plan_moe_max_load(p));
  }
  if (p && plan_cp(p) > 1) /* context parallelism: the KV ring's exchanges the attention waited for */
    fprintf(out, "  %-12s %10.4f s  %5.1f%%  (KV / dKV %s of context parallelism, cp %d)\n", "CP exposed",
            b->cp_exposed_s, T > 0 ? 100.0 * b->cp_exposed_s / T : 0,
            p->cp_allgather ? "all-gathers and reduce-scatters" : "ring steps", plan_cp(p));
  if (b->host_wait_s > 0) /* the host clock: the GPU idle until its host issued the next kernels */
    fprintf(out, "  %-12s %10.4f s  %5.1f%%  (GPU waiting for its host: launches, the MoE routing's syncs)\n",
            "host wait", b->host_wait_s, T > 0 ? 100.0 * b->host_wait_s / T : 0);
  fprintf(out, "  %-12s %10.4f s  (codec kernels inside compressed collectives)\n", "codec", b->codec_s);
  if (r->clock_passes && r->n_ranks) {
    /* the clock model: duty and speeds over the ranks listed (they differ by pipeline stage) */
    double lo[3] = {1e300, 1e300, 1e300}, hi[3] = {0, 0, 0}, sum[3] = {0, 0, 0}, cycle = 0;
    for (int i = 0; i < r->n_ranks; i++) {
      cycle += r->ranks[i].clock_cycle_us / r->n_ranks;
      const double v[3] = {r->ranks[i].clock_duty, r->ranks[i].clock_gemm_speed, r->ranks[i].clock_mem_speed};
      for (int k = 0; k < 3; k++) {
        sum[k] += v[k];
        if (v[k] < lo[k]) lo[k] = v[k];
        if (v[k] > hi[k]) hi[k] = v[k];
      }
    }
    fprintf(out, "clock         duty %.3f (%.3f-%.3f), GEMM speed x%.3f (%.3f-%.3f), memory-bound x%.3f (%.3f-%.3f); %d "
                 "simulations, busy/idle cycle %.3g ms\n",
            sum[0] / r->n_ranks, lo[0], hi[0], sum[1] / r->n_ranks, lo[1], hi[1], sum[2] / r->n_ranks, lo[2], hi[2],
            r->clock_passes, cycle * 1e-3);
    double mhz = 0;
    for (int i = 0; i < r->n_ranks; i++) mhz += r->ranks[i].clock_mhz / r->n_ranks;
    if (mhz > 0) fprintf(out, "              power-cap clock %.0f MHz (mean over the ranks' op windows)\n", mhz);
  }
  for (int i = 0; i < r->n_notes; i++) fprintf(out, "note: %s\n", r->notes[i]);
}

static void json_string_out(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\')
      fprintf(f, "\\%c", *s);
    else if ((unsigned char)*s < 0x20)
      fprintf(f, "\\u%04x", *s);
    else
      fputc(*s, f);
  }
  fputc('"', f);
}

/* what an event was, shown by Perfetto under "Arguments": only the fields set */
static void trace_args(FILE *f, const schema_op_record *op) {
  if (!op->kind[0]) return;
  fprintf(f, ",\"args\":{\"kind\":");
  json_string_out(f, op->kind);
  if (op->coll[0]) fprintf(f, ",\"coll\":"), json_string_out(f, op->coll);
  if (op->codec[0]) fprintf(f, ",\"codec\":"), json_string_out(f, op->codec);
  if (op->flops > 0) fprintf(f, ",\"flops\":%.6g", op->flops);
  if (op->bytes > 0) fprintf(f, ",\"bytes\":%.6g", op->bytes);
  if (op->wire_bytes > 0) fprintf(f, ",\"wire_bytes\":%.6g", op->wire_bytes);
  if (op->merged > 0) fprintf(f, ",\"merged_ops\":%d", op->merged);
  if (op->merged_names[0]) fprintf(f, ",\"merged\":"), json_string_out(f, op->merged_names);
  if (op->source[0]) fprintf(f, ",\"source\":"), json_string_out(f, op->source);
  fputc('}', f);
}

static int stream_tid(const schema_op_record *op) {
  for (int s = 0; s < PLAN_STREAM_COUNT; s++)
    if (strcmp(op->stream, plan_stream_name((plan_stream)s)) == 0) return s;
  return 0;
}

static const schema_op_record *flow_ops;
static int by_flow(const void *a, const void *b) { /* flow, then the send first, then rank, then time */
  const schema_op_record *x = &flow_ops[*(const int *)a], *y = &flow_ops[*(const int *)b];
  if (x->flow != y->flow) return x->flow < y->flow ? -1 : 1;
  int xs = strcmp(x->kind, "send") == 0, ys = strcmp(y->kind, "send") == 0;
  if (xs != ys) return ys - xs;
  if (x->rank != y->rank) return x->rank - y->rank;
  return x->start_s < y->start_s ? -1 : x->start_s > y->start_s;
}

/* Flow arrows: a send to its receive, and through the recorded members of one
 * collective call in rank order (Chrome trace flow events s / t / f, each bound
 * to the op's slice at its middle). Only flows with two or more recorded ends. */
static int write_flows(FILE *f, const schema_result *r, ts_err *e) {
  int *idx = malloc(sizeof(int) * (size_t)(r->n_ops ? r->n_ops : 1)), n = 0;
  if (!idx) return ts_fail_sys(e, "out of memory");
  for (int i = 0; i < r->n_ops; i++)
    if (r->ops[i].flow > 0) idx[n++] = i;
  flow_ops = r->ops;
  qsort(idx, (size_t)n, sizeof *idx, by_flow);
  for (int a = 0; a < n;) {
    int b = a + 1;
    while (b < n && r->ops[idx[b]].flow == r->ops[idx[a]].flow) b++;
    for (int k = a; b - a >= 2 && k < b; k++) {
      const schema_op_record *op = &r->ops[idx[k]];
      const char *ph = k == a ? "s" : k == b - 1 ? "f" : "t";
      fprintf(f, ",\n{\"ph\":\"%s\",%s\"name\":\"%s\",\"cat\":\"flow\",\"id\":%lld,\"pid\":%d,\"tid\":%d,\"ts\":%.3f}", ph,
              k == a ? "" : "\"bp\":\"e\",", op->coll[0] ? op->coll : "sendrecv", op->flow, op->rank, stream_tid(op),
              (op->start_s + 0.5 * op->dur_s) * 1e6);
    }
    a = b;
  }
  free(idx);
  return 0;
}

int sim_write_trace(const schema_result *r, const char *path, ts_err *e) {
  FILE *f = fopen(path, "w");
  if (!f) return ts_fail(e, path, NULL, "cannot open for writing (%s)", strerror(errno));
  /* one Perfetto thread per stream of the plan (tid = plan_stream) */
  fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
  int first = 1;
  for (int i = 0; i < r->n_ranks; i++) {
    int rank = r->ranks[i].rank;
    fprintf(f, "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}}", first ? "" : ",\n",
            rank, rank);
    first = 0;
    for (int s = 0; s < PLAN_STREAM_COUNT; s++)
      fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s\"}}", rank, s,
              plan_stream_name((plan_stream)s));
  }
  for (int i = 0; i < r->n_ops; i++) {
    const schema_op_record *op = &r->ops[i];
    int tid = stream_tid(op);
    fprintf(f, "%s{\"ph\":\"X\",\"name\":", first ? "" : ",\n");
    first = 0;
    json_string_out(f, op->name);
    fprintf(f, ",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f", op->rank, tid, op->start_s * 1e6, op->dur_s * 1e6);
    trace_args(f, op);
    fputc('}', f);
  }
  if (!first && write_flows(f, r, e)) {
    fclose(f);
    return -1;
  }
  fprintf(f, "\n]}\n");
  if (fclose(f)) return ts_fail_sys(e, "%s: cannot write (%s)", path, strerror(errno));
  return 0;
}

/* The child writes 'O', the length of the result's JSON (uint64), the JSON
 * without the op records, their count (int32) and the records as raw bytes
 * (parent and child are one binary); or 'E' + bad-input flag + message. The
 * records of a full-mode trace (100k) through JSON cost 2 s a simulation. */
typedef struct {
  const plan *p;
  const sim_options *o;
} isolated_args;

static int run_isolated_child(void *arg, schema_result *out, ts_err *e) {
  const isolated_args *a = arg;
  return sim_run(a->p, a->o, out, e);
}

int sim_run_isolated(const plan *p, const sim_options *o, schema_result *out, ts_err *e) {
  isolated_args a = {p, o};
  return sim_fork_result(run_isolated_child, &a, out, e);
}

/* x as the result JSON keeps it (10 significant digits, schema/result.c): a
 * record read raw holds what it held when records came through the JSON. */
static double as_json_keeps(double x) {
  char text[40];
  snprintf(text, sizeof text, "%.10g", x);
  return strtod(text, NULL);
}

/* A child's result: the JSON, then the records (the layout sim_fork_result's child writes). */
static int read_child_result(const char *buf, size_t len, schema_result *out, ts_err *e) {
  uint64_t json_len;
  int32_t n_ops;
  if (len < sizeof json_len) return ts_fail_sys(e, "the simulation process sent a truncated result");
  memcpy(&json_len, buf, sizeof json_len);
  buf += sizeof json_len, len -= sizeof json_len;
  if (json_len > len || len - json_len < sizeof n_ops)
    return ts_fail_sys(e, "the simulation process sent a truncated result");
  if (schema_result_from_json_text(buf, (size_t)json_len, "simulation result", out, e)) return -1;
  buf += json_len, len -= json_len;
  memcpy(&n_ops, buf, sizeof n_ops);
  buf += sizeof n_ops, len -= sizeof n_ops;
  if (n_ops < 0 || len != (size_t)n_ops * sizeof(schema_op_record)) {
    schema_result_free(out);
    return ts_fail_sys(e, "the simulation process sent %d records in %zu bytes", n_ops, len);
  }
  for (int32_t i = 0; i < n_ops; i++) {
    schema_op_record op;
    memcpy(&op, buf + (size_t)i * sizeof op, sizeof op);
    /* what the JSON writes only where set reads back as 0 */
    op.start_s = as_json_keeps(op.start_s), op.dur_s = as_json_keeps(op.dur_s);
    op.flops = op.flops > 0 ? as_json_keeps(op.flops) : 0;
    op.bytes = op.bytes > 0 ? as_json_keeps(op.bytes) : 0;
    op.wire_bytes = op.wire_bytes > 0 ? as_json_keeps(op.wire_bytes) : 0;
    if (op.merged < 0) op.merged = 0;
    if (op.flow < 0) op.flow = 0;
    if (schema_result_add_op(out, &op)) {
      schema_result_free(out);
      return ts_fail_sys(e, "out of memory");
    }
  }
  return 0;
}

int sim_fork_result(int (*fn)(void *arg, schema_result *out, ts_err *e), void *arg, schema_result *out,
                    ts_err *e) {
  schema_result_init(out, SCHEMA_SOURCE_SIMULATED);
  int fd[2];
  if (pipe(fd)) return ts_fail_sys(e, "pipe: %s", strerror(errno));
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    close(fd[0]);
    close(fd[1]);
    return ts_fail_sys(e, "fork: %s", strerror(errno));
  }
  if (pid == 0) {
    close(fd[0]);
    FILE *w = fdopen(fd[1], "w");
    schema_result r;
    ts_err ce = {0};
    int rc = fn(arg, &r, &ce);
    if (w) {
      if (rc == 0) {
        int32_t n_ops = r.n_ops;
        const schema_op_record *ops = r.ops;
        r.n_ops = 0;
        char *json = NULL;
        size_t json_len = 0;
        FILE *m = open_memstream(&json, &json_len);
        rc = m ? schema_result_write_json(&r, m, &ce) : ts_fail_sys(&ce, "out of memory");
        if (m && fclose(m) && rc == 0) rc = ts_fail_sys(&ce, "out of memory");
        if (rc == 0) {
          uint64_t len = json_len;
          fputc('O', w);
          fwrite(&len, sizeof len, 1, w);
          fwrite(json, 1, json_len, w);
          fwrite(&n_ops, sizeof n_ops, 1, w);
          if (n_ops > 0) fwrite(ops, sizeof *ops, (size_t)n_ops, w);
        } else {
          fprintf(w, "E%d%s", ce.bad_input, ce.msg);
        }
        free(json);
      } else {
        fprintf(w, "E%d%s", ce.bad_input, ce.msg);
      }
      fclose(w);
    }
    _exit(rc == 0 ? 0 : 1);
  }
  close(fd[1]);
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  FILE *rd = fdopen(fd[0], "r");
  if (!buf || !rd) {
    free(buf);
    if (rd) fclose(rd); else close(fd[0]);
    waitpid(pid, NULL, 0);
    return ts_fail_sys(e, "out of memory");
  }
  size_t got;
  while ((got = fread(buf + len, 1, cap - len - 1, rd)) > 0) {
    len += got;
    if (len + 1 == cap) {
      char *nb = realloc(buf, cap *= 2);
      if (!nb) {
        free(buf);
        fclose(rd);
        waitpid(pid, NULL, 0);
        return ts_fail_sys(e, "out of memory");
      }
      buf = nb;
    }
  }
  buf[len] = '\0';
  fclose(rd);
  int status = 0;
  waitpid(pid, &status, 0);
  int rc;
  if (len > 0 && buf[0] == 'O') {
    rc = read_child_result(buf + 1, len - 1, out, e);
  } else if (len > 1 && buf[0] == 'E') {
    snprintf(e->msg, sizeof e->msg, "%s", buf + 2);
    e->bad_input = buf[1] == '1';
    rc = -1;
  } else {
    rc = ts_fail_sys(e, "the simulation process died (status %d)", status);
  }
  free(buf);
  return rc;
}
