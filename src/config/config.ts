/**
 * Service configuration: environment variables validated once at start into a typed object that is
 * passed to `buildApp`. Nothing reads `process.env` elsewhere, so tests build apps with their own config.
 */
import { join, resolve } from 'node:path';
import { z } from 'zod';

const API_KEY_PATTERN = /^sk-[a-z0-9]{32}$/;

const intFrom = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

const remoteEndpointSchema = z.object({
  baseUrl: z.url(),
  apiKey: z.string().optional(),
  defaultModel: z.string().optional(),
  /** Voices listed in the voice catalogue (the endpoint may accept others). */
  voices: z
    .array(
      z.object({
        id: z.string().min(1).max(200),
        name: z.string().max(200).optional(),
        languages: z.array(z.string().max(35)).optional(),
        gender: z.enum(['female', 'male']).optional(),
      }),
    )
    .optional(),
});

const envSchema = z.object({
  HOST: z.string().min(1).default('127.0.0.1'),
  PORT: intFrom(0, 65535).default(8080),
  DATA_DIR: z.string().min(1).default('./data'),
  PUBLIC_URL: z.url().optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** `pretty` (human lines) or `json` (one JSON object a line); `auto`: pretty on a terminal only. */
  LOG_FORMAT: z.enum(['auto', 'json', 'pretty']).default('auto'),
  BOOTSTRAP_API_KEY: z
    .string()
    .regex(API_KEY_PATTERN, 'must be sk- followed by 32 lowercase letters or digits')
    .optional(),
  /** PostgreSQL connection string for scale-out; the embedded PGlite database under DATA_DIR when absent. */
  DATABASE_URL: z.string().optional(),
  /** The embedded database's page cache (PostgreSQL shared_buffers) in MiB; PostgreSQL's own default of 128 MiB is resident from the start. */
  EMBEDDED_DB_CACHE_MB: intFrom(1, 65_536).default(16),
  RATE_LIMIT_MAX: intFrom(1, 1_000_000).default(600),
  RATE_LIMIT_WINDOW_MS: intFrom(100, 86_400_000).default(60_000),
  STREAM_RATE_LIMIT_MAX: intFrom(1, 1_000_000).default(600),
  /** Requests per client address and window to the bearer and /admin routes, counted before the credential is checked. */
  RATE_LIMIT_IP_MAX: intFrom(1, 1_000_000).default(3000),
  /** Slowloris bounds: request headers complete within; whole request (headers and body) received within. */
  HEADERS_TIMEOUT_MS: intFrom(100, 600_000).default(10_000),
  REQUEST_TIMEOUT_MS: intFrom(100, 86_400_000).default(300_000),
  /** Comma-separated addresses/CIDRs (or loopback, linklocal, uniquelocal) of reverse proxies whose X-Forwarded-For is believed. */
  TRUST_PROXY: z
    .string()
    .regex(
      /^\s*[0-9A-Za-z.:/]+(\s*,\s*[0-9A-Za-z.:/]+)*\s*$/,
      'comma-separated addresses, CIDRs or loopback/linklocal/uniquelocal',
    )
    .optional(),
  /** Comma-separated web origins (`https://app.example`) allowed to call the API from a browser, or `*`; unset = no CORS. */
  CORS_ORIGINS: z
    .string()
    .regex(
      /^\s*(\*|https?:\/\/[^\s,/]+)(\s*,\s*https?:\/\/[^\s,/]+)*\s*$/,
      'comma-separated origins such as https://app.example (scheme and host, no path), or *',
    )
    .optional(),
  /** Bearer token /metrics requires; when unset, /metrics answers only clients on the loopback address. */
  METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').max(512).optional(),
  STREAM_IDLE_RECLAIM_MS: intFrom(10, 86_400_000).default(30 * 60_000),
  /** Live stream sessions (distinct `i` values and contents) per task on a node; 0 = unbounded. */
  STREAM_MAX_SESSIONS_PER_TASK: intFrom(0, 100_000).default(8),
  /** Live stream sessions per account on a node; 0 = unbounded. */
  STREAM_MAX_SESSIONS_PER_ACCOUNT: intFrom(0, 1_000_000).default(64),
  /** Disk the stream session caches of a node may use before new sessions are refused; 0 = unbounded. */
  STREAM_CACHE_BUDGET_BYTES: intFrom(0, Number.MAX_SAFE_INTEGER).default(2 * 1024 ** 3),
  /** Bytes a live listener gets at once on connect (5 s of 320 kbps audio). */
  STREAM_PACE_BURST_BYTES: intFrom(1, 1_000_000_000).default(200_000),
  /** Bytes per second a live listener behind the live edge gets after its burst (1.25× realtime); 0 = unpaced. */
  STREAM_PACE_BYTES_PER_SECOND: intFrom(0, 1_000_000_000).default(50_000),
  /**
   * Tasks a node generates at once. Their sentences share the synthesis threads (SYNTHESIS_THREADS)
   * fairly between accounts, so many live tasks all stay ahead of their listeners instead of two
   * running flat out while the rest wait (docs/decisions.md, Generation scheduling).
   */
  GENERATION_CONCURRENCY: intFrom(1, 256).default(64),
  /**
   * The short-task lane (docs/decisions.md, Generation lanes): tasks of at most SHORT_TASK_MAX_CHARS
   * characters (one-shots, a sentence or two) are generated in SHORT_TASK_CONCURRENCY slots of
   * their own, so they never wait behind long tasks; either 0 turns the lane off.
   */
  /**
   * How long a node remembers the account of a key that authenticated (no database lookup per
   * request). Default: 60 s embedded (every revocation goes through this process), 0.5 s in
   * scale-out (a key revoked on another node stops there within it).
   */
  AUTH_CACHE_MS: intFrom(0, 3_600_000).optional(),
  /**
   * Bytes of finished audio an embedded node keeps in memory for its most-read blobs (a blob is
   * loaded on its second read, up to 16 MiB each), so Range requests of popular files read no disk.
   */
  BLOB_MEMORY_CACHE_BYTES: intFrom(0, 64 * 1024 * 1024 * 1024).default(64 * 1024 * 1024),
  /** On a start with no account (and no BOOTSTRAP_API_KEY): create one and print its key once. */
  FIRST_RUN_ACCOUNT: z.enum(['true', 'false', '1', '0']).default('true'),
  SHORT_TASK_MAX_CHARS: intFrom(0, 1_000_000).default(500),
  SHORT_TASK_CONCURRENCY: intFrom(0, 256).default(64),
  /** Per-account quotas; 0 = unlimited. Pending plus processing tasks. */
  ACCOUNT_MAX_QUEUED_TASKS: intFrom(0, 1_000_000).default(100),
  /**
   * Tasks of one account processing at once, on every node together. Default: half a node's
   * GENERATION_CONCURRENCY (at least 1, and less than all of them when there are two or more), so
   * one account never holds every slot of a node and other accounts' tasks always find some free.
   */
  ACCOUNT_MAX_CONCURRENT_TASKS: intFrom(0, 10_000).optional(),
  /** Characters of the tasks one account may have accepted per UTC day (default: 5 of the largest tasks). */
  ACCOUNT_DAILY_CHARACTERS: intFrom(0, Number.MAX_SAFE_INTEGER).default(10_000_000),
  /** What one account may keep stored; 0 = unlimited. Beyond: 403 BILLING_QUOTA_EXCEEDED. */
  ACCOUNT_MAX_SPLITTERS: intFrom(0, Number.MAX_SAFE_INTEGER).default(1000),
  ACCOUNT_MAX_SPLITTER_BYTES: intFrom(0, Number.MAX_SAFE_INTEGER).default(16 * 1024 ** 2),
  ACCOUNT_MAX_VOICES: intFrom(0, Number.MAX_SAFE_INTEGER).default(1000),
  ACCOUNT_MAX_UPLOAD_BYTES: intFrom(0, Number.MAX_SAFE_INTEGER).default(2 * 1024 ** 3),
  /** Bytes of stored task audio per account: at or past it, new tasks are refused. */
  ACCOUNT_MAX_TASK_BYTES: intFrom(0, Number.MAX_SAFE_INTEGER).default(10 * 1024 ** 3),
  /** One-shot synthesis answers 503 NO_WORKER_AVAILABLE when its task has not started within this. */
  ONE_SHOT_START_TIMEOUT_MS: intFrom(100, 3_600_000).default(30_000),
  SYNTHESIS_THREADS: intFrom(1, 64).optional(),
  /** Long tasks' synthesis (espeak-ng, Flite) and encoding in a process of their own at the lowest priority. */
  BATCH_PROCESS: z.enum(['on', 'off']).default('off'),
  FINISHED_AUDIO_PROCESS: z.enum(['on', 'off']).default('on'),
  /** Niceness of every thread of the batch process (19: the lowest). */
  BATCH_PROCESS_NICENESS: intFrom(0, 19).default(10),
  ENCODER_THREADS: intFrom(1, 64).optional(),
  /** LAME build: the native addon over libmp3lame (built at install when libmp3lame-dev is present) or wasm; same bytes. */
  MP3_ENCODER: z.enum(['auto', 'native', 'wasm']).default('auto'),
  MAX_TEXT_LENGTH: intFrom(1, 1_000_000).default(10_000),
  MAX_CONTENTS: intFrom(1, 10_000).default(200),
  /** Markers (placeholder keys and bracket spans) one splitter-mode text may hold. */
  SPLITTER_MAX_MARKERS: intFrom(1, 1_000_000).default(1000),
  BODY_LIMIT_BYTES: intFrom(1024, 1 << 30).default(2 * 1024 * 1024),
  UPLOAD_LIMIT_BYTES: intFrom(1024, 1 << 31).default(100 * 1024 * 1024),
  /** JSON object: name → {baseUrl, apiKey?, defaultModel?} of OpenAI-compatible speech endpoints. */
  REMOTE_ENGINES: z.string().optional(),
  /** The OpenAI-compatible route (/v1): longest `input`, in characters (OpenAI's own limit by default). */
  OPENAI_INPUT_MAX_CHARS: intFrom(1, 1_000_000).default(4096),
  /** Whether /v1 model and voice lists answer without a key (public entries only); false = 401. */
  OPENAI_PUBLIC_LISTS: z.enum(['true', 'false', '1', '0']).default('true'),
  /** JSON object: OpenAI voice name (alloy, …) → voice spec such as espeak:en-us+f3, over the defaults. */
  OPENAI_VOICES: z.string().optional(),
  /** Engine calls: connect, wait for response headers, whole piece. */
  ENGINE_CONNECT_TIMEOUT_MS: intFrom(100, 3_600_000).default(10_000),
  ENGINE_FIRST_BYTE_TIMEOUT_MS: intFrom(100, 3_600_000).default(30_000),
  ENGINE_CALL_TIMEOUT_MS: intFrom(100, 3_600_000).default(120_000),
  /** Neural model folders (sherpa-onnx layouts), one engine each; default DATA_DIR/models. */
  MODELS_DIR: z.string().min(1).optional(),
  /** onnxruntime threads of each loaded neural model instance. */
  NEURAL_THREADS: intFrom(1, 64).default(1),
  /** Bytes of loaded neural models (estimated from their files), shared by the synthesis threads. */
  NEURAL_MODEL_MEMORY_BYTES: intFrom(1024 ** 2, Number.MAX_SAFE_INTEGER).default(1024 ** 3),
  /** Bytes a model archive of `models add` may take, and separately its unpacked files. */
  MODELS_MAX_ARCHIVE_BYTES: intFrom(1024, Number.MAX_SAFE_INTEGER).default(4 * 1024 ** 3),
  /** Operator token of the /admin API (accounts, keys, voice import); never a tenant key. */
  ADMIN_TOKEN: z.string().min(24, 'must be at least 24 characters').max(512).optional(),
  /** Scale-out: Redis (queue, events, leases, rate limits) and S3-compatible storage (blobs). */
  REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\//, 'must be a redis:// or rediss:// URL')
    .optional(),
  /** Prefix of every Redis key and channel, so several deployments can share one Redis server. */
  REDIS_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_.:-]{1,64}$/, 'at most 64 of A-Z a-z 0-9 _ . : -')
    .default('voicegen:'),
  S3_ENDPOINT: z.url().optional(),
  S3_BUCKET: z.string().min(3).max(63).optional(),
  S3_REGION: z.string().min(1).optional(),
  S3_ACCESS_KEY_ID: z.string().min(1).optional(),
  S3_SECRET_ACCESS_KEY: z.string().min(1).optional(),
  S3_FORCE_PATH_STYLE: z.enum(['true', 'false', '1', '0']).optional(),
  /** This node's own base URL as the other nodes reach it (relays of live stream sessions). */
  NODE_URL: z.url().optional(),
  /** Generation lease: a task whose worker stops renewing it is handed to another worker after this long. */
  TASK_LEASE_MS: intFrom(1000, 3_600_000).default(30_000),
  /** Stream-session ownership lease: a dead owner's session is rebuilt elsewhere after this long. */
  SESSION_LEASE_MS: intFrom(1000, 3_600_000).default(15_000),
  /** The Wyoming (Home Assistant) TTS server's TCP port; unset = no Wyoming server. 0 = any free port. */
  WYOMING_PORT: intFrom(0, 65535).optional(),
  /** Address the Wyoming server binds: loopback unless the operator opens it (Wyoming has no authentication). */
  WYOMING_HOST: z.string().min(1).default('127.0.0.1'),
  /** The account (id or name) every Wyoming request runs as: its quotas, rate limit and usage apply. */
  WYOMING_ACCOUNT: z.string().min(1).max(200).optional(),
  /** Wyoming connections open at once; more are closed as they arrive. */
  WYOMING_MAX_CONNECTIONS: intFrom(1, 10_000).default(16),
  /** Bytes a Wyoming message's header line, its data and its payload may each take. */
  WYOMING_MAX_MESSAGE_BYTES: intFrom(1024, 64 * 1024 ** 2).default(256 * 1024),
  /** A Wyoming connection with no traffic either way this long, or a message this slow to arrive, is closed. */
  WYOMING_IDLE_TIMEOUT_MS: intFrom(100, 3_600_000).default(60_000),
});

const S3_VARIABLES = [
  'S3_ENDPOINT',
  'S3_BUCKET',
  'S3_REGION',
  'S3_ACCESS_KEY_ID',
  'S3_SECRET_ACCESS_KEY',
  'S3_FORCE_PATH_STYLE',
] as const;

export type RemoteEndpointConfig = z.infer<typeof remoteEndpointSchema>;

/** An S3-compatible object store (AWS S3, MinIO, Ceph, R2, …). */
export interface S3Config {
  /** Custom endpoint (MinIO, Ceph, R2…); AWS's own when absent. */
  endpoint: string | undefined;
  bucket: string;
  region: string;
  /** Static credentials; the SDK's default provider chain when absent. */
  credentials: { accessKeyId: string; secretAccessKey: string } | undefined;
  /** Path-style addressing (`endpoint/bucket/key`), which most self-hosted stores need. */
  forcePathStyle: boolean;
}

/** Scale-out mode: N identical nodes on PostgreSQL, Redis and S3-compatible storage. */
export interface ScaleOutConfig {
  redisUrl: string;
  /** Prefix of every Redis key and channel of this deployment. */
  redisPrefix: string;
  s3: S3Config;
  /** This node's base URL as other nodes reach it. */
  nodeUrl: string;
}

export interface AppConfig {
  host: string;
  port: number;
  dataDir: string;
  publicUrl: string;
  logLevel: z.infer<typeof envSchema>['LOG_LEVEL'];
  logFormat: z.infer<typeof envSchema>['LOG_FORMAT'];
  bootstrapApiKey: string | undefined;
  databaseUrl: string | undefined;
  /** Embedded database only: its page cache (shared_buffers) in MiB. */
  embeddedDbCacheMb: number;
  /** Per account (`max`), per client address on stream and audio routes (`streamMax`) and before authentication (`ipMax`). */
  rateLimit: { max: number; windowMs: number; streamMax: number; ipMax: number };
  /** HTTP server bounds; `trustProxy`: proxies whose X-Forwarded-For gives `request.ip`. */
  http: {
    headersTimeoutMs: number;
    requestTimeoutMs: number;
    trustProxy: string[];
    /** Browser origins allowed by CORS (`*` = any); empty = no CORS headers. */
    corsOrigins: string[];
  };
  /** Bearer token of /metrics; undefined = loopback clients only. */
  metricsToken: string | undefined;
  streamIdleReclaimMs: number;
  /** Bounds of the live stream sessions of one node; 0 = unbounded. */
  streamSessions: { maxPerTask: number; maxPerAccount: number; cacheBudgetBytes: number };
  /** The pace of live listeners (burst, then bytes per second); undefined = unpaced. */
  streamPace: { burstBytes: number; bytesPerSecond: number } | undefined;
  generationConcurrency: number;
  /** How long an authenticated key's account is remembered (AccountService); 0 = never. */
  authCacheMs: number;
  /** Create the first account and print its key and console URL when none exists (first run). */
  firstRunAccount: boolean;
  /** Memory for the embedded blob store's most-read blobs (FsBlobStore); 0 = off. */
  blobMemoryCacheBytes: number;
  /** The short-task lane; null = off (every task shares the GENERATION_CONCURRENCY slots). */
  shortTasks: { maxChars: number; concurrency: number } | null;
  /** Per-account quotas; 0 = unlimited. */
  accountQuotas: { maxQueuedTasks: number; maxConcurrentTasks: number; dailyCharacters: number };
  /** What one account may keep stored (ACCOUNT_MAX_SPLITTERS, …; storage/storage-limits.ts); 0 = unlimited. */
  storageLimits: {
    splitters: number;
    splitterBytes: number;
    voices: number;
    uploadBytes: number;
    taskBytes: number;
  };
  /** How long one-shot synthesis waits for its task to start before answering 503. */
  oneShotStartTimeoutMs: number;
  /** The OpenAI-compatible route: input limit, public lists, OpenAI voice names mapped to voice specs. */
  openai: { inputMaxChars: number; publicLists: boolean; voices: Record<string, string> };
  synthesisThreads: number | undefined;
  /** `BATCH_PROCESS`: long tasks' synthesis and encoding in a process of their own (else this process's threads). */
  batchProcess: boolean;
  /** `BATCH_PROCESS_NICENESS`: of every thread of that process. */
  batchProcessNiceness: number;
  /** `FINISHED_AUDIO_PROCESS`: players' connections for finished audio served by a process of their own. */
  finishedAudioProcess: boolean;
  encoderThreads: number | undefined;
  /** `MP3_ENCODER`: which LAME build encodes (auto: native when the addon loads). */
  mp3Encoder: 'auto' | 'native' | 'wasm';
  limits: {
    textLength: number;
    contents: number;
    /** Most markers one splitter-mode text may hold (SPLITTER_MAX_MARKERS). */
    splitterMarkers: number;
    bodyBytes: number;
    uploadBytes: number;
    splitterName: number;
  };
  remoteEngines: Record<string, RemoteEndpointConfig>;
  /** Time limits of each engine call: connect and first byte (remote), whole piece (every engine). */
  engineTimeouts: { connectMs: number; firstByteMs: number; callMs: number };
  /** The neural engine: MODELS_DIR (absolute), NEURAL_THREADS, NEURAL_MODEL_MEMORY_BYTES, MODELS_MAX_ARCHIVE_BYTES. */
  neural: { modelsDir: string; threads: number; memoryBytes: number; maxArchiveBytes: number };
  /** Operator token of the /admin API; undefined = generated per data dir (embedded) or /admin off (scale-out). */
  adminToken: string | undefined;
  /** Present in scale-out mode (REDIS_URL and S3_* set); null = embedded coordination and files. */
  scaleOut: ScaleOutConfig | null;
  leases: { taskMs: number; sessionMs: number };
  /** The Wyoming TTS server; null = off (WYOMING_PORT unset). */
  wyoming: WyomingConfig | null;
}

/** The Wyoming (Home Assistant) TTS server: where it listens, whom it runs as, its bounds. */
export interface WyomingConfig {
  host: string;
  port: number;
  /** Id or name of the account it runs as (resolved at each request: the account may come later). */
  account: string;
  maxConnections: number;
  /** Bytes of a header line, of a message's data and of its payload, each. */
  maxMessageBytes: number;
  idleTimeoutMs: number;
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

/** OPENAI_VOICES: a JSON object of voice name → voice spec (`<engine>:<voice>[+<choice>]`). */
function parseOpenaiVoices(raw: string | undefined, problems: string[]): Record<string, string> {
  if (raw === undefined || raw.trim() === '') return {};
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch {
    problems.push('OPENAI_VOICES: not valid JSON');
    return {};
  }
  const parsed = z
    .record(
      z.string().min(1).max(64),
      z.string().regex(/^[A-Za-z0-9_-]{1,64}:[^+]+(\+.+)?$/, 'must be a voice spec such as espeak:en-us+f3'),
    )
    .safeParse(json);
  if (!parsed.success) {
    for (const issue of parsed.error.issues)
      problems.push(`OPENAI_VOICES.${issue.path.join('.')}: ${issue.message}`);
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
  const openaiVoices = parseOpenaiVoices(e.OPENAI_VOICES, problems);
  const scaleOut = parseScaleOut(e, problems);
  if (e.HEADERS_TIMEOUT_MS > e.REQUEST_TIMEOUT_MS) {
    problems.push(
      'HEADERS_TIMEOUT_MS: must not exceed REQUEST_TIMEOUT_MS (the headers are part of the request)',
    );
  }
  if (e.WYOMING_PORT !== undefined && e.WYOMING_ACCOUNT === undefined) {
    problems.push(
      'WYOMING_ACCOUNT: required when WYOMING_PORT is set (Wyoming has no authentication: name the account it runs as)',
    );
  }
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
    logFormat: e.LOG_FORMAT,
    bootstrapApiKey: e.BOOTSTRAP_API_KEY,
    databaseUrl: e.DATABASE_URL,
    embeddedDbCacheMb: e.EMBEDDED_DB_CACHE_MB,
    rateLimit: {
      max: e.RATE_LIMIT_MAX,
      windowMs: e.RATE_LIMIT_WINDOW_MS,
      streamMax: e.STREAM_RATE_LIMIT_MAX,
      ipMax: e.RATE_LIMIT_IP_MAX,
    },
    http: {
      headersTimeoutMs: e.HEADERS_TIMEOUT_MS,
      requestTimeoutMs: e.REQUEST_TIMEOUT_MS,
      trustProxy: (e.TRUST_PROXY ?? '')
        .split(',')
        .map((entry) => entry.trim())
        .filter((entry) => entry !== ''),
      corsOrigins: (e.CORS_ORIGINS ?? '')
        .split(',')
        .map((entry) => entry.trim())
        .filter((entry) => entry !== ''),
    },
    metricsToken: e.METRICS_TOKEN,
    streamIdleReclaimMs: e.STREAM_IDLE_RECLAIM_MS,
    streamSessions: {
      maxPerTask: e.STREAM_MAX_SESSIONS_PER_TASK,
      maxPerAccount: e.STREAM_MAX_SESSIONS_PER_ACCOUNT,
      cacheBudgetBytes: e.STREAM_CACHE_BUDGET_BYTES,
    },
    streamPace:
      e.STREAM_PACE_BYTES_PER_SECOND === 0
        ? undefined
        : { burstBytes: e.STREAM_PACE_BURST_BYTES, bytesPerSecond: e.STREAM_PACE_BYTES_PER_SECOND },
    generationConcurrency: e.GENERATION_CONCURRENCY,
    authCacheMs: e.AUTH_CACHE_MS ?? (scaleOut === null ? 60_000 : 500),
    blobMemoryCacheBytes: e.BLOB_MEMORY_CACHE_BYTES,
    firstRunAccount: e.FIRST_RUN_ACCOUNT === 'true' || e.FIRST_RUN_ACCOUNT === '1',
    shortTasks:
      e.SHORT_TASK_MAX_CHARS > 0 && e.SHORT_TASK_CONCURRENCY > 0
        ? { maxChars: e.SHORT_TASK_MAX_CHARS, concurrency: e.SHORT_TASK_CONCURRENCY }
        : null,
    accountQuotas: {
      maxQueuedTasks: e.ACCOUNT_MAX_QUEUED_TASKS,
      maxConcurrentTasks:
        e.ACCOUNT_MAX_CONCURRENT_TASKS ?? Math.max(1, Math.floor(e.GENERATION_CONCURRENCY / 2)),
      dailyCharacters: e.ACCOUNT_DAILY_CHARACTERS,
    },
    storageLimits: {
      splitters: e.ACCOUNT_MAX_SPLITTERS,
      splitterBytes: e.ACCOUNT_MAX_SPLITTER_BYTES,
      voices: e.ACCOUNT_MAX_VOICES,
      uploadBytes: e.ACCOUNT_MAX_UPLOAD_BYTES,
      taskBytes: e.ACCOUNT_MAX_TASK_BYTES,
    },
    oneShotStartTimeoutMs: e.ONE_SHOT_START_TIMEOUT_MS,
    openai: {
      inputMaxChars: e.OPENAI_INPUT_MAX_CHARS,
      publicLists: e.OPENAI_PUBLIC_LISTS === 'true' || e.OPENAI_PUBLIC_LISTS === '1',
      voices: openaiVoices,
    },
    synthesisThreads: e.SYNTHESIS_THREADS,
    batchProcess: e.BATCH_PROCESS === 'on',
    finishedAudioProcess: e.FINISHED_AUDIO_PROCESS === 'on',
    batchProcessNiceness: e.BATCH_PROCESS_NICENESS,
    encoderThreads: e.ENCODER_THREADS,
    mp3Encoder: e.MP3_ENCODER,
    limits: {
      textLength: e.MAX_TEXT_LENGTH,
      contents: e.MAX_CONTENTS,
      splitterMarkers: e.SPLITTER_MAX_MARKERS,
      bodyBytes: e.BODY_LIMIT_BYTES,
      uploadBytes: e.UPLOAD_LIMIT_BYTES,
      splitterName: 100,
    },
    remoteEngines,
    engineTimeouts: {
      connectMs: e.ENGINE_CONNECT_TIMEOUT_MS,
      firstByteMs: e.ENGINE_FIRST_BYTE_TIMEOUT_MS,
      callMs: e.ENGINE_CALL_TIMEOUT_MS,
    },
    neural: {
      modelsDir: resolve(e.MODELS_DIR ?? join(e.DATA_DIR, 'models')),
      threads: e.NEURAL_THREADS,
      memoryBytes: e.NEURAL_MODEL_MEMORY_BYTES,
      maxArchiveBytes: e.MODELS_MAX_ARCHIVE_BYTES,
    },
    adminToken: e.ADMIN_TOKEN,
    scaleOut,
    leases: { taskMs: e.TASK_LEASE_MS, sessionMs: e.SESSION_LEASE_MS },
    wyoming:
      e.WYOMING_PORT === undefined || e.WYOMING_ACCOUNT === undefined
        ? null
        : {
            host: e.WYOMING_HOST,
            port: e.WYOMING_PORT,
            account: e.WYOMING_ACCOUNT.trim(),
            maxConnections: e.WYOMING_MAX_CONNECTIONS,
            maxMessageBytes: e.WYOMING_MAX_MESSAGE_BYTES,
            idleTimeoutMs: e.WYOMING_IDLE_TIMEOUT_MS,
          },
  };
}

/**
 * Scale-out is on when REDIS_URL and the S3 variables are set; a partial set is refused, and so is
 * Redis without PostgreSQL (nodes must share one database).
 */
function parseScaleOut(e: z.infer<typeof envSchema>, problems: string[]): ScaleOutConfig | null {
  const s3Given = S3_VARIABLES.filter((name) => e[name] !== undefined);
  if (e.REDIS_URL === undefined && s3Given.length === 0) return null;
  const before = problems.length;
  if (e.REDIS_URL === undefined) {
    problems.push(
      `REDIS_URL: required for scale-out (${s3Given.join(', ')} ${s3Given.length > 1 ? 'are' : 'is'} set)`,
    );
  }
  if (e.S3_BUCKET === undefined) {
    problems.push(
      s3Given.length > 0
        ? 'S3_BUCKET: required when any S3_* variable is set'
        : 'S3_BUCKET: required for scale-out (REDIS_URL is set); set S3_BUCKET and the other S3_* variables',
    );
  }
  if ((e.S3_ACCESS_KEY_ID === undefined) !== (e.S3_SECRET_ACCESS_KEY === undefined)) {
    problems.push('S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY: set both or neither');
  }
  if (e.DATABASE_URL === undefined) {
    problems.push('DATABASE_URL: required for scale-out (all nodes share one PostgreSQL database)');
  }
  const nodeUrl = e.NODE_URL ?? `http://${e.HOST.includes(':') ? `[${e.HOST}]` : e.HOST}:${e.PORT}`;
  if (e.NODE_URL === undefined && (e.HOST === '0.0.0.0' || e.HOST === '::')) {
    problems.push(`NODE_URL: required when HOST is ${e.HOST} (the address other nodes reach this one at)`);
  }
  if (problems.length > before || e.REDIS_URL === undefined || e.S3_BUCKET === undefined) return null;
  return {
    redisUrl: e.REDIS_URL,
    redisPrefix: e.REDIS_PREFIX,
    nodeUrl: nodeUrl.replace(/\/+$/, ''),
    s3: {
      endpoint: e.S3_ENDPOINT,
      bucket: e.S3_BUCKET,
      region: e.S3_REGION ?? 'us-east-1',
      credentials:
        e.S3_ACCESS_KEY_ID !== undefined && e.S3_SECRET_ACCESS_KEY !== undefined
          ? { accessKeyId: e.S3_ACCESS_KEY_ID, secretAccessKey: e.S3_SECRET_ACCESS_KEY }
          : undefined,
      forcePathStyle: e.S3_FORCE_PATH_STYLE === 'true' || e.S3_FORCE_PATH_STYLE === '1',
    },
  };
}
