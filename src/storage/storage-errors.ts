/**
 * Disk failures told apart from bugs: a full, over-quota or read-only file system (or a failing
 * device) under DATA_DIR is the operator's to fix, so it becomes 503 STORAGE_UNAVAILABLE with a
 * message a tenant may read, never a 500 "internal error".
 */
import { AppError, isAppError } from '../errors/app-error.js';

/** errno codes of a file system that cannot take a write right now. */
const UNWRITABLE = new Set(['ENOSPC', 'EDQUOT', 'EROFS', 'EIO']);

/** What tenants read; the errno and path stay in the operator's log (the error's cause). */
export const STORAGE_FULL_MESSAGE = 'storage is full or read-only; retry later';

/** Retry-After of the 503: an operator has to free space or remount, not a matter of seconds. */
const RETRY_AFTER_SECONDS = 60;

/**
 * The STORAGE_UNAVAILABLE error for `err` when it (or an error in its `cause` chain) is a disk
 * that cannot be written, the AppError itself if it already is one, else undefined.
 */
export function storageUnavailable(err: unknown): AppError | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (isAppError(e) && e.code === 'STORAGE_UNAVAILABLE') return e;
    const code = (e as NodeJS.ErrnoException).code;
    if (code !== undefined && UNWRITABLE.has(code))
      return new AppError('STORAGE_UNAVAILABLE', STORAGE_FULL_MESSAGE, {
        cause: err,
        headers: { 'Retry-After': String(RETRY_AFTER_SECONDS) },
      });
  }
  return undefined;
}
