/**
 * The abort signal of one outbound call: aborted by whoever may stop it (a task's lease, a
 * cancellation, a client leaving) or when one of the call's own time limits passes (total,
 * connect, first byte). Every timer is cleared when the call ends, so a finished call leaves
 * nothing behind; the abort reason tells a passed limit from a caller's abort.
 */

/** The abort reason when a time limit of a call passed (as opposed to a caller stopping it). */
export class DeadlineExceededError extends Error {
  constructor(
    /** Which limit passed, e.g. 'connect', 'first byte', 'total'. */
    readonly limit: string,
    readonly ms: number,
  ) {
    super(`the ${limit} time limit of ${ms} ms passed`);
    this.name = 'DeadlineExceededError';
  }
}

/**
 * A signal composed of `parents` and the call's own time limits: aborted with a parent's reason
 * when a parent aborts, or with a DeadlineExceededError when a limit passes first. Call `clear()`
 * when the call ends (in a `finally`).
 */
export class CallDeadline {
  /** Pass this to the call. */
  readonly signal: AbortSignal;
  private readonly own = new AbortController();
  private readonly timers = new Set<NodeJS.Timeout>();

  /** `totalMs` (if given) starts a limit named `total` at once. */
  constructor(parents: AbortSignal | readonly AbortSignal[], totalMs?: number) {
    const list: readonly AbortSignal[] = parents instanceof AbortSignal ? [parents] : parents;
    this.signal = AbortSignal.any([...list, this.own.signal]);
    if (totalMs !== undefined) this.limit('total', totalMs);
  }

  /** Starts another time limit, e.g. until connected; returns the function that stops it. */
  limit(name: string, ms: number): () => void {
    if (this.signal.aborted) return () => undefined;
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      this.own.abort(new DeadlineExceededError(name, ms));
    }, ms);
    // Not unref'd: a call waiting only on its deadline must still end; clear() removes it.
    this.timers.add(timer);
    return () => {
      clearTimeout(timer);
      this.timers.delete(timer);
    };
  }

  /** The limit that stopped the call, or undefined (still running, or a parent aborted it first). */
  get exceeded(): DeadlineExceededError | undefined {
    const reason: unknown = this.signal.reason;
    return reason instanceof DeadlineExceededError && reason === this.own.signal.reason ? reason : undefined;
  }

  /** Stops every timer of the call; call when the call ends, however it ends. */
  clear(): void {
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
  }
}

/**
 * Resolves as `promise` does, or rejects with the abort reason as soon as `signal` aborts (the
 * work itself runs on, its outcome ignored): a wait on something that cannot be cancelled.
 */
export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  const reason = (): Error => (signal.reason instanceof Error ? signal.reason : new Error('aborted'));
  if (signal.aborted) {
    // Its outcome is ignored here too: a later failure of the work is no unhandled rejection.
    promise.catch(() => undefined);
    return Promise.reject(reason());
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(reason());
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}
