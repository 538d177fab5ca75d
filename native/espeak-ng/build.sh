#!/bin/bash
# Rebuilds native/espeak-ng/espeak-ng.{wasm,cjs}: espeak-ng's library and its emscripten binding
# (emscripten/espeakng_glue.{cpp,idl} of the same source) as WebAssembly, without data — the
# service reads the data file of the npm package @echogarden/espeak-ng-emscripten, whose files are
# byte for byte what this source's data compiler makes.
#
# Source: https://github.com/echogarden-project/espeak-ng at commit 21ac2203 (GPL-3.0-or-later),
# given as the first argument (a checkout or an unpacked archive of that commit).
# Needs Debian's emscripten (3.1.6), python3-ply and cmake: apt-get install emscripten python3-ply cmake
# Not run at install: the built files are committed; src/audio/engines/espeak-wasm.test.ts checks
# that they speak what the package's own build speaks.
set -euo pipefail
src=$(realpath "${1:?usage: build.sh <espeak-ng source at commit 21ac2203>}")
out=$(dirname "$(realpath "$0")")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export NODE_PATH=/usr/share/nodejs # emcc's JavaScript tools need Debian's acorn
cp -r "$src" "$work/src"
cd "$work/src"
# libsonic is off; this source would otherwise fetch it from the network while configuring.
sed -i 's/^if (SONIC_LIB AND SONIC_INC)/if (TRUE)/' cmake/deps.cmake
emcmake cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DENABLE_TESTS=OFF -DCOMPILE_INTONATIONS=OFF \
  -DUSE_MBROLA=OFF -DUSE_LIBSONIC=OFF -DUSE_LIBPCAUDIO=OFF -DUSE_SPEECHPLAYER=OFF -DUSE_ASYNC=OFF
emmake cmake --build build -j"$(nproc)" --target espeak-ng
cd emscripten
/usr/bin/python3 /usr/share/emscripten/tools/webidl_binder.py espeakng_glue.idl glue
em++ -O3 -I . -I .. -I ../src/include/espeak-ng -I ../src/libespeak-ng -c espeakng_glue.cpp -o glue.o
em++ -O3 glue.o ../build/src/libespeak-ng/libespeak-ng.a ../build/src/ucd-tools/libucd.a \
  -sWASM=1 -sMODULARIZE=1 -sEXPORT_NAME=EspeakNg -sENVIRONMENT=node,worker -sFORCE_FILESYSTEM=1 \
  -sALLOW_MEMORY_GROWTH=1 -sALLOW_TABLE_GROWTH=1 -sEXPORTED_RUNTIME_METHODS=addFunction,removeFunction,FS,ENV \
  -sERROR_ON_UNDEFINED_SYMBOLS=0 --post-js glue.js -o "$out/espeak-ng.cjs"
echo "built $out/espeak-ng.wasm and $out/espeak-ng.cjs"
