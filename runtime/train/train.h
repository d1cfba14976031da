/* train.h — `tacorun train` (train_cmd.c): loss runs of a small byte-level GPT
 * with and without compression (argv[0] is "train"; returns the exit status). */
#ifndef TRAIN_H
#define TRAIN_H

int cmd_train(int argc, char **argv);

#endif
