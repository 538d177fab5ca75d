import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { HEAP_GROWING_PERCENT } from './heap-growth.js';

const run = promisify(execFile);
const MODULE = fileURLToPath(new URL('./heap-growth.ts', import.meta.url));

/**
 * The growth factors V8 applied at each full collection of a fresh process that first calls
 * widenHeapGrowth(execArgv, NODE_OPTIONS) as given, then keeps ~20 MB alive and collects, in its
 * main thread and in a worker thread (`--trace-gc-verbose` prints "Limit: … (factor)").
 */
async function appliedFactors(
  execArgv: string[],
  nodeOptions: string,
): Promise<{ set: boolean; factors: string[] }> {
  const script = `
    import { Worker } from 'node:worker_threads';
    const { widenHeapGrowth } = await import(${JSON.stringify(MODULE)});
    console.log('set=' + widenHeapGrowth(${JSON.stringify(execArgv)}, ${JSON.stringify(nodeOptions)}));
    const work = "const live = Array.from({ length: 300000 }, (_, i) => ({ i, s: 'x' + i })); globalThis.gc(); globalThis.gc();";
    new Function(work)();
    await new Promise((resolve, reject) =>
      new Worker(work, { eval: true }).on('exit', resolve).on('error', reject));
  `;
  const { stdout } = await run(
    process.execPath,
    ['--expose-gc', '--trace-gc-verbose', '--import', 'tsx', '--input-type=module', '-e', script],
    { maxBuffer: 64 * 1024 * 1024 },
  );
  const set = /set=(true|false)/.exec(stdout)?.[1];
  assert.ok(set !== undefined, stdout.slice(0, 500));
  const factors = [...stdout.matchAll(/\[HeapController\] Limit: .*\(([\d.]+)\)/g)].map((m) => m[1]!);
  return { set: set === 'true', factors };
}

test('every heap of the process grows by the set factor after a full collection', async () => {
  const { set, factors } = await appliedFactors([], '');
  assert.equal(set, true);
  // Two collections in the main thread and two in the worker, at least.
  assert.ok(factors.length >= 4, `limits traced: ${factors.join(', ')}`);
  const expected = (1 + HEAP_GROWING_PERCENT / 100).toFixed(1);
  assert.deepEqual(new Set(factors), new Set([expected]));
});

test("an operator's own heap growth is kept", async () => {
  for (const [execArgv, nodeOptions] of [
    [['--heap-growing-percent=300'], ''],
    [[], '--max-old-space-size=512 --heap_growing_percent=300'],
  ] as const) {
    const { set, factors } = await appliedFactors([...execArgv], nodeOptions);
    // Not set here: V8 chooses (the flags in the arguments are only what the process was told).
    assert.equal(set, false);
    assert.ok(factors.length >= 4);
    assert.ok(
      factors.some((f) => f !== (1 + HEAP_GROWING_PERCENT / 100).toFixed(1)),
      `factors: ${factors.join(', ')}`,
    );
  }
});
