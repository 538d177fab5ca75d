import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { test } from 'node:test';
import { encodePiece } from '../audio/continuous-encoder.js';
import { createEncoderPool } from '../audio/encoder-pool.js';
import { createEspeakEngine } from '../audio/engines/espeak.engine.js';
import { fliteProvider } from '../audio/engines/flite.provider.js';
import { workerPoolRequestParser } from '../tasks/requests/request-parser.worker-pool.js';
import { lowerThreadPriority, WORKER_NICENESS } from './worker-priority.js';

/** Niceness of every thread of this process (field 19 of /proc/self/task/<tid>/stat). */
async function threadNiceness(): Promise<number[]> {
  const tids = await readdir('/proc/self/task');
  const values = await Promise.all(
    tids.map(async (tid) => {
      const stat = await readFile(`/proc/self/task/${tid}/stat`, 'utf8').catch(() => '');
      return nicenessIn(stat);
    }),
  );
  return values.filter((n) => Number.isInteger(n));
}

/**
 * Niceness of the calling thread. Read synchronously: `fs/promises` reads on a libuv pool thread,
 * whose /proc/thread-self is that thread, not this one (which once hid a lowered event loop).
 */
function ownNiceness(): number {
  return nicenessIn(readFileSync('/proc/thread-self/stat', 'utf8'));
}

/** Field 19 of a /proc stat line. */
function nicenessIn(stat: string): number {
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
}

/** The niceness this process started with: its parent's (the test runner; 0 unless run under `nice`). */
const startNiceness = (): number => nicenessIn(readFileSync(`/proc/${process.ppid}/stat`, 'utf8'));

void test(
  'the main thread never lowers its own priority, and importing the engines leaves it alone (Linux)',
  { skip: process.platform !== 'linux' },
  () => {
    // The espeak worker module, once imported by the engine for a constant, lowered the event
    // loop itself (and every thread started after it) to the workers' niceness.
    assert.equal(ownNiceness(), startNiceness());
    assert.equal(fliteProvider.id, 'flite'); // its module is loaded, its worker module is not
    assert.equal(lowerThreadPriority(), false);
    assert.equal(ownNiceness(), startNiceness());
  },
);

void test(
  "the request parser's thread (large bodies) runs at the lower priority too (Linux)",
  { skip: process.platform !== 'linux' },
  async () => {
    // A flood of 100,000-character tasks kept it busy at normal priority: everyone's requests
    // waited seconds at the start of the soak (docs/reliability.md, Load and soak).
    const before = (await threadNiceness()).filter((n) => n === WORKER_NICENESS).length;
    const parser = workerPoolRequestParser(
      { textLength: 10_000, contents: 10, splitterMarkers: 10 },
      { inlineBodyBytes: -1 }, // every body goes to the thread
    );
    try {
      const request = await parser.generate(
        { contents: [{ text: 'Parsed off the main thread.', voiceId: 'voice-a' }] },
        () => Promise.reject(new Error('no saved splitter')),
        100,
      );
      assert.equal(request.pieces.length, 1);
      const lowered = (await threadNiceness()).filter((n) => n === WORKER_NICENESS).length - before;
      assert.ok(lowered >= 1, `the parser thread at niceness ${WORKER_NICENESS} (${lowered} found)`);
    } finally {
      await parser.close();
    }
  },
);

void test(
  'synthesis and encoder threads run at a lower priority than the event loop (Linux)',
  { skip: process.platform !== 'linux' },
  async () => {
    const before = (await threadNiceness()).filter((n) => n === WORKER_NICENESS).length;
    const engine = createEspeakEngine({ threads: 1 });
    const encoders = createEncoderPool({ size: 1 });
    try {
      const pcm = engine.synthesize(
        { text: 'Low priority.', voice: { engine: 'espeak', voice: 'en-us' }, speechRate: 1 },
        new AbortController().signal,
      );
      let bytes = 0;
      for await (const mp3 of encodePiece(pcm, encoders.open())) bytes += mp3.length;
      assert.ok(bytes > 0);
      const after = await threadNiceness();
      const lowered = after.filter((n) => n === WORKER_NICENESS).length - before;
      assert.ok(
        lowered >= 2,
        `an espeak and an encoder thread at niceness ${WORKER_NICENESS} (${lowered} found)`,
      );
      // This (main) thread keeps its own priority.
      assert.equal(ownNiceness(), startNiceness());
    } finally {
      await engine.close();
      await encoders.close();
    }
  },
);
