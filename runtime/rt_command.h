/* rt_command.h — subcommands of `tacorun`.
 *
 * Each subcommand lives in its own file and registers itself with
 * RT_COMMAND(name, function, one-line help), so adding a command touches no
 * shared table. tacorun.c dispatches on argv[1]. */
#ifndef RT_COMMAND_H
#define RT_COMMAND_H

typedef int (*rt_command_fn)(int argc, char **argv); /* argv[0] is the subcommand name */

void rt_command_register(const char *name, rt_command_fn fn, const char *help);

#define RT_COMMAND(name, fn, help)                                              \
  __attribute__((constructor)) static void rt_register_##fn(void) {             \
    rt_command_register(name, fn, help);                                        \
  }

#endif
