/* tacorun — the GPU half of tacosim: benchmarks, calibration, plan execution. */
#include <stdio.h>
#include <string.h>

#include "rt_command.h"

#define RT_MAX_COMMANDS 32

static struct {
  const char *name, *help;
  rt_command_fn fn;
} commands[RT_MAX_COMMANDS];
static int command_count;

void rt_command_register(const char *name, rt_command_fn fn, const char *help) {
  if (command_count < RT_MAX_COMMANDS) {
    commands[command_count].name = name;
    commands[command_count].fn = fn;
    commands[command_count].help = help;
    command_count++;
  }
}

static void usage(FILE *out) {
  fprintf(out, "usage: tacorun COMMAND [options]   (COMMAND --help for its options)\n\ncommands:\n");
  for (int i = 0; i < command_count; i++) fprintf(out, "  %-17s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  for (int i = 0; i < command_count; i++)
    if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "tacorun: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
