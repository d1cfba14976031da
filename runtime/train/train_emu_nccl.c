/* train_emu_nccl.c — ncclAllReduce as tacorun sees it: the emulated TP
 * communicators of `tacorun train --tp-emulate` (train_emu.h) reduce on one
 * GPU; every other communicator goes to NCCL's own implementation through its
 * profiling interface (pncclAllReduce), unchanged. */
#include <nccl.h>

#include "train_emu.h"

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  int mine;
  ncclResult_t r = train_emu_nccl_allreduce(sendbuff, recvbuff, count, datatype, op, comm, stream, &mine);
  return mine ? r : pncclAllReduce(sendbuff, recvbuff, count, datatype, op, comm, stream);
}
