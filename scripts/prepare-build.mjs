#!/usr/bin/env node
// npm `prepare` (run by `npm ci` and `npm install`): builds dist/ once at install so that `npm start`
// and the CLI run compiled code at once, with no compile on every start. Skipped when dist/ is
// already a build of these sources. Never fails the install: without TypeScript (`npm ci
// --omit=dev`) or with a compile error it says what to do, and the launchers refuse to run a
// missing or stale build with the same advice.
import { join } from 'node:path';
import { buildState } from './build-stamp.mjs';
import { build, typescriptCompiler } from './build.mjs';

const root = join(import.meta.dirname, '..');
const state = buildState(root);
if (state === 'fresh' || state === 'no-sources') process.exit(0);
if (typescriptCompiler() === undefined) {
  console.log(
    'voicegen: dist/ not built here (TypeScript, a dev dependency, is not installed): build it where dev ' +
      'dependencies are (`npm ci && npm run build`) and ship dist/ with the install',
  );
  process.exit(0);
}
console.log('voicegen: compiling src/ into dist/ (once per install or source change)');
const code = build();
if (code !== 0)
  console.log('voicegen: the build failed (above); `npm start` runs once `npm run build` succeeds');
process.exit(0);
