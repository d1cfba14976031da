#!/usr/bin/env bash
# Figure 14: serving (inference) predictions against published static-batch measurements
# (experiments/published/dense-infer: TensorRT-LLM v0.5.0 / v0.6.1, lmdeploy, vLLM; Llama-2 7B and 70B on
# A100, H100 and H200), the ratio predicted / published of each row, one column per source and GPU, by model
# (MHA 7B / 13B; GQA 70B with TensorRT-LLM's XQA kernel, and before it: the GQA decode attention of
# engines before XQA is the largest miss, dense-infer/README.md). dense-infer/run.sh does the simulations and writes its table.txt.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_tacosim || exit 3
command -v python3 > /dev/null || { skip fig14 "python3 to read the table"; exit 3; }
SET="$EXP/published/dense-infer"
WORK="$DATA/work/fig14"
mkdir -p "$WORK"
bash "$SET/run.sh" --tacosim "$TACOSIM" --work "$WORK" > /dev/null
out="$DATA/fig14-serving.dat"
python3 - "$SET/table.txt" "$SET/published.csv" > "$out" <<'PY'
import csv, sys
table, pub = sys.argv[1:]
rows = {r[0]: r for r in csv.reader(l for l in open(pub) if not l.startswith("#"))}
groups, lines = [], []
for l in open(table):
    f = l.split()
    if len(f) < 7 or l.startswith("#") or f[0] not in rows or f[5] == "-":
        continue
    g = f[1] + " " + f[2]
    if g not in groups:
        groups.append(g)
    ratio = float(f[5]) / float(f[4])
    # 0: MHA (7B, 13B); 1: 70B, an engine whose GQA decode attention shares a KV head's reads (TensorRT-LLM
    # with XQA, rows "-xqa"), as the executor's kernel the prediction prices; 2: the other 70B rows (before XQA,
    # or an engine whose kernel the source does not say)
    cls = 0 if "70b" not in f[0] else 1 if f[0].endswith("-xqa") else 2
    lines.append((groups.index(g), ratio, cls, f[0]))
print("# dense serving rows: group x ratio(pred/pub) class(0 MHA, 1 70B with XQA, 2 other 70B) row; groups: " + "; ".join(
      "%d=%s" % (i, g) for i, g in enumerate(groups)))
n = {}
for gi, ratio, gqa, name in lines:
    k = n.get(gi, 0)
    n[gi] = k + 1
    print("%d %.3f %.5f %d %s" % (gi, gi + 0.06 * ((k % 7) - 3), ratio, gqa, name))
PY
ng=$(head -1 "$out" | sed 's/.*groups: //' | tr ';' '\n' | grep -c =)
xt=$(head -1 "$out" | sed 's/.*groups: //' | tr ';' '\n' | awk -F= 'NF == 2 { gsub(/^ /, "", $1); printf "%s\"%s\" %s", (NR > 1 ? ", " : ""), $2, $1 }')
plot fig14-serving 1400 650 <<GP
set title "Serving: predicted / published figure of each row (tokens/s rows: > 1 predicted faster; latency rows: > 1 predicted slower)" font ",10"
set ylabel "predicted / published"
set logscale y
set yrange [0.5:2.8]
set ytics (0.5, 0.67, 0.8, 0.9, 1, 1.1, 1.25, 1.5, 2, 2.5)
set xrange [-0.6:$ng - 0.4]
set xtics ($xt) rotate by -30 font ",9"
set grid ytics
set key top left font ",9"
f(x) = 1
plot "$out" using 2:(\$4 == 0 ? \$3 : 1/0) title "Llama-2 7B / 13B (MHA)" with points pt 7 ps 1.2, \
     "$out" using 2:(\$4 == 1 ? \$3 : 1/0) title "Llama-2 70B, TensorRT-LLM with XQA (KV read once per KV head)" with points pt 5 ps 1.2, \
     "$out" using 2:(\$4 == 2 ? \$3 : 1/0) title "Llama-2 70B, before XQA or kernel not published" with points pt 9 ps 1.3, \
     f(x) notitle with lines lt 0
GP
