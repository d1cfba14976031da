/* test_zoo_names.h — the names of a zoo folder's entries (NAME.json in dir),
 * sorted: what the tests that loop over every shipped model or cluster share. */
#ifndef TEST_ZOO_NAMES_H
#define TEST_ZOO_NAMES_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fills names[0..] (at most cap) and returns their count (0: no such folder). */
static inline int test_zoo_names(const char *dir, char names[][128], int cap) {
  DIR *d = opendir(dir);
  int n = 0;
  if (!d) return 0;
  for (struct dirent *de; (de = readdir(d)) && n < cap;) {
    size_t len = strlen(de->d_name);
    if (len <= 5 || de->d_name[0] == '.' || strcmp(de->d_name + len - 5, ".json")) continue;
    snprintf(names[n], 128, "%.*s", (int)(len - 5), de->d_name);
    n++;
  }
  closedir(d);
  qsort(names, (size_t)n, 128, (int (*)(const void *, const void *))strcmp);
  return n;
}

#endif
