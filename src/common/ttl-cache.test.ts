import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { TtlCache } from './ttl-cache.js';

void test('an entry is answered until its time to live has passed', async () => {
  const cache = new TtlCache<string, number>(40, 10);
  cache.set('a', 1);
  assert.equal(cache.get('a'), 1);
  await sleep(60);
  assert.equal(cache.get('a'), undefined);
  assert.equal(cache.size, 0);
});

void test('holds at most maxEntries, dropping the oldest inserted first', () => {
  const cache = new TtlCache<number, number>(60_000, 3);
  for (let i = 0; i < 5; i++) cache.set(i, i * 10);
  assert.equal(cache.size, 3);
  assert.deepEqual(
    [0, 1, 2, 3, 4].map((i) => cache.get(i)),
    [undefined, undefined, 20, 30, 40],
  );
  cache.set(2, 21); // stored again: now the newest
  cache.set(5, 50);
  assert.equal(cache.get(3), undefined);
  assert.equal(cache.get(2), 21);
});

void test('a time to live of 0 stores nothing; delete and clear forget entries', () => {
  const off = new TtlCache<string, number>(0, 3);
  off.set('a', 1);
  assert.equal(off.get('a'), undefined);
  const cache = new TtlCache<string, number>(60_000, 3);
  cache.set('a', 1);
  cache.set('b', 2);
  cache.delete('a');
  assert.equal(cache.get('a'), undefined);
  cache.clear();
  assert.equal(cache.get('b'), undefined);
});
