/**
 * GET /api/account/info: the authenticated account, with its quotas and current usage (issue 11
 * finding 3), in the hosted API's shape (src/accounts/account-info.ts). Its clients read the
 * account from top-level `user`; our envelope's `data` carries the same object.
 */
import type { FastifyInstance } from 'fastify';
import { accountInfo } from '../../accounts/account-info.js';
import type { AccountQuotaReport } from '../../tasks/task-service.js';
import { accountOf } from '../auth.js';
import { ok } from '../envelope.js';
import { accountSchema } from '../api-schemas.js';

/** The account info routes; `quotaReport` gives an account's quotas and usage. */
export function accountRoutes(
  quotaReport: (accountId: string) => Promise<AccountQuotaReport>,
  nodeConcurrency: number,
) {
  return async (app: FastifyInstance): Promise<void> => {
    app.get('/api/account/info', { schema: accountSchema }, async (request) => {
      const account = accountOf(request);
      const user = accountInfo(account, await quotaReport(account.id), nodeConcurrency);
      return { ...ok(user), user };
    });
  };
}
