/**
 * Schemas of /healthz, /readyz and /metrics (health.routes.ts).
 */
import { z } from 'zod';
import { route } from '../route-schema.js';

/** Schemas of /healthz, /readyz and /metrics. */
export const healthSchemas = {
  healthz: route({
    summary: 'Liveness',
    tags: ['health'],
    access: 'none',
    ok: z.object({
      status: z.literal(200),
      message: z.string(),
      data: z.object({ healthy: z.literal(true) }),
    }),
    errors: ['SYSTEM_SHUTTING_DOWN'],
  }),
  readyz: route({
    summary: 'Readiness',
    description:
      'The database and, in scale-out, Redis and S3 answer; 503 with Retry-After names the ones that do not.',
    tags: ['health'],
    access: 'none',
    ok: z.object({
      status: z.literal(200),
      message: z.string(),
      data: z.object({ ready: z.literal(true), checks: z.record(z.string(), z.enum(['ok', 'unreachable'])) }),
    }),
    errors: ['SYSTEM_SHUTTING_DOWN'],
  }),
  metrics: route({
    summary: 'Prometheus metrics',
    tags: ['health'],
    access: 'metricsToken',
    ok: {
      '200': {
        description: 'Prometheus text format',
        content: { 'text/plain': { schema: { type: 'string' } } },
      },
    },
    errors: [],
  }),
};
