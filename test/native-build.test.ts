// The native LAME addon's install script (scripts/build-native.mjs), as npm runs it: again at every
// `npx voicegen` inside a checkout, possibly while a service of that checkout is encoding. It
// leaves an addon built from the same sources alone, and replaces one in a single rename. Runs on
// copies of the script and the addon's sources in a throwaway folder, never on this checkout's
// addon.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import {
  appendFileSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  realpathSync,
  rmSync,
  statSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';

const root = join(import.meta.dirname, '..');

/** node-gyp as npm runs it for install scripts, else the copy bundled with npm; undefined if neither. */
function nodeGyp(): string | undefined {
  if (process.env.npm_config_node_gyp) return process.env.npm_config_node_gyp;
  try {
    const npm = realpathSync(execFileSync('which', ['npm'], { encoding: 'utf8' }).trim());
    const bundled = join(dirname(npm), '..', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js');
    return existsSync(bundled) ? bundled : undefined;
  } catch {
    return undefined;
  }
}

const gyp = nodeGyp();
const missing =
  gyp === undefined
    ? 'node-gyp not found'
    : ['/usr/include/lame/lame.h', '/usr/local/include/lame/lame.h'].some((h) => existsSync(h))
      ? undefined
      : 'libmp3lame-dev not installed';

let dir: string;
let addon: string;

function build(): string {
  const result = spawnSync(process.execPath, [join(dir, 'scripts', 'build-native.mjs')], {
    encoding: 'utf8',
    env: { ...process.env, npm_config_node_gyp: gyp, VOICEGEN_SKIP_NATIVE: '' },
    timeout: 300_000,
  });
  assert.equal(result.status, 0, result.stderr);
  return result.stdout;
}

void describe('the native addon install script', { skip: missing }, () => {
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'voicegen-native-'));
    mkdirSync(join(dir, 'scripts'));
    mkdirSync(join(dir, 'native', 'lame-mp3'), { recursive: true });
    copyFileSync(join(root, 'scripts', 'build-native.mjs'), join(dir, 'scripts', 'build-native.mjs'));
    for (const name of ['binding.gyp', 'lame_mp3.c'])
      copyFileSync(join(root, 'native', 'lame-mp3', name), join(dir, 'native', 'lame-mp3', name));
    addon = join(dir, 'native', 'lame-mp3', 'build', 'Release', 'lame_mp3.node');
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  void it('builds once, leaves a built addon alone, and replaces it in one rename after a change', () => {
    assert.match(build(), /native LAME addon built/);
    const first = statSync(addon);

    // Run again as `npx voicegen` in a checkout would: nothing is rebuilt or rewritten.
    assert.match(build(), /native LAME addon up to date/);
    const again = statSync(addon);
    assert.equal(again.ino, first.ino);
    assert.equal(again.mtimeMs, first.mtimeMs);

    // A changed source is built again, and the new addon takes the old one's name in a rename:
    // a new file, never the old one rewritten in place under a process that has it loaded.
    appendFileSync(join(dir, 'native', 'lame-mp3', 'lame_mp3.c'), '\n/* changed */\n');
    assert.match(build(), /native LAME addon built/);
    assert.notEqual(statSync(addon).ino, first.ino);
    assert.match(build(), /native LAME addon up to date/);
  });
});
