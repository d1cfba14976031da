/* search_mpi.c — the layout search's candidates spread over MPI processes.
 *
 * Under `mpirun -np N tacosim search ...` every process enumerates and
 * estimates the same candidates (deterministic, a second or two), simulates
 * its share of each round and gathers everyone's results, so all processes
 * hold the same ranking; process 0 prints it. Started without an MPI launcher
 * (or built without MPI) the search is one process and MPI is never touched:
 * the launcher's rank variables in the environment are how a process learns
 * that it was started as one of several (MPI_Init in a process started alone
 * would look for a launcher that is not there). */
#define _GNU_SOURCE /* dladdr */
#include <stdlib.h>
#include <string.h>

#include "search.h"

#ifdef TACOSIM_HAVE_MPI
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>

static int started, rank_, size_ = 1, local_size_ = 1;

static bool launched_by_mpi(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
    if (getenv(vars[i])) return true;
  return false;
}

int sim_search_mpi_start(int *argc, char ***argv) {
  if (started || !launched_by_mpi()) return 0;
  /* SimGrid's library defines MPI_* as well (its SMPI); linked first, its
   * MPI_Init would abort outside an SMPI run. Say so instead. */
  Dl_info where;
  if (dladdr((void *)(size_t)&MPI_Init, &where) && where.dli_fname && strstr(where.dli_fname, "simgrid")) {
    fprintf(stderr, "tacosim: search: MPI_Init resolves to %s, not the MPI library: link libmpi before SimGrid\n",
            where.dli_fname);
    return -1;
  }
  if (MPI_Init(argc, argv) != MPI_SUCCESS) return -1;
  started = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  MPI_Comm local;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local) == MPI_SUCCESS) {
    MPI_Comm_size(local, &local_size_);
    MPI_Comm_free(&local);
  }
  return 0;
}

void sim_search_mpi_stop(void) {
  if (started) MPI_Finalize();
  started = 0;
  rank_ = 0;
  size_ = local_size_ = 1;
}

int sim_search_mpi_rank(void) { return rank_; }
int sim_search_mpi_size(void) { return size_; }
int sim_search_mpi_local_size(void) { return local_size_; }

int sim_search_mpi_allgather(const void *mine, void *all, size_t bytes, ts_err *e) {
  if (!started || size_ == 1) {
    memcpy(all, mine, bytes);
    return 0;
  }
  if (bytes > (size_t)1 << 30) return ts_fail_sys(e, "search: %zu bytes per process to gather: too many", bytes);
  if (MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, MPI_COMM_WORLD) != MPI_SUCCESS)
    return ts_fail_sys(e, "search: MPI_Allgather of the simulation results failed");
  return 0;
}

#else /* built without MPI: always one process */

int sim_search_mpi_start(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  return 0;
}
void sim_search_mpi_stop(void) {}
int sim_search_mpi_rank(void) { return 0; }
int sim_search_mpi_size(void) { return 1; }
int sim_search_mpi_local_size(void) { return 1; }
int sim_search_mpi_allgather(const void *mine, void *all, size_t bytes, ts_err *e) {
  (void)e;
  memcpy(all, mine, bytes);
  return 0;
}

#endif
