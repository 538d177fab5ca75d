/**
 * Remote engine for OpenAI-compatible speech APIs (`POST /v1/audio/speech`). The MP3 answer is
 * decoded while it downloads (mpg123 wasm, gapless), downmixed to mono and resampled to 44.1 kHz,
 * so audio flows on before the upstream has finished. For the stream and the merged audio that
 * PCM is re-encoded by the one continuous encoder, which keeps joins gapless. `synthesizeMp3`
 * makes the same call asking for 24 kHz (`sample_rate`, as
 * OpenAI-compatible servers such as Kokoro-FastAPI accept; one that ignores it sends its own
 * rate) and hands over the upstream's MP3 bytes unchanged alongside the PCM decoded from them.
 */
import type { ClientRequest, IncomingMessage } from 'node:http';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { addAbortSignal } from 'node:stream';
import { MPEGDecoder } from 'mpg123-decoder';
import { CallDeadline, DeadlineExceededError } from '../../common/call-deadline.js';
import { floatToPcm } from '../pcm.js';
import { createResampler, type Resampler } from '../resampler.js';
import {
  DEFAULT_ENGINE_TIMEOUTS,
  EngineCallError,
  FORWARDED_MP3_SAMPLE_RATE,
  checkSpeechRate,
  type EngineFailureDetail,
  type EngineMp3Chunk,
  type EngineTimeouts,
  type SpeechEngine,
  type SynthesisRequest,
} from './engine.js';

/** An operator-configured remote endpoint (voices refer to it by name only). */
export interface RemoteEndpoint {
  /** Base URL without the `/v1/...` path, e.g. 'https://api.openai.com'. */
  baseUrl: string;
  apiKey?: string;
  defaultModel?: string;
  /** Voices the operator lists for the catalogue (the endpoint may accept others). */
  voices?: { id: string; name?: string; languages?: string[]; gender?: 'female' | 'male' }[];
}

/** Model asked for when neither the voice nor the endpoint names one. */
export const DEFAULT_REMOTE_MODEL = 'tts-1';

/** Bytes of an upstream error body read (for the operator's log), and how many of them are logged. */
const ERROR_BODY_READ_BYTES = 4096;
const ERROR_BODY_LOGGED_BYTES = 512;

/** An engine that delivers MP3 itself: `synthesizeMp3` (and `synthesizeWithMarks`) are always there. */
export type Mp3SpeechEngine = SpeechEngine &
  Required<Pick<SpeechEngine, 'synthesizeMp3' | 'synthesizeWithMarks'>>;

/**
 * Creates the engine for endpoint `name`. Its errors are EngineCallErrors: tenants see a generic
 * message, the URL (without credentials), status and redacted upstream body are the operator's
 * `detail`. `timeouts` bound the connection and the wait for the response headers; the whole
 * call is bounded by the caller's signal (the registry adds the total deadline).
 */
export function createOpenAiEngine(
  name: string,
  endpoint: RemoteEndpoint,
  timeouts: Pick<EngineTimeouts, 'connectMs' | 'firstByteMs'> = DEFAULT_ENGINE_TIMEOUTS,
): Mp3SpeechEngine {
  const synthesize = async function* (req: SynthesisRequest, signal: AbortSignal) {
    for await (const { pcm } of remoteSpeech(name, endpoint, timeouts, req, signal, {}))
      if (pcm.length > 0) yield pcm;
  };
  return {
    synthesize,
    // The endpoint answers audio only: no timing marks.
    async *synthesizeWithMarks(req, signal) {
      for await (const pcm of synthesize(req, signal)) yield { pcm, marks: [] };
    },
    synthesizeMp3: (req, signal) =>
      remoteSpeech(name, endpoint, timeouts, req, signal, { sample_rate: FORWARDED_MP3_SAMPLE_RATE }),
  };
}

/** One call to an endpoint: where it goes (the operator's detail) and how its failures are made. */
interface RemoteCall {
  where: { engine: string; url: string };
  /** The upstream's HTTP status once its headers arrived. */
  status?: number;
  /** A tenant-safe failure whose detail names the endpoint, with secrets redacted from `reason`. */
  failed: (reason: string, extra?: Partial<EngineFailureDetail>, cause?: unknown) => EngineCallError;
}

/**
 * One call: the upstream's MP3 bytes as they arrive, each chunk with the PCM decoded from it.
 * `extraBody` joins the JSON request (e.g. the sample rate asked for forwarded MP3).
 */
async function* remoteSpeech(
  name: string,
  endpoint: RemoteEndpoint,
  timeouts: Pick<EngineTimeouts, 'connectMs' | 'firstByteMs'>,
  req: SynthesisRequest,
  signal: AbortSignal,
  extraBody: Record<string, unknown>,
): AsyncIterable<EngineMp3Chunk> {
  if (req.voice.engine !== 'remote')
    throw new Error(`remote engine cannot speak a ${req.voice.engine} voice`);
  checkSpeechRate(req.speechRate);
  const url = new URL(`${endpoint.baseUrl.replace(/\/+$/, '')}/v1/audio/speech`);
  const secrets = endpoint.apiKey !== undefined && endpoint.apiKey !== '' ? [endpoint.apiKey] : [];
  const call: RemoteCall = {
    // `origin` leaves out user:password; the path is ours, so no query can carry a key.
    where: { engine: name, url: `${url.origin}${url.pathname}` },
    failed: (reason, extra = {}, cause) =>
      new EngineCallError(
        'failed',
        { ...call.where, ...extra, reason: redactSecrets(reason, secrets) },
        cause,
      ),
  };
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'audio/mpeg' };
  if (secrets[0] !== undefined) headers.authorization = `Bearer ${secrets[0]}`;
  const body = JSON.stringify({
    model: req.voice.model ?? endpoint.defaultModel ?? DEFAULT_REMOTE_MODEL,
    input: req.text,
    voice: req.voice.voice,
    response_format: 'mp3',
    // OpenAI's speed is a tempo factor; ours is a duration factor.
    speed: 1 / req.speechRate,
    // Only when asked: endpoints whose models take no instructions may refuse the field.
    ...(req.instructions !== undefined && { instructions: req.instructions }),
    ...extraBody,
  });
  yield* decodeMp3(upstreamMp3(call, url, headers, body, timeouts, signal, secrets), call);
}

/**
 * The upstream's answer body, byte for byte as it arrives. Connect and first-byte limits are this
 * call's own; a stalled body is cut by the caller's signal (the registry's total deadline). An
 * HTTP error reads the start of the body for the operator's detail.
 */
async function* upstreamMp3(
  call: RemoteCall,
  url: URL,
  headers: Record<string, string>,
  body: string,
  timeouts: Pick<EngineTimeouts, 'connectMs' | 'firstByteMs'>,
  signal: AbortSignal,
  secrets: readonly string[],
): AsyncIterable<Uint8Array> {
  signal.throwIfAborted();
  const { where, failed } = call;
  const deadline = new CallDeadline(signal);
  /** After an abort: the caller's reason, or the timeout of one of this call's own limits. */
  const stopped = (cause: unknown): Error | undefined => {
    if (signal.aborted) {
      // The caller's total deadline (the registry's) is a timeout too: report it with our detail.
      const reason = signal.reason as Error;
      return reason instanceof DeadlineExceededError
        ? new EngineCallError('timeout', { ...where, reason: reason.message }, cause)
        : reason;
    }
    const exceeded = deadline.exceeded;
    return exceeded === undefined
      ? undefined
      : new EngineCallError('timeout', { ...where, reason: exceeded.message }, cause);
  };

  let res: IncomingMessage | undefined;
  try {
    try {
      res = await post(url, headers, body, deadline, timeouts);
    } catch (err) {
      throw stopped(err) ?? failed(`request failed (${describe(err)})`, {}, err);
    }
    // A body that stalls is cut by the caller's total deadline (the registry's), as any other wait.
    addAbortSignal(deadline.signal, res);
    const status = res.statusCode ?? 0;
    if (status < 200 || status >= 300) {
      const text = await readStart(res, ERROR_BODY_READ_BYTES).catch(() => '');
      const abort = stopped(undefined);
      if (abort !== undefined) throw abort;
      throw failed(`answered HTTP ${status}`, {
        status,
        body: truncateBytes(redactSecrets(text, secrets), ERROR_BODY_LOGGED_BYTES),
      });
    }
    call.status = status;
    const chunks = (res as AsyncIterable<unknown>)[Symbol.asyncIterator]();
    for (;;) {
      let chunk: IteratorResult<unknown>;
      try {
        chunk = await chunks.next();
      } catch (err) {
        throw stopped(err) ?? failed(`connection lost mid-stream (${describe(err)})`, { status }, err);
      }
      if (chunk.done === true) break;
      const bytes = chunk.value;
      if (!(bytes instanceof Uint8Array)) throw failed('response body is not a byte stream', { status });
      yield bytes;
    }
  } finally {
    deadline.clear();
    // Stops the download when the call ends early (consumer gone, error, abort); a complete
    // response keeps its keep-alive socket.
    if (res !== undefined && !res.complete) res.destroy();
  }
}

/**
 * Each MP3 chunk unchanged, with the canonical PCM decoded from it (gapless, mono, 44.1 kHz); the
 * resampler's tail comes last with an empty `mp3`. Undecodable bytes fail the call.
 */
async function* decodeMp3(bytes: AsyncIterable<Uint8Array>, call: RemoteCall): AsyncIterable<EngineMp3Chunk> {
  const { failed } = call;
  let decoder: MPEGDecoder | undefined;
  let resampler: Resampler | undefined;
  try {
    let sampleRate = 0;
    let decodedAny = false;
    decoder = new MPEGDecoder({ enableGapless: true });
    await decoder.ready;
    for await (const mp3 of bytes) {
      const out = decoder.decode(mp3);
      if (out.errors.length > 0)
        throw failed(`undecodable MP3 (${out.errors[0]?.message ?? 'decoder error'})`, {
          status: call.status,
        });
      if (out.samplesDecoded === 0) {
        yield { mp3, pcm: new Int16Array(0) };
        continue;
      }
      if (sampleRate === 0) {
        sampleRate = out.sampleRate;
        resampler = await createResampler(sampleRate);
      } else if (out.sampleRate !== sampleRate) {
        throw failed(`sample rate changed mid-stream (${sampleRate} → ${out.sampleRate} Hz)`, {
          status: call.status,
        });
      }
      decodedAny = true;
      const pcm = resampler?.process(downmix(out.channelData, out.samplesDecoded)) ?? new Int16Array(0);
      yield { mp3, pcm };
    }
    if (!decodedAny) throw failed('answered without any decodable audio', { status: call.status });
    const tail = resampler?.flush();
    if (tail !== undefined && tail.length > 0) yield { mp3: new Uint8Array(0), pcm: tail };
  } finally {
    resampler?.destroy();
    decoder?.free();
  }
}

/**
 * Sends the request and resolves with the response once its headers arrived. Two limits of
 * `deadline`: `connect` until the TCP (and TLS) connection is up, then `first byte` until the
 * response headers. Aborting `deadline.signal` destroys the request and its socket.
 */
function post(
  url: URL,
  headers: Record<string, string>,
  body: string,
  deadline: CallDeadline,
  timeouts: Pick<EngineTimeouts, 'connectMs' | 'firstByteMs'>,
): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const tls = url.protocol === 'https:';
    const stopConnect = deadline.limit('connect', timeouts.connectMs);
    let stopFirstByte = (): void => undefined;
    const connected = (): void => {
      stopConnect();
      stopFirstByte = deadline.limit('first byte', timeouts.firstByteMs);
    };
    const request: ClientRequest = (tls ? httpsRequest : httpRequest)(url, {
      method: 'POST',
      headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
      signal: deadline.signal,
    });
    request.once('socket', (socket) => {
      // A kept-alive socket is connected already; a new one connects (and shakes hands) first.
      if (socket.connecting) socket.once(tls ? 'secureConnect' : 'connect', connected);
      else connected();
    });
    request.once('response', (res) => {
      stopConnect();
      stopFirstByte();
      resolve(res);
    });
    // `on`, not `once`: a late socket error after the response must not become an uncaught one.
    request.on('error', (err) => {
      stopConnect();
      stopFirstByte();
      reject(err);
    });
    request.end(body);
  });
}

/** The first `max` bytes of a body as text (the rest is not read; the stream is closed). */
async function readStart(res: IncomingMessage, max: number): Promise<string> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const chunk of res as AsyncIterable<Buffer>) {
    parts.push(chunk);
    size += chunk.length;
    if (size >= max) break;
  }
  return Buffer.concat(parts).subarray(0, max).toString('utf8');
}

/**
 * `text` without the endpoint's key, bearer tokens or `sk-` keys: upstreams echo requests in their
 * errors, and this text goes to the log.
 */
export function redactSecrets(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) if (secret.length >= 4) out = out.split(secret).join('[redacted]');
  return out
    .replace(/(bearer\s+)[^\s"'&,;]+/gi, '$1[redacted]')
    .replace(/\bsk-[A-Za-z0-9_-]{8,}/g, '[redacted]');
}

function truncateBytes(text: string, max: number): string {
  const bytes = Buffer.from(text, 'utf8');
  return bytes.length <= max ? text : bytes.subarray(0, max).toString('utf8');
}

/** Mono s16 from the decoder's planar float channels (mono sources arrive duplicated or single). */
function downmix(channels: Float32Array[], length: number): Int16Array {
  const left = channels[0];
  const right = channels[1];
  if (left === undefined) return new Int16Array(0);
  if (right === undefined) return floatToPcm(left.subarray(0, length));
  const mono = new Float32Array(length);
  for (let i = 0; i < length; i++) mono[i] = ((left[i] ?? 0) + (right[i] ?? 0)) / 2;
  return floatToPcm(mono);
}

function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = err.cause instanceof Error ? `: ${err.cause.message}` : '';
  return `${err.message}${cause}`;
}
