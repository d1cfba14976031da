/* rt_world.h — what every multi-rank command does with the world besides its
 * collectives: sub-communicators, small host reductions, and the result
 * schema's record of the machine and the knobs a run used. Shared by the
 * training executor, inference, calibration and the loss runs. */
#ifndef RT_WORLD_H
#define RT_WORLD_H

#include "result.h"
#include "rt_nccl.h"

/* The world of a command that drives one GPU per process (`tacorun CMD`): the
 * communicator (MPI or id file; rt_nccl_init), bounded by timeout_s, with one
 * local GPU, over the transport asked for (--transport). Returns 0, or the
 * exit status with the reason printed as "tacorun CMD: ..." (1: no
 * communicator; 2: single-process mode took several GPUs, or the transport
 * asked for is impossible). */
int rt_world_start(rt_nccl *w, const char *cmd, double timeout_s, coll_transport transport);
/* Sub-communicators of the world: ranks with the same color, ordered by key
 * (registered with w, so waits poll them and a failure aborts them). */
int rt_world_split(rt_nccl *w, int color, int key, ncclComm_t *out, ts_err *e);
/* Element-wise max / sum of doubles over all ranks (MPI, else NCCL on the world), in place. */
int rt_world_max(rt_nccl *w, double *vals, int n, ts_err *e);
int rt_world_sum(rt_nccl *w, double *vals, int n, ts_err *e);
/* The result schema's machine block (GPU, driver, CUDA, NCCL, transport) of this run. */
void rt_machine_of(const rt_nccl *w, schema_machine *mc);
/* Adds the note "environment: NAME=value ..." (every NCCL_*, EXEC_*
 * variable set, common/ts_env.h), so a result says which knobs it ran with. */
void rt_note_env(schema_result *r);
/* Adds the note "transport: asked A, decided D (peer access between every pair:
 * yes/no, one host: yes/no)" (--transport; machine.transport holds D's name). */
void rt_note_transport(schema_result *r, const rt_nccl *w);

#endif
