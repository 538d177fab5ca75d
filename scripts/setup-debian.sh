#!/usr/bin/env bash
# Installs the Debian packages the tests and benchmarks need: ffmpeg/ffprobe (decode checks of the
# produced MP3s), lame (the native reference encoder of bench/), libmp3lame-dev (the header the
# native LAME addon is built against at npm ci; without it the wasm build is used), and the servers of the scale-out
# tests: PostgreSQL, Redis and nginx (started by scripts/test-servers.sh, not here), and Chromium for
# the web console's end-to-end test (driven by playwright-core, never a downloaded browser), and
# python3-onnx, with which the tests build their own tiny neural voice model
# (scripts/make-tiny-vits.py), and espeak-ng-data, the phonemizer data of the tiny Kokoro, Kitten
# and Matcha models (scripts/make-tiny-models.py). Idempotent; skips what is present.
set -euo pipefail
need=()
command -v ffmpeg >/dev/null || need+=(ffmpeg)
command -v lame >/dev/null || need+=(lame)
[ -f /usr/include/lame/lame.h ] || need+=(libmp3lame-dev)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v redis-server >/dev/null || need+=(redis-server)
command -v nginx >/dev/null || need+=(nginx)
command -v chromium >/dev/null || need+=(chromium)
/usr/bin/python3 -c "import onnx" >/dev/null 2>&1 || need+=(python3-onnx)
ls /usr/lib/*/espeak-ng-data/phontab >/dev/null 2>&1 || need+=(espeak-ng-data)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
ffmpeg -version | head -1
