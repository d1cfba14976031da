/* ts_env.c — the environment variables that steered a run (ts_env.h). */
#include "ts_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

static const char *const knob_prefixes[] = {"NCCL_", "EXEC_"};

int ts_env_is_knob(const char *name) {
  for (size_t i = 0; i < sizeof knob_prefixes / sizeof *knob_prefixes; i++)
    if (!strncmp(name, knob_prefixes[i], strlen(knob_prefixes[i]))) return 1;
  return 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

int ts_env_knobs(char *buf, size_t n) {
  if (n) buf[0] = '\0';
  size_t count = 0;
  for (char **v = environ; v && *v; v++)
    if (ts_env_is_knob(*v) && strchr(*v, '=')) count++;
  if (!count) return 0;
  const char **set = malloc(count * sizeof *set);
  if (!set) {
    if (n) snprintf(buf, n, " (out of memory)");
    return (int)count;
  }
  size_t k = 0;
  for (char **v = environ; v && *v && k < count; v++)
    if (ts_env_is_knob(*v) && strchr(*v, '=')) set[k++] = *v;
  qsort(set, k, sizeof *set, by_name);
  size_t len = 0;
  for (size_t i = 0; i < k && n; i++) {
    const char *eq = strchr(set[i], '=');
    char one[256];
    snprintf(one, sizeof one, " %.*s=%.64s", (int)(eq - set[i] < 120 ? eq - set[i] : 120), set[i], eq + 1);
    if (len + strlen(one) + 4 > n) { /* no room: say that the list was cut */
      snprintf(buf + len, n - len, "%s", n - len > 4 ? " ..." : "");
      break;
    }
    memcpy(buf + len, one, strlen(one) + 1);
    len += strlen(one);
  }
  free(set);
  return (int)k;
}
