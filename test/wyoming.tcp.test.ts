// The Wyoming TTS server (Home Assistant's voice protocol) over a real TCP socket against the
// started service. The client below is written from the protocol's description (a JSON header line,
// then `data_length` bytes of JSON merged into data, then `payload_length` bytes of payload), not
// from the server's own reader.
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { rmsDbfs } from './helpers/audio-check.js';
import { startTestApp, type TestApp } from './helpers/test-app.js';

interface Event {
  type: string;
  data: Record<string, unknown>;
  payload: Buffer;
}

/** A minimal Wyoming client: events in arrival order, and whether the server closed the socket. */
class Client {
  private buffer = Buffer.alloc(0);
  readonly events: Event[] = [];
  private wake: (() => void) | undefined;
  closed = false;

  private constructor(readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.buffer = Buffer.concat([this.buffer, chunk]);
      this.parse();
      this.wake?.();
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      this.closed = true;
      this.wake?.();
    });
  }

  static async open(port: number): Promise<Client> {
    const socket = connect(port, '127.0.0.1');
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    return new Client(socket);
  }

  private parse(): void {
    for (;;) {
      const end = this.buffer.indexOf(0x0a);
      if (end < 0) return;
      const header = JSON.parse(this.buffer.subarray(0, end).toString('utf8')) as {
        type: string;
        data?: Record<string, unknown>;
        data_length?: number;
        payload_length?: number;
      };
      const dataLength = header.data_length ?? 0;
      const payloadLength = header.payload_length ?? 0;
      if (this.buffer.length < end + 1 + dataLength + payloadLength) return;
      let at = end + 1;
      const data = { ...(header.data ?? {}) };
      if (dataLength > 0) {
        Object.assign(data, JSON.parse(this.buffer.subarray(at, at + dataLength).toString('utf8')));
        at += dataLength;
      }
      const payload = Buffer.from(this.buffer.subarray(at, at + payloadLength));
      this.buffer = this.buffer.subarray(at + payloadLength);
      this.events.push({ type: header.type, data, payload });
    }
  }

  /** Sends an event with its data after the header line (as Home Assistant's client does). */
  send(type: string, data?: Record<string, unknown>): void {
    const body = data === undefined ? undefined : Buffer.from(JSON.stringify(data), 'utf8');
    const header = { type, ...(body !== undefined && { data_length: body.length }) };
    this.socket.write(Buffer.concat([Buffer.from(`${JSON.stringify(header)}\n`), body ?? Buffer.alloc(0)]));
  }

  /** Waits until an event of `type` has arrived (after `from` events); returns its index. */
  async waitFor(type: string, from = 0, timeoutMs = 30_000): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const index = this.events.findIndex((e, i) => i >= from && e.type === type);
      if (index >= 0) return index;
      if (this.closed) throw new Error(`connection closed before ${type}`);
      if (Date.now() > deadline) throw new Error(`no ${type} within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        setTimeout(resolve, 200);
      });
    }
  }

  async waitClosed(timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!this.closed) {
      if (Date.now() > deadline) throw new Error('the server did not close the connection');
      await sleep(20);
    }
  }

  close(): void {
    this.socket.destroy();
  }
}

/** The audio of one audio-start … audio-stop run beginning at event `start`. */
function audioRun(
  events: readonly Event[],
  start: number,
): { rate: number; pcm: Int16Array; chunks: Event[] } {
  const first = events[start];
  assert.equal(first?.type, 'audio-start');
  const chunks: Event[] = [];
  for (let i = start + 1; i < events.length && events[i]?.type !== 'audio-stop'; i++) {
    const event = events[i];
    if (event?.type === 'audio-chunk') chunks.push(event);
  }
  const bytes = Buffer.concat(chunks.map((c) => c.payload));
  const pcm = new Int16Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length));
  return { rate: Number(first?.data.rate), pcm, chunks };
}

/** Waits until the server has let go of every connection the tests before closed. */
async function connectionsLetGo(): Promise<void> {
  const deadline = Date.now() + 10_000;
  while ((t.app.wyoming?.openConnections ?? 0) > 0) {
    if (Date.now() > deadline) throw new Error('connections of earlier tests are still open');
    await sleep(20);
  }
}

let t: TestApp;
let port = 0;
let accountId = '';
let voiceId = '';
const logs: { msg?: string; reason?: string; taskId?: string }[] = [];
const ACCOUNT = 'wyoming-home';

before(async () => {
  t = await startTestApp({
    env: {
      LOG_LEVEL: 'info',
      WYOMING_PORT: '0',
      WYOMING_ACCOUNT: ACCOUNT,
      WYOMING_MAX_CONNECTIONS: '6',
      WYOMING_MAX_MESSAGE_BYTES: '65536',
      ACCOUNT_DAILY_CHARACTERS: '9000',
      RATE_LIMIT_MAX: '40',
    },
    logger: {
      level: 'info',
      stream: { write: (line: string) => void logs.push(JSON.parse(line) as (typeof logs)[number]) },
    },
  });
  port = t.app.wyoming?.address?.port ?? 0;
  assert.ok(port > 0, 'the Wyoming server listens');
  // The account the server runs as may come after the server: it is looked up at each request.
  accountId = (await t.app.services.accounts.createAccount(ACCOUNT)).id;
  voiceId = (
    await t.app.services.voices.create(accountId, {
      name: 'Kitchen narrator',
      engine: { engine: 'espeak', voice: 'gmw/en-US', variant: 'f3' },
    })
  ).id;
});

after(async () => {
  await t.close();
});

describe('Wyoming: describe', () => {
  it('answers info with one streaming TTS program listing the engine voices and the account’s', async () => {
    const client = await Client.open(port);
    try {
      client.send('describe');
      const at = await client.waitFor('info');
      const tts = client.events[at]?.data.tts as Record<string, unknown>[];
      assert.equal(tts.length, 1);
      const program = tts[0] as {
        name: string;
        installed: boolean;
        version: string;
        supports_synthesize_streaming: boolean;
        attribution: { name: string };
        voices: {
          name: string;
          description: string;
          installed: boolean;
          languages: string[];
          speakers: { name: string }[] | null;
          attribution: { name: string; url: string };
        }[];
      };
      assert.equal(program.name, 'voicegen');
      assert.equal(program.installed, true);
      assert.equal(program.supports_synthesize_streaming, true);
      assert.ok(program.version.length > 0);
      const kal = program.voices.find((v) => v.name === 'flite:kal16');
      assert.ok(kal, 'Flite’s default voice is listed by its spec');
      assert.deepEqual(kal.languages, ['en_US', 'en']);
      assert.equal(kal.speakers, null);
      assert.equal(kal.attribution.name, 'CMU Flite');
      const espeak = program.voices.find((v) => v.name === 'espeak:gmw/en-US');
      assert.ok(espeak, 'espeak-ng voices are listed');
      assert.ok(
        espeak.speakers?.some((s) => s.name === 'f3'),
        'espeak-ng variants are its speakers',
      );
      const own = program.voices.find((v) => v.name === voiceId);
      assert.ok(own, 'the account’s own voice is listed by its id');
      assert.equal(own.description, 'Kitchen narrator');
      assert.ok(own.languages.length > 0 && own.installed);
      assert.ok(program.voices.length > 100);
      // Home Assistant takes the first voice of a language: the default English voice leads the catalogue.
      assert.equal(program.voices.find((v) => v.name.includes(':'))?.name, 'flite:kal16');
    } finally {
      client.close();
    }
  });
});

describe('Wyoming: synthesize', () => {
  it('streams PCM at the rate audio-start announces, as long as the text takes to say', async () => {
    const client = await Client.open(port);
    try {
      const text = 'Hello from the kitchen. The oven is now preheated to two hundred degrees.';
      client.send('synthesize', { text, voice: { name: 'flite:kal16' } });
      const start = await client.waitFor('audio-start');
      await client.waitFor('audio-stop', start);
      const { rate, pcm, chunks } = audioRun(client.events, start);
      assert.equal(rate, 44100);
      assert.deepEqual(client.events[start]?.data, { rate: 44100, width: 2, channels: 1, timestamp: 0 });
      assert.ok(chunks.length > 1);
      for (const chunk of chunks) {
        assert.equal(chunk.data.rate, rate, 'every chunk is at the announced rate');
        assert.equal(chunk.data.width, 2);
        assert.equal(chunk.data.channels, 1);
        assert.equal(chunk.payload.length % 2, 0, 'whole samples');
      }
      const seconds = pcm.length / rate;
      // About 12 words a … 15 per 5 s of ordinary speech: a few seconds, neither a blip nor a minute.
      assert.ok(seconds > 2 && seconds < 12, `duration ${seconds} s`);
      assert.ok(rmsDbfs(pcm) > -40, 'speech, not silence');
      // Counted like a one-shot: a task of the account, billed in its characters.
      const listed = await t.app.services.tasks.list(accountId, {});
      assert.ok(listed.items.some((task) => task.status === 'generated' || task.status === 'processing'));
      const report = await t.app.services.tasks.quotaReport(accountId);
      assert.ok(report.usage.charactersToday >= [...text].length);
    } finally {
      client.close();
    }
  });

  it('speaks the account’s own voice by its id, and a speaker of a catalogue voice', async () => {
    const client = await Client.open(port);
    try {
      client.send('synthesize', { text: 'Own voice.', voice: { name: voiceId } });
      const first = await client.waitFor('audio-stop');
      client.send('synthesize', { text: 'A variant.', voice: { name: 'espeak:gmw/en-US', speaker: 'm3' } });
      const start = await client.waitFor('audio-start', first + 1);
      await client.waitFor('audio-stop', start);
      assert.ok(audioRun(client.events, start).pcm.length > 0);
      const voices = await t.app.services.voices.list(accountId, { limit: 50 });
      assert.ok(
        voices.items.some((v) => v.name === 'espeak:gmw/en-US+m3'),
        'the spec voice was made once',
      );
    } finally {
      client.close();
    }
  });

  it('answers an unknown voice with an error event, and the connection goes on', async () => {
    const client = await Client.open(port);
    try {
      client.send('synthesize', { text: 'Nobody speaks this.', voice: { name: 'no-such-voice' } });
      const at = await client.waitFor('error');
      assert.equal(client.events[at]?.data.code, 'VOICE_NOT_FOUND');
      assert.match(String(client.events[at]?.data.text), /no-such-voice/);
      client.send('describe');
      await client.waitFor('info', at);
    } finally {
      client.close();
    }
  });
});

describe('Wyoming: streaming text', () => {
  it('speaks each group of complete sentences as its text arrives, then synthesize-stopped', async () => {
    const client = await Client.open(port);
    try {
      client.send('synthesize-start', { voice: { name: 'flite:kal16' } });
      client.send('synthesize-chunk', { text: 'The first sentence has arrived. ' });
      client.send('synthesize-chunk', { text: 'The second is still being wr' });
      // Audio of the first sentence before the stream is stopped (and before the second is complete).
      const start = await client.waitFor('audio-start');
      await client.waitFor('audio-chunk', start);
      assert.ok(!client.events.some((e) => e.type === 'synthesize-stopped'));
      client.send('synthesize-chunk', { text: 'itten. And a last one' });
      // Sent inside a stream for servers without streaming: ignored here.
      client.send('synthesize', { text: 'The first sentence has arrived. The second…' });
      client.send('synthesize-stop');
      const stopped = await client.waitFor('synthesize-stopped');
      const starts = client.events.flatMap((e, i) => (e.type === 'audio-start' ? [i] : []));
      assert.equal(starts.length, 3, 'three groups: one per chunk that completed sentences, and the rest');
      for (const s of starts) {
        const run = audioRun(client.events, s);
        assert.equal(run.rate, 44100);
        assert.ok(run.pcm.length / run.rate > 0.5);
      }
      assert.ok(starts.every((s) => s < stopped));
      assert.equal(client.events.filter((e) => e.type === 'audio-stop').length, 3);
    } finally {
      client.close();
    }
  });
});

describe('Wyoming: malformed messages and limits', () => {
  it('closes only the connection that sent a malformed or oversized message, with a log line', async () => {
    const good = await Client.open(port);
    try {
      good.send('describe');
      await good.waitFor('info');
      const cases: [string, Buffer][] = [
        ['not JSON', Buffer.from('this is not json\n')],
        ['no type', Buffer.from('{"data":{}}\n')],
        ['header line over the limit', Buffer.from(`{"type":"describe","x":"${'a'.repeat(70_000)}"}\n`)],
        ['data over the limit', Buffer.from('{"type":"synthesize","data_length":100000000}\n')],
        ['payload over the limit', Buffer.from('{"type":"audio-chunk","payload_length":70000}\n')],
        ['data that is not an object', Buffer.from('{"type":"synthesize","data_length":2}\n[]')],
      ];
      for (const [what, bytes] of cases) {
        const before = logs.length;
        const bad = await Client.open(port);
        bad.socket.write(bytes);
        await bad.waitClosed();
        const lines = logs.slice(before).filter((l) => /malformed message/.test(l.msg ?? ''));
        assert.equal(lines.length, 1, `${what}: one log line`);
      }
      // The well-behaved connection was never touched.
      assert.equal(good.closed, false);
      good.send('synthesize', { text: 'Still here.', voice: { name: 'flite:kal16' } });
      await good.waitFor('audio-stop');
    } finally {
      good.close();
    }
  });

  it('closes connections beyond WYOMING_MAX_CONNECTIONS as they arrive', async () => {
    await connectionsLetGo();
    const open = await Promise.all(Array.from({ length: 6 }, () => Client.open(port)));
    try {
      const extra = await Client.open(port);
      await extra.waitClosed();
      assert.ok(logs.some((l) => /WYOMING_MAX_CONNECTIONS/.test(l.msg ?? '')));
      assert.ok(open.every((c) => !c.closed));
    } finally {
      for (const c of open) c.close();
    }
  });
});

describe('Wyoming: a client that vanishes mid-audio', () => {
  it('cancels its task, which aborts the engine call', async () => {
    const sentence = 'This long announcement goes on and on, sentence after sentence, for a long while. ';
    const text = sentence.repeat(40).trim(); // about 3,300 characters: minutes of speech
    await connectionsLetGo();
    const client = await Client.open(port);
    client.send('synthesize', { text, voice: { name: 'espeak:gmw/en-US' } });
    await client.waitFor('audio-chunk');
    client.close();
    const listed = await t.app.services.tasks.list(accountId, { limit: 1 });
    const taskId = listed.items[0]?.id ?? '';
    const deadline = Date.now() + 20_000;
    let task = await t.app.services.tasks.get(accountId, taskId);
    while (task.status !== 'failed' && Date.now() < deadline) {
      await sleep(50);
      task = await t.app.services.tasks.get(accountId, taskId);
    }
    assert.equal(task.status, 'failed', 'the generation was stopped, not finished');
    assert.match(task.error ?? '', /Wyoming client disconnected/);
    assert.ok(
      logs.some((l) => l.msg === 'generation aborted' && l.taskId === taskId),
      'the runner aborted the generation (its engine call included)',
    );
  });
});

describe('Wyoming: quotas and rate limits of the account', () => {
  it('answers a synthesis over the account’s daily characters with an error event', async () => {
    const client = await Client.open(port);
    try {
      client.send('synthesize', { text: 'Too much. '.repeat(950), voice: { name: 'flite:kal16' } });
      const at = await client.waitFor('error');
      assert.equal(client.events[at]?.data.code, 'RATE_LIMIT_EXCEEDED');
      assert.match(String(client.events[at]?.data.text), /daily characters quota exceeded/);
      assert.ok(!client.events.some((e) => e.type === 'audio-start'));
    } finally {
      client.close();
    }
  });

  it('counts each synthesis against the account’s rate limit', async () => {
    const client = await Client.open(port);
    try {
      // Empty texts are refused after they were counted; the limit is 40 per window.
      for (let i = 0; i < 45; i++) client.send('synthesize', { text: '' });
      let from = 0;
      const codes: unknown[] = [];
      for (let i = 0; i < 45; i++) {
        const at = await client.waitFor('error', from);
        codes.push(client.events[at]?.data.code);
        from = at + 1;
      }
      assert.ok(codes.includes('RATE_LIMIT_EXCEEDED'), JSON.stringify(codes));
      assert.equal(codes.at(-1), 'RATE_LIMIT_EXCEEDED');
    } finally {
      client.close();
    }
  });
});
