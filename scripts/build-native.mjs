#!/usr/bin/env node
// Builds the optional native LAME addon (native/lame-mp3) with node-gyp against Debian's
// libmp3lame and the machine's own Node headers; run by `npm ci`/`npm install` (the package's
// install script). Never fails the install and never downloads anything: without libmp3lame-dev,
// Node's headers or a compiler it says why and the service encodes with the wasm build of the same
// LAME (same bytes). `VOICEGEN_SKIP_NATIVE=1` skips it.
//
// npm runs this script again whenever it links the project as a package (`npx voicegen` inside a
// checkout does), possibly while a service of the checkout is encoding: an addon that is already
// built from the same sources for the same Node and loads is left as it is, and a new build is
// made in a folder of its own and moved into place in one rename, so the addon's path never
// points at a missing or half-written file.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const addonDir = join(dirname(fileURLToPath(import.meta.url)), '..', 'native', 'lame-mp3');
const SOURCES = ['binding.gyp', 'lame_mp3.c'];
const releaseDir = join(addonDir, 'build', 'Release');
const addon = join(releaseDir, 'lame_mp3.node');
const stampFile = join(addonDir, 'build', 'voicegen-stamp.json');

const skip = (why) => {
  console.log(`native LAME addon not built (${why}); MP3 encoding uses the wasm build of LAME`);
  process.exit(0);
};

/** What the addon is built from and for: a build with another stamp is made again. */
function stamp() {
  const hash = createHash('sha256');
  for (const name of SOURCES) hash.update(readFileSync(join(addonDir, name)));
  return JSON.stringify({ sources: hash.digest('hex'), node: process.version, arch: process.arch });
}

/** True when the addon in place was built by this script from these sources for this Node, and loads. */
function upToDate() {
  try {
    if (readFileSync(stampFile, 'utf8') !== stamp()) return false;
    createRequire(import.meta.url)(addon).version();
    return true;
  } catch {
    return false;
  }
}

if (process.env.VOICEGEN_SKIP_NATIVE === '1') skip('VOICEGEN_SKIP_NATIVE=1');
if (upToDate()) {
  console.log('native LAME addon up to date: native/lame-mp3/build/Release/lame_mp3.node');
  process.exit(0);
}
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

/**
 * Builds from a copy of the sources in a folder of its own and moves the addon into place; returns
 * why it could not (the staging folder is removed either way).
 */
function buildInStaging() {
  const staging = mkdtempSync(join(tmpdir(), 'voicegen-lame-mp3-'));
  try {
    for (const name of SOURCES) copyFileSync(join(addonDir, name), join(staging, name));
    // node-gyp: on PATH inside npm scripts; npm also tells where its bundled copy is.
    const gyp = process.env.npm_config_node_gyp;
    const [cmd, cmdArgs] = gyp ? [process.execPath, [gyp, ...args]] : ['node-gyp', args];
    const result = spawnSync(cmd, cmdArgs, { cwd: staging, encoding: 'utf8', timeout: 300_000 });
    if (result.error) return `node-gyp did not run: ${result.error.message}`;
    if (result.status !== 0) {
      console.log(`${result.stdout}\n${result.stderr}`.trim().split('\n').slice(-15).join('\n'));
      return `node-gyp exited with ${result.status}`;
    }
    mkdirSync(releaseDir, { recursive: true });
    // Copied beside its final name first: a rename within one folder replaces the file at once.
    const next = `${addon}.${process.pid}.tmp`;
    copyFileSync(join(staging, 'build', 'Release', 'lame_mp3.node'), next);
    renameSync(next, addon);
    writeFileSync(stampFile, stamp());
    return undefined;
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

const failure = buildInStaging();
if (failure !== undefined) skip(failure);
console.log('native LAME addon built: native/lame-mp3/build/Release/lame_mp3.node');
