/**
 * Remote engine for OpenAI-compatible speech APIs (`POST /v1/audio/speech`). The MP3 answer is
 * decoded while it downloads (mpg123 wasm, gapless), downmixed to mono and resampled to 44.1 kHz,
 * so audio flows on before the upstream has finished. Upstream MP3 is never passed through: it is
 * re-encoded by the one continuous encoder of the stream, which keeps joins gapless.
 */
import type { ClientRequest, IncomingMessage } from 'node:http';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { addAbortSignal } from 'node:stream';
import { MPEGDecoder } from 'mpg123-decoder';
import { CallDeadline, DeadlineExceededError } from '../../common/call-deadline.js';
import { errors } from '../../errors/app-error.js';
import { floatToPcm } from '../pcm.js';
import { createResampler, type Resampler } from '../resampler.js';
import {
  DEFAULT_ENGINE_TIMEOUTS,
  EngineCallError,
  SPEECH_RATE_RANGE,
  type EngineFailureDetail,
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
}

/** Model asked for when neither the voice nor the endpoint names one. */
export const DEFAULT_REMOTE_MODEL = 'tts-1';

/** Bytes of an upstream error body read (for the operator's log), and how many of them are logged. */
const ERROR_BODY_READ_BYTES = 4096;
const ERROR_BODY_LOGGED_BYTES = 512;

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
): SpeechEngine {
  return {
    synthesize: (req, signal) => synthesizeRemote(name, endpoint, timeouts, req, signal),
  };
}

async function* synthesizeRemote(
  name: string,
  endpoint: RemoteEndpoint,
  timeouts: Pick<EngineTimeouts, 'connectMs' | 'firstByteMs'>,
  req: SynthesisRequest,
  signal: AbortSignal,
): AsyncIterable<Int16Array> {
  if (req.voice.engine !== 'remote')
    throw new Error(`remote engine cannot speak a ${req.voice.engine} voice`);
  if (!(req.speechRate >= SPEECH_RATE_RANGE.min && req.speechRate <= SPEECH_RATE_RANGE.max)) {
    throw errors.invalidValue(
      `speechRate must be between ${SPEECH_RATE_RANGE.min} and ${SPEECH_RATE_RANGE.max}`,
    );
  }
  signal.throwIfAborted();
  const url = new URL(`${endpoint.baseUrl.replace(/\/+$/, '')}/v1/audio/speech`);
  const secrets = endpoint.apiKey !== undefined && endpoint.apiKey !== '' ? [endpoint.apiKey] : [];
  // `origin` leaves out user:password; the path is ours, so no query can carry a key.
  const where = { engine: name, url: `${url.origin}${url.pathname}` };
  const failed = (reason: string, extra: Partial<EngineFailureDetail> = {}, cause?: unknown) =>
    new EngineCallError('failed', { ...where, ...extra, reason: redactSecrets(reason, secrets) }, cause);

  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'audio/mpeg' };
  if (secrets[0] !== undefined) headers.authorization = `Bearer ${secrets[0]}`;
  const body = JSON.stringify({
    model: req.voice.model ?? endpoint.defaultModel ?? DEFAULT_REMOTE_MODEL,
    input: req.text,
    voice: req.voice.voice,
    response_format: 'mp3',
    // OpenAI's speed is a tempo factor; ours is a duration factor.
    speed: 1 / req.speechRate,
  });

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
  let decoder: MPEGDecoder | undefined;
  let resampler: Resampler | undefined;
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

    let sampleRate = 0;
    let decodedAny = false;
    decoder = new MPEGDecoder({ enableGapless: true });
    await decoder.ready;
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
      const out = decoder.decode(bytes);
      if (out.errors.length > 0)
        throw failed(`undecodable MP3 (${out.errors[0]?.message ?? 'decoder error'})`, { status });
      if (out.samplesDecoded === 0) continue;
      if (sampleRate === 0) {
        sampleRate = out.sampleRate;
        resampler = await createResampler(sampleRate);
      } else if (out.sampleRate !== sampleRate) {
        throw failed(`sample rate changed mid-stream (${sampleRate} → ${out.sampleRate} Hz)`, { status });
      }
      decodedAny = true;
      const pcm = resampler?.process(downmix(out.channelData, out.samplesDecoded));
      if (pcm !== undefined && pcm.length > 0) yield pcm;
    }
    if (!decodedAny) throw failed('answered without any decodable audio', { status });
    const tail = resampler?.flush();
    if (tail !== undefined && tail.length > 0) yield tail;
  } finally {
    deadline.clear();
    // Stops the download when the call ends early (consumer gone, error, abort); a complete
    // response keeps its keep-alive socket.
    if (res !== undefined && !res.complete) res.destroy();
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
