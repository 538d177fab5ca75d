/** In-process task events: one node, one EventEmitter (the embedded adapter of `TaskEvents`). */
import { EventEmitter } from 'node:events';
import type { TaskChangeFilter, TaskChangeKind, TaskEvents } from './task-events.js';

/** `TaskEvents` within one process; also the local dispatcher of the Redis adapter. */
export class MemoryTaskEvents implements TaskEvents {
  private readonly emitter = new EventEmitter();

  constructor() {
    // Many stream sessions may wait on one task; each waiter is a listener.
    this.emitter.setMaxListeners(0);
  }

  changed(taskId: string, kind: TaskChangeKind = 'progress'): void {
    // Event names are prefixed: a task id spelled "error" must not make emit() throw.
    this.emitter.emit(eventName(taskId));
    if (kind !== 'progress') {
      this.emitter.emit(eventName(taskId, kind));
      this.emitter.emit(ANNOUNCEMENTS, taskId, kind);
    }
  }

  /** Wakes every waiter of every task: after a lapse in which changes may have been missed. */
  wakeAll(): void {
    for (const name of this.emitter.eventNames()) {
      if (name === ANNOUNCEMENTS) this.emitter.emit(ANNOUNCEMENTS, null, null);
      else this.emitter.emit(name);
    }
  }

  onAnnouncement(listener: (taskId: string | null, kind: TaskChangeFilter | null) => void): () => void {
    // A listener's failure must not stop the announcement reaching the others (changed() never throws).
    const safe = (taskId: string | null, kind: TaskChangeFilter | null) => {
      try {
        listener(taskId, kind);
      } catch {
        // the listener's own concern
      }
    };
    this.emitter.on(ANNOUNCEMENTS, safe);
    return () => this.emitter.off(ANNOUNCEMENTS, safe);
  }

  nextChange(taskId: string, signal?: AbortSignal, options: { only?: TaskChangeFilter } = {}): Promise<void> {
    // The executor runs synchronously: the listener exists from the moment of the call.
    return new Promise<void>((resolve, reject) => {
      const name = eventName(taskId, options.only);
      const onChange = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      const onAbort = () => {
        this.emitter.off(name, onChange);
        reject(signal?.reason instanceof Error ? signal.reason : new Error('aborted'));
      };
      if (signal?.aborted) return onAbort();
      this.emitter.once(name, onChange);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Number of waiters of `taskId`, of any kind (tests check that aborted waits leave no listener behind). */
  waiterCount(taskId: string): number {
    return (
      this.emitter.listenerCount(eventName(taskId)) +
      this.emitter.listenerCount(eventName(taskId, 'status')) +
      this.emitter.listenerCount(eventName(taskId, 'cancel')) +
      this.emitter.listenerCount(eventName(taskId, 'deleted')) +
      this.emitter.listenerCount(eventName(taskId, 'token'))
    );
  }
}

/** The emitter event of `onAnnouncement` listeners (no task id is spelled with a space). */
const ANNOUNCEMENTS = 'every announcement';

/** The emitter event of the waiters of every change of a task, or of one kind of change only. */
function eventName(taskId: string, only?: TaskChangeFilter): string {
  return only === undefined ? `task:${taskId}` : `${only}:${taskId}`;
}
