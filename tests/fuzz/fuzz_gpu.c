/* fuzz_gpu.c — libFuzzer target for the GPU catalogue loader: any bytes must
 * give either a catalogue entry or a "file: field: reason" error, never a
 * crash, a leak or undefined behaviour. An entry that loads carries every
 * figure in range: positive peaks, memory and SM count, a boost clock not
 * below the base clock, NVLink generation and bandwidth both zero or both
 * set. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "topo.h"

static void require(int ok) {
  if (!ok) __builtin_trap();
}

static int positive(double x) { return isfinite(x) && x > 0; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  topo_gpu g;
  ts_err e;
  if (topo_gpu_from_json_text((const char *)data, (unsigned long)size, "fuzz.json", &g, &e) == 0) {
    require(g.from_catalogue);
    require(g.name[0] != '\0' && memchr(g.name, '\0', sizeof g.name) != NULL);
    require(positive(g.bf16_tflops) && positive(g.fp16_tflops) && positive(g.fp32_tflops));
    require(isfinite(g.fp8_tflops) && g.fp8_tflops >= 0);
    require(positive(g.hbm_gib) && positive(g.hbm_gbps) && positive(g.l2_mib) && positive(g.power_w));
    require(g.sms >= 1 && g.pcie_gen >= 1);
    require(g.base_mhz >= 0 && g.boost_mhz >= 0 && (g.base_mhz == 0 || g.boost_mhz == 0 || g.boost_mhz >= g.base_mhz));
    require((g.nvlink_gen == 0) == (g.nvlink_gbps == 0));
  } else {
    require(e.bad_input == 1 && e.msg[0] != '\0');
  }
  return 0;
}
