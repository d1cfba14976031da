/* coll_transport.h — which transport a run's ranks use, decided in one place
 * from what CUDA reports, never from NCCL's environment variables.
 *
 * The request (`--transport auto|p2p|shm|socket` of the tacorun commands):
 *   auto    p2p where every rank is on one host and every pair of their GPUs
 *           can access each other's memory (cudaDeviceCanAccessPeer), else shm
 *           where they share a host, else socket;
 *   p2p     GPU peer access (NVLink or PCIe peer-to-peer): refused unless
 *           every pair has it on one host;
 *   shm     pinned host memory shared by the processes of one host: refused
 *           unless the ranks share a host;
 *   socket  the network stack (always possible).
 * The runtime (runtime/nccl/rt_nccl.c) gathers the facts, decides here, gives
 * NCCL the matching restriction for shm and socket (for auto and p2p NCCL
 * chooses as it always does), tells the compressed collectives' direct paths
 * what they may use (coll_set_links) and records the decision.
 *
 * Plain C, no CUDA: the decision is tested on the CPU (tests/test_coll_layout.c). */
#ifndef COLL_TRANSPORT_H
#define COLL_TRANSPORT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { COLL_TRANSPORT_AUTO = 0, COLL_TRANSPORT_P2P, COLL_TRANSPORT_SHM, COLL_TRANSPORT_SOCKET } coll_transport;

/* What the run's ranks have, gathered by the runtime. */
typedef struct {
  int nranks;
  int same_host;   /* every rank on one host */
  int peer_all;    /* every pair of the ranks' GPUs can access each other's memory */
  int peer_nvlink; /* that access goes over NVLink (native atomics between the GPUs), not PCIe */
  int no_peer_a, no_peer_b; /* a pair of ranks without peer access (when !peer_all and known), else -1 */
} coll_transport_facts;

/* "auto", "p2p", "shm", "socket"; NULL for a value out of range. */
const char *coll_transport_name(coll_transport t);
/* 0 and *t, or -1 for a name that is none of the four. */
int coll_transport_parse(const char *s, coll_transport *t);
/* The resolved transport (not AUTO) of the request under the facts in *out;
 * -1 when the request is impossible, with the reason in why (n bytes). */
int coll_transport_decide(coll_transport req, const coll_transport_facts *f, coll_transport *out, char *why, size_t n);
/* The name result and calibration files record (the simulator's intra-node
 * vocabulary, sim_transport_of): p2p -> "nvlink" or "pcie", "shm", "socket";
 * "none" for a single rank. */
const char *coll_transport_record(coll_transport resolved, const coll_transport_facts *f);
/* What the direct paths of the compressed collectives may use under a
 * resolved transport: GPU peer access (p2p only) and shared host memory (not
 * over sockets). */
void coll_transport_links(coll_transport resolved, int *peer, int *host_shm);

#ifdef __cplusplus
}
#endif
#endif
