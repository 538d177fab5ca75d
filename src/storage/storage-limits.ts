/**
 * What one account may keep stored: splitter configurations (count and bytes), voices, the bytes
 * of their uploaded samples and of its tasks' audio. A request that would go past a limit is
 * refused with 403 BILLING_QUOTA_EXCEEDED (the hosted API's code for a spent allowance) before
 * anything is written. Task audio is generated after the task is accepted, so its limit refuses
 * new tasks once what is stored has reached it: a task accepted below it may pass it by its own size.
 */
import { AppError } from '../errors/app-error.js';

/** Per-account storage limits; 0 = unlimited. */
export interface StorageLimits {
  /** Saved splitter configurations. */
  splitters: number;
  /** UTF-8 bytes of all saved splitter configurations together. */
  splitterBytes: number;
  voices: number;
  /** Bytes of every uploaded voice sample (professional-cloning archives) together. */
  uploadBytes: number;
  /** Bytes of the stored audio of every task (merged and piece MP3s) together. */
  taskBytes: number;
}

export const UNLIMITED_STORAGE: StorageLimits = {
  splitters: 0,
  splitterBytes: 0,
  voices: 0,
  uploadBytes: 0,
  taskBytes: 0,
};

/** What an account stores, in the units of StorageLimits. */
export type StorageUsage = Record<keyof StorageLimits, number>;

/** Which limit a write would pass, with what the account already uses of it. */
export interface StorageRefusal {
  limit: keyof StorageLimits;
  max: number;
  used: number;
  /** What the refused write would have added. */
  adding: number;
}

/** The first limit that `used` plus `adding` passes, if any. */
export function storageRefusal(
  limits: StorageLimits,
  used: Partial<StorageUsage>,
  adding: Partial<StorageUsage>,
): StorageRefusal | undefined {
  for (const limit of Object.keys(adding) as (keyof StorageLimits)[]) {
    const max = limits[limit];
    const add = adding[limit] ?? 0;
    const now = used[limit] ?? 0;
    if (max > 0 && add > 0 && now + add > max) return { limit, max, used: now, adding: add };
  }
  return undefined;
}

const UNITS: Record<keyof StorageLimits, string> = {
  splitters: 'splitter configurations',
  splitterBytes: 'bytes of splitter configurations',
  voices: 'voices',
  uploadBytes: 'bytes of uploaded voice samples',
  taskBytes: 'bytes of stored task audio',
};

/** 403 BILLING_QUOTA_EXCEEDED naming the limit, what is used of it and what the request would add. */
export function storageLimitExceeded(refusal: StorageRefusal): AppError {
  const unit = UNITS[refusal.limit];
  if (refusal.limit === 'taskBytes')
    return new AppError(
      'BILLING_QUOTA_EXCEEDED',
      `storage limit reached: the account stores ${refusal.used} ${unit}, at most ${refusal.max}; ` +
        'no new task is accepted until some tasks are deleted',
    );
  return new AppError(
    'BILLING_QUOTA_EXCEEDED',
    `storage limit reached: the account has ${refusal.used} of at most ${refusal.max} ${unit} ` +
      `and this request adds ${refusal.adding}; delete some first`,
  );
}

/** A limit as account info reports it: null when unlimited. */
export function reportedLimits(limits: StorageLimits): Record<keyof StorageLimits, number | null> {
  const shown = (n: number): number | null => (n > 0 ? n : null);
  return {
    splitters: shown(limits.splitters),
    splitterBytes: shown(limits.splitterBytes),
    voices: shown(limits.voices),
    uploadBytes: shown(limits.uploadBytes),
    taskBytes: shown(limits.taskBytes),
  };
}
