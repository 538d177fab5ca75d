/**
 * Change notifications of generation tasks (a piece started or finished, the task finished or
 * failed), so stream sessions wake on progress instead of polling. In-process now; the scale-out
 * implementation (Redis pub/sub) implements the same contract.
 */
import { EventEmitter } from 'node:events';

export interface TaskEvents {
  /** Announces that something about `taskId` changed; listeners re-read what they need. */
  changed(taskId: string): void;
  /**
   * Resolves at the next change of `taskId` after this call. Call it *before* checking state and
   * await it after, so a change in between is never missed.
   */
  nextChange(taskId: string, signal?: AbortSignal): Promise<void>;
}

export class InProcessTaskEvents implements TaskEvents {
  private readonly emitter = new EventEmitter();

  constructor() {
    // Many stream sessions may wait on one task; each waiter is a listener.
    this.emitter.setMaxListeners(0);
  }

  changed(taskId: string): void {
    this.emitter.emit(taskId);
  }

  nextChange(taskId: string, signal?: AbortSignal): Promise<void> {
    // The executor runs synchronously: the listener exists from the moment of the call.
    return new Promise<void>((resolve, reject) => {
      const onChange = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      const onAbort = () => {
        this.emitter.off(taskId, onChange);
        reject(signal?.reason instanceof Error ? signal.reason : new Error('aborted'));
      };
      if (signal?.aborted) return onAbort();
      this.emitter.once(taskId, onChange);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}
