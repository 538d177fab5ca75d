/** The niceness of each thread of this process (Linux: /proc/self/task), to check which threads run at what priority. */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';

/** This process's threads (by id) and their niceness. */
export function threadNiceness(): Map<string, number> {
  const threads = new Map<string, number>();
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      // Fields after the command's closing parenthesis; niceness is the stat file's 19th field.
      const fields = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8').split(')').at(-1)?.trim().split(' ');
      threads.set(tid, Number(fields?.[16]));
    } catch {
      // The thread ended while the list was read.
    }
  }
  return threads;
}

/** The threads started since `before` was taken, with their niceness. */
export function threadsStartedSince(before: Map<string, number>): [tid: string, niceness: number][] {
  return [...threadNiceness()].filter(([tid]) => !before.has(tid));
}

/** Asserts that threads were started since `before` was taken, every one of them at niceness 0. */
export function assertStartedAtNormalPriority(before: Map<string, number>): void {
  const started = threadsStartedSince(before);
  assert.ok(started.length > 0, 'no thread started');
  assert.deepEqual(
    started.filter(([, nice]) => nice !== 0),
    [],
    `threads started: ${started.map(([tid, nice]) => `${tid} at ${nice}`).join(', ')}`,
  );
}
