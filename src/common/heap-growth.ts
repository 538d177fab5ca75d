/**
 * How far V8 lets the service's heaps grow past what the last full collection kept. The main
 * thread's live heap is small (~40 MB) while it allocates quickly under load (requests, database
 * answers, audio messages). With V8's own growth factor the next limit then sat only ~25–30 MB
 * above the live heap, and the main thread ran a full collection more than once a second, back to
 * back, its marking steps and pauses 10–30 ms each: what a polite request that arrives meanwhile
 * waits for (docs/reliability.md, Load and soak). Doubling the heap at each limit cuts those
 * collections about five-fold for tens of MB more heap at most.
 */
import { setFlagsFromString } from 'node:v8';

/** The next heap limit: live heap × (1 + this / 100). */
export const HEAP_GROWING_PERCENT = 100;

const FLAG = /^--heap[-_]growing[-_]percent(=|$)/;

/**
 * Sets V8's heap growth for every isolate of this process (its worker threads included), unless
 * the operator chose one (`node --heap-growing-percent=…` or NODE_OPTIONS). Returns whether it set it.
 */
export function widenHeapGrowth(
  execArgv: readonly string[] = process.execArgv,
  nodeOptions: string = process.env.NODE_OPTIONS ?? '',
): boolean {
  const given = [...execArgv, ...nodeOptions.split(/\s+/)];
  if (given.some((arg) => FLAG.test(arg))) return false;
  setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
  return true;
}
