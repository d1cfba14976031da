/* rt_idmsg.h — what rank 0 hands the other ranks before NCCL exists: the
 * communicator's unique id, or why it has none.
 *
 * Rank 0 calls ncclGetUniqueId; when that fails, the other ranks must not be
 * left waiting for an id that never comes (in MPI_Bcast, or polling the id
 * file until their timeout). So the message carries rank 0's status: every
 * rank receives it, and a failed one ends each rank at once with rank 0's
 * reason. Plain C (the id is opaque bytes), tested on the CPU. */
#ifndef RT_IDMSG_H
#define RT_IDMSG_H

#include "ts_error.h"

#define RT_ID_BYTES 128 /* NCCL_UNIQUE_ID_BYTES */

typedef struct {
  int status;        /* 0: id is valid; else rank 0 could not create one */
  char reason[252];  /* rank 0's error when status != 0 */
  unsigned char id[RT_ID_BYTES];
} rt_id_msg;

void rt_id_msg_ok(rt_id_msg *m, const void *id);
void rt_id_msg_fail(rt_id_msg *m, const char *reason);
/* 0 with the id copied out, or -1: "rank 0 could not create the NCCL id: REASON". */
int rt_id_msg_take(const rt_id_msg *m, void *id, ts_err *e);
/* The message through a file (id-file launch): written whole under a temporary
 * name, then renamed; the reader polls until it is there or timeout_s passes. */
int rt_id_file_write(const char *path, const rt_id_msg *m, ts_err *e);
int rt_id_file_read(const char *path, double timeout_s, rt_id_msg *m, ts_err *e);

#endif
