/**
 * A local OpenAI-compatible speech upstream for fault tests: each request is handed to the
 * handler the test sets (answer, fail, stall, cut the connection), and its connections are tracked
 * so a test can prove the service left none open. Also makes real MP3 tones with ffmpeg.
 */
import { execFile } from 'node:child_process';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** What the upstream does with one speech request (`input` is the text asked for, `body` the whole JSON body). */
export type UpstreamHandler = (
  request: { input: string; body: Record<string, unknown> },
  res: ServerResponse,
  req: IncomingMessage,
) => void;

/** A running fault upstream. */
export interface FaultUpstream {
  /** Base URL to configure as a remote engine endpoint (`REMOTE_ENGINES`). */
  url: string;
  /** Replaces the behaviour for the next requests. */
  handle(handler: UpstreamHandler): void;
  /** Speech requests received so far. */
  readonly requests: number;
  /** Connections open now. */
  readonly openConnections: number;
  /** Waits (at most `ms`) until every connection to the upstream is closed; throws naming how many are left. */
  connectionsClosed(ms?: number): Promise<void>;
  /** Destroys every connection and stops listening. */
  close(): Promise<void>;
}

/** Starts the upstream on a free loopback port; by default it answers 404. */
export async function startFaultUpstream(): Promise<FaultUpstream> {
  let handler: UpstreamHandler = (_request, res) => void res.writeHead(404).end();
  let requests = 0;
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (chunk: Buffer) => parts.push(chunk));
    req.on('end', () => {
      requests++;
      let input = '';
      let body: Record<string, unknown> = {};
      try {
        const parsed = JSON.parse(Buffer.concat(parts).toString()) as unknown;
        if (typeof parsed === 'object' && parsed !== null) body = parsed as Record<string, unknown>;
        if (typeof body.input === 'string') input = body.input;
      } catch {
        // not JSON: the handler sees an empty input and body
      }
      // One connection per call: no idle keep-alive socket lingers in the service's agent pool
      // (tests count the service's sockets before and after).
      res.setHeader('connection', 'close');
      handler({ input, body }, res, req);
    });
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    handle: (next) => void (handler = next),
    get requests() {
      return requests;
    },
    get openConnections() {
      return sockets.size;
    },
    async connectionsClosed(ms = 5000) {
      const deadline = AbortSignal.timeout(ms);
      while (sockets.size > 0) {
        if (deadline.aborted) throw new Error(`${sockets.size} upstream connection(s) left open`);
        await sleep(10);
      }
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** A real MP3 (mono, 24 kHz, 48 kbps) of a `seconds`-long sine tone, made by ffmpeg. */
export async function toneMp3(seconds: number, frequency = 440): Promise<Buffer> {
  const { stdout } = await run(
    'ffmpeg',
    [
      '-nostdin',
      '-v',
      'error',
      '-f',
      'lavfi',
      '-i',
      `sine=frequency=${frequency}:duration=${seconds}`,
      '-ac',
      '1',
      '-ar',
      '24000',
      '-c:a',
      'libmp3lame',
      '-b:a',
      '48k',
      '-f',
      'mp3',
      'pipe:1',
    ],
    { encoding: 'buffer', maxBuffer: 1 << 28 },
  );
  return stdout;
}
