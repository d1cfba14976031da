/* dev_proj_opts.c — the decode-projection drivers' options (dev_proj_opts.h). */
#include "dev_proj_opts.h"

#include <stdio.h>
#include <string.h>

#include "ts_args.h"
#include "ts_error.h"

void dev_proj_layer(const model_config *mc, dev_proj out[DEV_PROJ_LAYER], size_t *wmax_bytes) {
  const long long h = mc->hidden, d = model_head_dim(mc);
  out[0] = (dev_proj){"qkv", (mc->heads + 2LL * mc->kv_heads) * d, h};
  out[1] = (dev_proj){"attn_out", h, (long long)mc->heads * d};
  out[2] = (dev_proj){"fc1", 2LL * mc->ffn_hidden, h};
  out[3] = (dev_proj){"fc2", h, mc->ffn_hidden};
  *wmax_bytes = 0;
  for (int p = 0; p < DEV_PROJ_LAYER; p++)
    if ((size_t)out[p].n * out[p].k * 2 > *wmax_bytes) *wmax_bytes = (size_t)out[p].n * out[p].k * 2;
}

int dev_proj_opts_parse(int argc, char **argv, const char *prog, const char *batches_default, int max_m,
                        dev_proj_opts *o) {
  const char *model = "llama3-8b", *batches_s = batches_default;
  memset(o, 0, sizeof *o);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--check")) o->check_only = 1;
    else if (!strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
    else if (!strcmp(argv[i], "--batches") && i + 1 < argc) batches_s = argv[++i];
    else {
      const int help = ts_arg_is_help(argv[i]);
      if (!help) fprintf(stderr, "%s: unknown option or missing value: %s\n", prog, argv[i]);
      fprintf(help ? stdout : stderr,
              "usage: %s [--model NAME (llama3-8b)] [--batches LIST (%s; at most %d)] [--check (checks only)]\n",
              prog, batches_default, max_m);
      return help ? 0 : 2;
    }
  }
  o->nb = ts_arg_ll_list(batches_s, 1, max_m, o->batches, DEV_PROJ_MAX_BATCHES);
  if (o->nb < 1) {
    fprintf(stderr, "%s: --batches: comma-separated integers in [1, %d]\n", prog, max_m);
    return 2;
  }
  ts_err e = {{0}, 0};
  if (model_load(model, NULL, &o->mc, &e)) {
    fprintf(stderr, "%s: %s\n", prog, e.msg);
    return ts_exit_status(&e);
  }
  return -1;
}
