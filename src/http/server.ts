/**
 * The Fastify instance with the conventions every route shares: a UUID request id echoed in
 * X-Service-App-Request-Id on every response, the one error handler (also for errors Fastify and
 * Node's HTTP parser raise before a route runs), 404 RESOURCE_NOT_FOUND for unknown routes, and logs
 * that never contain credentials or the data of database errors (src/http/log-redaction.ts).
 * Slow clients are bounded: headers and the whole request must arrive in time,
 * else 408; during shutdown, requests on open connections get 503 SYSTEM_SHUTTING_DOWN.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import cors from '@fastify/cors';
import Fastify, {
  LogController,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifyServerOptions,
} from 'fastify';
import type { AppConfig } from '../config/config.js';
import { AppError } from '../errors/app-error.js';
import { decorateAccount } from './auth.js';
import {
  answerClientError,
  type ClientError,
  expectationFailed,
  handleError,
  handleFrameworkError,
  MAX_URL_LENGTH,
  REQUEST_ID_HEADER,
  uriTooLong,
} from './error-handler.js';
import { registerJsonBodyParser } from './json-body.js';
import { batchedJsonStdout } from './log-format.js';
import { redactUrl, scrubLogLine, serializeError } from './log-redaction.js';
import { registerStorableParamsCheck } from './unstorable-params.js';

export { MAX_URL_LENGTH, REQUEST_ID_HEADER } from './error-handler.js';
export { redactUrl } from './log-redaction.js';

/** Idle keep-alive connections are closed after this; above the 60 s idle timeout of common load balancers, so they close first. */
export const KEEP_ALIVE_TIMEOUT_MS = 72_000;

/** Seconds a client is asked to wait before retrying a request refused during shutdown. */
const SHUTDOWN_RETRY_AFTER_S = 5;

/**
 * How often Node checks the headers and request deadlines of open connections (they are enforced
 * only at these checks, so a deadline is exceeded by up to this much).
 */
function connectionsCheckingInterval(headersTimeoutMs: number): number {
  return Math.max(25, Math.min(1_000, Math.floor(headersTimeoutMs / 4)));
}

/** Response headers a browser script may read: the request id, audio ids and metadata, ranges. */
const CORS_EXPOSED_HEADERS = [
  REQUEST_ID_HEADER,
  'X-Service-Audio-Id',
  'X-Service-Response-Data',
  'X-Reecho-Audio-Id',
  'X-Reecho-Response-Data',
  'Content-Length',
  'Content-Range',
  'Accept-Ranges',
  'ETag',
  'Retry-After',
];

/**
 * CORS for browser clients (CORS_ORIGINS; none by default): preflights answered, the allowed
 * origins reflected, credentials by bearer header only (no cookies, so `*` is safe to offer).
 */
function registerCors(app: FastifyInstance, origins: readonly string[]): void {
  if (origins.length === 0) return;
  void app.register(cors, {
    origin: origins.includes('*') ? '*' : [...origins],
    methods: ['GET', 'HEAD', 'POST', 'PUT', 'DELETE'],
    allowedHeaders: ['Authorization', 'Content-Type', 'Range', 'If-Range', 'If-None-Match', 'If-Match'],
    exposedHeaders: CORS_EXPOSED_HEADERS,
    maxAge: 600,
  });
}

/** Node answers an Expect it does not know with a bare 417 unless told (RFC 9110 §10.1.1). */
const CONTINUE_EXPECTATION = /(?:^|\W)100-continue(?:$|\W)/i;

function unmetExpectation(request: FastifyRequest): boolean {
  const expect = request.headers.expect;
  if (expect === undefined) return false;
  const { httpVersionMajor, httpVersionMinor } = request.raw;
  // HTTP/1.0 has no Expect; Node ignores it there too.
  if (httpVersionMajor === 1 && httpVersionMinor === 0) return false;
  return !CONTINUE_EXPECTATION.test(expect);
}

/** Longest piece of a refused header value quoted back in an error message. */
const QUOTED_HEADER_CHARS = 100;

function quoted(value: string): string {
  return JSON.stringify(
    value.length > QUOTED_HEADER_CHARS ? `${value.slice(0, QUOTED_HEADER_CHARS)}…` : value,
  );
}

/**
 * The framing and coding of a request this service does not implement, as the error to answer,
 * or undefined when it has none of them. Node's parser lets all three through:
 *  - more than one Host field line: which one names the target is ambiguous (RFC 9112 §3.2, 400);
 *  - a Transfer-Encoding other than exactly `chunked` (`gzip, chunked`, `gzip`, any on HTTP/1.0):
 *    Node would decode only the chunking and hand on the rest as if it were the body; the framing
 *    is not trusted, so the connection closes too (RFC 9112 §6.1);
 *  - a body with a Content-Encoding other than identity: bodies are read as sent, so a compressed
 *    one would be misread as malformed JSON; 415 naming the coding (RFC 9110 §15.5.16).
 */
function unsupportedFraming(request: FastifyRequest): AppError | undefined {
  const raw = request.raw.rawHeaders;
  let hosts = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]?.toLowerCase() === 'host') hosts++;
  if (hosts > 1) {
    return new AppError('VALIDATION_INVALID_FORMAT', `a request must have one Host header, not ${hosts}`);
  }
  const transfer = request.headers['transfer-encoding'];
  if (transfer !== undefined && request.raw.httpVersion === '1.0') {
    return new AppError('VALIDATION_INVALID_FORMAT', 'an HTTP/1.0 request has no Transfer-Encoding', {
      headers: { connection: 'close' },
    });
  }
  if (transfer !== undefined && transfer.trim().toLowerCase() !== 'chunked') {
    return new AppError(
      'VALIDATION_INVALID_FORMAT',
      `the only Transfer-Encoding this service reads is "chunked", not ${quoted(transfer)}`,
      { headers: { connection: 'close' } },
    );
  }
  const coding = request.headers['content-encoding'];
  const length = request.headers['content-length'];
  const hasBody = transfer !== undefined || (length !== undefined && length.trim() !== '0');
  if (coding !== undefined && hasBody && !onlyIdentity(coding)) {
    return new AppError(
      'REQUEST_UNSUPPORTED_MEDIA_TYPE',
      `request bodies are read as sent, without a content coding: send this one without Content-Encoding ${quoted(coding)}`,
      { headers: { 'Accept-Encoding': 'identity' } },
    );
  }
  return undefined;
}

/** True when a Content-Encoding value names no coding but `identity` (or none at all). */
function onlyIdentity(coding: string): boolean {
  return coding
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .every((c) => c === '' || c === 'identity');
}

/** 503 for a request that arrives on an open connection while the server closes. */
function shuttingDown(): AppError {
  return new AppError('SYSTEM_SHUTTING_DOWN', 'the service is shutting down; retry the request', {
    headers: { 'Retry-After': String(SHUTDOWN_RETRY_AFTER_S), connection: 'close' },
  });
}

/** Paths that probes and scrapers ask every few seconds: their lines would bury everything else at info. */
const PROBE_PATHS = new Set(['/healthz', '/readyz', '/metrics']);

/**
 * Fastify's request log lines, one per request instead of two: nothing on arrival, and on completion
 * what was asked (the URL redacted by the req serializer), the answer and how long it took (a second
 * line per request cost a tenth of the CPU of serving finished audio). A probe's line is at debug.
 */
class OneLinePerRequest extends LogController {
  override incomingRequest(): void {
    // logged with the completion line
  }

  override requestCompleted(
    error: Error | null | undefined,
    request: FastifyRequest,
    reply: FastifyReply,
  ): void {
    if (error) {
      reply.log.error(
        { req: request, res: reply, err: error, responseTime: reply.elapsedTime },
        'request errored',
      );
    } else {
      const line = { req: request, res: reply, responseTime: reply.elapsedTime };
      const probe = reply.statusCode < 400 && PROBE_PATHS.has(request.url.split('?', 1)[0] ?? '');
      if (probe) reply.log.debug(line, 'request completed');
      else reply.log.info(line, 'request completed');
    }
  }
}

/**
 * Answers a request before Fastify routes it, returning true, or returns false (having written
 * nothing) to leave it to Fastify. For a hot path whose every answer it can give exactly as the
 * routes would (src/http/finished-audio.shortcut.ts); everything else goes to the routes.
 */
export type RequestShortcut = (req: IncomingMessage, res: ServerResponse) => boolean;

const shortcutSetters = new WeakMap<Server, (shortcut: RequestShortcut) => void>();

/** Lets `shortcut` answer the requests of `server` (the app's `server`) before Fastify routes them. */
export function answerBeforeRouting(server: Server, shortcut: RequestShortcut): void {
  const set = shortcutSetters.get(server);
  if (set === undefined) throw new Error('answerBeforeRouting: not a server of createHttpServer');
  set(shortcut);
}

/**
 * The Fastify instance. `logger`: `false` = no logging; absent or `true` = pino on stdout at
 * config.logLevel; an options object (e.g. `{ level, stream }` in tests capturing lines) is used
 * with the redacting serializers and line scrubber always applied on top.
 */
export function createHttpServer(
  config: AppConfig,
  logger?: FastifyServerOptions['logger'],
): FastifyInstance {
  // Operator secrets that could reach a message (an engine echoing its key, a token in a URL).
  const secrets = [config.adminToken, ...Object.values(config.remoteEngines).map((e) => e.apiKey)].filter(
    (s): s is string => s !== undefined,
  );
  let shortcut: RequestShortcut | undefined;
  let closing = false;
  const nodeOptions = {
    // RFC 9112 §3.2: an HTTP/1.1 request without Host is a 400 — answered by the onRequest hook
    // below with the spec body and request id, not by Node's bare 400.
    requireHostHeader: false,
    headersTimeout: config.http.headersTimeoutMs,
    connectionsCheckingInterval: connectionsCheckingInterval(config.http.headersTimeoutMs),
  };
  const app = Fastify({
    // Fastify's own server, with a shortcut in front of its routing (none until one is set).
    serverFactory: (handler) => {
      const server = createServer(nodeOptions, (req, res) => {
        if (shortcut !== undefined && !closing && shortcut(req, res)) return;
        handler(req, res);
      });
      server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
      server.requestTimeout = config.http.requestTimeoutMs;
      server.setTimeout(0);
      shortcutSetters.set(server, (set) => {
        shortcut = set;
      });
      return server;
    },
    logger:
      logger === false
        ? false
        : {
            level: config.logLevel,
            ...(typeof logger === 'object' && logger.stream !== undefined
              ? {}
              : { stream: batchedJsonStdout() }),
            ...(typeof logger === 'object' && logger),
            redact: ['req.headers.authorization'],
            serializers: {
              req: (req: { method: string; url: string; ip?: string }) => ({
                method: req.method,
                url: redactUrl(req.url),
                ip: req.ip,
              }),
              err: serializeError,
            },
            // The last word on every line, whatever a message or library put into it.
            hooks: { streamWrite: (line: string) => scrubLogLine(line, secrets) },
          },
    logController: new OneLinePerRequest(),
    genReqId: () => randomUUID(),
    requestIdHeader: false,
    bodyLimit: config.limits.bodyBytes,
    trustProxy: config.http.trustProxy.length > 0 ? config.http.trustProxy : false,
    // Node counts the request timeout from the first byte until the request (headers and body) is
    // received; a response may then take as long as it needs (a live stream for an hour).
    requestTimeout: config.http.requestTimeoutMs,
    http: nodeOptions,
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
    // No socket idle timeout: a live stream can be silent while it waits for the next piece.
    connectionTimeout: 0,
    // Answered by the onRequest hook below with the spec body instead of Fastify's own.
    return503OnClosing: false,
    frameworkErrors: handleFrameworkError,
    // Node's parser errors (bad request line, 431, timeouts) happen before Fastify has a request.
    clientErrorHandler: (err, socket) => {
      answerClientError(app.log, err as unknown as ClientError, socket);
    },
  });
  // An unknown Expect: let the request through the usual pipeline, whose onRequest hook answers 417.
  app.server.on('checkExpectation', (req, res) => app.routing(req, res));
  decorateAccount(app);
  registerCors(app, config.http.corsOrigins);
  registerJsonBodyParser(app);
  registerStorableParamsCheck(app);
  app.addHook('preClose', async () => {
    closing = true;
  });
  app.addHook('onRequest', async (request, reply) => {
    reply.header(REQUEST_ID_HEADER, request.id);
    // Every answer is what its Content-Type says: no browser reads JSON or audio as a page or script.
    reply.header('X-Content-Type-Options', 'nosniff');
    // Fastify already set `Connection: close` on requests that arrive while it closes.
    if (closing) throw shuttingDown();
    if (request.raw.url !== undefined && request.raw.url.length > MAX_URL_LENGTH) throw uriTooLong();
    if (unmetExpectation(request)) throw expectationFailed();
    if (request.raw.httpVersion === '1.1' && request.headers.host === undefined) {
      throw new AppError('VALIDATION_INVALID_FORMAT', 'an HTTP/1.1 request needs a Host header');
    }
    const framing = unsupportedFraming(request);
    if (framing !== undefined) throw framing;
  });
  app.setErrorHandler(handleError);
  app.setNotFoundHandler(async (request) => {
    throw new AppError(
      'RESOURCE_NOT_FOUND',
      `no route for ${request.method} ${redactUrl(request.url.split('?')[0] ?? '')}`,
    );
  });
  return app;
}
