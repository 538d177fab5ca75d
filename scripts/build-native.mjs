#!/usr/bin/env node
// Builds the optional native LAME addon (native/lame-mp3) with node-gyp against Debian's
// libmp3lame and the machine's own Node headers; run by `npm ci`/`npm install` (the package's
// install script). Never fails the install and never downloads anything: without libmp3lame-dev,
// Node's headers or a compiler it says why and the service encodes with the wasm build of the same
// LAME (same bytes). `VOICEGEN_SKIP_NATIVE=1` skips it.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const addonDir = join(dirname(fileURLToPath(import.meta.url)), '..', 'native', 'lame-mp3');
const skip = (why) => {
  console.log(`native LAME addon not built (${why}); MP3 encoding uses the wasm build of LAME`);
  process.exit(0);
};

if (process.env.VOICEGEN_SKIP_NATIVE === '1') skip('VOICEGEN_SKIP_NATIVE=1');
if (!['/usr/include/lame/lame.h', '/usr/local/include/lame/lame.h'].some((h) => existsSync(h)))
  skip('lame/lame.h not found: apt-get install libmp3lame-dev');

// Node's headers from the machine (never downloaded): npm's nodedir, else the distribution's.
const args = ['rebuild', '--loglevel=error'];
if (!process.env.npm_config_nodedir) {
  const nodedir = ['/usr', '/usr/local', join(dirname(process.execPath), '..')].find((d) =>
    existsSync(join(d, 'include', 'node', 'node_api.h')),
  );
  if (nodedir === undefined) skip("Node's headers (include/node/node_api.h) not found");
  args.push(`--nodedir=${nodedir}`);
}

// node-gyp: on PATH inside npm scripts; npm also tells where its bundled copy is.
const gyp = process.env.npm_config_node_gyp;
const [cmd, cmdArgs] = gyp ? [process.execPath, [gyp, ...args]] : ['node-gyp', args];
const result = spawnSync(cmd, cmdArgs, { cwd: addonDir, encoding: 'utf8', timeout: 300_000 });
if (result.error) skip(`node-gyp did not run: ${result.error.message}`);
if (result.status !== 0) {
  const tail = `${result.stdout}\n${result.stderr}`.trim().split('\n').slice(-15).join('\n');
  console.log(tail);
  skip(`node-gyp exited with ${result.status}`);
}
console.log('native LAME addon built: native/lame-mp3/build/Release/lame_mp3.node');
