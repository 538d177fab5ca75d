/**
 * Raw HTTP/1.1 over a socket, for requests no HTTP client sends (bad framing, duplicate headers,
 * odd encodings), and the check that an answer is the spec's error body with the request-id header.
 */
import assert from 'node:assert/strict';
import { connect } from 'node:net';

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** Interim 1xx status lines seen before the final response. */
  interim: number[];
}

/** Parses what the server wrote on a connection: optional 1xx responses, then one final response. */
export function parseResponse(text: string): RawResponse {
  const interim: number[] = [];
  let rest = text;
  for (;;) {
    const headEnd = rest.indexOf('\r\n\r\n');
    assert.ok(headEnd > 0, `no complete response head in ${JSON.stringify(text.slice(0, 300))}`);
    const [statusLine = '', ...lines] = rest.slice(0, headEnd).split('\r\n');
    const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(statusLine)?.[1]);
    rest = rest.slice(headEnd + 4);
    if (status >= 100 && status < 200) {
      interim.push(status);
      continue;
    }
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
    }
    return { status, headers, body: rest, interim };
  }
}

/**
 * Writes `parts` to a fresh connection (each after the server has answered something, when
 * `awaitReplyBetween`), and resolves with everything the server wrote once it closes the connection.
 */
export function rawExchange(
  port: number,
  parts: Array<string | Buffer>,
  options: { awaitReplyBetween?: boolean } = {},
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const deadline = setTimeout(() => socket.destroy(new Error('no answer within 10 s')), 10_000);
    deadline.unref();
    let received = '';
    let next = 0;
    const writeNext = () => {
      const part = parts[next++];
      if (part !== undefined) socket.write(part);
    };
    socket.on('connect', writeNext);
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
      if (options.awaitReplyBetween) writeNext();
    });
    // The server may reset the connection after answering a request it refused mid-stream.
    socket.on('error', (err) => {
      if (received === '') {
        clearTimeout(deadline);
        reject(err);
      }
    });
    socket.on('close', () => {
      clearTimeout(deadline);
      if (received === '') return;
      try {
        resolve(parseResponse(received));
      } catch (err) {
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
  });
}

export function assertSpecError(res: RawResponse, status: number, code: string): void {
  assert.equal(res.status, status, res.body);
  const requestId = res.headers['x-service-app-request-id'];
  assert.match(String(requestId), UUID, `request-id header on ${String(status)}`);
  assert.match(String(res.headers['content-type']), /^application\/json/);
  const body = JSON.parse(res.body) as Record<string, unknown>;
  assert.equal(body.status, status);
  assert.equal(body.code, code);
  assert.equal(typeof body.message, 'string');
  // None of these is on the reportable tier: no requestId in the body.
  assert.equal('requestId' in body, false, res.body);
  assert.deepEqual(Object.keys(body).sort(), ['code', 'message', 'status']);
}
