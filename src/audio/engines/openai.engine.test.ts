import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { rmsDbfs } from '../../../test/helpers/audio-check.js';
import { isAppError } from '../../errors/app-error.js';
import { encodePiece } from '../continuous-encoder.js';
import { createEncoderPool } from '../encoder-pool.js';
import { concatPcm, pcmToBuffer } from '../pcm.js';
import type { SynthesisRequest } from './engine.js';
import { createEngineRegistry } from './engine-registry.js';

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

const failedWith =
  (pattern: RegExp) =>
  (err: unknown): boolean =>
    isAppError(err) &&
    err.code === 'TTS_GENERATE_FAILED' &&
    pattern.test(err.message) &&
    !err.message.includes('127.0.0.1');

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
    await assert.rejects(speak(), failedWith(/connection lost/));
  });

  it('fails with TTS_GENERATE_FAILED on an HTTP error, quoting the status but not the URL', async () => {
    handler = (_req, _body, res) =>
      res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"overloaded"}');
    await assert.rejects(speak(), failedWith(/"local".*HTTP 500.*overloaded/));
  });

  it('fails with TTS_GENERATE_FAILED when the endpoint is unreachable or sends no audio', async () => {
    await assert.rejects(speak({ voice: { ...REMOTE, endpoint: 'closed' } }), failedWith(/request failed/));
    handler = (_req, _body, res) =>
      res.writeHead(200, { 'content-type': 'audio/mpeg' }).end('{"not":"audio"}');
    await assert.rejects(speak(), failedWith(/no decodable audio|without any decodable audio|undecodable/));
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
