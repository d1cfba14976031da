#!/bin/bash
# Writes the inference validation plans: Llama 3 8B, TP2 on 2 x H200, every
# transport x codec x (batch, prompt) point below, `layers_override` layers
# (the GPU time of the whole matrix must fit one short run), 16 tokens generated.
# Usage: experiments/infer/make-plans.sh   (from the repository root)
set -eu
cd "$(dirname "$0")"
LAYERS=${LAYERS:-4}
GEN=${GEN:-16}
POINTS=${POINTS:-"1x128 1x8176 4x512 8x1024 16x512 64x128"}
rm -f plans/infer-v-*.json
for tr in nvlink shm socket; do
  for pt in $POINTS; do
    b=${pt%x*}; s=${pt#*x}
    for cd in none taco caat taco-caat; do
      case $cd in
        none) codec='{ "kind": "none" }' ;;
        taco) codec='{ "kind": "taco", "group": 128, "fp8": "e4m3" }' ;;
        caat) codec='{ "kind": "caat", "p": 0.5 }' ;;
        taco-caat) codec='{ "kind": "taco+caat", "group": 128, "fp8": "e4m3", "p": 0.5 }' ;;
      esac
      name=infer-v-$tr-b$b-p$s-$cd
      cat > plans/$name.json <<JSON
{
  "schema": 1,
  "kind": "inference",
  "name": "$name",
  "description": "validation: Llama 3 8B ($LAYERS layers), TP2 on 2 x H200 ($tr), batch $b, prompt $s, $GEN generated, codec $cd",
  "model": "llama3-8b",
  "cluster": "h200x2-$tr",
  "layout": { "tp": 2, "pp": 1 },
  "batch": { "size": $b, "prompt": $s, "generate": $GEN },
  "kv_cache": "bf16",
  "codec": $codec,
  "codec_min_bytes": 0,
  "codec_auto": true,
  "layers_override": $LAYERS
}
JSON
    done
  done
done
ls plans/infer-v-*.json | wc -l
