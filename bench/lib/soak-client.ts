/**
 * What both processes of the soak (bench/soak.ts) share: the HTTP client, its answers' status
 * names, the open-loop sender and the phases of a run.
 */
import http, { type IncomingHttpHeaders } from 'node:http';

/** The phases of a soak run; only `unloaded` and `loaded` are recorded. */
export type Phase = 'setup' | 'warmup' | 'unloaded' | 'loaded' | 'done';

export const REQUEST_TIMEOUT_MS = 30_000;

/** The text of polite previews and of the long live tasks. */
export const SENTENCE =
  'The quiet harbour town woke slowly, and the fishermen counted their nets while gulls circled above the grey water. ';

/** Counts one more `key`. */
export function bump(map: Map<string, number>, key: string): void {
  map.set(key, (map.get(key) ?? 0) + 1);
}

/** A whole HTTP answer with its timings (ms from the request being sent). */
export interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  firstByteMs: number;
  totalMs: number;
  /** Whether the request went out on a kept-alive connection (false: a new one was opened for it). */
  reusedSocket: boolean;
}

/** One request: `key` becomes a bearer token, `body` JSON. */
export interface CallOptions {
  method: string;
  path: string;
  key?: string;
  body?: unknown;
  agent: http.Agent;
  timeoutMs?: number;
}

let baseUrl = '';

/** The service's origin every call() goes to. */
export function setBaseUrl(url: string): void {
  baseUrl = url;
}

/** Sends one request and reads its whole answer. */

export function call(options: CallOptions): Promise<Answer> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const payload = options.body === undefined ? undefined : Buffer.from(JSON.stringify(options.body));
    const headers: Record<string, string> = {};
    if (options.key !== undefined) headers.authorization = `Bearer ${options.key}`;
    if (payload !== undefined) {
      headers['content-type'] = 'application/json';
      headers['content-length'] = String(payload.length);
    }
    const req = http.request(
      `${baseUrl}${options.path}`,
      {
        method: options.method,
        headers,
        agent: options.agent,
        signal: AbortSignal.timeout(options.timeoutMs ?? REQUEST_TIMEOUT_MS),
      },
      (res) => {
        const chunks: Buffer[] = [];
        let firstByteMs = -1;
        res.on('data', (chunk: Buffer) => {
          if (firstByteMs < 0) firstByteMs = performance.now() - started;
          chunks.push(chunk);
        });
        res.once('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks),
            firstByteMs: firstByteMs < 0 ? performance.now() - started : firstByteMs,
            totalMs: performance.now() - started,
            reusedSocket: req.reusedSocket,
          }),
        );
        res.once('error', reject);
      },
    );
    req.once('error', reject);
    req.end(payload);
  });
}

/** A keep-alive agent whose connections leave from `localAddress` (one client address per group). */
export function agentFor(localAddress: string, maxSockets: number): http.Agent {
  return new http.Agent({ keepAlive: true, maxSockets, localAddress });
}

/** The `data` of a 2xx answer's envelope; throws on any other status. */
export function json<T>(answer: Answer): T {
  if (answer.status < 200 || answer.status > 299) {
    throw new Error(`HTTP ${answer.status}: ${answer.body.toString('utf8').slice(0, 300)}`);
  }
  return (JSON.parse(answer.body.toString('utf8')) as { data: T }).data;
}

/**
 * Status and error code of an answer; a per-account quota refusal (which shares the rate
 * limiter's code RATE_LIMIT_EXCEEDED) is told apart by the quota its message names.
 */
export function statusOf(answer: Answer): string {
  const text = answer.body.toString('utf8', 0, 2000);
  const code = /"code"\s*:\s*"([A-Z_]+)"/.exec(text)?.[1];
  if (code === undefined) return String(answer.status);
  const quota = /(queued tasks|daily characters) quota exceeded/.exec(text)?.[1];
  return quota === undefined ? `${answer.status} ${code}` : `${answer.status} ${code} (${quota} quota)`;
}

/** A failed call's error code (ECONNRESET, AbortError…). */
export function errorName(err: unknown): string {
  if (err instanceof Error) return (err as NodeJS.ErrnoException).code ?? err.name;
  return 'error';
}

/** Open loop at `rps`: requests are sent on schedule whatever the answers' latency (no coordinated omission). */
export function openLoop(rps: number, stop: AbortSignal, send: (n: number) => void): Promise<void> {
  if (rps <= 0) return Promise.resolve();
  return new Promise((resolve) => {
    const started = performance.now();
    let sent = 0;
    const timer = setInterval(() => {
      if (stop.aborted) {
        clearInterval(timer);
        resolve();
        return;
      }
      const due = Math.floor(((performance.now() - started) / 1000) * rps);
      for (; sent < due; sent++) send(sent);
    }, 10);
  });
}
