/**
 * Schemas of the operator routes under /admin (admin.routes.ts).
 */
import { z } from 'zod';
import { createAccountRequestSchema, voiceImportRequestSchema } from '../../admin/admin-service.js';
import { envelope, okNoData, route, timestamp } from '../route-schema.js';
import { voiceSchema } from './voice.schemas.js';

const accountRecord = z.object({ id: z.string(), name: z.string(), createdAt: timestamp });
const keyRecord = z.object({
  id: z.string(),
  accountId: z.string(),
  prefix: z.string().describe('The start of the key, never the key'),
  createdAt: timestamp,
  revokedAt: timestamp.nullable(),
});
const accountParams = z.object({ account: z.string().describe('An account id or name') });

/** Schemas of the /admin routes. */
export const adminSchemas = {
  createAccount: route({
    summary: 'Create an account',
    tags: ['admin'],
    access: 'adminToken',
    body: createAccountRequestSchema.meta({ examples: [{ name: 'team-a' }] }),
    ok: envelope(accountRecord),
    errors: ['VALIDATION_MISSING_FIELD', 'VALIDATION_INVALID_VALUE', 'VALIDATION_CONFLICT'],
  }),
  listAccounts: route({
    summary: 'List accounts',
    tags: ['admin'],
    access: 'adminToken',
    ok: envelope(z.array(accountRecord)),
    errors: [],
  }),
  createKey: route({
    summary: 'Issue an API key',
    description: 'The only answer that holds the whole key.',
    tags: ['admin'],
    access: 'adminToken',
    params: accountParams,
    ok: envelope(keyRecord.extend({ key: z.string() })),
    errors: ['RESOURCE_NOT_FOUND'],
  }),
  listKeys: route({
    summary: "List an account's keys",
    tags: ['admin'],
    access: 'adminToken',
    params: accountParams,
    ok: envelope(z.array(keyRecord)),
    errors: ['RESOURCE_NOT_FOUND'],
  }),
  revokeKey: route({
    summary: 'Revoke an API key',
    tags: ['admin'],
    access: 'adminToken',
    params: z.object({ keyId: z.string() }),
    ok: okNoData,
    errors: ['RESOURCE_NOT_FOUND'],
  }),
  exportVoices: route({
    summary: "Export an account's voices",
    description:
      'Each voice as the import request that recreates it (POST …/voices/import, or `voicegen voices import --from`).',
    tags: ['admin'],
    access: 'adminToken',
    params: accountParams,
    ok: envelope(z.array(voiceImportRequestSchema)),
    errors: ['RESOURCE_NOT_FOUND'],
  }),
  importVoice: route({
    summary: 'Import a voice into an account',
    description: 'Any version v1.0–v4.0, e.g. to migrate voices from elsewhere.',
    tags: ['admin'],
    access: 'adminToken',
    params: accountParams,
    body: voiceImportRequestSchema.meta({
      examples: [{ name: 'Old narrator', version: 'v2.0', language: 'en' }],
    }),
    ok: envelope(voiceSchema),
    errors: [
      'RESOURCE_NOT_FOUND',
      'VALIDATION_MISSING_FIELD',
      'VALIDATION_INVALID_VALUE',
      'VOICE_MODEL_VERSION_INVALID',
    ],
  }),
};
