#!/usr/bin/env node
// `npm run build`: compiles src/ into a clean dist/ (no module of a removed source lingers) with the
// TypeScript of this install, then writes dist/build-stamp.json, which the launchers check. The
// stamp hashes the sources as they were before the compile: an edit made during it leaves the
// build stale, never wrongly fresh. Exit code: the compiler's (no stamp unless it succeeded).
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { sourceHash, STAMP_FILE } from './build-stamp.mjs';

const root = join(import.meta.dirname, '..');

/** The path of tsc's entry, or undefined where TypeScript is not installed (`npm ci --omit=dev`). */
export function typescriptCompiler() {
  try {
    return createRequire(join(root, 'package.json')).resolve('typescript/bin/tsc');
  } catch {
    return undefined;
  }
}

/** Compiles and stamps; returns the exit code (0 built). */
export function build() {
  const tsc = typescriptCompiler();
  if (tsc === undefined) {
    console.error(
      'cannot build: TypeScript is not installed (it is a dev dependency): run `npm ci` with dev dependencies, ' +
        '`npm run build`, then prune them if you like (`npm prune --omit=dev`)',
    );
    return 1;
  }
  const hash = sourceHash(root);
  rmSync(join(root, 'dist'), { recursive: true, force: true });
  const result = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], {
    cwd: root,
    stdio: 'inherit',
  });
  if (result.status !== 0) return result.status ?? 1;
  // A migrated embedded database to unpack instead of running initdb: a first start and every
  // in-process `voicegen synth` skip seconds of it. Made by the compiled code, so it holds exactly
  // the migrations of this build.
  const pglite = pathToFileURL(join(root, 'dist', 'storage', 'database.pglite.js')).href;
  const out = join(root, 'dist', 'pglite-template.tar.gz');
  const template = spawnSync(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `const { createPgliteTemplate } = await import(${JSON.stringify(pglite)});
       const { writeFile } = await import('node:fs/promises');
       const dump = await createPgliteTemplate();
       await writeFile(${JSON.stringify(out)}, Buffer.from(await dump.arrayBuffer()));`,
    ],
    { cwd: root, stdio: 'inherit' },
  );
  if (template.status !== 0) {
    console.error('could not make the embedded database template (dist/pglite-template.tar.gz)');
    return template.status ?? 1;
  }
  writeFileSync(
    join(root, 'dist', STAMP_FILE),
    `${JSON.stringify({ sourceHash: hash, builtAt: new Date().toISOString() }, null, 2)}\n`,
  );
  return 0;
}

if (process.argv[1] === import.meta.filename) process.exit(build());
