/**
 * Schema of the account info route (account.routes.ts).
 */
import { z } from 'zod';
import { envelope, route, timestamp } from '../route-schema.js';

const nullableCount = z.int().nullable().describe('null = unlimited');
const accountInfoSchema = z.object({
  id: z.string(),
  name: z.string(),
  createdAt: timestamp,
  role: z.literal('user'),
  isPaid: z.literal(true),
  credit: z.number().describe('Characters the account may still synthesise today (999999999 = unlimited)'),
  bonusCredit: z.number(),
  credits: z.number().describe('Deprecated hosted field, equal to credit'),
  loraQuota: z.number(),
  quota: z.object({
    maxQueuedTasks: nullableCount,
    maxConcurrentTasks: nullableCount,
    dailyCharacters: nullableCount,
    syncBaseConcurrent: z.int(),
    syncPaidConcurrent: z.int(),
    asyncBaseConcurrent: z.int(),
    asyncHPConcurrent: z.int(),
    lora: z.int(),
    priority: z.int(),
  }),
  usage: z.object({
    queuedTasks: z.int(),
    pendingTasks: z.int(),
    processingTasks: z.int(),
    charactersToday: z.int(),
    charactersRemaining: nullableCount,
    resetsAt: timestamp,
    splitters: z.int().describe('Saved splitter configurations'),
    splitterBytes: z.int().describe('UTF-8 bytes of the saved splitter configurations together'),
    voices: z.int(),
    uploadBytes: z.int().describe('Bytes of the uploaded voice samples together'),
    taskBytes: z
      .int()
      .describe('Bytes of the stored audio of its tasks together (merged and per-content MP3s)'),
  }),
  limits: z
    .object({
      splitters: nullableCount,
      splitterBytes: nullableCount,
      voices: nullableCount,
      uploadBytes: nullableCount,
      taskBytes: nullableCount,
    })
    .describe(
      'What the account may keep stored (null = unlimited); a write past one answers 403 BILLING_QUOTA_EXCEEDED ' +
        '(`taskBytes`: new tasks are refused once the stored task audio has reached it)',
    ),
});

/** Schema of `GET /api/account/info`. */
export const accountSchema = route({
  summary: 'The authenticated account',
  description:
    'With its quotas and usage; the hosted API’s clients read the same object from top-level `user`.',
  tags: ['account'],
  access: 'apiKey',
  ok: envelope(accountInfoSchema, { user: accountInfoSchema }),
  errors: [],
});
