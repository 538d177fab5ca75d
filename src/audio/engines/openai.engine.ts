/**
 * Remote engine for OpenAI-compatible speech APIs (`POST /v1/audio/speech`). The MP3 answer is
 * decoded while it downloads (mpg123 wasm, gapless), downmixed to mono and resampled to 44.1 kHz,
 * so audio flows on before the upstream has finished. Upstream MP3 is never passed through: it is
 * re-encoded by the one continuous encoder of the stream, which keeps joins gapless.
 */
import { MPEGDecoder } from 'mpg123-decoder';
import { AppError, errors } from '../../errors/app-error.js';
import { floatToPcm } from '../pcm.js';
import { createResampler, type Resampler } from '../resampler.js';
import { SPEECH_RATE_RANGE, type SpeechEngine, type SynthesisRequest } from './engine.js';

/** An operator-configured remote endpoint (voices refer to it by name only). */
export interface RemoteEndpoint {
  /** Base URL without the `/v1/...` path, e.g. 'https://api.openai.com'. */
  baseUrl: string;
  apiKey?: string;
  defaultModel?: string;
}

/** Model asked for when neither the voice nor the endpoint names one. */
export const DEFAULT_REMOTE_MODEL = 'tts-1';

/** Longest upstream error body quoted in our error message. */
const ERROR_SNIPPET_CHARS = 200;

/** Creates the engine for endpoint `name`; `name` (never the URL) appears in error messages. */
export function createOpenAiEngine(name: string, endpoint: RemoteEndpoint): SpeechEngine {
  return {
    synthesize: (req, signal) => synthesizeRemote(name, endpoint, req, signal),
  };
}

async function* synthesizeRemote(
  name: string,
  endpoint: RemoteEndpoint,
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
  const failed = (what: string, cause?: unknown): AppError =>
    new AppError('TTS_GENERATE_FAILED', `remote TTS endpoint "${name}": ${what}`, { cause });

  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'audio/mpeg' };
  if (endpoint.apiKey !== undefined && endpoint.apiKey !== '')
    headers.authorization = `Bearer ${endpoint.apiKey}`;
  const body = JSON.stringify({
    model: req.voice.model ?? endpoint.defaultModel ?? DEFAULT_REMOTE_MODEL,
    input: req.text,
    voice: req.voice.voice,
    response_format: 'mp3',
    // OpenAI's speed is a tempo factor; ours is a duration factor.
    speed: 1 / req.speechRate,
  });

  let res: Response;
  try {
    res = await fetch(`${endpoint.baseUrl.replace(/\/+$/, '')}/v1/audio/speech`, {
      method: 'POST',
      headers,
      body,
      signal,
    });
  } catch (err) {
    signal.throwIfAborted();
    throw failed(`request failed (${describe(err)})`, err);
  }
  if (!res.ok || res.body === null) {
    const text = await res.text().catch(() => '');
    throw failed(
      `answered HTTP ${res.status}${text === '' ? '' : `: ${text.slice(0, ERROR_SNIPPET_CHARS)}`}`,
    );
  }

  const reader = res.body.getReader();
  const decoder = new MPEGDecoder({ enableGapless: true });
  let resampler: Resampler | undefined;
  let sampleRate = 0;
  let decodedAny = false;
  try {
    await decoder.ready;
    for (;;) {
      let chunk: Awaited<ReturnType<typeof reader.read>>;
      try {
        chunk = await reader.read();
      } catch (err) {
        signal.throwIfAborted();
        throw failed(`connection lost mid-stream (${describe(err)})`, err);
      }
      if (chunk.done) break;
      const bytes: unknown = chunk.value;
      if (!(bytes instanceof Uint8Array)) throw failed('response body is not a byte stream');
      const out = decoder.decode(bytes);
      if (out.errors.length > 0)
        throw failed(`undecodable MP3 (${out.errors[0]?.message ?? 'decoder error'})`);
      if (out.samplesDecoded === 0) continue;
      if (sampleRate === 0) {
        sampleRate = out.sampleRate;
        resampler = await createResampler(sampleRate);
      } else if (out.sampleRate !== sampleRate) {
        throw failed(`sample rate changed mid-stream (${sampleRate} → ${out.sampleRate} Hz)`);
      }
      decodedAny = true;
      const pcm = resampler?.process(downmix(out.channelData, out.samplesDecoded));
      if (pcm !== undefined && pcm.length > 0) yield pcm;
    }
    if (!decodedAny) throw failed('answered without any decodable audio');
    const tail = resampler?.flush();
    if (tail !== undefined && tail.length > 0) yield tail;
  } finally {
    // Stops the download when the consumer gave up early; a no-op after a complete read.
    reader.cancel().catch(() => undefined);
    resampler?.destroy();
    decoder.free();
  }
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
