/** The CLI's calls of the service's public API: an answer's status and bytes, and its `data`. */
import { CliError } from './cli-error.js';

/** One API call's answer: status and body bytes. */
export interface ApiAnswer {
  status: number;
  body: Buffer;
}

/** Calls the service's public API (a path with its query), with the key. */
export type ApiCall = (method: 'GET' | 'POST', path: string, body?: unknown) => Promise<ApiAnswer>;

/** The `data` of a successful API answer; an error answer becomes a CliError with the server's message. */
export function parseData<T>(answer: ApiAnswer, what: string): T {
  let body: { data?: T; message?: string; code?: string };
  try {
    body = JSON.parse(answer.body.toString('utf8')) as typeof body;
  } catch {
    throw new CliError(`${what}: HTTP ${answer.status} without a JSON body`, 1);
  }
  if (answer.status < 200 || answer.status >= 300) {
    throw new CliError(
      `${what}: ${body.message ?? `HTTP ${answer.status}`} (${body.code ?? answer.status})`,
      1,
    );
  }
  return body.data as T;
}
