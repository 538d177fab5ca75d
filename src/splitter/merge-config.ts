/**
 * Diff-update semantics of a splitter config: objects are deep-merged, arrays (and
 * every other non-object value) replace what was there, and `null` deletes the key.
 *
 * Decisions where the spec is silent:
 * - Existing keys keep their position; keys new to `current` are appended in the diff's order.
 * - An object in the diff that lands where `current` has no object is merged into an empty object,
 *   so `null`s nested in it delete nothing and are simply dropped (a stored config never holds them).
 * - `null` inside an array is an ordinary element: the array replaces the old one as given.
 * - The result shares nothing with either argument, and the caller re-validates it.
 */
import { cloneJson, isPlainRecord } from './splitter-config.js';

function setKey(target: Record<string, unknown>, key: string, value: unknown): void {
  // defineProperty, not assignment, so a `__proto__` key stays data and never swaps the prototype.
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

/** Applies a diff to a config: objects deep-merged, arrays replaced, `null` deletes; returns a new object. */
export function mergeConfigDiff(
  current: Readonly<Record<string, unknown>>,
  diff: Readonly<Record<string, unknown>>,
): Record<string, unknown> {
  const out = cloneJson({ ...current });
  for (const [key, patch] of Object.entries(diff)) {
    if (patch === null) {
      delete out[key];
      continue;
    }
    if (isPlainRecord(patch)) {
      const base = Object.hasOwn(out, key) ? out[key] : undefined;
      setKey(out, key, mergeConfigDiff(isPlainRecord(base) ? base : {}, patch));
      continue;
    }
    setKey(out, key, cloneJson(patch));
  }
  return out;
}
