/* coll_transport.c — the transport decision (coll_transport.h). */
#include "coll_transport.h"

#include <stdio.h>
#include <string.h>

static const char *const names[] = {"auto", "p2p", "shm", "socket"};

const char *coll_transport_name(coll_transport t) {
  return (unsigned)t < sizeof names / sizeof *names ? names[t] : NULL;
}

int coll_transport_parse(const char *s, coll_transport *t) {
  for (unsigned i = 0; s && i < sizeof names / sizeof *names; i++)
    if (!strcmp(s, names[i])) {
      *t = (coll_transport)i;
      return 0;
    }
  return -1;
}

int coll_transport_decide(coll_transport req, const coll_transport_facts *f, coll_transport *out, char *why, size_t n) {
  if (why && n) why[0] = 0;
  switch (req) {
  case COLL_TRANSPORT_AUTO:
    *out = f->same_host && f->peer_all ? COLL_TRANSPORT_P2P : f->same_host ? COLL_TRANSPORT_SHM : COLL_TRANSPORT_SOCKET;
    return 0;
  case COLL_TRANSPORT_P2P:
    if (!f->same_host) {
      snprintf(why, n, "p2p needs every rank on one host; these %d ranks span more than one", f->nranks);
      return -1;
    }
    if (!f->peer_all) {
      if (f->no_peer_a >= 0)
        snprintf(why, n, "p2p needs GPU peer access between every pair of ranks; ranks %d and %d have none "
                 "(cudaDeviceCanAccessPeer)", f->no_peer_a, f->no_peer_b);
      else snprintf(why, n, "p2p needs GPU peer access between every pair of ranks (cudaDeviceCanAccessPeer)");
      return -1;
    }
    *out = req;
    return 0;
  case COLL_TRANSPORT_SHM:
    if (!f->same_host) {
      snprintf(why, n, "shm needs every rank on one host; these %d ranks span more than one", f->nranks);
      return -1;
    }
    *out = req;
    return 0;
  case COLL_TRANSPORT_SOCKET:
    *out = req;
    return 0;
  }
  snprintf(why, n, "transport %d is not auto, p2p, shm or socket", (int)req);
  return -1;
}

const char *coll_transport_record(coll_transport resolved, const coll_transport_facts *f) {
  if (f->nranks < 2) return "none"; /* one GPU: nothing travels */
  switch (resolved) {
  case COLL_TRANSPORT_P2P: return f->peer_nvlink ? "nvlink" : "pcie";
  case COLL_TRANSPORT_SHM: return "shm";
  case COLL_TRANSPORT_SOCKET: return "socket";
  default: return "auto";
  }
}

void coll_transport_links(coll_transport resolved, int *peer, int *host_shm) {
  *peer = resolved == COLL_TRANSPORT_P2P;
  *host_shm = resolved != COLL_TRANSPORT_SOCKET;
}
