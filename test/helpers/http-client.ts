/**
 * The HTTP client of the stream tests: node:http, one connection per request, reporting a body the
 * server cut (no terminating chunk) and how long the response headers took.
 */
import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';

/** A complete (or cut) response. */
export interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** The server ended the connection before the body was complete (no terminating chunk). */
  truncated: boolean;
  /** Milliseconds until the response headers arrived. */
  headersMs: number;
}

/** Method, headers and a client-side drop point. */
export interface RequestOptions {
  method?: 'GET' | 'HEAD';
  headers?: Record<string, string>;
  /** Client side: drop the connection once this many body bytes arrived. */
  dropAfter?: number;
}

/** Sends one request on its own connection and collects the whole response. */
export function send(url: string, options: RequestOptions = {}): Promise<Reply> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: options.method ?? 'GET', headers: options.headers, agent: false });
    req.on('error', reject);
    req.on('response', (res: IncomingMessage) => {
      const headersMs = Date.now() - started;
      const parts: Buffer[] = [];
      let received = 0;
      let dropped = false;
      res.on('data', (chunk: Buffer) => {
        parts.push(chunk);
        received += chunk.length;
        if (options.dropAfter !== undefined && received >= options.dropAfter && !dropped) {
          dropped = true;
          req.destroy();
        }
      });
      res.on('error', () => undefined); // a cut body is reported through `complete` below
      res.on('close', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(parts),
          truncated: !res.complete && !dropped,
          headersMs,
        }),
      );
    });
    req.end();
  });
}

/** A GET read live: the bytes so far, a wait for the first `n` of them, and the whole reply. */
export interface LiveRead {
  status: Promise<{ status: number; headers: IncomingHttpHeaders }>;
  bytes(): Buffer;
  /** Resolves once `n` body bytes arrived; rejects if the response ends first (or after 60 s). */
  until(n: number): Promise<void>;
  done: Promise<Reply>;
}

/** Starts a GET (own connection) and reads its body as it arrives. */
export function readLive(url: string): LiveRead {
  const parts: Buffer[] = [];
  let received = 0;
  let ended = false;
  const waiters = new Set<{ n: number; resolve: () => void; reject: (err: Error) => void }>();
  const wake = (): void => {
    for (const w of waiters) {
      if (received >= w.n) w.resolve();
      else if (ended)
        w.reject(new Error(`the response ended after ${String(received)} of ${String(w.n)} bytes`));
      else continue;
      waiters.delete(w);
    }
  };
  let resolveStatus: (value: { status: number; headers: IncomingHttpHeaders }) => void = () => undefined;
  const status = new Promise<{ status: number; headers: IncomingHttpHeaders }>((r) => (resolveStatus = r));
  const done = new Promise<Reply>((resolve, reject) => {
    const req = httpRequest(url, { agent: false });
    req.on('error', reject);
    req.on('response', (res) => {
      resolveStatus({ status: res.statusCode ?? 0, headers: res.headers });
      res.on('data', (chunk: Buffer) => {
        parts.push(chunk);
        received += chunk.length;
        wake();
      });
      res.on('error', () => undefined); // a cut body shows as `truncated`
      res.on('close', () => {
        ended = true;
        wake();
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(parts),
          truncated: !res.complete,
          headersMs: 0,
        });
      });
    });
    req.end();
  });
  return {
    status,
    bytes: () => Buffer.concat(parts),
    until: (n) =>
      new Promise<void>((resolve, reject) => {
        // A generous bound for a loaded machine so a regression fails instead of hanging.
        const timer = setTimeout(
          () => reject(new Error(`only ${String(received)} of ${String(n)} bytes`)),
          60_000,
        );
        const settle = {
          n,
          resolve: () => (clearTimeout(timer), resolve()),
          reject: (e: Error) => (clearTimeout(timer), reject(e)),
        };
        waiters.add(settle);
        wake();
      }),
    done,
  };
}
