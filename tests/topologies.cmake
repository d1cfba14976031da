# Tests of topologies/: the cluster zoo, the strict loader, the route model,
# and the SimGrid platform (each platform loaded by SimGrid in its own process,
# since SimGrid initialises once per process).
add_executable(test_topologies ${CMAKE_CURRENT_LIST_DIR}/test_topologies.c)
target_link_libraries(test_topologies PRIVATE ts_topo PkgConfig::CUNIT PkgConfig::JANSSON m)
add_test(NAME topologies COMMAND test_topologies)

add_executable(test_gpus ${CMAKE_CURRENT_LIST_DIR}/test_gpus.c)
target_link_libraries(test_gpus PRIVATE ts_topo PkgConfig::CUNIT PkgConfig::JANSSON m)
add_test(NAME topologies_gpus COMMAND test_gpus)

add_executable(test_topologies_simgrid ${CMAKE_CURRENT_LIST_DIR}/test_topologies_simgrid.c)
target_link_libraries(test_topologies_simgrid PRIVATE ts_topo PkgConfig::SIMGRID PkgConfig::CUNIT m)
foreach(cluster h200x2-nvlink h200x8-nvswitch pcie-8gpu-2x100gbe h200-512-fattree-2to1 h200-1024-dragonfly
                h200-1024-rail h200-16384-rail a100x8-nvswitch a100-3072-hdr h100x8-nvswitch h100-1024-ndr
                h100-6144-ndr b200x8-nvswitch b200-1024-ndr gb200-nvl72 gb200-nvl72-1152 h100-24576-roce)
  add_test(NAME topologies_simgrid_${cluster} COMMAND test_topologies_simgrid ${cluster})
endforeach()
# torchtitan's Grand Teton hosts (experiments/published/torchtitan/), on the catalogue's H100 96GB HBM2e entry
add_test(NAME topologies_simgrid_h100e-512-roce COMMAND test_topologies_simgrid h100e-512-roce)
# the platform of a part of the GPUs (the simulator's reduced mode): routes as on the whole one (a
# cluster of one node is written whole)
foreach(cluster pcie-8gpu-2x100gbe h200-512-fattree-2to1 h200-1024-dragonfly h200-16384-rail
                gb200-nvl72-1152 h100-24576-roce)
  add_test(NAME topologies_simgrid_subset_${cluster} COMMAND test_topologies_simgrid ${cluster} subset)
endforeach()

if(TACOSIM_FUZZ)
  include(${CMAKE_CURRENT_LIST_DIR}/fuzz/fuzz.cmake)
  tacosim_add_fuzzer(fuzz_topo fuzz/fuzz_topo.c ts_topo)
  tacosim_add_fuzzer(fuzz_gpu fuzz/fuzz_gpu.c ts_topo)
endif()
