/**
 * The composition root: opens the adapters config selects (src/adapters.ts), builds the domain
 * services and the HTTP server on them, and tears everything down on a failed start and on close.
 * Tests build their own app with their own config.
 */
import { BatchProcess } from './audio/batch-process.js';
import { join } from 'node:path';
import type { FastifyBaseLogger, FastifyInstance, FastifyRequest } from 'fastify';
import { AccountService } from './accounts/account-service.js';
import { SqlAccountStore } from './accounts/account-store.sql.js';
import { openAdapters, type Adapters } from './adapters.js';
import { tightenDataDir } from './common/owner-only.js';
import { AdminService } from './admin/admin-service.js';
import { createEncoderPool, type EncoderPool } from './audio/encoder-pool.js';
import { resolveLameBuild, type LameBuild } from './audio/lame-stream.js';
import {
  createEngineRegistry,
  type EngineRegistry,
  type VoiceBinding,
} from './audio/engines/engine-registry.js';
import { localModelOperations } from './audio/engines/neural-install.js';
import type { EngineInfo } from './audio/engines/provider.js';
import type { AppConfig } from './config/config.js';
import { effectiveAdminToken } from './http/admin-auth.js';
import { bearerAuth } from './http/auth.js';
import { adminRoutes } from './http/routes/admin.routes.js';
import { addRouteOnRequestHook, clientAddressKey, registerRateLimit } from './http/rate-limit.js';
import { accountRoutes } from './http/routes/account.routes.js';
import { presetRoutes } from './http/routes/presets.routes.js';
import { engineRoutes } from './http/routes/engines.routes.js';
import { audioRoutes } from './http/routes/audio.routes.js';
import { registerOpenApi, SERVICE_VERSION, useDocumentingSchemas } from './http/openapi.js';
import { consoleRoutes } from './http/routes/console.routes.js';
import { healthRoutes } from './http/routes/health.routes.js';
import { createServiceMetrics, type MetricsSources, type ServiceMetrics } from './http/metrics.prom.js';
import { simpleGenerateRoutes } from './http/routes/simple-generate.routes.js';
import { registerOpenAiErrors } from './http/openai-errors.js';
import { openAiListRoutes, openAiSpeechRoutes } from './http/routes/openai.routes.js';
import { OpenAiCatalogue } from './openai/catalogue.js';
import { OpenAiSpeech } from './openai/openai-speech.js';
import { stockVoiceMap } from './openai/stock-voices.js';
import { VoiceResolver } from './openai/voice-resolver.js';
import { splitterRoutes } from './http/routes/splitter.routes.js';
import { streamRoutes } from './http/routes/stream.routes.js';
import { taskRoutes } from './http/routes/task.routes.js';
import { timingRoutes } from './http/routes/timing.routes.js';
import { TimingService } from './tasks/timings/timing-service.js';
import { TimingStore } from './tasks/timings/timing-store.js';
import type { RequestParser } from './tasks/requests/request-parser.js';
import { workerPoolRequestParser } from './tasks/requests/request-parser.worker-pool.js';
import { voiceRoutes } from './http/routes/voice.routes.js';
import { FinishedAudioProcess } from './http/finished-audio.process.js';
import { createHttpServer, KEEP_ALIVE_TIMEOUT_MS } from './http/server.js';
import { SplitterService } from './splitter/splitter-service.js';
import { SplitterStore } from './splitter/splitter-store.js';
import { createStreamService, type StreamService } from './stream/stream-service.js';
import { OneShotService } from './tasks/one-shot/one-shot.js';
import { FsPieceAudioStore } from './tasks/piece-audio.fs.js';
import { batchedPieceStates, type PieceStatus } from './tasks/piece-audio.js';
import { TaskRunner } from './tasks/runner/task-runner.js';
import { TaskService } from './tasks/task-service.js';
import { TaskStore } from './tasks/task-store.js';
import type { TaskEvents } from './tasks/queue/task-events.js';
import type { BlobStore } from './storage/blob-store.js';
import type { DatabaseHandle } from './storage/database.js';
import { runGrowingFileFolder } from './storage/growing-file.fs.js';
import { VoiceService } from './voices/voice-service.js';
import { VoiceStore } from './voices/voice-store.js';
import { warmUpDatabase } from './database-warm-up.js';
import { MemoryRateLimitCounters } from './http/rate-limit-store.memory.js';
import type { RateLimitStore } from './http/rate-limit.js';
import { describeService } from './wyoming/info.js';
import { WyomingServer } from './wyoming/server.js';
import { WyomingSpeech } from './wyoming/speech.js';

export interface AppOptions {
  /** Start a new embedded database from this PGlite dump (tests), instead of running initdb. */
  pgliteTemplate?: Blob | undefined;
  /** Logger option of createHttpServer (tests pass `{ stream }` to capture lines); defaults to pino at config.logLevel. */
  logger?: Parameters<typeof createHttpServer>[1];
  /**
   * The database, already being opened by `openDatabaseFor(config)`: an entry point starts it before
   * it loads this module, so the database opens (in its own thread) while the service's code loads.
   */
  database?: Promise<DatabaseHandle> | undefined;
  /** A voice whose first request should find its threads started: they start while storage opens. */
  warmUp?: VoiceBinding | undefined;
}

export interface Services {
  database: DatabaseHandle;
  accounts: AccountService;
  voices: VoiceService;
  splitters: SplitterService;
  /** Every engine: bindings, the voice catalogue and synthesis. */
  synthesis: EngineRegistry;
  encoders: EncoderPool;
  tasks: TaskService;
  runner: TaskRunner;
  stream: StreamService;
  /** Subtitles and timestamps of tasks. */
  timings: TimingService;
  /** The task announcements this node hears and sends (every node's, in scale-out). */
  events: TaskEvents;
}

export interface App {
  http: FastifyInstance;
  services: Services;
  config: AppConfig;
  /** The token /admin accepts (ADMIN_TOKEN, or generated for an embedded install); undefined = /admin off. */
  adminToken: string | undefined;
  /** Every route registered, as `METHOD url` with whether the API reference hides it (tests check the reference is complete). */
  routes: readonly RegisteredRoute[];
  /** Reads MODELS_DIR again (SIGHUP, the admin API): one log line per model folder; resolves with their engines. */
  rescanModels(): Promise<EngineInfo[]>;
  /** The Wyoming TTS server, listening (WYOMING_PORT); undefined when it is off. */
  wyoming: WyomingServer | undefined;
  /** The finished-audio process (FINISHED_AUDIO_PROCESS); undefined when it is off. */
  finishedAudio: FinishedAudioProcess | undefined;
  /**
   * Starts running the service's statements on the embedded database in the background
   * (src/database-warm-up.ts), so that the first traffic finds their code compiled; the service's
   * entry point calls it once it listens. Nothing on PostgreSQL; once only; `close` stops it.
   */
  warmUpDatabase(): void;
  /** Stops accepting requests, then releases workers and the database. */
  close(): Promise<void>;
}

/** A route of the app, as `onRoute` saw it. */
export interface RegisteredRoute {
  method: string;
  url: string;
  /** Left out of the OpenAPI document (the console's files, the reference page itself). */
  hidden: boolean;
  /** The HEAD Fastify adds to a GET route, answered by the GET's handler (not documented apart). */
  automaticHead: boolean;
}

/** Per-account rate-limit key; the client address where no account is known. */
function rateLimitKey(request: FastifyRequest): string {
  return request.account ? `account:${request.account.id}` : `ip:${request.ip}`;
}

/** How long shutdown waits for open requests after the live streams were cut, before it cuts them. */
const SHUTDOWN_GRACE_MS = 2_000;

/**
 * What the app has opened so far, filled in as each part is built: `closeApp` stops what is there,
 * so a failed start tears down exactly what it had opened.
 */
interface Opened {
  engines?: Engines;
  /** The embedded database's warm-up once started, and how to stop it. */
  databaseWarmUp?: { done: Promise<void>; stop: AbortController };
  /** Set once `close` was called: no warm-up starts after it. */
  closing?: boolean;
  audioProcess?: FinishedAudioProcess;
  runner?: TaskRunner;
  stream?: StreamService;
  wyoming?: WyomingServer;
}

/**
 * Builds the app: opens the adapters, builds each domain on the ones below it, then the HTTP
 * routes on the services. Every part is built by a function of its own below; this root owns the
 * order and the teardown.
 */
export async function buildApp(config: AppConfig, options: AppOptions = {}): Promise<App> {
  const { http, engines, storage } = await openBeforeStorage(config, options);
  const warming = options.warmUp === undefined ? undefined : warmUp(engines, options.warmUp);
  const adapters = await openStorage(config, http, options).catch(async (err: unknown) => {
    await warming;
    await closeEngines(engines);
    throw err;
  });
  storage.blobs = adapters.blobs;
  const opened: Opened = { engines };
  const close = (): Promise<void> => closeApp(http, adapters, opened);
  try {
    await warming;
    // Before any route: its hooks measure every request.
    const metrics = serviceMetrics(http);
    await engines.rescanModels();
    const routes = collectRoutes(http);
    useDocumentingSchemas(http);
    await registerOpenApi(http, { version: SERVICE_VERSION, publicUrl: config.publicUrl });
    const accounts = await buildAccounts(config, adapters.database);
    const { voices, splitters } = buildVoices(config, adapters, engines);
    const { tasks, runner, pieceAudio, timings } = buildTasks(
      config,
      adapters,
      engines,
      voices,
      accounts,
      http,
      // The sessions are made next; the runner asks only once it has started.
      (taskId, at) => {
        const played = opened.stream?.playedSeconds(taskId);
        return played !== undefined && at < played + LISTENED_LEAD_S;
      },
    );
    opened.runner = runner;
    const stream = buildStreams(config, adapters, engines, tasks, pieceAudio);
    opened.stream = stream;
    const audioProcess = finishedAudioProcess(config, adapters.events);
    opened.audioProcess = audioProcess;
    metrics.readFrom({ ...engines, runner, tasks, stream, audioProcess });
    const services: Services = {
      database: adapters.database,
      accounts,
      voices,
      splitters,
      synthesis: engines.synthesis,
      encoders: engines.encoders,
      tasks,
      runner,
      stream,
      timings,
      events: adapters.events,
    };
    const adminToken = await registerRoutes(
      http,
      config,
      adapters,
      services,
      metrics.registry,
      engines,
      audioProcess,
    );
    await http.ready();
    await runner.start();
    const wyoming = wyomingServer(config, adapters, services, http);
    opened.wyoming = wyoming;
    await wyoming?.listen();
    return {
      http,
      config,
      adminToken,
      routes,
      services,
      rescanModels: engines.rescanModels,
      wyoming,
      finishedAudio: audioProcess,
      warmUpDatabase: () => {
        if (adapters.database.kind === 'pglite' && opened.databaseWarmUp === undefined && !opened.closing)
          opened.databaseWarmUp = startDatabaseWarmUp(adapters.database, http.log);
      },
      close,
    };
  } catch (err) {
    await close().catch((closeErr: unknown) =>
      http.log.error({ err: closeErr }, 'teardown after a failed start'),
    );
    throw err;
  }
}

/**
 * Stops everything in the reverse order of its dependencies; also tears down a failed start. The
 * server closes after the live streams are cut and before the runner stops, so requests still
 * open (a one-shot waiting for its task) end before generation does.
 */
async function closeApp(http: FastifyInstance, adapters: Adapters, opened: Opened): Promise<void> {
  opened.closing = true;
  opened.databaseWarmUp?.stop.abort();
  await opened.databaseWarmUp?.done;
  // Wyoming clients first: their tasks are cancelled while the runner and database still work.
  await opened.wyoming?.close();
  // Cut live streams first: a reader of a stuck task would otherwise hold http.close() open.
  await opened.stream?.close();
  // So do the connections the finished-audio process holds (the server waits for them).
  await opened.audioProcess?.close();
  // Requests still open a moment after the streams were cut (a client that half-closed its
  // socket, a stuck upload) must not hold shutdown until the keep-alive timeout: cut them.
  const force = setTimeout(() => http.server.closeAllConnections(), SHUTDOWN_GRACE_MS);
  force.unref();
  await http.close().finally(() => clearTimeout(force));
  await opened.runner?.stop();
  if (opened.engines !== undefined) await closeEngines(opened.engines);
  await adapters.close();
}

/**
 * The finished-audio process when the configuration asks for it, told of every task deleted or
 * given a new token (the bus is the node's own and closes with it: no unsubscribing).
 */
function finishedAudioProcess(config: AppConfig, events: TaskEvents): FinishedAudioProcess | undefined {
  if (!config.finishedAudioProcess) return undefined;
  const audioProcess = new FinishedAudioProcess(config.authCacheMs, KEEP_ALIVE_TIMEOUT_MS);
  events.onAnnouncement((taskId, kind) => {
    if (taskId === null || kind === 'deleted' || kind === 'token') audioProcess.forget(taskId);
  });
  return audioProcess;
}

/** Starts the embedded database's warm-up in the background; it logs how it ended, never throws. */
function startDatabaseWarmUp(
  database: DatabaseHandle,
  log: FastifyBaseLogger,
): { done: Promise<void>; stop: AbortController } {
  const stop = new AbortController();
  const started = performance.now();
  const done = warmUpDatabase(database, stop.signal).then(
    () => {
      const ms = Math.round(performance.now() - started);
      log.debug({ ms, stopped: stop.signal.aborted }, 'embedded database warmed up');
    },
    (err: unknown) => log.warn({ err }, 'warming up the embedded database failed'),
  );
  return { done, stop };
}

async function closeEngines(engines: Engines): Promise<void> {
  await engines.requestParser.close();
  await engines.synthesis.close();
  await engines.encoders.close();
  await engines.batch?.close();
}

/**
 * Starts what a first request in `binding`'s voice needs (its engine's interactive synthesis
 * thread, the interactive MP3 encoder, the engine catalogue) by a tiny synthesis whose audio is
 * dropped.
 * Best effort: a failure here is the first request's to report.
 */
async function warmUp(engines: Engines, binding: VoiceBinding): Promise<void> {
  // The catalogue too: a client naming a voice by engine and voice lists it first.
  const catalogue = engines.synthesis.engines().catch(() => undefined);
  const encoder = engines.encoders.open({ interactive: true });
  const signal = AbortSignal.timeout(10_000);
  try {
    const request = { text: 'Hi.', voice: binding, speechRate: 1, interactive: true };
    for await (const pcm of engines.synthesis.engineFor(binding).synthesize(request, signal)) {
      await encoder.encode(pcm.slice(0, 1152));
      break;
    }
  } catch {
    // The first real request reports what is wrong with the voice.
  } finally {
    encoder.abort();
    await catalogue;
  }
}

/**
 * What exists before storage opens: the HTTP server and the engines (so a warm-up overlaps the
 * database's start). A database the caller passed is the app's to close from then on: a failure
 * here closes it.
 */
async function openBeforeStorage(
  config: AppConfig,
  options: AppOptions,
): Promise<{ http: FastifyInstance; engines: Engines; storage: { blobs?: BlobStore } }> {
  const storage: { blobs?: BlobStore } = {};
  try {
    // Before anything is opened: MP3_ENCODER=native without the addon is a start error.
    const lame = resolveLameBuild(config.mp3Encoder);
    const http = createHttpServer(config, options.logger);
    const engines = openEngines(config, http, lame, () => {
      if (storage.blobs === undefined) throw new Error('the blob store is not open yet');
      return storage.blobs;
    });
    return { http, engines, storage };
  } catch (err) {
    await options.database?.then((database) => database.close()).catch(() => undefined);
    throw err;
  }
}

// ---- storage -----------------------------------------------------------------------------------

/** Opens the adapters config selects, then makes DATA_DIR its owner's only. */
async function openStorage(config: AppConfig, http: FastifyInstance, options: AppOptions): Promise<Adapters> {
  const adapters = await openAdapters(config, {
    pgliteTemplate: options.pgliteTemplate,
    database: options.database,
    onBackgroundError: (err) => http.log.warn({ err }, 'background connection error (retried)'),
  });
  // Once the database exists (a new one included): an install made readable to others becomes
  // its owner's only again before the first request; what is written from now on already is. Best
  // effort: a DATA_DIR whose modes cannot be changed (another owner, a read-only mount) still serves.
  const tightened = await tightenDataDir(config.dataDir).catch((err: unknown) => {
    http.log.warn({ err }, 'DATA_DIR: could not check the modes of its files');
    return undefined;
  });
  if (tightened !== undefined && (tightened.changed > 0 || tightened.failed > 0)) {
    (tightened.failed > 0 ? http.log.warn : http.log.info).call(
      http.log,
      tightened,
      `DATA_DIR: removed group and other permissions from ${tightened.changed} of ${tightened.examined} entries` +
        (tightened.failed > 0 ? ` (${tightened.failed} could not be changed)` : ''),
    );
  }
  return adapters;
}

// ---- metrics -----------------------------------------------------------------------------------

/** What the metrics read from the services, once they exist. */
interface MeteredParts {
  encoders: EncoderPool;
  runner: TaskRunner;
  tasks: TaskService;
  stream: StreamService;
  audioProcess: FinishedAudioProcess | undefined;
}

/**
 * The service metrics, registered on the server before any route so their hooks measure every
 * request. The services they read are built later: until `readFrom` is called each reads zero.
 * They are read at scrape time only.
 */
function serviceMetrics(http: FastifyInstance): {
  registry: ServiceMetrics;
  readFrom(parts: MeteredParts): void;
} {
  let sources: MetricsSources | undefined;
  const registry = createServiceMetrics(http, {
    streamSessions: () => sources?.streamSessions() ?? 0,
    listeners: () => sources?.listeners() ?? 0,
    pipelineRuns: () => sources?.pipelineRuns() ?? 0,
    relayRuns: () => sources?.relayRuns() ?? 0,
    activeGenerations: () => sources?.activeGenerations() ?? 0,
    openEncoderStreams: () => sources?.openEncoderStreams() ?? 0,
    encoded: () => sources?.encoded() ?? { audioSeconds: 0, workerSeconds: 0 },
    engineErrors: () => sources?.engineErrors() ?? new Map<string, number>(),
    queueDepthByAccount: async (limit) => (await sources?.queueDepthByAccount(limit)) ?? [],
    finishedAudioConnections: () => sources?.finishedAudioConnections() ?? new Map<string, number>(),
  });
  const readFrom = ({ encoders, runner, tasks, stream, audioProcess }: MeteredParts): void => {
    sources = {
      streamSessions: () => stream.liveSessions(),
      listeners: () => stream.listeners(),
      pipelineRuns: () => stream.pipelineRuns(),
      relayRuns: () => stream.relayRuns(),
      activeGenerations: () => runner.active,
      openEncoderStreams: () => encoders.openStreams,
      encoded: () => encoders.encoded,
      engineErrors: () => runner.engineErrors,
      queueDepthByAccount: (limit) => tasks.queueDepthByAccount(limit),
      finishedAudioConnections: () => audioProcess?.connectionCounts() ?? new Map<string, number>(),
    };
  };
  return { registry, readFrom };
}

/**
 * Audio a live listener is to hear within this many seconds is made in the service's threads; audio
 * further ahead is batch work like any other (the batch process, at its lower priority).
 */
const LISTENED_LEAD_S = 30;

// ---- engines -----------------------------------------------------------------------------------

/** The worker pools: speech engines, MP3 encoders and the parser of large requests. */
interface Engines {
  synthesis: EngineRegistry;
  encoders: EncoderPool;
  requestParser: RequestParser;
  /** The process long tasks' synthesis and encoding run in (BATCH_PROCESS=on); none: this process's threads. */
  batch: BatchProcess | undefined;
  /** Reads MODELS_DIR again and logs one line per model folder; resolves with their engines. */
  rescanModels: () => Promise<EngineInfo[]>;
}

function openEngines(
  config: AppConfig,
  http: FastifyInstance,
  lame: LameBuild,
  blobs: () => BlobStore,
): Engines {
  const batch = config.batchProcess ? new BatchProcess(config.batchProcessNiceness) : undefined;
  const synthesis = createEngineRegistry({
    remoteEndpoints: config.remoteEngines,
    timeouts: config.engineTimeouts,
    neural: config.neural,
    // Voices' reference clips are kept beside the voice in the blob store (shared in scale-out).
    referenceClips: { read: async (key) => Buffer.concat(await blobs().read(key).toArray()) },
    ...(config.synthesisThreads !== undefined && { synthesisThreads: config.synthesisThreads }),
    ...(batch !== undefined && { batchHost: batch }),
  });
  const encoders = createEncoderPool({
    lame,
    // A lost worker costs its streams (an unanswered one moves to the replacement): say why.
    onWorkerCrash: (err) => http.log.error({ err }, 'an MP3 encoder worker stopped unexpectedly'),
    ...(config.encoderThreads !== undefined ? { size: config.encoderThreads } : {}),
    ...(batch !== undefined && { batchHost: batch }),
  });
  // Every model folder is reported at start, one line each: a broken one is unavailable, never fatal.
  const rescanModels = async (): Promise<EngineInfo[]> => {
    const models = await synthesis.rescan();
    for (const m of models) {
      if (m.available) http.log.info({ model: m.id }, `neural model ${m.id}: ${m.description}`);
      else
        http.log.warn(
          { model: m.id, reason: m.reason },
          `neural model ${m.id} is unavailable: ${m.reason ?? ''}`,
        );
    }
    return models;
  };
  http.log.info(
    { mp3Encoder: lame },
    `MP3 encoding: ${lame === 'native' ? 'native libmp3lame' : 'wasm LAME'}`,
  );
  // Generate and preview requests: large ones are parsed on a thread of their own.
  const requestParser = workerPoolRequestParser(config.limits);
  return { synthesis, encoders, requestParser, batch, rescanModels };
}

// ---- accounts, voices, splitters ----------------------------------------------------------------

async function buildAccounts(config: AppConfig, database: DatabaseHandle): Promise<AccountService> {
  const accounts = new AccountService(new SqlAccountStore(database.db), { authCacheMs: config.authCacheMs });
  if (config.bootstrapApiKey !== undefined) await accounts.bootstrap(config.bootstrapApiKey);
  return accounts;
}

function buildVoices(
  config: AppConfig,
  adapters: Adapters,
  engines: Engines,
): { voices: VoiceService; splitters: SplitterService } {
  const voices = new VoiceService(
    new VoiceStore(adapters.database.db),
    engines.synthesis,
    adapters.blobs,
    config.storageLimits,
  );
  const splitters = new SplitterService(
    new SplitterStore(adapters.database.db),
    config.limits.splitterName,
    config.storageLimits,
  );
  return { voices, splitters };
}

// ---- tasks and streams --------------------------------------------------------------------------

/** The tasks domain: its store, the piece audio it generates and streams read, the runner, the service. */
function buildTasks(
  config: AppConfig,
  adapters: Adapters,
  engines: Engines,
  voices: VoiceService,
  accounts: AccountService,
  http: FastifyInstance,
  listened: (taskId: string, at: number) => boolean,
): { tasks: TaskService; runner: TaskRunner; pieceAudio: FsPieceAudioStore; timings: TimingService } {
  const taskStore = new TaskStore(adapters.database.db);
  const pieceAudio = new FsPieceAudioStore(
    join(config.dataDir, 'work', 'tasks'),
    adapters.events,
    batchedPieceStates((taskId, idxs) => pieceStates(taskStore, taskId, idxs)),
  );
  const timings = new TimingStore(adapters.database.db);
  const runner = new TaskRunner({
    store: taskStore,
    timings,
    queue: adapters.queue,
    workerUrl: adapters.nodeUrl,
    pieceAudio,
    blobs: adapters.blobs,
    encoders: engines.encoders,
    engineFor: (binding) => engines.synthesis.engineFor(binding),
    listened,
    events: adapters.events,
    concurrency: config.generationConcurrency,
    shortLane:
      adapters.shortQueue !== undefined && config.shortTasks !== null
        ? { queue: adapters.shortQueue, ...config.shortTasks }
        : undefined,
    accountConcurrency: config.accountQuotas.maxConcurrentTasks,
    // Stream pipelines of a finished task have read its pieces long before this.
    workFilesIdleMs: Math.max(config.streamIdleReclaimMs, 30 * 60_000),
    log: http.log,
  });
  const tasks = new TaskService(
    taskStore,
    voices,
    adapters.blobs,
    pieceAudio,
    engines.requestParser,
    config.publicUrl,
    runner,
    config.accountQuotas,
    adapters.events,
    { finishedCacheMs: config.authCacheMs, maxTaskBytes: config.storageLimits.taskBytes },
  );
  return { tasks, runner, pieceAudio, timings: new TimingService(taskStore, timings, accounts) };
}

/** What the piece audio needs to know of pieces `idxs` of a task: generated, failed or waiting. */
async function pieceStates(
  taskStore: TaskStore,
  taskId: string,
  idxs: readonly number[],
): Promise<Map<number, PieceStatus>> {
  const rows = new Map((await taskStore.pieceStatuses(taskId, idxs)).map((row) => [row.idx, row]));
  return new Map(
    idxs.map((idx): [number, PieceStatus] => {
      const state = rows.get(idx);
      if (state === undefined || state.piece === 'failed' || state.task === 'failed') {
        return [idx, { piece: 'failed', taskUnfinished: false }];
      }
      return [
        idx,
        {
          piece: state.piece === 'generated' ? 'generated' : 'waiting',
          taskUnfinished: state.task === 'pending' || state.task === 'processing',
        },
      ];
    }),
  );
}

function buildStreams(
  config: AppConfig,
  adapters: Adapters,
  engines: Engines,
  tasks: TaskService,
  pieceAudio: FsPieceAudioStore,
): StreamService {
  return createStreamService({
    tasks,
    pieces: pieceAudio,
    encoders: engines.encoders,
    cacheFiles: runGrowingFileFolder(join(config.dataDir, 'stream-cache')),
    idleReclaimMs: config.streamIdleReclaimMs,
    cluster: adapters.cluster,
    bounds: config.streamSessions,
    events: adapters.events,
    relaySecret: adapters.relaySecret,
    pace: config.streamPace,
  });
}

// ---- HTTP routes --------------------------------------------------------------------------------

/** Records every route as it is added (App.routes), with whether the reference hides it. */
function collectRoutes(http: FastifyInstance): RegisteredRoute[] {
  const routes: RegisteredRoute[] = [];
  const getHandlers = new Map<string, unknown>();
  http.addHook('onRoute', (route) => {
    const methods = [route.method].flat();
    if (methods.includes('GET')) getHandlers.set(route.url, route.handler);
    for (const method of methods) {
      routes.push({
        method,
        url: route.url,
        hidden: route.schema?.hide === true,
        automaticHead:
          methods.length === 1 && method === 'HEAD' && getHandlers.get(route.url) === route.handler,
      });
    }
  });
  return routes;
}

/**
 * Registers every route on the services: health and the console, token-guarded audio and
 * streams, the operator API, then the tenant API. Answers the admin token (undefined = /admin off).
 */
async function registerRoutes(
  http: FastifyInstance,
  config: AppConfig,
  adapters: Adapters,
  services: Services,
  metrics: ServiceMetrics,
  engines: Engines,
  audioProcess: FinishedAudioProcess | undefined,
): Promise<string | undefined> {
  const { tasks, stream, voices, accounts } = services;
  // Before any /v1 route: their errors are re-shaped as OpenAI's on the way out.
  registerOpenAiErrors(http);
  await http.register(
    healthRoutes(metrics, { metricsToken: config.metricsToken, readiness: adapters.readiness }),
  );
  // Finished audio and streams: per client address (task ids are the client's to make up).
  const perAddress = {
    rateLimitMax: config.rateLimit.streamMax,
    rateLimitWindowMs: config.rateLimit.windowMs,
    rateLimitStore: adapters.rateLimitStore,
  };
  await http.register(consoleRoutes({ publicUrl: config.publicUrl }));
  // The common finished-audio request answered before routing, where its answers are the routes'.
  const shortcut =
    config.http.corsOrigins.length === 0 && config.http.trustProxy.length === 0
      ? { metrics, process: audioProcess }
      : undefined;
  await http.register(audioRoutes(tasks, adapters.blobs, stream, { ...perAddress, shortcut }));
  // Stream endpoints: only the task's `auth` query token, never a bearer key.
  await http.register(streamRoutes(stream, perAddress));
  // Subtitles and timestamps: the task's `auth` token (a <track src> sends no header) or the owner's key.
  await http.register(timingRoutes(services.timings, perAddress));
  // OpenAI-compatible lists: their key is optional (Open WebUI asks without one), so they stand
  // outside the tenant API, limited per client address.
  await http.register(async (scope) => {
    await registerRateLimit(
      scope,
      {
        name: 'openai-lists',
        max: config.rateLimit.ipMax,
        windowMs: config.rateLimit.windowMs,
        keyGenerator: clientAddressKey,
      },
      adapters.rateLimitStore,
    );
    await scope.register(
      openAiListRoutes(openAiCatalogue(config, services), {
        accounts,
        publicLists: config.openai.publicLists,
      }),
    );
  });

  // Operator API: the admin token only, never a tenant key (and tenant routes never take the admin token).
  const adminToken = effectiveAdminToken(config);
  await http.register(
    adminRoutes(
      new AdminService(
        accounts,
        async () => voices,
        localModelOperations(config.neural, engines.rescanModels),
      ),
      adminToken,
      {
        rescanModels: engines.rescanModels,
        rateLimitMax: config.rateLimit.ipMax,
        rateLimitWindowMs: config.rateLimit.windowMs,
        rateLimitStore: adapters.rateLimitStore,
      },
    ),
  );
  await http.register(tenantRoutes(config, adapters, services, engines));
  return adminToken;
}

/**
 * The tenant API: a per-address limit (bad keys count too), the bearer key, then the per-account
 * limit, in front of every route of an account.
 */
function tenantRoutes(config: AppConfig, adapters: Adapters, services: Services, engines: Engines) {
  const { accounts, voices, splitters, tasks, stream, events, synthesis } = services;
  return async (scope: FastifyInstance): Promise<void> => {
    const limit = { windowMs: config.rateLimit.windowMs };
    await registerRateLimit(
      scope,
      { name: 'api-ip', max: config.rateLimit.ipMax, ...limit, keyGenerator: clientAddressKey },
      adapters.rateLimitStore,
    );
    addRouteOnRequestHook(scope, bearerAuth(accounts));
    await registerRateLimit(
      scope,
      { name: 'api', max: config.rateLimit.max, ...limit, keyGenerator: rateLimitKey },
      adapters.rateLimitStore,
    );
    await scope.register(
      accountRoutes({
        // Three reads asked together: one round trip on PostgreSQL, back to back on the embedded database.
        usage: async (accountId) => {
          const [ofTasks, ofVoices, ofSplitters] = await Promise.all([
            tasks.accountReport(accountId),
            voices.usage(accountId),
            splitters.usage(accountId),
          ]);
          return {
            quotas: ofTasks.quotas,
            stored: { ...ofVoices, ...ofSplitters, taskBytes: ofTasks.taskBytes },
          };
        },
        storageLimits: config.storageLimits,
        nodeConcurrency: config.generationConcurrency,
      }),
    );
    await scope.register(voiceRoutes(voices, config.limits.uploadBytes));
    await scope.register(splitterRoutes(splitters, engines.requestParser));
    await scope.register(taskRoutes(tasks, splitters));
    await scope.register(presetRoutes());
    await scope.register(engineRoutes(synthesis));
    await scope.register(
      simpleGenerateRoutes(
        new OneShotService({
          tasks,
          events,
          contentAudio: (task, idx, signal) => stream.contentBytes(task, idx, signal),
          startTimeoutMs: config.oneShotStartTimeoutMs,
        }),
      ),
    );
    await scope.register(openAiSpeechRoutes(openAiSpeech(config, services)));
  };
}

// ---- Wyoming ------------------------------------------------------------------------------------

/**
 * The Wyoming TTS server (WYOMING_PORT; undefined when unset), speaking through one-shot synthesis
 * as the account WYOMING_ACCOUNT names. Its audio is a piece's canonical PCM, read from the growing
 * piece file where this node generates the task, else decoded from the piece's relayed MP3.
 */
function wyomingServer(
  config: AppConfig,
  adapters: Adapters,
  services: Services,
  http: FastifyInstance,
): WyomingServer | undefined {
  if (config.wyoming === null) return undefined;
  const { tasks, events, stream, voices, synthesis, accounts } = services;
  const oneShot = new OneShotService({
    tasks,
    events,
    contentAudio: (task, idx, signal) => stream.contentBytes(task, idx, signal),
    startTimeoutMs: config.oneShotStartTimeoutMs,
  });
  const speech = new WyomingSpeech({
    oneShot,
    tasks,
    voices,
    synthesis,
    contentPcm: (task, idx, signal) => stream.contentPcm(task, idx, signal),
  });
  return new WyomingServer({
    config: config.wyoming,
    textLimit: config.limits.textLength,
    accounts,
    speech,
    describe: (accountId) => describeService(synthesis, voices, accountId, SERVICE_VERSION),
    admit: accountRequestCounter(config, adapters.rateLimitStore),
    log: http.log,
  });
}

/**
 * Counts a Wyoming request of an account against RATE_LIMIT_MAX per RATE_LIMIT_WINDOW_MS (the
 * per-account limit of the API, in counters of its own: Wyoming requests do not pass the HTTP
 * limiter), in this process or in Redis for a cluster; resolves with the seconds to wait when over.
 */
export function accountRequestCounter(
  config: AppConfig,
  store: RateLimitStore,
): (accountId: string) => Promise<number | undefined> {
  const { max, windowMs } = config.rateLimit;
  const over = (current: number, ttlMs: number): number | undefined =>
    current > max ? Math.max(1, Math.ceil(ttlMs / 1000)) : undefined;
  if (store.kind === 'memory') {
    const counters = new MemoryRateLimitCounters(store.capacity);
    return async (accountId) => {
      const { current, ttl } = counters.increment(`account:${accountId}`, windowMs, max);
      return over(current, ttl);
    };
  }
  return async (accountId) => {
    const key = `${store.keyPrefix}rate-limit:wyoming:account:${accountId}`;
    // A window starts with its first request (SET NX with its expiry) and is counted by INCR.
    const [, [, current], [, ttl]] = (await store.client
      .multi()
      .set(key, 0, 'PX', windowMs, 'NX')
      .incr(key)
      .pttl(key)
      .exec()) as [[unknown, unknown], [unknown, number], [unknown, number]];
    return over(current, ttl);
  };
}

// ---- OpenAI-compatible route ----------------------------------------------------------------------

/** The catalogue the OpenAI-compatible lists and model names read. */
function openAiCatalogue(config: AppConfig, services: Services): OpenAiCatalogue {
  return new OpenAiCatalogue({
    engines: services.synthesis,
    voices: services.voices,
    stockVoices: stockVoiceMap(config.openai.voices),
  });
}

/** `POST /v1/audio/speech`: OpenAI's request as a one-shot synthesis in the format asked for. */
function openAiSpeech(config: AppConfig, services: Services): OpenAiSpeech {
  const { tasks, events, stream, voices, synthesis } = services;
  return new OpenAiSpeech({
    oneShot: new OneShotService({
      tasks,
      events,
      contentAudio: (task, idx, signal) => stream.contentBytes(task, idx, signal),
      startTimeoutMs: config.oneShotStartTimeoutMs,
    }),
    resolver: new VoiceResolver({
      voices,
      engines: synthesis,
      stockVoices: stockVoiceMap(config.openai.voices),
    }),
    catalogue: openAiCatalogue(config, services),
    contentPcm: (task, idx, signal) => stream.contentPcm(task, idx, signal),
    inputMaxChars: config.openai.inputMaxChars,
  });
}
