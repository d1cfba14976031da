/* model_internal.h — shared between the files of models/, not a public API. */
#ifndef MODEL_INTERNAL_H
#define MODEL_INTERNAL_H

#include "model.h"

/* model_layer_ops without the shard check: returns the op count, or -1 when
 * cap is too small. */
int model_build_layer_unchecked(const model_config *m, const model_shard *s, model_op *ops, int cap);

#endif
