/**
 * The operator API under /admin (accounts, API keys, voice imports, a rescan of MODELS_DIR), authenticated by the admin
 * token alone. `:account` is an account id or name. Without an admin token the routes are not
 * registered at all, so /admin answers 404 RESOURCE_NOT_FOUND like any unknown path.
 * Revocation is `POST /admin/keys/:keyId/revoke` (a revoked key stays listed, so it is no delete).
 * Rate-limited per client address, counted before the token is checked.
 */
import type { FastifyInstance } from 'fastify';
import type { AdminService } from '../../admin/admin-service.js';
import type { AddModelRequest } from '../../audio/engines/neural-install.js';
import { adminAuth } from '../admin-auth.js';
import { ok, okNoData } from '../envelope.js';
import {
  addRouteOnRequestHook,
  clientAddressKey,
  registerRateLimit,
  type RateLimitStore,
} from '../rate-limit.js';
import { adminSchemas } from './admin.schemas.js';

/** Rate-limit settings of the admin routes (requests per client address and window). */
export interface AdminRouteOptions {
  /** Reads MODELS_DIR again; resolves with the neural engines it holds now. */
  rescanModels: () => Promise<unknown[]>;
  rateLimitMax: number;
  rateLimitWindowMs: number;
  rateLimitStore: RateLimitStore;
}

interface AccountParams {
  account: string;
}

interface KeyParams {
  keyId: string;
}

/** Registers the /admin routes behind `adminToken`; none when it is undefined. */
export function adminRoutes(admin: AdminService, adminToken: string | undefined, options: AdminRouteOptions) {
  return async (app: FastifyInstance): Promise<void> => {
    if (adminToken === undefined) return;
    await registerRateLimit(
      app,
      {
        name: 'admin',
        max: options.rateLimitMax,
        windowMs: options.rateLimitWindowMs,
        keyGenerator: clientAddressKey,
      },
      options.rateLimitStore,
    );
    addRouteOnRequestHook(app, adminAuth(adminToken));

    app.post('/admin/accounts', { schema: adminSchemas.createAccount }, async (request) =>
      ok(await admin.createAccount(request.body)),
    );

    app.get('/admin/accounts', { schema: adminSchemas.listAccounts }, async () =>
      ok(await admin.listAccounts()),
    );

    app.post<{ Params: AccountParams }>(
      '/admin/accounts/:account/keys',
      { schema: adminSchemas.createKey },
      async (request) => ok(await admin.createKey(request.params.account)),
    );

    app.get<{ Params: AccountParams }>(
      '/admin/accounts/:account/keys',
      { schema: adminSchemas.listKeys },
      async (request) => ok(await admin.listKeys(request.params.account)),
    );

    app.post<{ Params: KeyParams }>(
      '/admin/keys/:keyId/revoke',
      { schema: adminSchemas.revokeKey },
      async (request) => {
        await admin.revokeKey(request.params.keyId);
        return okNoData();
      },
    );

    app.get<{ Params: AccountParams }>(
      '/admin/accounts/:account/voices/export',
      { schema: adminSchemas.exportVoices },
      async (request) => ok(await admin.exportVoices(request.params.account)),
    );

    app.post<{ Params: AccountParams }>(
      '/admin/accounts/:account/voices/import',
      { schema: adminSchemas.importVoice },
      async (request) => ok(await admin.importVoice(request.params.account, request.body)),
    );

    app.post('/admin/models/rescan', { schema: adminSchemas.rescanModels }, async () =>
      ok(await options.rescanModels()),
    );

    app.get('/admin/models', { schema: adminSchemas.listModels }, async () => ok(await admin.listModels()));

    app.post('/admin/models', { schema: adminSchemas.addModel }, async (request) =>
      ok(await admin.addModel(request.body as AddModelRequest)),
    );

    app.delete<{ Params: { name: string } }>(
      '/admin/models/:name',
      { schema: adminSchemas.removeModel },
      async (request) => {
        await admin.removeModel(request.params.name);
        return okNoData();
      },
    );
  };
}
