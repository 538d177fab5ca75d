/**
 * A piscina task queue with two classes: tasks marked interactive (a one-shot or a short task a
 * client is waiting on) go before queued batch work, FIFO within each class. Without it, the first
 * sentence of a one-shot waits behind every sentence long tasks have queued on the shared threads.
 */
import { queueOptionsSymbol, type TaskQueue } from 'piscina';

/** A queued piscina task (the package exports its queue interface, not this type). */
export type QueuedTask = Parameters<TaskQueue['push']>[0];

/** The queue options a submitted task carries under `queueOptionsSymbol`. */
export interface SynthesisQueueOptions {
  interactive: boolean;
}

/** Marks a piscina task object as interactive or batch work (the mark is not sent to the worker). */
export function withQueueOptions<T extends object>(task: T, options: SynthesisQueueOptions): T {
  return Object.assign(task, { [queueOptionsSymbol]: options });
}

function isInteractive(task: QueuedTask): boolean {
  const options = task[queueOptionsSymbol] as Partial<SynthesisQueueOptions> | null;
  return options?.interactive === true;
}

/** Interactive tasks first, then batch tasks, each in arrival order. */
export class PriorityTaskQueue implements TaskQueue {
  private readonly interactive: QueuedTask[] = [];
  private readonly batch: QueuedTask[] = [];

  get size(): number {
    return this.interactive.length + this.batch.length;
  }

  push(task: QueuedTask): void {
    (isInteractive(task) ? this.interactive : this.batch).push(task);
  }

  shift(): QueuedTask | null {
    return this.interactive.shift() ?? this.batch.shift() ?? null;
  }

  remove(task: QueuedTask): void {
    for (const list of [this.interactive, this.batch]) {
      const at = list.indexOf(task);
      if (at !== -1) {
        list.splice(at, 1);
        return;
      }
    }
  }
}
