// The Wyoming server's deadlines and bounds over real TCP, with a stand-in for speech (the real
// speech path, tasks and engines included, is exercised by test/wyoming.tcp.test.ts).
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AccountService } from '../accounts/account-service.js';
import { WyomingServer } from './server.js';
import type { SpokenAudio, WyomingSpeech } from './speech.js';

const logs: string[] = [];
const log = {
  info: (_o: unknown, msg?: string) => void logs.push(msg ?? ''),
  warn: (_o: unknown, msg?: string) => void logs.push(msg ?? ''),
  error: (_o: unknown, msg?: string) => void logs.push(msg ?? ''),
  debug: () => undefined,
};

/** What the stand-in speech was asked, and whether each call's signal was aborted. */
const calls: { text: string; signal: AbortSignal }[] = [];

/** Speech that yields `text.length` × 64 KiB of PCM as fast as the socket takes it; "block" never speaks. */
const speech = {
  async speak(_account: string, text: string, _voice: unknown, signal: AbortSignal): Promise<SpokenAudio> {
    calls.push({ text, signal });
    if (text === 'block') await new Promise((resolve) => signal.addEventListener('abort', resolve));
    async function* pcm(): AsyncIterable<Buffer> {
      for (let i = 0; i < text.length; i++) {
        signal.throwIfAborted();
        yield Buffer.alloc(64 * 1024);
        await sleep(0);
      }
    }
    return { taskId: 't', pcm: pcm() };
  },
} as unknown as WyomingSpeech;

const accounts = { resolveAccount: async () => ({ id: 'acct', name: 'home' }) } as unknown as AccountService;

const server = new WyomingServer({
  config: {
    host: '127.0.0.1',
    port: 0,
    account: 'home',
    maxConnections: 8,
    maxMessageBytes: 4096,
    idleTimeoutMs: 400,
  },
  textLimit: 1000,
  accounts,
  speech,
  describe: async () => ({ tts: [] }),
  admit: async () => undefined,
  log,
});
let port = 0;

before(async () => {
  port = (await server.listen()).port;
});
after(() => server.close());

async function open(): Promise<{ socket: Socket; closed: Promise<number> }> {
  const socket = connect(port, '127.0.0.1');
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  socket.on('error', () => undefined);
  const opened = Date.now();
  const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now() - opened)));
  return { socket, closed };
}

function event(type: string, data?: Record<string, unknown>): string {
  return `${JSON.stringify({ type, ...(data && { data }) })}\n`;
}

describe('Wyoming server deadlines and bounds', () => {
  it('closes an idle connection after the idle timeout, with a log line', async () => {
    const { closed } = await open();
    const ms = await closed;
    assert.ok(ms >= 350 && ms < 3000, `${ms} ms`);
    assert.ok(logs.some((l) => /idle for 400 ms/.test(l)));
  });

  it('closes a connection whose message drips in slower than the timeout allows', async () => {
    const { socket, closed } = await open();
    let stop = false;
    void (async () => {
      // One byte every 100 ms: traffic that would keep an idle timer alive for ever.
      for (const byte of '{"type":"describe","padding":"' + 'x'.repeat(100)) {
        if (stop) return;
        socket.write(byte);
        await sleep(100);
      }
    })();
    const ms = await closed;
    stop = true;
    assert.ok(ms < 3000, `${ms} ms`);
    assert.ok(logs.some((l) => /took longer than 400 ms to arrive/.test(l)));
  });

  it('stops speaking for a client that vanishes mid-audio', async () => {
    const { socket, closed } = await open();
    let received = 0;
    socket.on('data', (d: Buffer) => {
      received += d.length;
      if (received > 100_000) socket.destroy();
    });
    socket.write(event('synthesize', { text: 'x'.repeat(500) }));
    await closed;
    const call = calls.at(-1);
    for (let i = 0; i < 100 && call?.signal.aborted !== true; i++) await sleep(10);
    assert.equal(call?.signal.aborted, true, 'the speech was told to stop');
  });

  it('cuts a client that stops reading audio, which stops the speech', async () => {
    const { socket } = await open();
    socket.pause(); // reads nothing: the server's writes back up
    socket.write(event('synthesize', { text: 'x'.repeat(2000) })); // 128 MiB if it were all sent
    // A paused client does not see the end of its connection: the server's side is what counts.
    const started = Date.now();
    while (!logs.some((l) => /read no audio for 400 ms/.test(l))) {
      assert.ok(Date.now() - started < 10_000, 'the server did not cut the client in time');
      await sleep(20);
    }
    for (let i = 0; i < 100 && calls.at(-1)?.signal.aborted !== true; i++) await sleep(10);
    assert.equal(calls.at(-1)?.signal.aborted, true);
    socket.destroy();
  });

  it('closes a connection that floods events faster than they are answered', async () => {
    const { socket, closed } = await open();
    socket.resume();
    socket.write(event('synthesize', { text: 'block' }) + event('describe').repeat(80));
    await closed;
    assert.ok(logs.some((l) => /more than 64 events waiting/.test(l)));
  });

  it('answers events of other connections meanwhile, and after', async () => {
    const { socket } = await open();
    const got: Buffer[] = [];
    socket.on('data', (d: Buffer) => got.push(d));
    socket.write(event('describe'));
    for (let i = 0; i < 100 && !Buffer.concat(got).toString().includes('"info"'); i++) await sleep(10);
    assert.match(Buffer.concat(got).toString(), /^\{"type":"info","data_length":\d+\}\n\{"tts":\[\]\}/);
    socket.destroy();
  });
});
