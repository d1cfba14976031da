/* search_cli — `tacosim search` as a program of its own (argv[0] is replaced
 * by "search", as tacosim's dispatch passes it). */
#include "search.h"

int main(int argc, char **argv) {
  char name[] = "search";
  argv[0] = name;
  return sim_search_main(argc, argv);
}
