/**
 * The account record `GET /api/account/info` answers, in the shape the hosted API's clients read
 * (docs/compatibility.md): top-level `user` with `credit`, `credits`, `bonusCredit`, `loraQuota`
 * and `quota{…}`, filled from the account's real limits, next to our own `quota`, `limits` and
 * `usage` report. Pure.
 */
import { reportedLimits, type StorageLimits, type StorageUsage } from '../storage/storage-limits.js';
import type { AccountQuotaReport } from '../tasks/task-service.js';
import type { Account } from './account-service.js';

/**
 * What `credit` (and every other count) says when the account has no such limit: a large number,
 * so clients that refuse to synthesise below some balance (several check `credit < 100`) go on.
 */
export const UNLIMITED_CREDIT = 999_999_999;

/** The hosted API's `user` object, with our quota report. */
export interface AccountInfo {
  id: string;
  name: string;
  createdAt: string;
  role: 'user';
  /** A self-hosted account has no paid-only features locked: always true. */
  isPaid: true;
  /** Characters the account may still synthesise today (its daily quota), or UNLIMITED_CREDIT. */
  credit: number;
  /** No bonus balance here: 0. */
  bonusCredit: number;
  /** The hosted API's deprecated balance field; equal to `credit` so old clients read the balance. */
  credits: number;
  /** Professional-clone (LoRA) voices the account may hold: not limited here. */
  loraQuota: number;
  quota: AccountQuotaReport['quota'] & {
    syncBaseConcurrent: number;
    syncPaidConcurrent: number;
    asyncBaseConcurrent: number;
    asyncHPConcurrent: number;
    lora: number;
    priority: number;
  };
  /** What the account may keep stored; null = unlimited. */
  limits: Record<keyof StorageLimits, number | null>;
  usage: AccountQuotaReport['usage'] & StorageUsage;
}

/**
 * The account info of `account`. `nodeConcurrency` (GENERATION_CONCURRENCY) stands for the
 * concurrency fields when the account has no concurrency limit of its own.
 */
export function accountInfo(
  account: Account,
  report: AccountQuotaReport,
  storage: { limits: StorageLimits; usage: StorageUsage },
  nodeConcurrency: number,
): AccountInfo {
  const concurrent = report.quota.maxConcurrentTasks ?? nodeConcurrency;
  const credit = report.usage.charactersRemaining ?? UNLIMITED_CREDIT;
  return {
    id: account.id,
    name: account.name,
    createdAt: account.createdAt.toISOString(),
    role: 'user',
    isPaid: true,
    credit,
    bonusCredit: 0,
    credits: credit,
    loraQuota: UNLIMITED_CREDIT,
    quota: {
      ...report.quota,
      syncBaseConcurrent: concurrent,
      syncPaidConcurrent: concurrent,
      asyncBaseConcurrent: concurrent,
      asyncHPConcurrent: concurrent,
      lora: UNLIMITED_CREDIT,
      priority: 0,
    },
    limits: reportedLimits(storage.limits),
    usage: { ...report.usage, ...storage.usage },
  };
}
