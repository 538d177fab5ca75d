import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';

const MODULE = fileURLToPath(new URL('./wasi-warning.ts', import.meta.url));

/** stderr of a fresh Node (tsx) process running `code` as a module. */
function stderrOf(code: string): string {
  const run = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], {
    encoding: 'utf8',
    timeout: 30_000,
  });
  assert.equal(run.status, 0, run.stderr);
  return run.stderr;
}

void test('node:wasi prints its ExperimentalWarning without the filter', () => {
  const stderr = stderrOf(`const { WASI } = await import('node:wasi'); new WASI({ version: 'preview1' });`);
  assert.match(stderr, /ExperimentalWarning: WASI is an experimental feature/);
});

void test('the filter drops exactly the WASI warning and passes every other one', () => {
  const stderr = stderrOf(`
    const { dropWasiExperimentalWarning } = await import(${JSON.stringify(MODULE)});
    dropWasiExperimentalWarning();
    const { WASI } = await import('node:wasi');
    new WASI({ version: 'preview1' });
    process.emitWarning('Another feature is experimental', 'ExperimentalWarning');
    process.emitWarning('something else', { type: 'DeprecationWarning', code: 'DEP9999' });
    process.emitWarning(new Error('an error warning'));
  `);
  assert.doesNotMatch(stderr, /WASI is an experimental feature/);
  assert.match(stderr, /ExperimentalWarning: Another feature is experimental/);
  assert.match(stderr, /\[DEP9999\] DeprecationWarning: something else/);
  assert.match(stderr, /an error warning/);
});
