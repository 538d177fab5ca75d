#!/usr/bin/env bash
# Installs the Debian packages the tests and benchmarks need: ffmpeg/ffprobe (decode checks of the
# produced MP3s) and lame (the native reference encoder of bench/). Idempotent; skips what is present.
set -euo pipefail
need=()
command -v ffmpeg >/dev/null || need+=(ffmpeg)
command -v lame >/dev/null || need+=(lame)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
ffmpeg -version | head -1
