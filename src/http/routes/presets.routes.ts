/**
 * GET /api/tts/presets: the synthesis presets `preset` accepts (src/tasks/requests/generation-params.ts),
 * in the hosted API's shape `{key, i18n_name, i18n_description, config{…}}`, plus `style`, the
 * behaviour each key maps to. Bearer-protected like the rest of the tenant API.
 */
import type { FastifyInstance } from 'fastify';
import { PRESETS } from '../../tasks/requests/generation-params.js';
import { ok } from '../envelope.js';
import { presetsSchema } from './presets.schemas.js';

/** The presets route. */
export function presetRoutes() {
  return async (app: FastifyInstance): Promise<void> => {
    app.get('/api/tts/presets', { schema: presetsSchema }, async () => ok(PRESETS));
  };
}
