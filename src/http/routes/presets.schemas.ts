/**
 * Schema of the presets route (presets.routes.ts).
 */
import { z } from 'zod';
import { PRESETS } from '../../tasks/requests/generation-params.js';
import { envelope, route } from '../route-schema.js';

const presetSchema = z.object({
  key: z.enum(PRESETS.map((p) => p.key) as [string, ...string[]]),
  style: z.enum(['creative', 'balance', 'stable']),
  i18n_name: z.object({ en: z.string(), zh: z.string() }),
  i18n_description: z.object({ en: z.string(), zh: z.string() }),
  config: z.record(z.string(), z.number()),
});

/** Schema of `GET /api/tts/presets`. */
export const presetsSchema = route({
  summary: 'Synthesis presets',
  description: 'The values `preset` accepts and the style each maps to.',
  tags: ['tasks'],
  access: 'apiKey',
  ok: envelope(z.array(presetSchema)),
  errors: [],
});
