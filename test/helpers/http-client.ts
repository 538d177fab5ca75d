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
