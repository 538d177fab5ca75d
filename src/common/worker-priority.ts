/**
 * Lowers the CPU priority of the calling worker thread (Linux: `setpriority` on its thread id,
 * read from /proc/thread-self), so that synthesis, encoding and the parsing of large requests —
 * batch work that can run a moment later — never take the CPU from the event loop, which answers
 * requests and feeds live listeners. The workers still get every cycle the event loop leaves.
 * Elsewhere, or when the call is refused, a no-op: priority is an optimisation, never a requirement.
 */
import { readdirSync, readlinkSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';
import { isMainThread } from 'node:worker_threads';

/** Niceness of synthesis and encoder threads (0 = normal, 19 = lowest). */
export const WORKER_NICENESS = 10;

/**
 * Gives this worker thread `niceness` (default WORKER_NICENESS); returns whether it took effect.
 * Never on the main thread (a worker module evaluated there by an import must not lower the
 * event loop; threads started afterwards would inherit it too), and never raises a thread's
 * priority: a thread of a process started lower (the batch process) stays lower.
 */
export function lowerThreadPriority(niceness = WORKER_NICENESS): boolean {
  if (process.platform !== 'linux' || isMainThread) return false;
  try {
    // "/proc/thread-self" links to "<pid>/task/<tid>".
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    if (!Number.isInteger(tid) || tid <= 0) return false;
    if (getPriority(tid) < niceness) setPriority(tid, niceness);
    return true;
  } catch {
    return false;
  }
}

/**
 * Gives every thread of this process `niceness` (Linux: each of /proc/self/task; threads started
 * later inherit it from the thread that starts them). For a child process that only does batch
 * work: V8's helper threads exist before any code runs, so lowering the main thread alone would
 * leave its collections at the service's priority. Returns the threads lowered; 0 elsewhere.
 */
export function lowerProcessPriority(niceness: number): number {
  if (process.platform !== 'linux') return 0;
  let lowered = 0;
  let tids: string[];
  try {
    tids = readdirSync('/proc/self/task');
  } catch {
    return 0;
  }
  for (const tid of tids) {
    try {
      if (getPriority(Number(tid)) < niceness) setPriority(Number(tid), niceness);
      lowered++;
    } catch {
      // A thread that ended meanwhile, or a refusal: priority is an optimisation.
    }
  }
  return lowered;
}
