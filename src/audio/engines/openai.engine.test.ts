import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { rmsDbfs } from '../../../test/helpers/audio-check.js';
import { isAppError } from '../../errors/app-error.js';
import { encodePiece } from '../continuous-encoder.js';
import { createEncoderPool } from '../encoder-pool.js';
import { concatPcm, pcmToBuffer } from '../pcm.js';
import {
  ENGINE_FAILED_MESSAGE,
  ENGINE_TIMEOUT_MESSAGE,
  EngineCallError,
  type EngineFailureDetail,
  type SynthesisRequest,
} from './engine.js';
import { createEngineRegistry } from './engine-registry.js';
import { redactSecrets } from './openai.engine.js';

type Handler = (req: IncomingMessage, body: string, res: ServerResponse) => void;
let handler: Handler = (_req, _body, res) => res.writeHead(404).end();
const server = createServer((req, res) => {
  const parts: Buffer[] = [];
  req.on('data', (c: Buffer) => parts.push(c));
  req.on('end', () => handler(req, Buffer.concat(parts).toString('utf8'), res));
});

const pool = createEncoderPool({ size: 1 });
let registry = createEngineRegistry({ remoteEndpoints: {}, synthesisThreads: 1 });
let speech: Int16Array = new Int16Array(0); // espeak speech, 44.1 kHz
let mp3 = Buffer.alloc(0); // the same, encoded by our own encoder

before(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  registry = createEngineRegistry({
    synthesisThreads: 1,
    remoteEndpoints: {
      local: { baseUrl: `http://127.0.0.1:${port}/`, apiKey: 'sk-test', defaultModel: 'tts-test' },
      closed: { baseUrl: 'http://127.0.0.1:9' },
    },
  });
  const text = 'The remote engine streams this sentence back. It arrives as MP3, in pieces.';
  const chunks: Int16Array[] = [];
  const espeak = registry.engineFor({ engine: 'espeak', voice: 'en-us' });
  for await (const c of espeak.synthesize(
    { text, voice: { engine: 'espeak', voice: 'en-us' }, speechRate: 1 },
    new AbortController().signal,
  ))
    chunks.push(c);
  speech = concatPcm(chunks);
  const parts: Uint8Array[] = [];
  for await (const b of encodePiece([speech.slice()], pool.open())) parts.push(b);
  mp3 = Buffer.concat(parts);
});

after(async () => {
  await registry.close();
  await pool.close();
  await new Promise((resolve) => server.close(resolve));
});

const REMOTE = { engine: 'remote', endpoint: 'local', voice: 'alloy' } as const;

async function speak(
  req: Partial<SynthesisRequest> = {},
  signal = new AbortController().signal,
): Promise<Int16Array[]> {
  const full: SynthesisRequest = { text: 'Hello.', voice: REMOTE, speechRate: 1, ...req };
  const chunks: Int16Array[] = [];
  for await (const c of registry.engineFor(full.voice).synthesize(full, signal)) chunks.push(c);
  return chunks;
}

/** Serves `bytes` as a 200 audio/mpeg body in 8 KB writes. */
function serveMp3(bytes: Buffer): Handler {
  return (_req, _body, res) => {
    res.writeHead(200, { 'content-type': 'audio/mpeg' });
    for (let o = 0; o < bytes.length; o += 8192) res.write(bytes.subarray(o, o + 8192));
    res.end();
  };
}

/** A mono MP3 at `rate` with a complete LAME tag (ffmpeg writes it to a file, where it can seek back), as OpenAI-like services send. */
async function ffmpegMp3(pcm: Int16Array, rate: number): Promise<Buffer> {
  const dir = await mkdtemp(join(tmpdir(), 'openai-test-'));
  try {
    const file = join(dir, 'upstream.mp3');
    const child = spawn('ffmpeg', [
      '-nostdin',
      '-v',
      'error',
      '-f',
      's16le',
      '-ar',
      '44100',
      '-ac',
      '1',
      '-i',
      '-',
      '-ar',
      String(rate),
      '-b:a',
      '64k',
      file,
    ]);
    const done = new Promise<number | null>((resolve) => child.on('close', resolve));
    child.stdin.end(pcmToBuffer(pcm));
    assert.equal(await done, 0);
    return await readFile(file);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** A tenant-safe engine failure (generic message) whose operator detail matches `reason`. */
const failedWith =
  (kind: 'failed' | 'timeout', reason: RegExp, detail: Partial<EngineFailureDetail> = {}) =>
  (err: unknown): boolean => {
    assert.ok(err instanceof EngineCallError, `not an EngineCallError: ${String(err)}`);
    assert.equal(err.code, 'TTS_GENERATE_FAILED');
    assert.equal(err.kind, kind);
    assert.equal(err.message, kind === 'failed' ? ENGINE_FAILED_MESSAGE : ENGINE_TIMEOUT_MESSAGE);
    assert.match(err.detail.reason, reason);
    for (const [key, value] of Object.entries(detail))
      assert.equal(err.detail[key as keyof EngineFailureDetail], value, key);
    return true;
  };

describe('remote OpenAI-compatible engine', () => {
  it('posts the OpenAI request and streams the decoded MP3 back as canonical PCM', async () => {
    let seen: { auth?: string; path?: string; method?: string; body?: unknown } = {};
    const serve = serveMp3(mp3);
    handler = (req, body, res) => {
      seen = { auth: req.headers.authorization, path: req.url, method: req.method, body: JSON.parse(body) };
      serve(req, body, res);
    };
    const chunks = await speak({ text: 'Say it slowly.', speechRate: 2 });
    assert.deepEqual(seen, {
      auth: 'Bearer sk-test',
      path: '/v1/audio/speech',
      method: 'POST',
      body: {
        model: 'tts-test',
        input: 'Say it slowly.',
        voice: 'alloy',
        response_format: 'mp3',
        speed: 0.5,
      },
    });
    assert.ok(chunks.length > 1, 'progressive');
    const pcm = concatPcm(chunks);
    // Untagged MP3 decodes with the encoder's delay and frame padding: at most 3 frames more.
    assert.ok(
      pcm.length >= speech.length && pcm.length <= speech.length + 3 * 1152,
      `${pcm.length} vs ${speech.length}`,
    );
    assert.ok(Math.abs(rmsDbfs(pcm) - rmsDbfs(speech)) < 1, 'same level');
  });

  it('resamples a 24 kHz upstream to 44.1 kHz, trimmed gaplessly by its LAME tag', async () => {
    handler = serveMp3(await ffmpegMp3(speech, 24000));
    const pcm = concatPcm(await speak({ voice: { ...REMOTE, model: 'own-model' } }));
    assert.ok(Math.abs(pcm.length - speech.length) <= 441, `${pcm.length} vs ${speech.length}`);
    assert.ok(Math.abs(rmsDbfs(pcm) - rmsDbfs(speech)) < 1.5, 'same level');
  });

  it('fails with TTS_GENERATE_FAILED when the server drops the connection mid-body', async () => {
    handler = (_req, _body, res) => {
      res.writeHead(200, { 'content-type': 'audio/mpeg', 'content-length': String(mp3.length) });
      res.write(mp3.subarray(0, mp3.length >> 1), () => res.socket?.destroy());
    };
    await assert.rejects(speak(), failedWith('failed', /connection lost/, { status: 200 }));
  });

  it('fails with a generic error on an HTTP error; status, URL and body are the operator detail', async () => {
    handler = (_req, _body, res) =>
      res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"overloaded"}');
    await assert.rejects(
      speak(),
      failedWith('failed', /answered HTTP 500/, {
        engine: 'local',
        status: 500,
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/audio/speech`,
        body: '{"error":"overloaded"}',
      }),
    );
  });

  it('redacts the API key an upstream echoes in its error body, and keeps 512 bytes of it', async () => {
    handler = (req, _body, res) =>
      res
        .writeHead(401, { 'content-type': 'application/json' })
        .end(`{"error":"bad key","echo":"${String(req.headers.authorization)}","pad":"${'x'.repeat(2000)}"}`);
    await assert.rejects(speak(), (err: unknown) => {
      failedWith('failed', /answered HTTP 401/, { status: 401 })(err);
      const { body } = (err as EngineCallError).detail;
      assert.ok(body?.startsWith('{"error":"bad key","echo":"Bearer [redacted]"'), body);
      assert.equal(Buffer.byteLength(body ?? ''), 512);
      assert.ok(!JSON.stringify(err).includes('sk-test') && !String(err).includes('sk-test'));
      return true;
    });
  });

  it('fails with a generic error when the endpoint is unreachable or sends no audio', async () => {
    await assert.rejects(
      speak({ voice: { ...REMOTE, endpoint: 'closed' } }),
      failedWith('failed', /request failed/, { engine: 'closed' }),
    );
    handler = (_req, _body, res) =>
      res.writeHead(200, { 'content-type': 'audio/mpeg' }).end('{"not":"audio"}');
    await assert.rejects(speak(), failedWith('failed', /without any decodable audio|undecodable/));
  });

  it('synthesizeMp3: asks for 24 kHz MP3, hands the upstream bytes over unchanged with the same PCM', async () => {
    const upstream = await ffmpegMp3(speech, 24000);
    let body: unknown;
    const serve = serveMp3(upstream);
    handler = (req, text, res) => {
      body = JSON.parse(text);
      serve(req, text, res);
    };
    const engine = registry.engineFor(REMOTE);
    assert.ok(engine.synthesizeMp3, 'the remote engine (behind the registry deadline) delivers MP3');
    const request: SynthesisRequest = {
      text: 'Design this.',
      voice: REMOTE,
      speechRate: 1,
      instructMode: true,
    };
    const mp3Parts: Uint8Array[] = [];
    const pcmParts: Int16Array[] = [];
    for await (const chunk of engine.synthesizeMp3(request, new AbortController().signal)) {
      mp3Parts.push(chunk.mp3);
      pcmParts.push(chunk.pcm);
    }
    assert.deepEqual(body, {
      model: 'tts-test',
      input: 'Design this.',
      voice: 'alloy',
      response_format: 'mp3',
      speed: 1,
      sample_rate: 24000,
    });
    assert.ok(Buffer.concat(mp3Parts).equals(upstream), 'the upstream bytes, byte for byte');
    // The PCM is what the PCM-only call decodes from the same bytes.
    const viaPcmPath = concatPcm(await speak({ text: 'Design this.' }));
    assert.deepEqual(concatPcm(pcmParts), viaPcmPath);
    assert.ok(Math.abs(viaPcmPath.length - speech.length) <= 441, `${viaPcmPath.length} vs ${speech.length}`);
  });

  it('synthesizeMp3 fails like synthesize: HTTP error, connection lost, undecodable bytes', async () => {
    const engine = registry.engineFor(REMOTE);
    const mp3Call = async (): Promise<void> => {
      const req: SynthesisRequest = { text: 'x', voice: REMOTE, speechRate: 1, instructMode: true };
      for await (const _ of engine.synthesizeMp3?.(req, new AbortController().signal) ?? []);
    };
    handler = (_req, _body, res) =>
      res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"sk-test overloaded"}');
    await assert.rejects(
      mp3Call(),
      failedWith('failed', /answered HTTP 500/, { status: 500, body: '{"error":"[redacted] overloaded"}' }),
    );
    handler = (_req, _body, res) => {
      res.writeHead(200, { 'content-type': 'audio/mpeg', 'content-length': String(mp3.length) });
      res.write(mp3.subarray(0, mp3.length >> 1), () => res.socket?.destroy());
    };
    await assert.rejects(mp3Call(), failedWith('failed', /connection lost/, { status: 200 }));
    handler = (_req, _body, res) =>
      res.writeHead(200, { 'content-type': 'audio/mpeg' }).end('{"not":"audio"}');
    await assert.rejects(mp3Call(), failedWith('failed', /without any decodable audio|undecodable/));
  });

  it('espeak delivers PCM only (no synthesizeMp3)', () => {
    assert.equal(registry.engineFor({ engine: 'espeak', voice: 'en-us' }).synthesizeMp3, undefined);
  });

  it('stops with the abort reason, not as an engine failure', async () => {
    handler = serveMp3(mp3);
    const ac = new AbortController();
    const reason = new Error('client left');
    await assert.rejects(
      (async () => {
        for await (const _ of registry
          .engineFor(REMOTE)
          .synthesize({ text: 'x', voice: REMOTE, speechRate: 1 }, ac.signal))
          ac.abort(reason);
      })(),
      (err) => err === reason,
    );
  });
});

describe('redactSecrets', () => {
  const cases: [string, string][] = [
    ['key sk-test-endpoint-key here', 'key [redacted] here'],
    ['{"auth":"Bearer abc.def"}', '{"auth":"Bearer [redacted]"}'],
    ['authorization: bearer xyz, next', 'authorization: bearer [redacted], next'],
    ['other sk-abcdefgh12345678 key', 'other [redacted] key'],
    ['nothing secret', 'nothing secret'],
  ];
  for (const [text, expected] of cases) {
    it(JSON.stringify(text), () => assert.equal(redactSecrets(text, ['sk-test-endpoint-key']), expected));
  }
});

describe('engine registry', () => {
  const isInvalid = (err: unknown): boolean => isAppError(err) && err.code === 'VALIDATION_INVALID_VALUE';

  it('knows only operator-configured endpoint names', async () => {
    assert.throws(() => registry.engineFor({ engine: 'remote', endpoint: 'nope', voice: 'a' }), isInvalid);
    assert.throws(
      () => registry.engineFor({ engine: 'remote', endpoint: 'constructor', voice: 'a' }),
      isInvalid,
    );
    assert.equal(registry.engineFor(REMOTE), registry.engineFor(REMOTE));
    await registry.validateBinding(REMOTE);
    await assert.rejects(registry.validateBinding({ ...REMOTE, endpoint: 'http://evil.example' }), isInvalid);
  });

  it('validates espeak bindings', async () => {
    await registry.validateBinding({ engine: 'espeak', voice: 'de', variant: 'm3', pitch: 40 });
    await assert.rejects(registry.validateBinding({ engine: 'espeak', voice: 'klingon' }), isInvalid);
  });
});

describe('remote engine time limits (connect 300 ms, first byte 300 ms, call 1500 ms)', () => {
  // Each upstream keeps its server-side sockets, so a test can wait until the engine closed them.
  const sockets = new Set<Socket>();
  const track = (socket: Socket): void => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  };
  let respond: Handler = () => undefined;
  const slow = createServer((req, res) => {
    req.resume();
    req.on('end', () => respond(req, '', res));
  });
  slow.on('connection', track);
  // Accepts TCP but never speaks TLS: an https endpoint here never finishes connecting.
  const silentTcp = createNetServer((socket) => {
    track(socket);
    socket.resume(); // reads (and ignores) the ClientHello, so it sees the client's close
  });
  let limited = createEngineRegistry({ remoteEndpoints: {} });

  before(async () => {
    await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
    await new Promise<void>((resolve) => silentTcp.listen(0, '127.0.0.1', resolve));
    limited = createEngineRegistry({
      remoteEndpoints: {
        slow: { baseUrl: `http://127.0.0.1:${(slow.address() as AddressInfo).port}`, apiKey: 'sk-test' },
        tls: { baseUrl: `https://127.0.0.1:${(silentTcp.address() as AddressInfo).port}` },
      },
      timeouts: { connectMs: 300, firstByteMs: 300, callMs: 1500 },
    });
  });

  after(async () => {
    for (const socket of sockets) socket.destroy();
    await limited.close();
    await new Promise((resolve) => slow.close(resolve));
    await new Promise((resolve) => silentTcp.close(resolve));
  });

  async function speakLimited(endpoint: string, signal = new AbortController().signal): Promise<void> {
    const voice = { engine: 'remote', endpoint, voice: 'alloy' } as const;
    for await (const _ of limited.engineFor(voice).synthesize({ text: 'x', voice, speechRate: 1 }, signal));
  }

  /** Waits (at most 5 s) until the engine has closed every connection it opened. */
  async function allClosed(): Promise<void> {
    const deadline = AbortSignal.timeout(5000);
    while (sockets.size > 0) {
      if (deadline.aborted) assert.fail(`${sockets.size} upstream connection(s) left open`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  it('a connection that never completes (TLS handshake unanswered) hits the connect limit', async () => {
    await assert.rejects(speakLimited('tls'), failedWith('timeout', /connect time limit of 300 ms/));
    await allClosed();
  });

  it('an upstream that never sends its headers hits the first-byte limit', async () => {
    respond = () => undefined;
    await assert.rejects(speakLimited('slow'), failedWith('timeout', /first byte time limit of 300 ms/));
    await allClosed();
  });

  it('a body that stalls mid-stream hits the total limit of the call', async () => {
    respond = (_req, _body, res) => {
      res.writeHead(200, { 'content-type': 'audio/mpeg' });
      res.write(mp3.subarray(0, mp3.length >> 1));
    };
    await assert.rejects(
      speakLimited('slow'),
      failedWith('timeout', /total time limit of 1500 ms/, { engine: 'slow', status: undefined }),
    );
    await allClosed();
  });

  it('synthesizeMp3 is bounded by the same limits (a stalled body hits the total limit)', async () => {
    respond = (_req, _body, res) => {
      res.writeHead(200, { 'content-type': 'audio/mpeg' });
      res.write(mp3.subarray(0, mp3.length >> 1));
    };
    const voice = { engine: 'remote', endpoint: 'slow', voice: 'alloy' } as const;
    const engine = limited.engineFor(voice);
    let received = 0;
    await assert.rejects(
      (async () => {
        const req: SynthesisRequest = { text: 'x', voice, speechRate: 1, instructMode: true };
        for await (const { mp3: bytes } of engine.synthesizeMp3?.(req, new AbortController().signal) ?? [])
          received += bytes.length;
      })(),
      failedWith('timeout', /total time limit of 1500 ms/, { engine: 'slow' }),
    );
    assert.equal(received, mp3.length >> 1, 'the bytes that came were handed over');
    await allClosed();
  });

  it("the caller's abort stops a waiting call at once, with the caller's reason", async () => {
    respond = () => undefined;
    const ac = new AbortController();
    const reason = new Error('task cancelled');
    const call = speakLimited('slow', ac.signal);
    // Abort once the request reached the upstream.
    while (sockets.size === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    ac.abort(reason);
    await assert.rejects(call, (err) => err === reason);
    await allClosed();
  });
});
