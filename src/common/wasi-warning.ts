/**
 * Node 20 marks `node:wasi` experimental: the first `new WASI(…)` of a thread emits an
 * ExperimentalWarning, so every thread that runs a WASI build (Flite's synthesis threads) would
 * print it when it starts — noise at every start and after every idle minute.
 */

/** The message of that warning (Node 20). */
export const WASI_WARNING = 'WASI is an experimental feature and might change at any time';

/**
 * Makes the calling thread's `process.emitWarning` drop exactly the WASI warning — type
 * ExperimentalWarning with that message — and pass every other warning on unchanged. Call it in
 * the thread that uses `node:wasi`, before its first `new WASI(…)`: a worker thread has its own
 * `process`, so the main thread and other threads are untouched. Idempotent.
 */
export function dropWasiExperimentalWarning(): void {
  if (filtered.has(process)) return;
  filtered.add(process);
  const emit = process.emitWarning.bind(process) as (...args: unknown[]) => void;
  process.emitWarning = (warning: string | Error, ...rest: unknown[]) => {
    const option = rest[0];
    const type =
      typeof warning !== 'string'
        ? warning.name
        : typeof option === 'string'
          ? option
          : (option as { type?: string } | undefined)?.type;
    const message = typeof warning === 'string' ? warning : warning.message;
    if (type === 'ExperimentalWarning' && message === WASI_WARNING) return;
    emit(warning, ...rest);
  };
}

const filtered = new WeakSet<object>();
