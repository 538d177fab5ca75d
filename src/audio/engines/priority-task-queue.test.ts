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

const owned = (name: string, owner: string): Task & { name: string } => ({
  name,
  [queueOptionsSymbol]: { interactive: false, owner },
});

function drain(queue: PriorityTaskQueue): string[] {
  const names: string[] = [];
  for (let t = queue.shift(); t !== null; t = queue.shift()) names.push((t as Task & { name: string }).name);
  return names;
}

test('batch work is shared between owners in turn, FIFO within each owner', () => {
  const queue = new PriorityTaskQueue();
  // A busy account queued five sentences before a second account queued two.
  for (const name of ['h1', 'h2', 'h3', 'h4', 'h5']) queue.push(owned(name, 'hostile'));
  queue.push(owned('p1', 'polite'));
  queue.push(owned('p2', 'polite'));
  assert.equal(queue.size, 7);
  assert.deepEqual(drain(queue), ['h1', 'p1', 'h2', 'p2', 'h3', 'h4', 'h5']);
  assert.equal(queue.size, 0);
});

test('an owner that comes back later takes its turn after those already waiting', () => {
  const queue = new PriorityTaskQueue();
  queue.push(owned('a1', 'a'));
  queue.push(owned('b1', 'b'));
  queue.push(owned('a2', 'a'));
  assert.equal((queue.shift() as Task & { name: string }).name, 'a1');
  queue.push(owned('c1', 'c'));
  queue.push(task('i1', true));
  assert.deepEqual(drain(queue), ['i1', 'b1', 'a2', 'c1']);
});

test('remove takes a task out of its owner queue', () => {
  const queue = new PriorityTaskQueue();
  const [a1, a2, b1] = [owned('a1', 'a'), owned('a2', 'a'), owned('b1', 'b')];
  for (const t of [a1, a2, b1]) queue.push(t);
  queue.remove(a1);
  queue.remove(a2);
  assert.equal(queue.size, 1);
  assert.deepEqual(drain(queue), ['b1']);
});

test('unshift puts a task taken by shift back where it was, its owner first again', () => {
  const queue = new PriorityTaskQueue();
  for (const t of [owned('a1', 'a'), owned('a2', 'a'), owned('b1', 'b'), owned('c1', 'c')]) queue.push(t);
  // piscina takes the head, finds every thread busy and puts it back: nothing may change.
  for (let round = 0; round < 5; round++) {
    const taken = queue.shift();
    assert.ok(taken !== null);
    queue.unshift(taken);
  }
  const i1 = task('i1', true);
  queue.push(i1);
  const urgent = queue.shift();
  assert.equal(urgent, i1);
  if (urgent !== null) queue.unshift(urgent);
  assert.equal(queue.size, 5);
  assert.deepEqual(drain(queue), ['i1', 'a1', 'b1', 'c1', 'a2']);
});

test('within an owner, the task furthest behind goes first; equals in arrival order', () => {
  const queue = new PriorityTaskQueue();
  const ranked = (name: string, owner: string, rank: number): Task & { name: string } => ({
    name,
    [queueOptionsSymbol]: { interactive: false, owner, rank },
  });
  // Task x has 40 s of audio already; task y is just starting; z of another owner in between.
  for (const t of [
    ranked('x-40', 'a', 40),
    ranked('x-40b', 'a', 40),
    ranked('y-0', 'a', 0),
    ranked('z-10', 'b', 10),
    ranked('y-0b', 'a', 0),
  ])
    queue.push(t);
  assert.deepEqual(drain(queue), ['y-0', 'z-10', 'y-0b', 'x-40', 'x-40b']);
});

test('interactive pieces furthest behind in their task go first, before any batch work', () => {
  const queue = new PriorityTaskQueue();
  const ranked = (name: string, interactive: boolean, rank: number): Task & { name: string } => ({
    name,
    [queueOptionsSymbol]: { interactive, rank, owner: 'a' },
  });
  // A task 4 s into its audio queued its third piece; tasks created after it queued their first
  // and second pieces: a listener still waiting for its first byte goes before one with audio.
  for (const t of [
    ranked('batch-0', false, 0),
    ranked('x-4', true, 4),
    ranked('y-0', true, 0),
    ranked('y-1', true, 1),
    ranked('z-0', true, 0),
    ranked('x-4b', true, 4),
  ])
    queue.push(t);
  assert.deepEqual(drain(queue), ['y-0', 'z-0', 'y-1', 'x-4', 'x-4b', 'batch-0']);
});
