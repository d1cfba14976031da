// sim_sendto.cpp — a transfer between two hosts that no actor sends or
// receives (SimGrid's s4u::Comm::sendto_async, which its C API does not
// offer): the flows of reduced mode whose source rank is not simulated
// (sim_comm.c). The network action is the one a mailbox transfer between the
// same hosts starts (same route, bytes and rate), without the actor that
// would post it or the one that would take it.
#include <cstdint>
#include <simgrid/comm.h>
#include <simgrid/s4u/Comm.hpp>
#include <simgrid/s4u/Host.hpp>

extern "C" sg_comm_t sim_sendto_async(sg_host_t from, sg_host_t to, double bytes) {
  simgrid::s4u::CommPtr c = simgrid::s4u::Comm::sendto_async(from, to, (uint64_t)(long)bytes);
  c->add_ref(); // the caller's reference: sg_comm_wait_all takes it over, as for sg_mailbox_put_async
  return c.get();
}
