/**
 * The operator token of the /admin API: which token is in force, and the hook that checks it.
 * Tenant API keys are never accepted there; the admin token is no API key, so tenant routes refuse it.
 */
import { randomBytes } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { API_KEY_PATTERN } from '../accounts/api-keys.js';
import { secretsEqual } from '../common/secret-compare.js';
import type { AppConfig } from '../config/config.js';
import { errors } from '../errors/app-error.js';
import { bearerToken } from './auth.js';

/** A new random operator token (256 bits, base64url: 43 characters, never of the API-key form). */
export function generateAdminToken(): string {
  return randomBytes(32).toString('base64url');
}

/**
 * The token /admin accepts: ADMIN_TOKEN; else, on an embedded install (no DATABASE_URL), one
 * generated for this run (the CLI reads it from the server file); else none and /admin is off.
 */
export function effectiveAdminToken(
  config: Pick<AppConfig, 'adminToken' | 'databaseUrl'>,
): string | undefined {
  if (config.adminToken !== undefined) return config.adminToken;
  return config.databaseUrl === undefined ? generateAdminToken() : undefined;
}

/** onRequest hook of the /admin routes: `Authorization: Bearer <admin token>`, compared in constant time. */
export function adminAuth(adminToken: string) {
  return async (request: FastifyRequest): Promise<void> => {
    const given = bearerToken(request);
    if (given === undefined)
      throw errors.unauthorized('the admin API needs Authorization: Bearer <admin token>');
    if (!secretsEqual(given, adminToken)) {
      throw errors.unauthorized(
        API_KEY_PATTERN.test(given)
          ? 'API keys are not accepted by the admin API; use the admin token'
          : 'wrong admin token',
      );
    }
  };
}
