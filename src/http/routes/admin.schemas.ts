/**
 * Schemas of the operator routes under /admin (admin.routes.ts).
 */
import { z } from 'zod';
import {
  addModelRequestSchema,
  createAccountRequestSchema,
  voiceImportRequestSchema,
} from '../../admin/admin-service.js';
import { envelope, okNoData, route, timestamp } from '../route-schema.js';
import { engineInfoSchema } from './engines.schemas.js';
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
/** A model folder of MODELS_DIR as operators see it. */
const modelRecordSchema = z.object({
  name: z.string().describe('The folder name: the engine id of its voices'),
  available: z.boolean(),
  reason: z.string().optional().describe('Why it cannot be used, when unavailable'),
  family: z.string().optional().describe('vits, kokoro, kitten or matcha'),
  sampleRate: z.int().optional(),
  speakers: z.array(z.string()).optional().describe('Its voices (speaker names or ids)'),
  languages: z.array(z.string()).optional(),
});

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
  listModels: route({
    summary: 'List the neural models',
    description:
      'The model folders of MODELS_DIR as the start-up check reads them, unavailable ones with the reason.',
    tags: ['admin'],
    access: 'adminToken',
    ok: envelope(z.array(modelRecordSchema)),
    errors: [],
  }),
  addModel: route({
    summary: 'Add a neural model',
    description:
      'Unpacks a .tar.bz2/.tar.gz model archive (the layout sherpa-onnx publishes) from an http(s) URL or a file of the server into MODELS_DIR: the hash is checked when given, entries outside the folder, links and archives over MODELS_MAX_ARCHIVE_BYTES are refused, the folder must pass the start-up check; the model is in the catalogue when this answers.',
    tags: ['admin'],
    access: 'adminToken',
    body: addModelRequestSchema,
    ok: envelope(modelRecordSchema),
    errors: ['VALIDATION_MISSING_FIELD', 'VALIDATION_INVALID_VALUE', 'VALIDATION_CONFLICT'],
  }),
  removeModel: route({
    summary: 'Remove a neural model',
    tags: ['admin'],
    access: 'adminToken',
    params: z.object({ name: z.string() }),
    ok: okNoData,
    errors: ['RESOURCE_NOT_FOUND'],
  }),
  rescanModels: route({
    summary: 'Rescan the neural models',
    description:
      'Reads MODELS_DIR again (as SIGHUP does): folders added or fixed appear in the catalogue. Answers every model folder as an engine, unavailable ones with the reason.',
    tags: ['admin'],
    access: 'adminToken',
    ok: envelope(z.array(engineInfoSchema)),
    errors: [],
  }),
};
