/** The niceness of each thread of this process (Linux), to check which threads run at what priority. */
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { getPriority } from 'node:os';

/** This process's threads (by id, from /proc/self/task) and their niceness. */
export function threadNiceness(): Map<string, number> {
  const threads = new Map<string, number>();
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      threads.set(tid, getPriority(Number(tid)));
    } catch {
      // The thread ended while the list was read.
    }
  }
  return threads;
}

/** Asserts that threads were started since `before` was taken, every one of them at niceness 0. */
export function assertStartedAtNormalPriority(before: Map<string, number>): void {
  const started = [...threadNiceness()].filter(([tid]) => !before.has(tid));
  assert.ok(started.length > 0, 'no thread started');
  assert.deepEqual(
    started.filter(([, nice]) => nice !== 0),
    [],
    `threads started: ${started.map(([tid, nice]) => `${tid} at ${nice}`).join(', ')}`,
  );
}
