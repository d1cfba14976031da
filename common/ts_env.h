/* ts_env.h — the environment variables that steered a run, for its record.
 *
 * Result and calibration files record every variable a run read that can
 * change what it measured (ARCHITECTURE.md, "Environment variables"): NCCL's
 * own (NCCL_*) and the executor's (EXEC_*); the kernels and collectives read
 * none (their variants are options). The launch variables
 * (TACORUN_ID_FILE, TACORUN_RANK, ..., OMPI_*) and the zoo paths
 * (TACOSIM_*) are not options and are left out. */
#ifndef TS_ENV_H
#define TS_ENV_H

#include <stddef.h>

/* 1 when NAME is one of the recorded families above. */
int ts_env_is_knob(const char *name);

/* Writes " NAME=value" for every recorded variable set in the environment,
 * sorted by name, into buf (always terminated; a value is cut at 64
 * characters, the list at n - 1 with "..." at its end). Returns how many
 * variables are set (0: buf is ""). */
int ts_env_knobs(char *buf, size_t n);

#endif
