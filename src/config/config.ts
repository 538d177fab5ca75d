/**
 * Service configuration: environment variables validated once at start into a typed object that is
 * passed to `buildApp`. Nothing reads `process.env` elsewhere, so tests build apps with their own config.
 */
import { resolve } from 'node:path';
import { z } from 'zod';

const API_KEY_PATTERN = /^sk-[a-z0-9]{32}$/;

const intFrom = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

const remoteEndpointSchema = z.object({
  baseUrl: z.url(),
  apiKey: z.string().optional(),
  defaultModel: z.string().optional(),
});

const envSchema = z.object({
  HOST: z.string().min(1).default('127.0.0.1'),
  PORT: intFrom(0, 65535).default(8080),
  DATA_DIR: z.string().min(1).default('./data'),
  PUBLIC_URL: z.url().optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  BOOTSTRAP_API_KEY: z
    .string()
    .regex(API_KEY_PATTERN, 'must be sk- followed by 32 lowercase letters or digits')
    .optional(),
  /** PostgreSQL connection string for scale-out; the embedded PGlite database under DATA_DIR when absent. */
  DATABASE_URL: z.string().optional(),
  RATE_LIMIT_MAX: intFrom(1, 1_000_000).default(600),
  RATE_LIMIT_WINDOW_MS: intFrom(100, 86_400_000).default(60_000),
  STREAM_RATE_LIMIT_MAX: intFrom(1, 1_000_000).default(600),
  STREAM_IDLE_RECLAIM_MS: intFrom(10, 86_400_000).default(30 * 60_000),
  GENERATION_CONCURRENCY: intFrom(1, 64).default(2),
  SYNTHESIS_THREADS: intFrom(1, 64).optional(),
  ENCODER_THREADS: intFrom(1, 64).optional(),
  MAX_TEXT_LENGTH: intFrom(1, 1_000_000).default(10_000),
  MAX_CONTENTS: intFrom(1, 10_000).default(200),
  BODY_LIMIT_BYTES: intFrom(1024, 1 << 30).default(2 * 1024 * 1024),
  UPLOAD_LIMIT_BYTES: intFrom(1024, 1 << 31).default(100 * 1024 * 1024),
  /** JSON object: name → {baseUrl, apiKey?, defaultModel?} of OpenAI-compatible speech endpoints. */
  REMOTE_ENGINES: z.string().optional(),
});

export type RemoteEndpointConfig = z.infer<typeof remoteEndpointSchema>;

export interface AppConfig {
  host: string;
  port: number;
  dataDir: string;
  publicUrl: string;
  logLevel: z.infer<typeof envSchema>['LOG_LEVEL'];
  bootstrapApiKey: string | undefined;
  databaseUrl: string | undefined;
  rateLimit: { max: number; windowMs: number; streamMax: number };
  streamIdleReclaimMs: number;
  generationConcurrency: number;
  synthesisThreads: number | undefined;
  encoderThreads: number | undefined;
  limits: {
    textLength: number;
    contents: number;
    bodyBytes: number;
    uploadBytes: number;
    splitterName: number;
  };
  remoteEngines: Record<string, RemoteEndpointConfig>;
}

/** Thrown when the environment is invalid; lists every bad variable so start-up fails once, clearly. */
export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

function parseRemoteEngines(
  raw: string | undefined,
  problems: string[],
): Record<string, RemoteEndpointConfig> {
  if (raw === undefined || raw.trim() === '') return {};
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch {
    problems.push('REMOTE_ENGINES: not valid JSON');
    return {};
  }
  const parsed = z.record(z.string().regex(/^[A-Za-z0-9_-]{1,64}$/), remoteEndpointSchema).safeParse(json);
  if (!parsed.success) {
    for (const issue of parsed.error.issues)
      problems.push(`REMOTE_ENGINES.${issue.path.join('.')}: ${issue.message}`);
    return {};
  }
  return parsed.data;
}

/** Validates `env` (default: process.env) into an AppConfig, or throws ConfigError naming every bad variable. */
export function loadConfig(env: Record<string, string | undefined> = process.env): AppConfig {
  const problems: string[] = [];
  const cleaned = Object.fromEntries(
    Object.keys(envSchema.shape).map((k) => [k, env[k] === '' ? undefined : env[k]]),
  );
  const parsed = envSchema.safeParse(cleaned);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) problems.push(`${issue.path.join('.')}: ${issue.message}`);
    throw new ConfigError(problems);
  }
  const e = parsed.data;
  const remoteEngines = parseRemoteEngines(e.REMOTE_ENGINES, problems);
  if (problems.length > 0) throw new ConfigError(problems);
  return {
    host: e.HOST,
    port: e.PORT,
    dataDir: resolve(e.DATA_DIR),
    publicUrl: (e.PUBLIC_URL ?? `http://${e.HOST.includes(':') ? `[${e.HOST}]` : e.HOST}:${e.PORT}`).replace(
      /\/+$/,
      '',
    ),
    logLevel: e.LOG_LEVEL,
    bootstrapApiKey: e.BOOTSTRAP_API_KEY,
    databaseUrl: e.DATABASE_URL,
    rateLimit: {
      max: e.RATE_LIMIT_MAX,
      windowMs: e.RATE_LIMIT_WINDOW_MS,
      streamMax: e.STREAM_RATE_LIMIT_MAX,
    },
    streamIdleReclaimMs: e.STREAM_IDLE_RECLAIM_MS,
    generationConcurrency: e.GENERATION_CONCURRENCY,
    synthesisThreads: e.SYNTHESIS_THREADS,
    encoderThreads: e.ENCODER_THREADS,
    limits: {
      textLength: e.MAX_TEXT_LENGTH,
      contents: e.MAX_CONTENTS,
      bodyBytes: e.BODY_LIMIT_BYTES,
      uploadBytes: e.UPLOAD_LIMIT_BYTES,
      splitterName: 100,
    },
    remoteEngines,
  };
}
