import assert from 'node:assert/strict';
import { test } from 'node:test';
import { queueOptionsSymbol } from 'piscina';
import { PriorityTaskQueue, type QueuedTask as Task } from './priority-task-queue.js';

const task = (name: string, interactive: boolean | null): Task & { name: string } => ({
  name,
  [queueOptionsSymbol]: interactive === null ? null : { interactive },
});

test('interactive tasks leave the queue before batch tasks, each class in arrival order', () => {
  const queue = new PriorityTaskQueue();
  const order = [task('b1', false), task('b2', null), task('i1', true), task('b3', false), task('i2', true)];
  for (const t of order) queue.push(t);
  assert.equal(queue.size, 5);
  const names: string[] = [];
  for (let t = queue.shift(); t !== null; t = queue.shift()) names.push((t as Task & { name: string }).name);
  assert.deepEqual(names, ['i1', 'i2', 'b1', 'b2', 'b3']);
  assert.equal(queue.size, 0);
});

test('remove takes a queued task out of its class (an aborted task)', () => {
  const queue = new PriorityTaskQueue();
  const [b1, i1, b2] = [task('b1', false), task('i1', true), task('b2', false)];
  for (const t of [b1, i1, b2]) queue.push(t);
  queue.remove(b1);
  queue.remove(i1);
  queue.remove(task('never queued', true));
  assert.equal(queue.size, 1);
  assert.equal(queue.shift(), b2);
});
