/* test_cli.c — the commands a person learns from their help.
 *
 * tacosim: every command answers --help and -h with exit 0 and its usage; every
 * option its parser accepts is in that usage, and every option the usage
 * defines is accepted (the parser is probed from outside: an option it does
 * not know is answered "unknown option"; the candidates are the option
 * literals of sim/tacosim.c and sim/search_main.c). Unknown model names list
 * the zoo; a directory or a file over the input cap given to any loader of
 * any command is named as such, exit 2; what `tacosim simulate --json` writes
 * `tacosim compare` reads.
 * tacorun (when built): every command prints its help with exit 0 on a
 * machine without a GPU, and every option literal of its parser's source is
 * in it. */
#define _XOPEN_SOURCE 700 /* mkdtemp, ftruncate */
#include <CUnit/Basic.h>
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model.h"
#include "ts_file.h"

#ifndef TACOSIM_BIN
#error TACOSIM_BIN must name the tacosim binary
#endif
#ifndef SOURCE_DIR
#error SOURCE_DIR must name the source tree
#endif

static char workdir[256]; /* the commands run here: nothing they might write lands in the tree */

/* Runs a shell command line in workdir; its stdout and stderr (together) into out. */
static int run(const char *cmdline, char *out, size_t cap) {
  char full[8192];
  snprintf(full, sizeof full, "cd '%s' && %s </dev/null 2>&1", workdir, cmdline);
  FILE *p = popen(full, "r");
  if (!p) return -1;
  size_t n = 0, got;
  while (n + 1 < cap && (got = fread(out + n, 1, cap - 1 - n, p)) > 0) n += got;
  out[n] = '\0';
  char sink[4096];
  while (fread(sink, 1, sizeof sink, p) > 0) {
  }
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int tacosim(const char *args, char *out, size_t cap) {
  char line[4096];
  snprintf(line, sizeof line, "'%s' %s", TACOSIM_BIN, args);
  return run(line, out, cap);
}

/* opt occurs in text as a whole option: not followed by [a-z0-9-]. */
static int has_option(const char *text, const char *opt) {
  size_t n = strlen(opt);
  for (const char *p = strstr(text, opt); p; p = strstr(p + 1, opt)) {
    char next = p[n];
    int before_ok = p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '-');
    if (before_ok && !(isalnum((unsigned char)next) || next == '-')) return 1;
  }
  return 0;
}

typedef struct {
  char v[128][48];
  int n;
} name_list;

static void add_name(name_list *l, const char *s, size_t len) {
  if (len == 0 || len >= sizeof l->v[0] || l->n == 128) return;
  for (int i = 0; i < l->n; i++)
    if (strlen(l->v[i]) == len && !strncmp(l->v[i], s, len)) return;
  memcpy(l->v[l->n], s, len);
  l->v[l->n][len] = '\0';
  l->n++;
}

/* Every string literal of a source file that is exactly "--name". */
static void option_literals(const char *rel, name_list *l) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", SOURCE_DIR, rel);
  size_t len;
  ts_err e;
  char *text = ts_read_file(path, 0, &len, &e);
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  for (char *p = strstr(text, "\"--"); p; p = strstr(p + 1, "\"--")) {
    char *q = p + 3;
    while (islower((unsigned char)*q) || isdigit((unsigned char)*q) || *q == '-') q++;
    if (*q == '"' && q > p + 3) add_name(l, p + 1, (size_t)(q - p - 1));
  }
  free(text);
}

/* The commands tacosim --help lists: the first word of each line indented by two spaces. */
static void listed_commands(const char *help, name_list *l) {
  const char *p = strstr(help, "commands:\n");
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  for (p = strchr(p, '\n') + 1; *p && *p != '\n'; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p)) {
    if (p[0] == ' ' && p[1] == ' ' && islower((unsigned char)p[2])) {
      size_t n = strcspn(p + 2, " \n");
      add_name(l, p + 2, n);
    }
  }
}

static void test_every_command_has_help(void) {
  static char help[65536], out[65536];
  CU_ASSERT_EQUAL(tacosim("--help", help, sizeof help), 0);
  CU_ASSERT_EQUAL(tacosim("-h", out, sizeof out), 0);
  CU_ASSERT_STRING_EQUAL(out, help);
  name_list cmds = {0};
  listed_commands(help, &cmds);
  const char *expected[] = {"plan", "simulate", "compare", "ops", "derive-calibration", "search"};
  for (size_t i = 0; i < sizeof expected / sizeof *expected; i++) {
    int found = 0;
    for (int k = 0; k < cmds.n; k++) found |= !strcmp(cmds.v[k], expected[i]);
    if (!found) fprintf(stderr, "\n  tacosim --help does not list %s\n", expected[i]);
    CU_ASSERT(found);
  }
  for (int k = 0; k < cmds.n; k++) {
    char args[128], want[128];
    snprintf(args, sizeof args, "%s --help", cmds.v[k]);
    int rc = tacosim(args, out, sizeof out);
    snprintf(want, sizeof want, "usage: tacosim %s", cmds.v[k]);
    if (rc != 0 || strncmp(out, want, strlen(want))) fprintf(stderr, "\n  tacosim %s -> %d: %.200s\n", args, rc, out);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_EQUAL(strncmp(out, want, strlen(want)), 0);
    /* every usage names what it reads and writes */
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "reads:"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "writes:"));
    static char again[65536];
    snprintf(args, sizeof args, "%s -h", cmds.v[k]);
    CU_ASSERT_EQUAL(tacosim(args, again, sizeof again), 0);
    CU_ASSERT_STRING_EQUAL(again, out);
    /* the top-level help holds the same usage, word for word (the folders' footer once, at its end) */
    char *footer = strstr(out, "\nfolders of this build:");
    if (footer) *footer = '\0';
    if (!strstr(help, out)) fprintf(stderr, "\n  tacosim --help lacks the usage of %s\n", cmds.v[k]);
    CU_ASSERT_PTR_NOT_NULL(strstr(help, out));
  }
  /* an unknown command names the commands */
  CU_ASSERT_EQUAL(tacosim("simulat x.json", out, sizeof out), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "unknown command \"simulat\""));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "simulate"));
}

/* Option lines of a usage: lines whose text starts with "--" after spaces; their first word. */
static void defined_options(const char *usage, name_list *l) {
  for (const char *p = usage; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p)) {
    const char *q = p;
    while (*q == ' ') q++;
    if (q > p && q[0] == '-' && q[1] == '-') add_name(l, q, strcspn(q, " \n"));
  }
}

static void test_help_lists_every_option(void) {
  static char help[65536], usage[65536], out[65536];
  CU_ASSERT_EQUAL(tacosim("--help", help, sizeof help), 0);
  name_list cmds = {0}, cands = {0};
  listed_commands(help, &cmds);
  option_literals("sim/tacosim.c", &cands);
  option_literals("sim/search_main.c", &cands);
  option_literals("sim/search_infer_main.c", &cands);
  CU_ASSERT(cands.n >= 20); /* the parsers' options, from their source */
  int accepted_total = 0;
  for (int k = 0; k < cmds.n; k++) {
    char args[256];
    snprintf(args, sizeof args, "%s --help", cmds.v[k]);
    CU_ASSERT_EQUAL_FATAL(tacosim(args, usage, sizeof usage), 0);
    name_list accepted = {0};
    for (int i = 0; i < cands.n; i++) {
      if (!strcmp(cands.v[i], "--help")) continue;
      snprintf(args, sizeof args, "%s %s x", cmds.v[k], cands.v[i]);
      int rc = tacosim(args, out, sizeof out);
      if (strstr(out, "unknown option")) continue;
      /* accepted: the command went on and stopped at its missing arguments or the value "x" */
      add_name(&accepted, cands.v[i], strlen(cands.v[i]));
      accepted_total++;
      if (!has_option(usage, cands.v[i]))
        fprintf(stderr, "\n  tacosim %s accepts %s (-> %d) but its --help does not list it\n", cmds.v[k], cands.v[i], rc);
      CU_ASSERT(has_option(usage, cands.v[i]));
      CU_ASSERT_NOT_EQUAL(rc, 0); /* nothing ran: a plan, a model or an output was missing */
    }
    /* and every option the usage defines is one the parser takes */
    name_list defined = {0};
    defined_options(usage, &defined);
    for (int i = 0; i < defined.n; i++) {
      int found = 0;
      for (int j = 0; j < accepted.n; j++) found |= !strcmp(defined.v[i], accepted.v[j]);
      if (!found) fprintf(stderr, "\n  tacosim %s --help lists %s, which its parser refuses\n", cmds.v[k], defined.v[i]);
      CU_ASSERT(found);
    }
  }
  CU_ASSERT(accepted_total >= 20);
  /* an option no parser has is answered as such, naming the command */
  CU_ASSERT_EQUAL(tacosim("simulate --calibraton x plan.json", out, sizeof out), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "simulate: unknown option --calibraton"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "tacosim simulate --help"));
}

/* ---- unknown model names list the zoo ---- */

static void test_unknown_model_lists_names(void) {
  char dir[] = "/tmp/tacosim_test_zoo_XXXXXX";
  CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
  const char *files[] = {"beta.json", "alpha.json", "notes.txt", ".hidden.json"};
  for (size_t i = 0; i < 4; i++) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, files[i]);
    FILE *f = fopen(p, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("{}", f);
    fclose(f);
  }
  model_config m;
  ts_err e = {0};
  CU_ASSERT_EQUAL(model_load("gamma", dir, &m, &e), -1);
  CU_ASSERT_EQUAL(e.bad_input, 1);
  char want[600];
  snprintf(want, sizeof want, "%s/gamma.json: no model named \"gamma\" in the zoo %s; it has: alpha, beta", dir, dir);
  if (strcmp(e.msg, want)) fprintf(stderr, "\n  \"%s\" is not \"%s\"\n", e.msg, want);
  CU_ASSERT_STRING_EQUAL(e.msg, want);
  for (size_t i = 0; i < 4; i++) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, files[i]);
    unlink(p);
  }
  CU_ASSERT_EQUAL(model_load("gamma", dir, &m, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "it has: none"));
  rmdir(dir);

  /* from the command line: every model of the shipped zoo is named */
  static char out[65536];
  CU_ASSERT_EQUAL(tacosim("search --model llama3-9b --cluster h200x8-nvswitch", out, sizeof out), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "no model named \"llama3-9b\""));
  char zoo[1024];
  snprintf(zoo, sizeof zoo, "%s/models", SOURCE_DIR);
  DIR *d = opendir(zoo);
  CU_ASSERT_PTR_NOT_NULL_FATAL(d);
  struct dirent *de;
  int named = 0;
  while ((de = readdir(d))) {
    size_t n = strlen(de->d_name);
    if (n <= 5 || strcmp(de->d_name + n - 5, ".json")) continue;
    char name[300];
    snprintf(name, sizeof name, "%.*s", (int)(n - 5), de->d_name);
    if (!has_option(out, name)) fprintf(stderr, "\n  the message does not name %s: %s\n", name, out);
    CU_ASSERT(has_option(out, name));
    named++;
  }
  closedir(d);
  CU_ASSERT(named >= 10);
}

/* ---- every loader of every command: a directory, a file over the cap ---- */

static void expect_refused(const char *args, const char *path, const char *reason) {
  static char out[65536];
  int rc = tacosim(args, out, sizeof out);
  char want[1024];
  snprintf(want, sizeof want, "%s: %s", path, reason);
  if (rc != 2 || !strstr(out, want)) fprintf(stderr, "\n  tacosim %s -> %d: %s(expected \"%s\")\n", args, rc, out, want);
  CU_ASSERT_EQUAL(rc, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
}

static void test_directories_and_big_files_named(void) {
  char dir[600], big[600], args[4096];
  snprintf(dir, sizeof dir, "%s/a-folder.json", workdir);
  CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0700) == 0 || access(dir, F_OK) == 0, 1);
  snprintf(big, sizeof big, "%s/big.json", workdir);
  FILE *f = fopen(big, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  CU_ASSERT_EQUAL(ftruncate(fileno(f), (off_t)TS_MAX_INPUT_BYTES + 4096), 0); /* sparse: no disk */
  fclose(f);
  const char *plan = SOURCE_DIR "/experiments/plans/gpt-h4096-tp2-none.json";
  const char *result = SOURCE_DIR "/experiments/validation/measured/tp2-sp-taco-shm.json";
  const char *bad[] = {dir, big};
  const char *why[] = {"is a directory", "is 134221824 bytes, over the limit of 134217728 bytes (128 MiB)"};
  CU_ASSERT_EQUAL(TS_MAX_INPUT_BYTES, 134217728ul);
  for (int b = 0; b < 2; b++) {
    const char *x = bad[b];
    snprintf(args, sizeof args, "plan '%s'", x);
    expect_refused(args, x, why[b]);
    snprintf(args, sizeof args, "simulate '%s'", x);
    expect_refused(args, x, why[b]);
    snprintf(args, sizeof args, "simulate '%s' --calibration '%s'", plan, x);
    expect_refused(args, x, why[b]);
    snprintf(args, sizeof args, "ops '%s' --calibration '%s'", plan, x);
    expect_refused(args, x, why[b]);
    snprintf(args, sizeof args, "compare '%s' '%s'", result, x);
    expect_refused(args, x, why[b]);
    snprintf(args, sizeof args, "compare '%s' '%s'", x, result);
    expect_refused(args, x, why[b]);
    snprintf(args, sizeof args, "search --model '%s' --cluster h200x8-nvswitch", x);
    expect_refused(args, x, why[b]);
    snprintf(args, sizeof args, "search --model gpt3-1.3b --cluster '%s'", x);
    expect_refused(args, x, why[b]);
    snprintf(args, sizeof args, "search --model gpt3-1.3b --cluster h200x8-nvswitch --calibration '%s'", x);
    expect_refused(args, x, why[b]);
  }
  unlink(big);
  rmdir(dir);
}

/* tacosim ops on an inference plan: the prefill's and the decode step's ops, each list summing to the TTFT at the
 * tables' sustained speed (simulate with --prefill-clock off and --prefill-power off) and to the eager TPOT that
 * simulate prints; an in-flight plan is refused (exit 2). */
static void test_ops_inference_plan(void) {
  static char out[65536], sim[65536];
  const char *plan = SOURCE_DIR "/experiments/validation/h100/infer-plans/llama3-8b-tp1-b1-p4096-g64-bf16.json";
  char args[1024];
  snprintf(args, sizeof args, "ops '%s' 2>/dev/null", plan);
  CU_ASSERT_EQUAL_FATAL(tacosim(args, out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\nprefill.qkv 32 "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\ndecode.attn 32 "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\ndecode.logits 1 "));
  double listed[2] = {0, 0}, total[2] = {-1, -1};
  for (char *l = strtok(out, "\n"); l; l = strtok(NULL, "\n")) {
    char name[64];
    int count;
    double ms, t;
    if (sscanf(l, "%63s %d %lf", name, &count, &ms) == 3 && name[0] != '#')
      listed[strncmp(name, "decode.", 7) == 0] += ms;
    else if (sscanf(l, "# prefill total %lf", &t) == 1)
      total[0] = t;
    else if (sscanf(l, "# decode total %lf", &t) == 1)
      total[1] = t;
  }
  snprintf(args, sizeof args, "simulate '%s' --prefill-clock off --prefill-power off 2>/dev/null", plan);
  CU_ASSERT_EQUAL_FATAL(tacosim(args, sim, sizeof sim), 0);
  const char *ttft = strstr(sim, "time to first token"), *tpot = strstr(sim, "time per output token");
  CU_ASSERT_PTR_NOT_NULL_FATAL(ttft);
  CU_ASSERT_PTR_NOT_NULL_FATAL(tpot);
  double printed[2];
  CU_ASSERT_EQUAL_FATAL(sscanf(ttft, "time to first token %lf", &printed[0]), 1);
  CU_ASSERT_EQUAL_FATAL(sscanf(tpot, "time per output token %lf", &printed[1]), 1);
  for (int ph = 0; ph < 2; ph++) {
    CU_ASSERT_DOUBLE_EQUAL(listed[ph], total[ph], 2e-3);
    CU_ASSERT_DOUBLE_EQUAL(total[ph], printed[ph], 1e-3);
  }
  snprintf(args, sizeof args, "ops '%s/experiments/published/inflight-infer/plans/trt10-qwen3-235b-h100-tp8-i1000-o1000.json' 2>&1",
           SOURCE_DIR);
  CU_ASSERT_EQUAL(tacosim(args, out, sizeof out), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "in-flight"));
}

/* What tacosim simulate --json writes (training with ops, inference with its details), compare reads. */
static void test_written_results_load(void) {
  static char out[65536];
  char args[2048];
  snprintf(args, sizeof args, "simulate '%s/experiments/plans/gpt-h4096-tp2-taco.json' --json train.json --trace t.json",
           SOURCE_DIR);
  CU_ASSERT_EQUAL_FATAL(tacosim(args, out, sizeof out), 0);
  int rc = tacosim("compare train.json train.json", out, sizeof out);
  if (rc) fprintf(stderr, "\n  %s\n", out);
  CU_ASSERT_EQUAL(rc, 0);
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/experiments/plans/infer-llama3-8b-tp2", SOURCE_DIR);
  DIR *d = opendir(dir);
  CU_ASSERT_PTR_NOT_NULL_FATAL(d);
  struct dirent *de;
  char plan[1400] = "";
  while ((de = readdir(d)))
    if (strstr(de->d_name, "taco.json")) {
      snprintf(plan, sizeof plan, "%s/%s", dir, de->d_name);
      break;
    }
  closedir(d);
  CU_ASSERT_FATAL(plan[0] != '\0');
  snprintf(args, sizeof args, "simulate '%s' --json infer.json", plan);
  CU_ASSERT_EQUAL_FATAL(tacosim(args, out, sizeof out), 0);
  rc = tacosim("compare infer.json infer.json", out, sizeof out);
  if (rc) fprintf(stderr, "\n  %s\n", out);
  CU_ASSERT_EQUAL(rc, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "ttft"));
}

/* Issue 20, a caching allocator's reserve: the plan's "alloc_reserve" (default PLAN_DEFAULT_ALLOC_RESERVE) and
 * --alloc-reserve, which sets it over the file's: `tacosim plan` states it in the overhead note, `simulate`
 * records it in its result and on its memory line; a value outside [0, 1) is refused, the field or the
 * option named, exit 2. */
static void test_alloc_reserve(void) {
  static char out[65536];
  char path[512];
  const char *tails[] = {"", ", \"alloc_reserve\": 0.25", ", \"alloc_reserve\": 1.5"};
  for (int i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "%s/ar%d.json", workdir, i);
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "{ \"schema\": 1, \"model\": \"gpt-tiny\", \"cluster\": \"h200x2-nvlink\", \"layout\": "
               "{ \"dp\": 1, \"tp\": 1, \"pp\": 1 },\n  \"batch\": { \"micro\": 1, \"global\": 1, \"seq\": 256 }, "
               "\"schedule\": \"1f1b\"%s }\n",
            tails[i]);
    fclose(f);
  }
  /* the default as the help states it, then as the summary does */
  CU_ASSERT_EQUAL(tacosim("plan --help", out, sizeof out), 0);
  const char *d = strstr(out, "over the file's; default the file's, else\n");
  CU_ASSERT_PTR_NOT_NULL_FATAL(d);
  d = strchr(d, '\n') + 1;
  while (*d == ' ') d++;
  char *end;
  double dflt = strtod(d, &end);
  CU_ASSERT_FATAL(end > d && (*end == ':' || *end == ','));
  CU_ASSERT_EQUAL(tacosim("plan ar0.json", out, sizeof out), 0);
  char want[128];
  snprintf(want, sizeof want, "alloc_reserve %g x the activations (the default", dflt);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  CU_ASSERT_EQUAL(tacosim("plan ar1.json", out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "alloc_reserve 0.25 x the activations (the plan's"));
  CU_ASSERT_EQUAL(tacosim("plan ar1.json --alloc-reserve 0.125", out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "alloc_reserve 0.125 x"));
  CU_ASSERT_EQUAL(tacosim("plan ar2.json", out, sizeof out), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "ar2.json: alloc_reserve"));
  CU_ASSERT_EQUAL(tacosim("plan ar0.json --alloc-reserve 1", out, sizeof out), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--alloc-reserve"));
  CU_ASSERT_EQUAL(tacosim("simulate ar0.json --alloc-reserve 0.5x", out, sizeof out), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--alloc-reserve"));
  CU_ASSERT_EQUAL_FATAL(tacosim("simulate ar0.json --alloc-reserve 0.5 --json ar.json", out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "caching-allocator reserve 0.5 x the activations"));
  snprintf(path, sizeof path, "%s/ar.json", workdir);
  size_t n = 0;
  ts_err e = {0};
  char *text = ts_read_file(path, 1 << 24, &n, &e);
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"alloc_reserve\": 0.5"));
  free(text);
  CU_ASSERT_EQUAL(tacosim("compare ar.json ar.json", out, sizeof out), 0);
}

/* Mixtral-8x7B's 46.7 B parameters with their optimizer states do not fit 8 A100s of 80 GiB in any layout: the
 * search says so (exit 2) and names the layout that needs the least memory and how much, above the 80 GiB. */
static void test_search_least_memory(void) {
  static char out[65536];
  CU_ASSERT_EQUAL(tacosim("search --model mixtral-8x7b --cluster a100x8-nvswitch", out, sizeof out), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "no layout of mixtral-8x7b fits 8 GPUs"));
  const char *l = strstr(out, "the least memory any layout needs is ");
  CU_ASSERT_PTR_NOT_NULL_FATAL(l);
  double gib = atof(l + strlen("the least memory any layout needs is "));
  CU_ASSERT(gib > 80.0 && gib < 1000.0);
  CU_ASSERT_PTR_NOT_NULL(strstr(l, "against the GPU's 80 GiB"));
}

#ifdef TACORUN_BIN
/* ---- tacorun: help without a GPU ---- */

/* The source files of each command's option parser. */
static const struct {
  const char *name, *files[3];
} tacorun_commands[] = {
    {"bench-burst", {"runtime/bench/bench_burst.c"}},
    {"bench-codec", {"runtime/bench/bench_codec.c"}},
    {"bench-comm", {"runtime/bench/bench_comm.c"}},
    {"bench-decode", {"runtime/bench/bench_decode.c"}},
    {"bench-decode-step", {"runtime/bench/bench_decode_step.c", "runtime/bench/bench_decode_step_grid.c"}},
    {"bench-graph", {"runtime/calibrate/bench_graph.c"}},
    {"calibrate", {"runtime/calibrate/calibrate.c"}},
    {"calibrate-infer", {"runtime/calibrate/calibrate_infer.c"}},
    {"execute", {"runtime/exec/exec_execute.c", "runtime/infer/infer_run.c"}},
    {"probe-interleave", {"runtime/bench/probe_interleave.c"}},
    {"train", {"runtime/train/train_cmd.c"}},
};

static int tacorun(const char *args, char *out, size_t cap) {
  char line[4096];
  /* no GPU may be touched: none is visible */
  snprintf(line, sizeof line, "CUDA_VISIBLE_DEVICES= '%s' %s", TACORUN_BIN, args);
  return run(line, out, cap);
}

static void test_tacorun_help(void) {
  static char help[65536], out[65536];
  CU_ASSERT_EQUAL(tacorun("--help", help, sizeof help), 0);
  name_list listed = {0};
  listed_commands(help, &listed);
  size_t n = sizeof tacorun_commands / sizeof *tacorun_commands;
  CU_ASSERT_EQUAL((size_t)listed.n, n); /* a new command gets a row above */
  for (int k = 0; k < listed.n; k++) {
    int row = -1;
    for (size_t i = 0; i < n; i++)
      if (!strcmp(tacorun_commands[i].name, listed.v[k])) row = (int)i;
    if (row < 0) fprintf(stderr, "\n  tacorun %s: no row in tacorun_commands\n", listed.v[k]);
    CU_ASSERT_FATAL(row >= 0);
    char args[128];
    snprintf(args, sizeof args, "%s --help", listed.v[k]);
    int rc = tacorun(args, out, sizeof out);
    if (rc) fprintf(stderr, "\n  tacorun %s -> %d: %.300s\n", args, rc, out);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "usage:"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "reads:"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "writes:"));
    static char again[65536];
    snprintf(args, sizeof args, "%s -h", listed.v[k]);
    CU_ASSERT_EQUAL(tacorun(args, again, sizeof again), 0);
    CU_ASSERT_STRING_EQUAL(again, out);
    name_list opts = {0};
    for (int f = 0; f < 3 && tacorun_commands[row].files[f]; f++) option_literals(tacorun_commands[row].files[f], &opts);
    CU_ASSERT(opts.n >= 3);
    for (int i = 0; i < opts.n; i++) {
      if (!strcmp(opts.v[i], "--help")) continue;
      if (!has_option(out, opts.v[i])) fprintf(stderr, "\n  tacorun %s --help does not list %s\n", listed.v[k], opts.v[i]);
      CU_ASSERT(has_option(out, opts.v[i]));
    }
  }
}

/* A dump at a step the run never reaches is refused before any GPU (steps count from 0). */
static void test_tacorun_train_dump_past_end(void) {
  static char out[65536];
  int rc = tacorun("train --corpus /dev/null --tp-emulate 2 --steps 300 --stats-every 100 --dump-at 300 --out-dir .",
                   out, sizeof out);
  CU_ASSERT_EQUAL(rc, 2);
  if (!strstr(out, "--dump-at 300: the run's training steps are 0 to 299")) fprintf(stderr, "\n  %.300s\n", out);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--dump-at 300: the run's training steps are 0 to 299"));
}

/* A plan file in the work folder: micro-batch 1, 1F1B, then `tail` (more fields, each after a comma). */
static void write_plan_with(const char *name, const char *model, const char *cluster, const char *layout, int global,
                            int seq, const char *tail) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", workdir, name);
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f, "{ \"schema\": 1, \"model\": \"%s\", \"cluster\": \"%s\", \"layout\": { %s },\n"
             "  \"batch\": { \"micro\": 1, \"global\": %d, \"seq\": %d }, \"schedule\": \"1f1b\"%s }\n",
          model, cluster, layout, global, seq, tail);
  fclose(f);
}
static void write_plan(const char *name, const char *model, const char *cluster, const char *layout, int global) {
  write_plan_with(name, model, cluster, layout, global, 1024, ",\n  \"layers_override\": 1, \"hidden_dropout\": 0");
}

/* calibrate --coll-groups: TACO group sizes of the compressed collectives, refused before any GPU when not a
 * power of two in 32..512. */
static void test_tacorun_calibrate_coll_groups(void) {
  static char out[65536];
  CU_ASSERT_EQUAL(tacorun("calibrate --only comm --coll-groups 32,48", out, sizeof out), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--coll-groups: 48 is not a power of two"));
  CU_ASSERT_EQUAL(tacorun("calibrate --only comm --coll-groups 1024", out, sizeof out), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--coll-groups"));
}

/* calibrate --only: the FP8 GEMM phase is one of the phases (a misspelt one refused with the list, before any
 * GPU); without a GPU, --only gemm_fp8 gets as far as looking for one. */
static void test_tacorun_calibrate_only_fp8(void) {
  static char out[65536];
  CU_ASSERT_EQUAL(tacorun("calibrate --only gemm_fp16", out, sizeof out), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "unknown phase 'gemm_fp16' (gemm, gemm_fp8,"));
  CU_ASSERT_NOT_EQUAL(tacorun("calibrate --only gemm_fp8 --gemm-fp8-tsv /dev/null", out, sizeof out), 0);
  CU_ASSERT_PTR_NULL(strstr(out, "unknown"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "no CUDA device"));
}

/* --peak-gbps (the HBM rate the inference executor's decode floor is read at): a rate > 0, else exit 2 naming the
 * option before any GPU; a good one gets as far as looking for a GPU. */
static void test_tacorun_peak_gbps(void) {
  static char out[65536];
  char args[1024];
  const char *plan = SOURCE_DIR "/experiments/infer/v3/plans/llama3-8b-tp1-b1-p4096-g64-bf16.json";
  const char *bad[] = {"0", "-1", "fast", "4800x"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    snprintf(args, sizeof args, "execute '%s' --peak-gbps %s", plan, bad[i]);
    CU_ASSERT_EQUAL(tacorun(args, out, sizeof out), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "--peak-gbps"));
  }
  snprintf(args, sizeof args, "execute '%s' --peak-gbps 3350", plan);
  CU_ASSERT_EQUAL(tacorun(args, out, sizeof out), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "no CUDA device"));
}

/* bench-decode-step (the executor's whole decode step over batch x KV length): bad options and what the executor
 * refuses exit 2 naming the option or the model before any GPU; good ones get as far as looking for a GPU. */
static void test_tacorun_decode_step(void) {
  static char out[65536];
  static const struct {
    const char *args, *named;
  } bad[] = {{"bench-decode-step --tp 2", "--tp: '2' is not 1"},
             {"bench-decode-step --kv-cache fp16", "--kv-cache: 'fp16'"},
             {"bench-decode-step --kv 512,256", "--kv: '512,256'"},
             {"bench-decode-step --kv-cache fp8 --decode-attention v1", "--kv-cache fp8"},
             {"bench-decode-step --model mixtral-8x7b", "mixtral-8x7b is a mixture-of-experts model"},
             {"bench-decode-step --model gpt3-125m", "gpt3-125m uses LayerNorm"},
             {"bench-decode-step --model no-such-model", "no-such-model"}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    const int rc = tacorun(bad[i].args, out, sizeof out);
    if (rc != 2 || !strstr(out, bad[i].named)) fprintf(stderr, "\n  %s -> %d: %.300s\n", bad[i].args, rc, out);
    CU_ASSERT_EQUAL(rc, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, bad[i].named));
  }
  const char *good[] = {"bench-decode-step", "bench-decode-step --model qwen2.5-7b --kv-cache fp8 --eager --batches 1,64",
                        "bench-decode-step --model qwen3-8b --decode-attention v5 --peak-gbps 3350 --kv 8192"};
  for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
    CU_ASSERT_EQUAL(tacorun(good[i], out, sizeof out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "no CUDA device"));
  }
}

/* The dense Qwen3 models (head_dim 128, wider than hidden / heads on qwen3-tiny and qwen3-32b; the QK norm) in
 * one-GPU inference plans pass every check of the inference executor before the GPU (none is visible here: the
 * run stops at "no CUDA device", exit 1, not 2 naming model.qk_norm); the shipped plan
 * experiments/exec-qwen3/plans/qwen3-8b-infer-b16-p1024-g64.json among them. --help names the QK norm. */
static void test_tacorun_infer_qwen3(void) {
  static char out[65536];
  char args[1024];
  const char *models[] = {"qwen3-tiny", "qwen3-8b", "qwen3-14b", "qwen3-32b"};
  for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
    char name[64], path[512];
    snprintf(name, sizeof name, "infer-%s.json", models[i]);
    snprintf(path, sizeof path, "%s/%s", workdir, name);
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "{ \"schema\": 1, \"kind\": \"inference\", \"name\": \"infer-%s\", \"model\": \"%s\",\n"
               "  \"cluster\": \"h200x2-nvlink\", \"layout\": { \"tp\": 1, \"pp\": 1 },\n"
               "  \"batch\": { \"size\": 4, \"prompt\": 256, \"generate\": 8 }, \"kv_cache\": \"bf16\" }\n",
            models[i], models[i]);
    fclose(f);
    snprintf(args, sizeof args, "execute %s", name);
    int rc = tacorun(args, out, sizeof out);
    if (rc != 1 || !strstr(out, "no CUDA device")) fprintf(stderr, "\n  %s: %d: %.400s\n", models[i], rc, out);
    CU_ASSERT_EQUAL(rc, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "no CUDA device"));
    CU_ASSERT_PTR_NULL(strstr(out, "qk_norm"));
  }
  snprintf(args, sizeof args, "execute '%s/experiments/exec-qwen3/plans/qwen3-8b-infer-b16-p1024-g64.json'",
           SOURCE_DIR);
  CU_ASSERT_EQUAL(tacorun(args, out, sizeof out), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "no CUDA device"));
  CU_ASSERT_EQUAL(tacorun("execute --help", out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "dense Qwen3-style"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "the QK norm before RoPE (prefill and decode step"));
}

/* Context parallelism is simulated, not executed: refused before any GPU or communicator, the field named. */
static void test_tacorun_refuses_cp(void) {
  static char out[65536];
  const char *cp = "\"dp\": 1, \"tp\": 1, \"pp\": 1, \"context_parallel_size\": 2";
  write_plan_with("cp.json", "gpt-tiny", "h200x2-nvlink", cp, 1, 256, ",\n  \"hidden_dropout\": 0");
  CU_ASSERT_EQUAL(tacorun("execute cp.json", out, sizeof out), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "layout.context_parallel_size"));
  /* TACO on the KV exchanges: the codec's field is the one named */
  write_plan_with("cp.json", "gpt-tiny", "h200x2-nvlink", cp, 1, 256,
                  ",\n  \"codec\": { \"cp\": { \"kind\": \"taco\", \"group\": 128, \"fp8\": \"e4m3\" } },\n"
                  "  \"hidden_dropout\": 0");
  CU_ASSERT_EQUAL(tacorun("execute cp.json", out, sizeof out), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "codec.cp.kind"));
  CU_ASSERT_EQUAL(tacorun("execute --help", out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "context_parallel_size"));
}

/* ZeRO-2 and ZeRO-3 are simulated, not executed: refused before any GPU, the
 * field named; overlap_param_gather true and overlap_grad_reduce false run
 * from the plan's program only (the built-in program refuses them). */
static void test_tacorun_zero_refusals(void) {
  static char out[65536];
  const char *cases[][2] = {{"z2.json", "\"data_parallel_sharding_strategy\": \"optim_grads\""},
                            {"z3.json", "\"data_parallel_sharding_strategy\": \"optim_grads_params\""},
                            {"late.json", "\"overlap_grad_reduce\": false"},
                            {"pg.json", "\"zero1\": true, \"overlap_param_gather\": true"}};
  for (int i = 0; i < 4; i++) {
    char layout[256], cmd[600];
    snprintf(layout, sizeof layout, "\"dp\": 2, \"tp\": 1, \"pp\": 1, %s", cases[i][1]);
    write_plan_with(cases[i][0], "gpt-tiny", "h200x2-nvlink", layout, 2, 256, ",\n  \"hidden_dropout\": 0");
    /* the ZeRO-2/3 plans refused by the plan reader; the other two by the built-in program */
    snprintf(cmd, sizeof cmd, "execute %s%s", cases[i][0], i < 2 ? "" : " --program builtin");
    CU_ASSERT_EQUAL(tacorun(cmd, out, sizeof out), 2);
    const char *want = i < 2 ? "layout.data_parallel_sharding_strategy" : i == 2 ? "overlap_grad_reduce false"
                                                                                  : "overlap_param_gather true";
    if (!strstr(out, want)) fprintf(stderr, "\n  %s: %.300s\n", cases[i][0], out);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  }
  CU_ASSERT_EQUAL(tacorun("execute --help", out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "optim_grads_params (ZeRO-2/3)"));
}

/* tp_comm_overlap (Transformer Engine's userbuffer overlap) and uneven stages with interleaved chunks are
 * priced, not executed: refused before any GPU, the field named, and both said in execute --help. */
static void test_tacorun_tpo_uneven_refusals(void) {
  static char out[65536];
  write_plan_with("tpo.json", "gpt-tiny", "h200x2-nvlink",
                  "\"dp\": 1, \"tp\": 2, \"pp\": 1, \"sequence_parallel\": true, \"tp_comm_overlap\": true", 1, 256,
                  ",\n  \"hidden_dropout\": 0");
  CU_ASSERT_EQUAL(tacorun("execute tpo.json", out, sizeof out), 2);
  if (!strstr(out, "layout.tp_comm_overlap")) fprintf(stderr, "\n  tpo.json: %.300s\n", out);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "tpo.json: layout.tp_comm_overlap"));
  char path[512];
  snprintf(path, sizeof path, "%s/uneven.json", workdir);
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f, "{ \"schema\": 1, \"model\": \"gpt-tiny\", \"cluster\": \"h200x2-nvlink\",\n"
             "  \"layout\": { \"dp\": 1, \"tp\": 1, \"pp\": 2, \"vpp\": 2, \"decoder_first_pipeline_num_layers\": 1 },\n"
             "  \"batch\": { \"micro\": 1, \"global\": 4, \"seq\": 256 }, \"schedule\": \"interleaved-1f1b\",\n"
             "  \"layers_override\": 5, \"hidden_dropout\": 0 }\n");
  fclose(f);
  int rc = tacorun("execute uneven.json", out, sizeof out);
  if (rc != 2 || !strstr(out, "layout.decoder_first_pipeline_num_layers")) fprintf(stderr, "\n  uneven.json: %.300s\n", out);
  CU_ASSERT_EQUAL(rc, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "uneven.json: layout.decoder_first_pipeline_num_layers"));
  CU_ASSERT_EQUAL(tacorun("execute --help", out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "tp_comm_overlap true"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "layout.decoder_first/last_pipeline_num_layers"));
}

/* Mixture-of-experts plans run on one GPU at EP 1 or at EP 2 .. 8 dividing DP; the rest is refused before
 * any GPU, the field named: EP 1 over DP > 1, EP 16 (more than the experts and the executor's 8), EP with
 * ZeRO-1, a compressed expert-DP reduction (codec.dp with ep < dp), TP > 1 (expert TP follows it), and the
 * built-in program (dense layers only). Qwen3 (wider heads, the QK norm) runs: test_tacorun_zoo_models. */
static void test_tacorun_moe_refusals(void) {
  static char out[65536];
  write_plan("ep16.json", "mixtral-8x7b", "h200-1024-rail", "\"dp\": 16, \"tp\": 1, \"pp\": 1, \"ep\": 16", 16);
  write_plan("tp2.json", "moe-tiny", "h200x2-nvlink", "\"dp\": 1, \"tp\": 2, \"pp\": 1, \"sequence_parallel\": true", 1);
  write_plan("tiny.json", "moe-tiny", "h200x2-nvlink", "\"dp\": 1, \"tp\": 1, \"pp\": 1", 1);
  CU_ASSERT_EQUAL(tacorun("execute ep16.json", out, sizeof out), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "layout.ep"));
  write_plan("ep1dp2.json", "mixtral-8x7b", "h200x2-nvlink", "\"dp\": 2, \"tp\": 1, \"pp\": 1", 2);
  CU_ASSERT_EQUAL(tacorun("execute ep1dp2.json", out, sizeof out), 2); /* experts over DP only with EP */
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "ep1dp2.json: layout.ep"));
  write_plan("ep4z1.json", "mixtral-8x7b", "h200x8-nvswitch", "\"dp\": 8, \"tp\": 1, \"pp\": 1, \"ep\": 4, \"zero1\": true", 8);
  CU_ASSERT_EQUAL(tacorun("execute ep4z1.json", out, sizeof out), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "ep4z1.json: layout.zero1"));
  write_plan_with("ep2dp4.json", "mixtral-8x7b", "h200x8-nvswitch", "\"dp\": 4, \"tp\": 1, \"pp\": 1, \"ep\": 2", 4,
                  1024, ",\n  \"layers_override\": 1, \"hidden_dropout\": 0, \"codec\": { \"dp\": { \"kind\": \"taco\" } }");
  CU_ASSERT_EQUAL(tacorun("execute ep2dp4.json", out, sizeof out), 2); /* expert-DP uncompressed only */
  if (!strstr(out, "ep2dp4.json: codec.dp")) fprintf(stderr, "\n  ep2dp4.json: %.300s\n", out);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "ep2dp4.json: codec.dp"));
  CU_ASSERT_EQUAL(tacorun("execute tp2.json", out, sizeof out), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "layout.expert_tp")); /* expert TP defaults to TP */
  CU_ASSERT_EQUAL(tacorun("execute tiny.json --program builtin", out, sizeof out), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--program plan"));
  CU_ASSERT_EQUAL(tacorun("execute --help", out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "Mixture of experts"));
}

/* The executor runs no dropout: a plan that leaves hidden_dropout at Megatron-LM's 0.1, or sets it > 0, is
 * refused before any GPU, the field named; 0 is what its plans say. */
static void test_tacorun_refuses_hidden_dropout(void) {
  static char out[65536];
  const char *value[] = {"", ", \"hidden_dropout\": 0.1"};
  for (int i = 0; i < 2; i++) {
    char name[32];
    snprintf(name, sizeof name, "hd%d.json", i);
    write_plan_with(name, "gpt-tiny", "h200x2-nvlink", "\"dp\": 1, \"tp\": 1, \"pp\": 1", 1, 256, value[i]);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "execute hd%d.json", i);
    CU_ASSERT_EQUAL(tacorun(cmd, out, sizeof out), 2);
    if (!strstr(out, "hd0.json: hidden_dropout: 0.1") && !strstr(out, "hd1.json: hidden_dropout: 0.1"))
      fprintf(stderr, "\n  %.300s\n", out);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, i ? "hd1.json: hidden_dropout: 0.1" : "hd0.json: hidden_dropout: 0.1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "NOT IMPLEMENTED"));
  }
  CU_ASSERT_EQUAL(tacorun("execute --help", out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "hidden_dropout > 0"));
}

/* Issue 24: every zoo model as published, in a one-GPU training plan of one layer, passes every check of
 * tacorun execute before the GPU (none is visible here: the run stops at "no CUDA device", not exit 2):
 * the dense models (RoPE with theta and Llama 3.1's scaling, QKV and linear biases, untied output weights,
 * the norm epsilon) and Mixtral at EP 1; DeepSeek-V3 at TP 1 (its sigmoid, group-limited, biased router and its
 * multi-head latent attention run; at TP 2 it is refused, layout.tp named); Qwen3 (head_dim 128 wider than
 * hidden / heads, the QK norm), dense (qwen3-tiny) and at EP 1 (qwen3-30b-a3b), runs too, as does mla-tiny
 * (DeepSeek-V3's multi-head latent attention on dense layers). */
static void test_tacorun_zoo_models(void) {
  static char out[65536];
  const char *runs[] = {"gpt3-125m", "gpt3-350m", "gpt3-1.3b", "gpt3-2.7b", "gpt3-6.7b", "gpt3-13b", "gpt3-175b",
                        "llama3-8b", "llama3-70b", "llama3-405b", "qwen2.5-7b", "qwen2.5-14b", "qwen2.5-32b",
                        "qwen2.5-72b", "mixtral-8x7b", "mixtral-8x22b", "qwen3-tiny", "qwen3-8b", "qwen3-32b",
                        "qwen3-30b-a3b", "mla-tiny", "deepseek-v3"};
  for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
    char name[64], cmd[128];
    snprintf(name, sizeof name, "zoo-%s.json", runs[i]);
    write_plan(name, runs[i], "h200x2-nvlink", "\"dp\": 1, \"tp\": 1, \"pp\": 1", 1);
    snprintf(cmd, sizeof cmd, "execute %s --iters 1", name);
    int rc = tacorun(cmd, out, sizeof out);
    if (rc == 2 || !strstr(out, "no CUDA device")) fprintf(stderr, "\n  %s: %d: %.400s\n", runs[i], rc, out);
    CU_ASSERT_NOT_EQUAL(rc, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "no CUDA device"));
  }
  write_plan("zoo-deepseek-v3-tp2.json", "deepseek-v3", "h200x2-nvlink",
             "\"dp\": 1, \"tp\": 2, \"pp\": 1, \"sequence_parallel\": true", 2);
  int rc = tacorun("execute zoo-deepseek-v3-tp2.json --iters 1", out, sizeof out);
  if (rc != 2 || !strstr(out, "zoo-deepseek-v3-tp2.json: layout.tp: 2")) fprintf(stderr, "\n  deepseek-v3 tp2: %.400s\n", out);
  CU_ASSERT_EQUAL(rc, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "zoo-deepseek-v3-tp2.json: layout.tp: 2"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "NOT IMPLEMENTED here"));
  CU_ASSERT_EQUAL(tacorun("execute --help", out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "Multi-head latent attention"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "the QK norm (model qk_norm"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "DeepSeek-V3's router (model router \"sigmoid\""));
  CU_ASSERT_PTR_NULL(strstr(out, "head_dim other than hidden / heads\n(Qwen3")); /* no longer refused */
}

/* DeepSeek-V3's router fields: a bad value in a model file stops `tacosim plan` with exit 2 naming the file
 * and the field. */
static void test_router_fields_refused(void) {
  static const struct {
    const char *tail, *want;
  } bad[] = {
      {"\"router_num_groups\": 3, \"router_group_topk\": 1", "router_num_groups: 3 does not divide experts 8"},
      {"\"router_num_groups\": 4, \"router_group_topk\": 1", "router_group_topk: 1 groups of 2 experts cannot hold"},
      {"\"router_expert_bias\": true", "router_expert_bias: true needs \"router\": \"sigmoid\""},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char model[600], planf[64], cmd[128], want[700];
    static char out[65536];
    snprintf(model, sizeof model, "%s/router-bad-%zu.json", workdir, i);
    FILE *f = fopen(model, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "{\"schema\": 1, \"name\": \"router-bad-%zu\", \"family\": \"x\", \"layers\": 2, \"hidden\": 256, "
               "\"heads\": 4, \"kv_heads\": 4, \"ffn_hidden\": 512, \"activation\": \"swiglu\", \"norm\": \"rmsnorm\", "
               "\"vocab\": 1000, \"tied_embeddings\": false, \"max_seq\": 4096, \"position\": \"rope\", "
               "\"experts\": 8, \"top_k\": 4, \"expert_ffn_hidden\": 128, %s}\n", i, bad[i].tail);
    fclose(f);
    snprintf(planf, sizeof planf, "router-bad-%zu-plan.json", i);
    write_plan(planf, model, "h200x2-nvlink", "\"dp\": 1, \"tp\": 1, \"pp\": 1", 1);
    snprintf(cmd, sizeof cmd, "plan %s", planf);
    int rc = tacosim(cmd, out, sizeof out);
    snprintf(want, sizeof want, "%s: %s", model, bad[i].want);
    if (rc != 2 || !strstr(out, want)) fprintf(stderr, "\n  %s -> %d: %.400s(expected \"%s\")\n", cmd, rc, out, want);
    CU_ASSERT_EQUAL(rc, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  }
}

/* Issue 20: tacosim search --emit-plans writes plans tacorun execute accepts unchanged, for layouts the
 * executor runs: with --hidden-dropout 0 the plan passes every check before the GPU (here none is
 * visible, so the run stops there: "no CUDA device", not exit 2); with the default 0.1 it is refused,
 * the field named. */
static void test_tacorun_runs_emitted_plans(void) {
  static char out[65536];
  const char *dropout[] = {" --hidden-dropout 0", ""};
  for (int i = 0; i < 2; i++) {
    char args[512];
    snprintf(args, sizeof args,
             "search --model gpt3-1.3b --cluster h200x8-nvswitch --gpus 1 --global-batch 8 --max-micro 2 "
             "--codecs none --simulate 1 --top 1 --jobs 1 --emit-plans emit%d%s",
             i, dropout[i]);
    CU_ASSERT_EQUAL_FATAL(tacosim(args, out, sizeof out), 0);
    snprintf(args, sizeof args, "execute emit%d/01-*.json --iters 1", i);
    int rc = tacorun(args, out, sizeof out);
    if (i == 0 && (rc == 2 || !strstr(out, "no CUDA device"))) fprintf(stderr, "\n  %d: %.400s\n", rc, out);
    if (i == 0) {
      CU_ASSERT_NOT_EQUAL(rc, 2);
      CU_ASSERT_PTR_NOT_NULL(strstr(out, "no CUDA device"));
    } else {
      CU_ASSERT_EQUAL(rc, 2);
      CU_ASSERT_PTR_NOT_NULL(strstr(out, "hidden_dropout: 0.1"));
    }
  }
}
#endif

static void remove_workdir(void) {
  char line[512];
  snprintf(line, sizeof line, "rm -rf '%s'", workdir);
  if (system(line)) fprintf(stderr, "could not remove %s\n", workdir);
}

int main(void) {
  snprintf(workdir, sizeof workdir, "/tmp/tacosim_test_cli_XXXXXX");
  if (!mkdtemp(workdir)) return 1;
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("cli", NULL, NULL);
  CU_add_test(s, "tacosim: every command answers --help and -h, exit 0", test_every_command_has_help);
  CU_add_test(s, "tacosim: each option a parser accepts is in its --help, and back", test_help_lists_every_option);
  CU_add_test(s, "an unknown model name lists the zoo's names", test_unknown_model_lists_names);
  CU_add_test(s, "search: no layout fits names the least memory a layout needs (exit 2)", test_search_least_memory);
  CU_add_test(s, "tacosim ops on an inference plan: prefill and decode ops sum to TTFT and TPOT",
              test_ops_inference_plan);
  CU_add_test(s, "a directory or a file over the cap, given to any loader: named, exit 2",
              test_directories_and_big_files_named);
  CU_add_test(s, "what tacosim simulate --json writes, tacosim compare reads", test_written_results_load);
  CU_add_test(s, "alloc_reserve and --alloc-reserve: stated, recorded, out of range refused (exit 2)", test_alloc_reserve);
#ifdef TACORUN_BIN
  CU_add_test(s, "tacorun: every command's --help without a GPU lists its options", test_tacorun_help);
  CU_add_test(s, "tacorun train refuses --dump-at past the last step (exit 2)", test_tacorun_train_dump_past_end);
  CU_add_test(s, "tacorun calibrate refuses --coll-groups outside powers of two in 32..512 (exit 2)",
              test_tacorun_calibrate_coll_groups);
  CU_add_test(s, "tacorun calibrate --only knows gemm_fp8, refuses an unknown phase (exit 2)",
              test_tacorun_calibrate_only_fp8);
  CU_add_test(s, "tacorun execute --peak-gbps: a rate > 0, else exit 2 before any GPU", test_tacorun_peak_gbps);
  CU_add_test(s, "tacorun bench-decode-step: refusals exit 2 naming the option or the model before any GPU",
              test_tacorun_decode_step);
  CU_add_test(s, "tacorun execute: dense Qwen3 inference plans (wide heads, the QK norm) pass every check before the GPU",
              test_tacorun_infer_qwen3);
  CU_add_test(s, "tacorun execute refuses context_parallel_size > 1 (exit 2, the field named)", test_tacorun_refuses_cp);
  CU_add_test(s, "tacorun execute refuses ZeRO-2/3; the DP overlap switches run from the program only (exit 2)",
              test_tacorun_zero_refusals);
  CU_add_test(s, "tacorun execute refuses tp_comm_overlap and uneven stages with vpp > 1 (exit 2, the field named)",
              test_tacorun_tpo_uneven_refusals);
  CU_add_test(s, "tacorun execute: MoE layouts it does not run refused (exit 2, the field named)", test_tacorun_moe_refusals);
  CU_add_test(s, "tacorun execute refuses hidden_dropout > 0 (exit 2, the field named)",
              test_tacorun_refuses_hidden_dropout);
  CU_add_test(s, "tacorun execute accepts the plans tacosim search --hidden-dropout 0 emits",
              test_tacorun_runs_emitted_plans);
  CU_add_test(s, "tacorun execute: every zoo model as published passes its checks up to the GPU; DeepSeek-V3's MLA "
                 "refused",
              test_tacorun_zoo_models);
  CU_add_test(s, "DeepSeek-V3 router fields: bad values exit 2 naming the file and the field",
              test_router_fields_refused);
#endif
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  remove_workdir();
  return failed ? 1 : 0;
}
