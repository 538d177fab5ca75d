/**
 * Lowers the CPU priority of the calling worker thread (Linux: `setpriority` on its thread id,
 * read from /proc/thread-self), so that synthesis, encoding and the parsing of large requests —
 * batch work that can run a moment later — never take the CPU from the event loop, which answers
 * requests and feeds live listeners. The workers still get every cycle the event loop leaves.
 * Elsewhere, or when the call is refused, a no-op: priority is an optimisation, never a requirement.
 */
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { isMainThread } from 'node:worker_threads';

/** Niceness of synthesis and encoder threads (0 = normal, 19 = lowest). */
export const WORKER_NICENESS = 10;

/**
 * Gives this worker thread `niceness` (default WORKER_NICENESS); returns whether it took effect.
 * Never on the main thread (a worker module evaluated there by an import must not lower the
 * event loop; threads started afterwards would inherit it too).
 */
export function lowerThreadPriority(niceness = WORKER_NICENESS): boolean {
  if (process.platform !== 'linux' || isMainThread) return false;
  try {
    // "/proc/thread-self" links to "<pid>/task/<tid>".
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    if (!Number.isInteger(tid) || tid <= 0) return false;
    setPriority(tid, niceness);
    return true;
  } catch {
    return false;
  }
}
