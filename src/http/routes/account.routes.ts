/**
 * GET /api/account/info: the authenticated account, with its quotas, storage limits and current
 * usage, in the hosted API's shape (src/accounts/account-info.ts). Its clients read the account
 * from top-level `user`; our envelope's `data` carries the same object.
 */
import type { FastifyInstance } from 'fastify';
import { accountInfo } from '../../accounts/account-info.js';
import type { StorageLimits, StorageUsage } from '../../storage/storage-limits.js';
import type { AccountQuotaReport } from '../../tasks/task-service.js';
import { accountOf } from '../auth.js';
import { ok } from '../envelope.js';
import { accountSchema } from './account.schemas.js';

/** Where account info comes from. */
export interface AccountReports {
  /** An account's task quotas and its use of them, and what it stores in the units of `storageLimits`. */
  usage(accountId: string): Promise<{ quotas: AccountQuotaReport; stored: StorageUsage }>;
  storageLimits: StorageLimits;
  /** GENERATION_CONCURRENCY, for the hosted concurrency fields. */
  nodeConcurrency: number;
}

/** The account info routes. */
export function accountRoutes(reports: AccountReports) {
  return async (app: FastifyInstance): Promise<void> => {
    app.get('/api/account/info', { schema: accountSchema }, async (request) => {
      const account = accountOf(request);
      const { quotas, stored } = await reports.usage(account.id);
      const storage = { limits: reports.storageLimits, usage: stored };
      const user = accountInfo(account, quotas, storage, reports.nodeConcurrency);
      return { ...ok(user), user };
    });
  };
}
