/* test_coll_transport.c — the transport decision (kernels/coll_transport.h):
 * auto follows the facts, an impossible request is refused with a reason
 * naming what is missing, names round-trip, the links follow the transport. */
#include <CUnit/Basic.h>
#include <string.h>

#include "coll_transport.h"

static coll_transport_facts facts(int nranks, int same_host, int peer_all, int nvlink) {
  coll_transport_facts f = {nranks, same_host, peer_all, nvlink, -1, -1};
  return f;
}

static void test_auto(void) {
  coll_transport t;
  char why[256];
  coll_transport_facts f = facts(8, 1, 1, 1);
  CU_ASSERT_EQUAL(coll_transport_decide(COLL_TRANSPORT_AUTO, &f, &t, why, sizeof why), 0);
  CU_ASSERT_EQUAL(t, COLL_TRANSPORT_P2P);
  CU_ASSERT_STRING_EQUAL(coll_transport_record(t, &f), "nvlink");
  f = facts(2, 1, 1, 0);
  CU_ASSERT_EQUAL(coll_transport_decide(COLL_TRANSPORT_AUTO, &f, &t, why, sizeof why), 0);
  CU_ASSERT_STRING_EQUAL(coll_transport_record(t, &f), "pcie");
  f = facts(2, 1, 0, 0);
  CU_ASSERT_EQUAL(coll_transport_decide(COLL_TRANSPORT_AUTO, &f, &t, why, sizeof why), 0);
  CU_ASSERT_EQUAL(t, COLL_TRANSPORT_SHM);
  CU_ASSERT_STRING_EQUAL(coll_transport_record(t, &f), "shm");
  f = facts(1, 1, 1, 1); /* one GPU */
  CU_ASSERT_EQUAL(coll_transport_decide(COLL_TRANSPORT_AUTO, &f, &t, why, sizeof why), 0);
  CU_ASSERT_STRING_EQUAL(coll_transport_record(t, &f), "none");
  f = facts(16, 0, 0, 0);
  CU_ASSERT_EQUAL(coll_transport_decide(COLL_TRANSPORT_AUTO, &f, &t, why, sizeof why), 0);
  CU_ASSERT_EQUAL(t, COLL_TRANSPORT_SOCKET);
  CU_ASSERT_STRING_EQUAL(coll_transport_record(t, &f), "socket");
}

static void test_refusals(void) {
  coll_transport t = COLL_TRANSPORT_AUTO;
  char why[256];
  coll_transport_facts f = facts(4, 1, 0, 0);
  f.no_peer_a = 1, f.no_peer_b = 3;
  CU_ASSERT_EQUAL(coll_transport_decide(COLL_TRANSPORT_P2P, &f, &t, why, sizeof why), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(why, "ranks 1 and 3"));
  CU_ASSERT_PTR_NOT_NULL(strstr(why, "cudaDeviceCanAccessPeer"));
  f = facts(16, 0, 1, 1);
  CU_ASSERT_EQUAL(coll_transport_decide(COLL_TRANSPORT_P2P, &f, &t, why, sizeof why), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(why, "one host"));
  CU_ASSERT_EQUAL(coll_transport_decide(COLL_TRANSPORT_SHM, &f, &t, why, sizeof why), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(why, "shm needs every rank on one host"));
  /* what is possible is taken as asked */
  CU_ASSERT_EQUAL(coll_transport_decide(COLL_TRANSPORT_SOCKET, &f, &t, why, sizeof why), 0);
  CU_ASSERT_EQUAL(t, COLL_TRANSPORT_SOCKET);
  f = facts(8, 1, 1, 1);
  CU_ASSERT_EQUAL(coll_transport_decide(COLL_TRANSPORT_SHM, &f, &t, why, sizeof why), 0);
  CU_ASSERT_EQUAL(t, COLL_TRANSPORT_SHM);
  CU_ASSERT_EQUAL(coll_transport_decide((coll_transport)9, &f, &t, why, sizeof why), -1);
}

static void test_names_links(void) {
  coll_transport t;
  for (int i = 0; i < 4; i++) {
    CU_ASSERT_EQUAL(coll_transport_parse(coll_transport_name((coll_transport)i), &t), 0);
    CU_ASSERT_EQUAL((int)t, i);
  }
  CU_ASSERT_EQUAL(coll_transport_parse("nvlink", &t), -1);
  CU_ASSERT_EQUAL(coll_transport_parse(NULL, &t), -1);
  CU_ASSERT_PTR_NULL(coll_transport_name((coll_transport)7));
  int peer, shm;
  coll_transport_links(COLL_TRANSPORT_P2P, &peer, &shm);
  CU_ASSERT(peer && shm);
  coll_transport_links(COLL_TRANSPORT_SHM, &peer, &shm);
  CU_ASSERT(!peer && shm);
  coll_transport_links(COLL_TRANSPORT_SOCKET, &peer, &shm);
  CU_ASSERT(!peer && !shm);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("coll_transport", NULL, NULL);
  CU_add_test(s, "auto follows the facts", test_auto);
  CU_add_test(s, "impossible requests refused with a reason", test_refusals);
  CU_add_test(s, "names and links", test_names_links);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}
