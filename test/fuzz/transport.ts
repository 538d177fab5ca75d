/**
 * How fuzz cases reach the app: in process through Fastify's `inject` (fast, every route), or as
 * raw bytes on a socket of the listening app (request lines, header bytes and framing no HTTP
 * client would send). Both return a FuzzResponse for the invariant checks.
 */
import { connect } from 'node:net';
import type { App } from '../../src/app.js';
import type { RawCase } from './arbitraries.js';
import type { FuzzRequest, FuzzResponse } from './invariants.js';

type InjectMethod =
  'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'HEAD' | 'OPTIONS' | 'TRACE' | 'PROPFIND' | 'COPY' | 'SEARCH';

/** Sends `request` through `app.http.inject`. */
export async function injectCase(app: App, request: FuzzRequest): Promise<FuzzResponse> {
  const res = await app.http.inject({
    method: request.method as InjectMethod,
    url: request.url,
    headers: request.headers,
    ...(request.payload === undefined ? {} : { payload: request.payload }),
  });
  const headers: FuzzResponse['headers'] = {};
  for (const [name, value] of Object.entries(res.headers)) {
    headers[name] = typeof value === 'number' ? String(value) : value;
  }
  return { status: res.statusCode, headers, body: res.rawPayload };
}

/** One parsed response, or `undefined` while more bytes are needed. */
function parseResponse(bytes: Buffer, method: string): FuzzResponse | undefined {
  const headEnd = bytes.indexOf('\r\n\r\n');
  if (headEnd < 0) return undefined;
  const [statusLine = '', ...lines] = bytes.subarray(0, headEnd).toString('latin1').split('\r\n');
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1] ?? 0);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
  }
  const rest = bytes.subarray(headEnd + 4);
  if (status >= 100 && status < 200) return parseResponse(rest, method);
  if (method === 'HEAD' || status === 204 || status === 304)
    return { status, headers, body: Buffer.alloc(0) };
  const length = headers['content-length'];
  if (length !== undefined) {
    const n = Number(length);
    return rest.length >= n ? { status, headers, body: rest.subarray(0, n) } : undefined;
  }
  if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
    const parts: Buffer[] = [];
    let at = 0;
    for (;;) {
      const lineEnd = rest.indexOf('\r\n', at);
      if (lineEnd < 0) return undefined;
      const size = parseInt(rest.subarray(at, lineEnd).toString('latin1'), 16);
      if (Number.isNaN(size)) return { status, headers, body: Buffer.concat(parts) };
      if (size === 0) return { status, headers, body: Buffer.concat(parts) };
      if (rest.length < lineEnd + 2 + size + 2) return undefined;
      parts.push(rest.subarray(lineEnd + 2, lineEnd + 2 + size));
      at = lineEnd + 2 + size + 2;
    }
  }
  return undefined; // body until close
}

/** What a raw exchange ended with. */
export interface RawOutcome {
  response: FuzzResponse | undefined;
  /** The connection stayed open without an answer even after the client half-closed. */
  hung: boolean;
}

/**
 * Writes a raw case to a fresh connection and reads the first response. A request still
 * unanswered after `answerMs` (or announced incomplete) gets a FIN, so the server's parser sees
 * the end; a connection still open and silent `hangMs` after that is reported as hung.
 */
export function rawCase(
  port: number,
  c: RawCase,
  options: { answerMs?: number; hangMs?: number } = {},
): Promise<RawOutcome> {
  const answerMs = options.answerMs ?? 2000;
  const hangMs = options.hangMs ?? 5000;
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let received = Buffer.alloc(0);
    let done = false;
    const timers: NodeJS.Timeout[] = [];
    const finish = (outcome: RawOutcome) => {
      if (done) return;
      done = true;
      for (const timer of timers) clearTimeout(timer);
      socket.destroy();
      resolve(outcome);
    };
    const halfClose = () => {
      if (!socket.destroyed) socket.end();
      timers.push(
        setTimeout(
          () => finish({ response: parseResponse(received, c.request.method), hung: received.length === 0 }),
          hangMs,
        ),
      );
    };
    socket.on('connect', () => {
      socket.write(c.bytes);
      if (c.incomplete) halfClose();
      else timers.push(setTimeout(halfClose, answerMs));
    });
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const response = parseResponse(received, c.request.method);
      if (response !== undefined) finish({ response, hung: false });
    });
    socket.on('error', () => undefined); // a reset after a refusal: judged by what arrived
    socket.on('close', () => {
      const response = parseResponse(received, c.request.method);
      if (response !== undefined || received.length === 0) {
        finish({ response, hung: false });
        return;
      }
      // The body ran until close (no length, not chunked).
      const headEnd = received.indexOf('\r\n\r\n');
      if (headEnd < 0) {
        finish({ response: undefined, hung: false });
        return;
      }
      const head = parseResponse(Buffer.concat([received.subarray(0, headEnd + 4)]), 'HEAD');
      finish({
        response: head === undefined ? undefined : { ...head, body: received.subarray(headEnd + 4) },
        hung: false,
      });
    });
  });
}
