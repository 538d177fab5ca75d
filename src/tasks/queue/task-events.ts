/**
 * Change notifications of generation tasks (a piece started or finished, the task finished or
 * failed), so stream sessions wake on progress instead of polling. Adapters: in-process
 * (`task-events.memory.ts`, one node) and Redis pub/sub (`task-events.redis.ts`, every node hears
 * every node's changes); one contract suite (`task-events.contract.test.ts`) runs against both.
 */

/**
 * The task-change bus. A notification carries no data: it only says "look again". Delivery is
 * best effort — a change can be missed (the Redis adapter misses those published while its
 * subscription is down) and a waiter can be woken without a change — so callers treat a wake-up
 * as a hint, re-check the state they wait on, and bound every wait with an abort signal.
 */
export interface TaskEvents {
  /**
   * Announces that something about `taskId` changed; listeners re-read what they need. `cancel`:
   * the change is a cancellation request (it wakes every waiter, and the waiters of cancellations
   * only). Never throws.
   */
  changed(taskId: string, kind?: TaskChangeKind): void;
  /**
   * Resolves at the next change of `taskId` after this call (or at a spurious wake-up) — with
   * `{ only: 'cancel' }` (or `'deleted'`), at the next change of that kind only, so a generation's own progress
   * does not wake its cancellation watcher; rejects with `signal.reason` (when it is an Error) as
   * soon as `signal` aborts, removing the listener. Call it *before* checking state and await it
   * after, so a change in between is never missed.
   */
  nextChange(taskId: string, signal?: AbortSignal, options?: { only?: TaskChangeFilter }): Promise<void>;
  /**
   * Calls `listener` with the task and kind of every announcement other than progress, of any task,
   * this node's own included — or with `null` after a lapse in which announcements may have been
   * missed (anything may have changed). For caches that must forget a task when it changes on any
   * node. Returns the unsubscribe function.
   */
  onAnnouncement(listener: (taskId: string | null, kind: TaskChangeFilter | null) => void): () => void;
}

/**
 * What kind of change an announcement is: progress of the task (default: a piece started or
 * finished), a change of the task's own row (claimed for generation, generated or failed: every
 * node forgets the stream view it may keep), a cancellation request, the task's deletion (its live
 * stream sessions end on every node), or a new stream token (every node forgets the old one it may
 * remember).
 */
export type TaskChangeKind = 'progress' | 'status' | 'cancel' | 'deleted' | 'token';

/** The kinds a waiter may wait for alone (every announcement wakes the waiters of any change). */
export type TaskChangeFilter = Exclude<TaskChangeKind, 'progress'>;
