/* model_load.c — reads a model file strictly: every field is checked for
 * presence, type and range, then the fields are checked against each other,
 * so that nothing downstream ever divides by zero or builds a torn shape. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model.h"
#include "ts_json.h"

#ifndef TACOSIM_MODELS_DIR
#define TACOSIM_MODELS_DIR "models"
#endif

/* The environment's TACOSIM_MODELS_DIR first: binaries copied to a machine
 * without the source tree they were built from read the zoo from there. */
const char *model_zoo_dir(void) {
  const char *env = getenv("TACOSIM_MODELS_DIR");
  return env && *env ? env : TACOSIM_MODELS_DIR;
}

static const char *const activation_names[] = {"gelu", "swiglu", NULL};
static const char *const norm_names[] = {"layernorm", "rmsnorm", NULL};
static const char *const position_names[] = {"learned", "rope", NULL};

/* Every key a model file may hold; anything else is a typo worth reporting. */
static const char *const known_keys[] = {
    "schema", "name",     "family",          "layers",  "hidden",    "heads",     "kv_heads",
    "ffn_hidden", "activation", "norm",      "vocab",   "tied_embeddings", "max_seq", "position",
    "qkv_bias", "linear_bias", "rope_theta", "rope_scaling", "norm_eps", "source",
    /* added: explicit head dimension, mixture of experts, multi-head latent attention */
    "head_dim", "experts", "top_k", "expert_ffn_hidden", "shared_experts", "dense_layers", "router", "attention",
    "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
    /* added: Qwen3's RMSNorm of every query and key head */
    "qk_norm",
    /* added: DeepSeek-V3's router (group-limited top-k, scaling, the balancing bias) */
    "router_num_groups", "router_group_topk", "router_topk_scaling_factor", "router_expert_bias",
    "router_bias_update_rate", NULL};
static const char *const rope_scaling_keys[] = {"rope_type", "factor", "low_freq_factor", "high_freq_factor",
                                                "original_max_position_embeddings", NULL};

/* Upper bounds: far above any published model, low enough that every product
 * of shapes stays exact in a long long and finite in a double. */
enum {
  MAX_LAYERS = 4096,
  MAX_HIDDEN = 262144,
  MAX_FFN = 4 * MAX_HIDDEN,
  MAX_VOCAB = 16777216,
  MAX_SEQ = 16777216,
};

static int check_unknown_keys(json_t *root, const char *file, ts_err *e) {
  const char *key;
  json_t *value;
  json_object_foreach(root, key, value) {
    (void)value;
    int known = 0;
    for (int i = 0; known_keys[i]; i++) known |= strcmp(key, known_keys[i]) == 0;
    if (!known) return ts_fail(e, file, key, "unknown field (a typo?)");
  }
  return 0;
}

/* Names end up in file names and reports: keep them to [A-Za-z0-9._-]. */
static int check_identifier(const char *s, const char *file, const char *field, ts_err *e) {
  for (const char *c = s; *c; c++) {
    int ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '.' ||
             *c == '_' || *c == '-';
    if (!ok) return ts_fail(e, file, field, "\"%s\": only letters, digits, '.', '_' and '-' are allowed", s);
  }
  return 0;
}

static const char *const router_names[] = {"softmax", "sigmoid", NULL};
static const char *const attention_names[] = {"gqa", "mla", NULL};

/* DeepSeek-V3's router fields (Megatron-LM: --moe-router-num-groups, --moe-router-group-topk,
 * --moe-router-topk-scaling-factor, --moe-router-enable-expert-bias, --moe-router-bias-update-rate), read
 * once "experts" and "top_k" are. A group's score is the sum of its top_k / group_topk best scores
 * (Megatron-Core's group_limited_topk), so group_topk may not exceed top_k, nor that count a group's size. */
static int read_router_fields(json_t *root, const char *file, model_config *m, ts_err *e) {
  long long v;
  if (tsj_int_opt(root, "router_num_groups", 1, m->experts, 0, &v, file, NULL, e)) return -1;
  m->router_num_groups = (int)v;
  if (m->router_num_groups > 0 && m->experts % m->router_num_groups)
    return ts_fail(e, file, "router_num_groups", "%d does not divide experts %d", m->router_num_groups, m->experts);
  if (!m->router_num_groups && json_object_get(root, "router_group_topk"))
    return ts_fail(e, file, "router_group_topk", "only meaningful with \"router_num_groups\"");
  if (m->router_num_groups) {
    if (tsj_int(root, "router_group_topk", 1, m->router_num_groups, &v, file, NULL, e)) return -1;
    m->router_group_topk = (int)v;
    const int per_group = m->experts / m->router_num_groups, n = m->top_k / m->router_group_topk;
    if (n < 1)
      return ts_fail(e, file, "router_group_topk", "%d exceeds top_k %d (a group's score sums its top top_k / "
                     "router_group_topk experts)", m->router_group_topk, m->top_k);
    if (n > per_group || (long long)m->router_group_topk * per_group < m->top_k)
      return ts_fail(e, file, "router_group_topk", "%d groups of %d experts cannot hold top_k %d", m->router_group_topk,
                     per_group, m->top_k);
  }
  if (tsj_real_opt(root, "router_topk_scaling_factor", 1e-3, 1e3, 1.0, &m->router_topk_scaling_factor, file, NULL, e))
    return -1;
  if (tsj_bool_opt(root, "router_expert_bias", false, &m->router_expert_bias, file, NULL, e)) return -1;
  if (m->router_expert_bias && m->router != MODEL_ROUTER_SIGMOID)
    return ts_fail(e, file, "router_expert_bias", "true needs \"router\": \"sigmoid\" (the balancing bias is "
                   "added to sigmoid scores, as DeepSeek-V3 and Megatron-LM have it)");
  if (!m->router_expert_bias && json_object_get(root, "router_bias_update_rate"))
    return ts_fail(e, file, "router_bias_update_rate", "only meaningful with \"router_expert_bias\": true");
  /* 1e-3: Megatron-LM's default and DeepSeek-V3's gamma for its first 14.3T tokens (arXiv 2412.19437, 4.2) */
  return tsj_real_opt(root, "router_bias_update_rate", 0.0, 1.0, 1e-3, &m->router_bias_update_rate, file, NULL, e);
}

/* Mixture-of-experts and MLA fields (all optional; absent: a dense GQA
 * model). A field that only means something with another one present is
 * refused without it, so a half-written MoE file does not load as dense. */
static int read_moe_fields(json_t *root, const char *file, model_config *m, ts_err *e) {
  long long v;
  int idx;
  if (tsj_int_opt(root, "head_dim", 1, MAX_HIDDEN, 0, &v, file, NULL, e)) return -1;
  m->head_dim_override = (int)v;
  if (tsj_int_opt(root, "experts", 0, 65536, 0, &v, file, NULL, e)) return -1;
  m->experts = (int)v;
  static const char *const moe_only[] = {"top_k", "expert_ffn_hidden", "shared_experts", "dense_layers", "router",
                                         "router_num_groups", "router_group_topk", "router_topk_scaling_factor",
                                         "router_expert_bias", "router_bias_update_rate", NULL};
  if (!m->experts) {
    for (int i = 0; moe_only[i]; i++)
      if (json_object_get(root, moe_only[i]))
        return ts_fail(e, file, moe_only[i], "only meaningful with \"experts\" >= 1");
  } else {
    if (tsj_int(root, "top_k", 1, m->experts, &v, file, NULL, e)) return -1;
    m->top_k = (int)v;
    if (tsj_int(root, "expert_ffn_hidden", 1, MAX_FFN, &v, file, NULL, e)) return -1;
    m->expert_ffn_hidden = (int)v;
    if (tsj_int_opt(root, "shared_experts", 0, 64, 0, &v, file, NULL, e)) return -1;
    m->shared_experts = (int)v;
    if (tsj_int_opt(root, "dense_layers", 0, m->layers - 1, 0, &v, file, NULL, e)) return -1;
    m->dense_layers = (int)v;
    if (tsj_enum_opt(root, "router", router_names, MODEL_ROUTER_SOFTMAX, &idx, file, NULL, e)) return -1;
    m->router = (model_router)idx;
    if (read_router_fields(root, file, m, e)) return -1;
  }
  if (tsj_enum_opt(root, "attention", attention_names, MODEL_ATTN_GQA, &idx, file, NULL, e)) return -1;
  m->attention = (model_attention)idx;
  static const char *const mla_keys[] = {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                                         "v_head_dim", NULL};
  int *mla_vals[] = {&m->q_lora_rank, &m->kv_lora_rank, &m->qk_nope_head_dim, &m->qk_rope_head_dim, &m->v_head_dim};
  for (int i = 0; mla_keys[i]; i++) {
    if (m->attention != MODEL_ATTN_MLA) {
      if (json_object_get(root, mla_keys[i]))
        return ts_fail(e, file, mla_keys[i], "only meaningful with \"attention\": \"mla\"");
      continue;
    }
    if (tsj_int(root, mla_keys[i], 1, MAX_HIDDEN, &v, file, NULL, e)) return -1;
    *mla_vals[i] = (int)v;
  }
  if (m->attention == MODEL_ATTN_MLA && json_object_get(root, "head_dim"))
    return ts_fail(e, file, "head_dim", "an MLA model's head dimensions are qk_nope_head_dim + qk_rope_head_dim "
                   "(queries, keys) and v_head_dim (values)");
  return 0;
}

static int read_fields(json_t *root, const char *file, model_config *m, ts_err *e) {
  long long v;
  int idx;
  char source[2048];
  if (tsj_schema(root, 1, file, e)) return -1;
  if (check_unknown_keys(root, file, e)) return -1;
  if (tsj_string(root, "name", m->name, sizeof m->name, file, NULL, e)) return -1;
  if (check_identifier(m->name, file, "name", e)) return -1;
  if (tsj_string(root, "family", m->family, sizeof m->family, file, NULL, e)) return -1;
  if (check_identifier(m->family, file, "family", e)) return -1;
  if (tsj_string_opt(root, "source", "", source, sizeof source, file, NULL, e)) return -1;

  if (tsj_int(root, "layers", 1, MAX_LAYERS, &v, file, NULL, e)) return -1;
  m->layers = (int)v;
  if (tsj_int(root, "hidden", 1, MAX_HIDDEN, &v, file, NULL, e)) return -1;
  m->hidden = (int)v;
  if (tsj_int(root, "heads", 1, m->hidden, &v, file, NULL, e)) return -1;
  m->heads = (int)v;
  if (m->hidden % m->heads) /* before kv_heads, whose range depends on heads */
    return ts_fail(e, file, "heads", "%d does not divide hidden %d", m->heads, m->hidden);
  if (tsj_int(root, "kv_heads", 1, m->heads, &v, file, NULL, e)) return -1;
  m->kv_heads = (int)v;
  if (tsj_int(root, "ffn_hidden", 1, MAX_FFN, &v, file, NULL, e)) return -1;
  m->ffn_hidden = (int)v;
  if (tsj_int(root, "vocab", 1, MAX_VOCAB, &v, file, NULL, e)) return -1;
  m->vocab = (int)v;
  if (tsj_int(root, "max_seq", 1, MAX_SEQ, &v, file, NULL, e)) return -1;
  m->max_seq = (int)v;

  if (tsj_enum(root, "activation", activation_names, &idx, file, NULL, e)) return -1;
  m->activation = (model_activation)idx;
  if (tsj_enum(root, "norm", norm_names, &idx, file, NULL, e)) return -1;
  m->norm = (model_norm)idx;
  if (tsj_enum(root, "position", position_names, &idx, file, NULL, e)) return -1;
  m->position = (model_position)idx;
  if (tsj_bool(root, "tied_embeddings", &m->tied_embeddings, file, NULL, e)) return -1;
  if (tsj_bool_opt(root, "linear_bias", false, &m->linear_bias, file, NULL, e)) return -1;
  if (tsj_bool_opt(root, "qkv_bias", m->linear_bias, &m->qkv_bias, file, NULL, e)) return -1;
  if (tsj_bool_opt(root, "qk_norm", false, &m->qk_norm, file, NULL, e)) return -1;

  if (read_moe_fields(root, file, m, e)) return -1;

  double dflt_theta = m->position == MODEL_POS_ROPE ? 10000.0 : 0.0;
  if (tsj_real_opt(root, "rope_theta", 1.0, 1e12, dflt_theta, &m->rope_theta, file, NULL, e)) return -1;
  if (tsj_real_opt(root, "norm_eps", 1e-12, 0.1, 1e-5, &m->norm_eps, file, NULL, e)) return -1;
  return 0;
}

/* Optional "rope_scaling" (Hugging Face's rope_scaling of Llama 3.1): only
 * rope_type "llama3" (long wavelengths slowed by factor, short ones kept, a
 * ramp between low_freq_factor and high_freq_factor of the original context). */
static int load_rope_scaling(json_t *root, const char *file, model_config *m, ts_err *e) {
  bool failed = false;
  json_t *o = tsj_object_opt(root, "rope_scaling", file, NULL, e, &failed);
  if (failed) return -1;
  if (!o) return 0;
  if (m->position != MODEL_POS_ROPE) return ts_fail(e, file, "rope_scaling", "only meaningful with \"position\": \"rope\"");
  const char *key;
  json_t *v;
  json_object_foreach(o, key, v) {
    int known = 0;
    for (int i = 0; rope_scaling_keys[i]; i++) known |= strcmp(key, rope_scaling_keys[i]) == 0;
    if (!known) {
      char f[96];
      snprintf(f, sizeof f, "rope_scaling.%.60s", key);
      return ts_fail(e, file, f, "unknown field (a typo?)");
    }
  }
  char type[32];
  if (tsj_string(o, "rope_type", type, sizeof type, file, "rope_scaling", e)) return -1;
  if (strcmp(type, "llama3") != 0)
    return ts_fail(e, file, "rope_scaling.rope_type", "\"%s\": only \"llama3\" (Llama 3.1's frequency scaling) is known",
                   type);
  long long orig;
  if (tsj_real(o, "factor", 1.0, 1e6, &m->rope_factor, file, "rope_scaling", e) ||
      tsj_real(o, "low_freq_factor", 1e-6, 1e6, &m->rope_low_freq, file, "rope_scaling", e) ||
      tsj_real(o, "high_freq_factor", 1e-6, 1e6, &m->rope_high_freq, file, "rope_scaling", e) ||
      tsj_int(o, "original_max_position_embeddings", 1, m->max_seq, &orig, file, "rope_scaling", e))
    return -1;
  if (!(m->rope_high_freq > m->rope_low_freq))
    return ts_fail(e, file, "rope_scaling.high_freq_factor", "%g must exceed low_freq_factor %g", m->rope_high_freq,
                   m->rope_low_freq);
  m->rope_orig_max = (int)orig;
  return 0;
}

/* Rules that tie fields together. */
static int check_consistency(json_t *root, const char *file, const model_config *m, ts_err *e) {
  if (m->heads % m->kv_heads)
    return ts_fail(e, file, "kv_heads", "%d does not divide heads %d", m->kv_heads, m->heads);
  if (m->attention == MODEL_ATTN_MLA && m->kv_heads != m->heads)
    return ts_fail(e, file, "kv_heads", "%d: multi-head latent attention has one key/value head per query head (%d)",
                   m->kv_heads, m->heads);
  if (m->attention == MODEL_ATTN_MLA && m->position == MODEL_POS_ROPE && m->qk_rope_head_dim % 2)
    return ts_fail(e, file, "qk_rope_head_dim", "%d: rope needs an even dimension", m->qk_rope_head_dim);
  if (m->position == MODEL_POS_ROPE && m->attention != MODEL_ATTN_MLA && model_head_dim(m) % 2)
    return ts_fail(e, file, "position", "rope needs an even head dimension (hidden/heads = %d)", model_head_dim(m));
  if (m->position != MODEL_POS_ROPE && json_object_get(root, "rope_theta"))
    return ts_fail(e, file, "rope_theta", "only meaningful with \"position\": \"rope\"");
  if (m->qk_norm && m->attention == MODEL_ATTN_MLA)
    return ts_fail(e, file, "qk_norm", "true: multi-head latent attention has its own norms (of the compressed Q "
                   "and KV), not one per query and key head");
  if (m->qk_norm && m->norm != MODEL_NORM_RMSNORM)
    return ts_fail(e, file, "qk_norm", "true needs \"norm\": \"rmsnorm\" (the QK norm is an RMSNorm, as Qwen3's; "
                   "a LayerNorm over each head is not modelled)");
  if (m->linear_bias && !m->qkv_bias)
    return ts_fail(e, file, "qkv_bias", "false contradicts \"linear_bias\": true (every linear layer has a bias)");
  return 0;
}

int model_from_json_text(const char *text, unsigned long len, const char *what, model_config *m, ts_err *e) {
  const char *file = what && *what ? what : "<model>";
  if (!text) return ts_fail(e, file, NULL, "no text");
  memset(m, 0, sizeof *m);
  json_t *root = tsj_load_string(text, (size_t)len, file, e);
  if (!root) return -1;
  int rc = read_fields(root, file, m, e);
  if (!rc) rc = check_consistency(root, file, m, e);
  if (!rc) rc = load_rope_scaling(root, file, m, e);
  json_decref(root);
  return rc;
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* "a, b, c": the names of the zoo's model files (NAME.json), sorted; "none"
 * when the folder has none or cannot be read. */
static void zoo_names(const char *dir, char *out, size_t cap) {
  snprintf(out, cap, "none");
  DIR *d = opendir(dir);
  if (!d) return;
  char **names = NULL;
  size_t n = 0, room = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    size_t len = strlen(de->d_name);
    if (len <= 5 || de->d_name[0] == '.' || strcmp(de->d_name + len - 5, ".json")) continue;
    if (n == room) {
      char **p = realloc(names, (room = room ? 2 * room : 32) * sizeof *names);
      if (!p) break;
      names = p;
    }
    if (!(names[n] = strndup(de->d_name, len - 5))) break;
    n++;
  }
  closedir(d);
  if (n) qsort(names, n, sizeof *names, cmp_name);
  size_t used = 0;
  for (size_t i = 0; i < n; i++) {
    int w = snprintf(out + used, cap - used, "%s%s", i ? ", " : "", names[i]);
    if (w < 0 || (size_t)w >= cap - used) {
      if (cap > 4) snprintf(out + cap - 4, 4, "...");
      break;
    }
    used += (size_t)w;
  }
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
}

int model_load(const char *name_or_path, const char *models_dir, model_config *m, ts_err *e) {
  if (!name_or_path || !*name_or_path) return ts_fail(e, NULL, "model", "no model name or path given");
  char path[4096];
  size_t n = strlen(name_or_path);
  int is_path = strchr(name_or_path, '/') || (n > 5 && strcmp(name_or_path + n - 5, ".json") == 0);
  const char *dir = models_dir && *models_dir ? models_dir : model_zoo_dir();
  if (is_path) {
    if (n >= sizeof path) return ts_fail(e, NULL, "model", "path is too long (%zu characters)", n);
    memcpy(path, name_or_path, n + 1);
  } else {
    if (check_identifier(name_or_path, NULL, "model", e)) return -1;
    int w = snprintf(path, sizeof path, "%s/%s.json", dir, name_or_path);
    if (w < 0 || (size_t)w >= sizeof path) return ts_fail(e, NULL, "model", "path is too long");
  }
  if (!is_path && access(path, F_OK) && errno == ENOENT) { /* say which zoo was searched and what it holds */
    char names[768];
    zoo_names(dir, names, sizeof names);
    return ts_fail(e, path, NULL, "no model named \"%s\" in the zoo %s; it has: %s", name_or_path, dir, names);
  }
  memset(m, 0, sizeof *m);
  json_t *root = tsj_load_file(path, e);
  if (!root) return -1;
  int rc = read_fields(root, path, m, e);
  if (!rc) rc = check_consistency(root, path, m, e);
  if (!rc) rc = load_rope_scaling(root, path, m, e);
  json_decref(root);
  return rc;
}
