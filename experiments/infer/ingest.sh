#!/bin/bash
# Files an archive the GPU machine returned into this folder:
#   ingest.sh w1 PATH/w1.tgz   logs -> runs/w1/, calibration files -> calibration/
#   ingest.sh w2 PATH/w2.tgz   logs -> runs/w2/, measured results -> measured/
set -eu
cd "$(dirname "$0")"
what=$1 tgz=$2
tmp=$(mktemp -d)
tar xzf "$tgz" -C "$tmp"
mkdir -p runs/$what
cp -r "$tmp/$what/logs/." runs/$what/
case $what in
  w1)
    mkdir -p calibration runs/w1/smoke
    cp "$tmp"/w1/calib/*.json calibration/ 2> /dev/null || echo "ingest: no calibration files in $tgz" >&2
    cp "$tmp"/w1/smoke/*.json runs/w1/smoke/ 2> /dev/null || true ;;
  w2)
    mkdir -p measured
    cp "$tmp"/w2/measured/*.json measured/ ;;
esac
rm -rf "$tmp"
ls -R runs/$what | head -40
