/* topo_gpu_internal.h — what the cluster loader (topo_load.c) shares with the
 * GPU catalogue (topo_gpu.c): reading a GPU's figures from a JSON object,
 * loading a catalogue entry on behalf of a cluster file, and listing the
 * names in a folder for error messages. Not part of the module's contract. */
#ifndef TOPO_GPU_INTERNAL_H
#define TOPO_GPU_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "topo.h"

/* The figures of a GPU object into g (name excluded). A catalogue entry must
 * hold every figure; an inline block in a cluster file must hold bf16_tflops,
 * hbm_gib and hbm_gbps, and any other figure it gives must be in range (the
 * ones it leaves out stay 0). `path` prefixes field names ("gpu" inline, NULL
 * for an entry). Unknown keys are the caller's to check (topo_gpu_is_figure). */
int topo_gpu_read_figures(json_t *obj, bool catalogue, const char *file, const char *path, topo_gpu *g,
                          ts_err *e);
bool topo_gpu_is_figure(const char *key);

/* Loads catalogue entry `name` from gpus_dir (NULL: topo_gpus_dir()) for the
 * cluster file `file`: an unknown name fails as "file: field: no GPU named
 * ..." with the catalogue's names; a broken entry fails naming the entry. */
int topo_gpu_load_for(const char *name, const char *gpus_dir, const char *file, const char *field, topo_gpu *g,
                      ts_err *e);

/* The names of the *.json files of dir (file names less ".json"), sorted,
 * comma-separated into out; "none" when there are none, "cannot read the
 * folder" when it cannot be opened. */
void topo_list_names(const char *dir, char *out, size_t cap);

#endif
