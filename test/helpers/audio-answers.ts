// Finished-audio answers read over real HTTP, for comparing the paths that answer them.
import { request as httpRequest, type Agent, type IncomingHttpHeaders } from 'node:http';

export interface Answer {
  status: number;
  /** Header names in the order they were sent, lower-cased. */
  names: string[];
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** GET `path`; on a kept-alive connection of `agent`, else on a connection of its own. */
export function get(
  base: string,
  path: string,
  headers: Record<string, string> = {},
  agent: Agent | false = false,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${base}${path}`, { headers, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          names: res.rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase()),
          headers: res.headers,
          body: Buffer.concat(chunks),
        }),
      );
    });
    req.on('error', reject);
    req.end();
  });
}

/** The `code` of an error answer's body. */
export const errorCode = (answer: Answer): unknown =>
  (JSON.parse(answer.body.toString()) as { code?: unknown }).code;

/** The same request in a spelling only the routes answer (`auth` percent-encoded). */
export const routed = (path: string) => path.replace('?auth=', '?%61uth=');

/** Headers that differ between any two answers. */
export const VOLATILE = new Set([
  'date',
  'x-service-app-request-id',
  'x-ratelimit-remaining',
  'x-ratelimit-reset',
]);
