/**
 * A piscina task queue with two classes: tasks marked interactive (a one-shot or a short task a
 * client is waiting on) go before queued batch work, the piece due first first (its rank: when
 * its task's audio began being made plus where the piece plays in it, so the listener that will
 * run dry first is served first, whichever task it listens to). Batch work is
 * shared fairly between its owners (accounts): the queue takes one task of each owner in turn, so
 * an account that runs many tasks at once gets no more of the threads than an account with one —
 * and, as every running task keeps at most a sentence or two queued, the tasks of an owner share
 * its turn too. Without it, the first sentence of a one-shot would wait behind every sentence long
 * tasks have queued, and one tenant's tasks would slow everyone's live streams.
 */
import { queueOptionsSymbol, type TaskQueue } from 'piscina';

/** A queued piscina task (the package exports its queue interface, not this type). */
export type QueuedTask = Parameters<TaskQueue['push']>[0];

/** The queue options a submitted task carries under `queueOptionsSymbol`. */
export interface SynthesisQueueOptions {
  interactive: boolean;
  /** Whose work it is (an account id); batch work is shared fairly between owners. */
  owner?: string | undefined;
  /**
   * Interactive work: when it is due (seconds on `performance.now()`'s clock), the earliest first.
   * Batch work: where it sits in its task's audio (seconds from the start), within an owner the
   * task furthest behind first, so every task's first sentence comes before anyone's tenth. The
   * queue reads it when it picks: a sender may correct it while the task waits.
   */
  rank?: number | undefined;
}

/** Marks a piscina task object as interactive or batch work (the mark is not sent to the worker). */
export function withQueueOptions<T extends object>(task: T, options: SynthesisQueueOptions): T {
  return Object.assign(task, { [queueOptionsSymbol]: options });
}

function optionsOf(task: QueuedTask): Partial<SynthesisQueueOptions> {
  return (task[queueOptionsSymbol] as Partial<SynthesisQueueOptions> | null) ?? {};
}

/** Removes and returns the first task of the lowest rank (a linear scan: an owner queues a few per task). */
function takeLowestRank(queued: QueuedTask[]): QueuedTask | null {
  let best = -1;
  let bestRank = Infinity;
  for (let i = 0; i < queued.length; i++) {
    const task = queued[i];
    const rank = task === undefined ? Infinity : (optionsOf(task).rank ?? 0);
    if (best === -1 || rank < bestRank) {
      best = i;
      bestRank = rank;
    }
  }
  return best === -1 ? null : (queued.splice(best, 1)[0] ?? null);
}

/**
 * Interactive tasks first, the lowest `rank` first; then batch tasks, one owner after another and,
 * within an owner, the lowest `rank` first (arrival order among equals in both classes). Use it with
 * piscina's `stricterFIFO: true`: a task piscina took but could not place on a busy thread comes
 * back through `unshift` to where it was (piscina's default pushes it to the back, which here would
 * also send its owner to the back of the turns: one owner's first sentence was bumped 20 times).
 */
export class PriorityTaskQueue implements TaskQueue {
  private readonly interactive: QueuedTask[] = [];
  /** Batch tasks per owner, in arrival order; an owner is here only while it has tasks queued. */
  private readonly batch = new Map<string, QueuedTask[]>();
  /** Owners with batch tasks queued, the one whose turn it is first. */
  private readonly turns: string[] = [];
  private batchSize = 0;

  get size(): number {
    return this.interactive.length + this.batchSize;
  }

  push(task: QueuedTask): void {
    this.add(task, 'back');
  }

  /** Puts back a task just taken by `shift`, where it was. */
  unshift(task: QueuedTask): void {
    this.add(task, 'front');
  }

  shift(): QueuedTask | null {
    const urgent = takeLowestRank(this.interactive);
    if (urgent !== null) return urgent;
    const owner = this.turns.shift();
    if (owner === undefined) return null;
    const queued = this.batch.get(owner) ?? [];
    const task = takeLowestRank(queued);
    // After its task, the owner waits for its next turn behind the others.
    if (queued.length > 0) this.turns.push(owner);
    else this.batch.delete(owner);
    if (task !== null) this.batchSize--;
    return task;
  }

  remove(task: QueuedTask): void {
    const at = this.interactive.indexOf(task);
    if (at !== -1) {
      this.interactive.splice(at, 1);
      return;
    }
    for (const [owner, queued] of this.batch) {
      const index = queued.indexOf(task);
      if (index === -1) continue;
      queued.splice(index, 1);
      this.batchSize--;
      if (queued.length === 0) this.dropOwner(owner);
      return;
    }
  }

  private add(task: QueuedTask, end: 'front' | 'back'): void {
    const options = optionsOf(task);
    if (options.interactive === true) {
      if (end === 'front') this.interactive.unshift(task);
      else this.interactive.push(task);
      return;
    }
    const owner = options.owner ?? '';
    let queued = this.batch.get(owner);
    if (queued === undefined) {
      queued = [];
      this.batch.set(owner, queued);
      if (end === 'back') this.turns.push(owner);
    }
    if (end === 'front') {
      queued.unshift(task);
      // Its owner's turn comes first again, as before the task was taken.
      this.dropTurn(owner);
      this.turns.unshift(owner);
    } else {
      queued.push(task);
    }
    this.batchSize++;
  }

  private dropOwner(owner: string): void {
    this.batch.delete(owner);
    this.dropTurn(owner);
  }

  private dropTurn(owner: string): void {
    const at = this.turns.indexOf(owner);
    if (at !== -1) this.turns.splice(at, 1);
  }
}
