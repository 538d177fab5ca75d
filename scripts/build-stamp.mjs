// Whether dist/ holds a build of the sources next to it. `npm run build` writes dist/build-stamp.json
// with a hash of what the build reads (src/ without tests, the tsconfig files, the version of the
// embedded database whose template it writes); the launchers (`npm start`, bin/voicegen.js) compare
// it with the sources before importing dist/, so a stale or missing build gives one clear message
// instead of old code or a module-not-found trace.
// Plain JavaScript on purpose: it runs before (and without) any compiled code. Hashing the ~1 MB of
// sources costs a few milliseconds, far less than a compile.
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';

export const STAMP_FILE = 'build-stamp.json';

/**
 * Files the build depends on besides src/: a change to any of them makes dist/ stale. PGlite's
 * version decides the format of the database template the build writes.
 */
const INPUTS = ['tsconfig.json', 'tsconfig.build.json', 'node_modules/@electric-sql/pglite/package.json'];

function sourceFiles(dir) {
  const out = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...sourceFiles(path));
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts')) out.push(path);
  }
  return out;
}

/** A hash of every input of the build under `root`: names and contents, in a stable order. */
export function sourceHash(root) {
  const files = [
    ...sourceFiles(join(root, 'src')),
    ...INPUTS.map((name) => join(root, name)).filter((path) => existsSync(path)),
  ]
    .map((path) => relative(root, path).split(sep).join('/'))
    .sort();
  const hash = createHash('sha256');
  for (const name of files) {
    hash.update(`${name}\0`);
    hash.update(readFileSync(join(root, name)));
    hash.update('\0');
  }
  return hash.digest('hex');
}

/** The stamp of the build in `root`/dist, or undefined when there is none (or it is unreadable). */
export function readStamp(root) {
  try {
    const stamp = JSON.parse(readFileSync(join(root, 'dist', STAMP_FILE), 'utf8'));
    return typeof stamp?.sourceHash === 'string' ? stamp : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Whether `root`/dist can be run: `fresh` (built from these sources), `missing` (no build, or a build
 * that did not finish), `stale` (built from other sources) or `no-sources` (an installed package
 * without src/: dist/ is all there is, nothing to compare).
 */
export function buildState(root) {
  if (!existsSync(join(root, 'src'))) return existsSync(join(root, 'dist')) ? 'no-sources' : 'missing';
  const stamp = readStamp(root);
  if (stamp === undefined) return 'missing';
  return stamp.sourceHash === sourceHash(root) ? 'fresh' : 'stale';
}

/** The one message a launcher prints when the build cannot be run; undefined when it can. */
export function buildProblem(root) {
  const state = buildState(root);
  if (state === 'fresh' || state === 'no-sources') return undefined;
  const what =
    state === 'missing'
      ? 'voicegen is not built (dist/ is missing or incomplete)'
      : 'voicegen was built from other sources (src/ changed since the last build)';
  return `${what}: run \`npm run build\` (about 20 s), then start again. \`npm run dev\` runs the sources directly.`;
}

/**
 * Exits with the message when `root`/dist cannot be run; returns otherwise. Exit code 1, as for
 * any start-up failure.
 */
export function requireFreshBuild(root) {
  const problem = buildProblem(root);
  if (problem === undefined) return;
  console.error(problem);
  process.exit(1);
}
