#!/usr/bin/env bash
# experiments/loss/corpus.sh OUT — the English corpus of the 124M-parameter loss runs (issue 25),
# assembled from Debian packages (Debian 12 "bookworm"):
#   - bible-kjv + bible-kjv-text: the King James Bible (public domain), `bible gen1:1-rev22:21`;
#   - linux-doc-6.1: the Linux kernel's documentation, every English reStructuredText file under
#     Documentation/ (translations/ left out), licence GPL-2 (the package's copyright file).
# Documents (each .rst file; the Bible cut at its 66 books) are ordered by the SHA-1 of their name,
# so the held-out tail (tacorun train --val-frac, the last 5 %) is a random sample of both sources,
# not the end of the alphabet. Writes OUT (text) and OUT.manifest (packages, versions, sizes, hash).
# Needs apt-get (download only: no install, no root for dpkg -x) and python3; ~40 MB download.
set -euo pipefail
out=${1:?usage: corpus.sh OUT}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
command -v bible > /dev/null || { echo "corpus.sh: needs the bible command (apt-get install bible-kjv bible-kjv-text)" >&2; exit 2; }
(cd "$work" && apt-get download linux-doc-6.1 > /dev/null 2>&1) || { echo "corpus.sh: apt-get download linux-doc-6.1 failed" >&2; exit 2; }
dpkg -x "$work"/linux-doc-6.1_*.deb "$work/x"
bible gen1:1-rev22:21 > "$work/kjv.txt"
python3 - "$work/kjv.txt" "$work/x/usr/share/doc/linux-doc-6.1/Documentation" "$out" << 'PY'
import gzip, hashlib, os, re, sys
kjv, docdir, out = sys.argv[1:4]
docs = []
text = open(kjv, encoding="utf-8", errors="replace").read()
# `bible` prints each book's name on a line of its own before chapter 1 ("Genesis 1"); cut there
parts = re.split(r"\n(?=[1-3]? ?[A-Z][a-zA-Z ]+ 1\n)", text)
for i, p in enumerate(parts):
    docs.append(("kjv/%02d" % i, p.strip("\n") + "\n"))
for root, dirs, files in os.walk(docdir):
    dirs[:] = sorted(d for d in dirs if d != "translations")
    for f in sorted(files):
        if f.endswith(".rst.gz") or f.endswith(".rst"):
            path = os.path.join(root, f)
            data = (gzip.open if f.endswith(".gz") else open)(path, "rb").read().decode("utf-8", "replace")
            docs.append(("linux-doc/" + os.path.relpath(path, docdir), data.strip("\n") + "\n"))
docs.sort(key=lambda d: hashlib.sha1(d[0].encode()).hexdigest())
blob = "\n".join(d[1] for d in docs).encode("utf-8")
open(out, "wb").write(blob)
nk = sum(1 for d in docs if d[0].startswith("kjv/"))
print("documents %d (Bible books %d, kernel documentation files %d), %d bytes, sha256 %s" % (
    len(docs), nk, len(docs) - nk, len(blob), hashlib.sha256(blob).hexdigest()[:16]))
PY
{
  echo "corpus $out: $(wc -c < "$out") bytes, sha256 $(sha256sum "$out" | cut -c1-16)"
  dpkg-deb -f "$work"/linux-doc-6.1_*.deb Package Version
  dpkg-query -W bible-kjv bible-kjv-text
  echo "licences: KJV public domain (bible-kjv-text copyright); linux-doc-6.1 GPL-2 (its copyright file)"
} > "$out.manifest"
cat "$out.manifest"
