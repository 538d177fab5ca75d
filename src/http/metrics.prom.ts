/**
 * Prometheus metrics of one app with prom-client (a registry per app: tests build many apps in one
 * process). HTTP requests by route pattern (never the raw URL: bounded series) and status, their
 * latency and response bytes are measured by hooks; the service's own figures (stream sessions,
 * listeners, pipeline and relay runs, generations, encoder realtime factor, queue depth per
 * account, engine errors) are read from the services at scrape time, so domain code knows nothing
 * of Prometheus; and the process's default metrics (CPU, memory, event loop, handles).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { AnswerMeter } from './finished-audio.shortcut.js';

/** What the metrics read from the services when scraped. */
export interface MetricsSources {
  streamSessions(): number;
  listeners(): number;
  pipelineRuns(): number;
  relayRuns(): number;
  activeGenerations(): number;
  openEncoderStreams(): number;
  encoded(): { audioSeconds: number; workerSeconds: number };
  engineErrors(): ReadonlyMap<string, number>;
  /** Pending tasks of the accounts with the most of them (at most `limit`). */
  queueDepthByAccount(limit: number): Promise<{ accountId: string; pending: number }[]>;
  /** Connections the finished-audio process took (`sent`) and sent back (by reason). */
  finishedAudioConnections(): ReadonlyMap<string, number>;
}

/** Accounts shown in the queue-depth gauge (the deepest queues): bounded series whatever the tenants. */
export const QUEUE_DEPTH_ACCOUNTS = 20;

/** One app's metrics: the registry /metrics renders; `answered` and `answeredMany` count requests answered without Fastify's hooks. */
export interface ServiceMetrics extends AnswerMeter {
  readonly registry: Registry;
  /** The Prometheus text exposition of every metric. */
  render(): Promise<{ contentType: string; body: string }>;
}

/** Latency buckets (seconds): API calls take milliseconds, live streams minutes. */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

/** The route label of a request: its route pattern, or "unmatched" (404s must not add series). */
function routeOf(request: FastifyRequest): string {
  return request.routeOptions.url ?? 'unmatched';
}

/**
 * Creates the metrics of one app and registers the hooks that measure its requests. Call it on the
 * root instance before any route is registered (hooks apply to routes registered after them).
 */
export function createServiceMetrics(app: FastifyInstance, sources: MetricsSources): ServiceMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'voicegen_' });
  const registers = [registry];

  const requests = new Counter({
    name: 'voicegen_http_requests_total',
    help: 'HTTP requests answered, by method, route pattern and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers,
  });
  const latency = new Histogram({
    name: 'voicegen_http_request_duration_seconds',
    help: 'Time from a request to the end of its answer (a live stream counts until it ends)',
    labelNames: ['method', 'route'] as const,
    buckets: LATENCY_BUCKETS,
    registers,
  });
  const bytesServed = new Counter({
    name: 'voicegen_http_response_bytes_total',
    help: 'Bytes written to clients (headers and bodies), by route pattern: audio routes are the bytes served',
    labelNames: ['route'] as const,
    registers,
  });

  /** Bytes the request's socket had written when the request arrived (keep-alive sockets serve many). */
  const socketBytesAtStart = new WeakMap<FastifyRequest, number>();
  app.addHook('onRequest', (request, _reply, done) => {
    socketBytesAtStart.set(request, request.raw.socket.bytesWritten);
    done();
  });
  const answered = (method: string, route: string, status: number, seconds: number, bytes?: number) => {
    requests.inc({ method, route, status: String(status) });
    latency.observe({ method, route }, seconds);
    if (bytes !== undefined) bytesServed.inc({ route }, Math.max(0, bytes));
  };
  app.addHook('onResponse', (request, reply, done) => {
    const before = socketBytesAtStart.get(request);
    answered(
      request.method,
      routeOf(request),
      reply.statusCode,
      reply.elapsedTime / 1000,
      before === undefined ? undefined : request.raw.socket.bytesWritten - before,
    );
    done();
  });

  new Gauge({
    name: 'voicegen_stream_sessions',
    help: 'Live stream sessions on this node',
    registers,
    collect() {
      this.set(sources.streamSessions());
    },
  });
  new Gauge({
    name: 'voicegen_stream_listeners',
    help: 'Requests reading a live stream session on this node now',
    registers,
    collect() {
      this.set(sources.listeners());
    },
  });
  // Totals the services keep: the counter shows their value at scrape time.
  new Counter({
    name: 'voicegen_stream_pipeline_runs',
    help: 'Stream pipelines started on this node (one per session build)',
    registers,
    collect() {
      this.reset();
      this.inc(sources.pipelineRuns());
    },
  });
  new Counter({
    name: 'voicegen_stream_relay_runs',
    help: 'Stream sessions this node relayed from the node generating their task',
    registers,
    collect() {
      this.reset();
      this.inc(sources.relayRuns());
    },
  });
  new Gauge({
    name: 'voicegen_active_generations',
    help: 'Tasks being generated on this node now',
    registers,
    collect() {
      this.set(sources.activeGenerations());
    },
  });
  new Gauge({
    name: 'voicegen_encoder_streams',
    help: 'MP3 encoder streams open on this node',
    registers,
    collect() {
      this.set(sources.openEncoderStreams());
    },
  });
  new Counter({
    name: 'voicegen_encoder_audio_seconds_total',
    help: 'Seconds of audio the MP3 encoders encoded',
    registers,
    collect() {
      this.reset();
      this.inc(sources.encoded().audioSeconds);
    },
  });
  new Counter({
    name: 'voicegen_encoder_worker_seconds_total',
    help: 'Seconds the MP3 encoder workers spent encoding',
    registers,
    collect() {
      this.reset();
      this.inc(sources.encoded().workerSeconds);
    },
  });
  new Gauge({
    name: 'voicegen_encoder_realtime_factor',
    help: 'Seconds of audio encoded per second of encoder work since start (0 before any)',
    registers,
    collect() {
      const { audioSeconds, workerSeconds } = sources.encoded();
      this.set(workerSeconds > 0 ? audioSeconds / workerSeconds : 0);
    },
  });
  new Counter({
    name: 'voicegen_engine_errors_total',
    help: 'Engine calls that failed a task on this node, by engine',
    labelNames: ['engine'] as const,
    registers,
    collect() {
      this.reset();
      for (const [engine, count] of sources.engineErrors()) this.inc({ engine }, count);
    },
  });
  new Counter({
    name: 'voicegen_finished_audio_connections_total',
    help: 'Connections sent to the finished-audio process (event "sent") and sent back by it, by reason',
    labelNames: ['event'] as const,
    registers,
    collect() {
      this.reset();
      for (const [event, count] of sources.finishedAudioConnections()) this.inc({ event }, count);
    },
  });
  new Gauge({
    name: 'voicegen_queue_depth',
    help: `Pending tasks per account (the ${QUEUE_DEPTH_ACCOUNTS} accounts with the most)`,
    labelNames: ['account'] as const,
    registers,
    async collect() {
      this.reset();
      for (const { accountId, pending } of await sources.queueDepthByAccount(QUEUE_DEPTH_ACCOUNTS)) {
        this.set({ account: accountId }, pending);
      }
    },
  });

  const answeredMany = (
    method: string,
    route: string,
    status: number,
    seconds: readonly number[],
    bytes: number,
  ) => {
    const labels = { method, route };
    requests.inc({ method, route, status: String(status) }, seconds.length);
    for (const time of seconds) latency.observe(labels, time);
    bytesServed.inc({ route }, Math.max(0, bytes));
  };

  return {
    registry,
    render: async () => ({ contentType: registry.contentType, body: await registry.metrics() }),
    answered,
    answeredMany,
  };
}
