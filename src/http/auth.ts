/** Bearer-key authentication for protected routes: sets `request.account` or answers 401. */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Account, AccountService } from '../accounts/account-service.js';

declare module 'fastify' {
  interface FastifyRequest {
    account: Account | null;
  }
}

/** The token of an `Authorization: Bearer <token>` header, if the request has one. */
export function bearerToken(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  if (header === undefined) return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}

/** Returns an onRequest hook that authenticates the bearer key of the request. */
export function bearerAuth(accounts: AccountService) {
  return async (request: FastifyRequest): Promise<void> => {
    request.account = await accounts.authenticate(bearerToken(request));
  };
}

/** The authenticated account of a protected route (set by bearerAuth). */
export function accountOf(request: FastifyRequest): Account {
  if (request.account === null) throw new Error('route is not protected by bearerAuth');
  return request.account;
}

export function decorateAccount(app: FastifyInstance): void {
  app.decorateRequest('account', null);
}
