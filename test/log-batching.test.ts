// The service's JSON lines on standard output are written in batches (src/http/log-format.ts):
// a quiet service's line still arrives promptly, and the lines a process logs just before it
// exits — a normal exit or a fatal error — are not lost.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, it } from 'node:test';

const MODULE = new URL('../src/http/log-format.ts', import.meta.url).href;

/** Runs `body` (after `log` = a pino logger on the batched destination) in a child; its stdout chunks as they came. */
function run(body: string): Promise<{ chunks: string[]; code: number | null }> {
  const script = `
    import pino from 'pino';
    import { batchedJsonStdout } from ${JSON.stringify(MODULE)};
    const log = pino(batchedJsonStdout());
    ${body}
  `;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const chunks: string[] = [];
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (text: string) => chunks.push(text));
  return new Promise((resolve) => child.on('close', (code) => resolve({ chunks, code })));
}

const lines = (chunks: string[]) =>
  chunks
    .join('')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => (JSON.parse(l) as { msg: string }).msg);

describe('batched JSON log lines', () => {
  it('writes a quiet process’s line within the flush interval, long before it exits', async () => {
    const { chunks, code } = await run(`log.info('first'); setTimeout(() => log.info('last'), 1500);`);
    assert.equal(code, 0);
    assert.deepEqual(lines(chunks), ['first', 'last']);
    // 'first' came in a chunk of its own, well before the process logged 'last' and exited.
    assert.match(chunks[0]!, /"first"/);
    assert.doesNotMatch(chunks[0]!, /"last"/);
  });

  it('writes many lines whole and in order', async () => {
    const { chunks, code } = await run(`for (let i = 0; i < 2000; i++) log.info('line ' + i);`);
    assert.equal(code, 0);
    assert.deepEqual(
      lines(chunks),
      Array.from({ length: 2000 }, (_, i) => `line ${String(i)}`),
    );
  });

  it('keeps the lines logged just before process.exit and before a fatal error', async () => {
    const exit = await run(`log.info('before exit'); process.exit(3);`);
    assert.equal(exit.code, 3);
    assert.deepEqual(lines(exit.chunks), ['before exit']);
    const crash = await run(`log.error('before crash'); setImmediate(() => { throw new Error('boom'); });`);
    assert.notEqual(crash.code, 0);
    assert.deepEqual(lines(crash.chunks), ['before crash']);
  });
});
