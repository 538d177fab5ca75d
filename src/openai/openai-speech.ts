/**
 * `POST /v1/audio/speech`: OpenAI's request made into a one-shot synthesis. The request becomes an
 * ordinary one-piece task through OneShotService (recorded, billed in characters, queued fairly
 * and under the account's quotas like any one-shot), and the answer is that piece's audio while
 * it is generated: its MP3 as one-shot makes it, or its PCM resampled and encoded in the format
 * asked for. With `stream_format: "sse"` the same bytes travel base64-encoded in
 * `speech.audio.delta` events, then `speech.audio.done` with the usage.
 * No HTTP here: the route lives in src/http/routes/openai.routes.ts.
 */
import { encodePcm } from '../audio/formats/convert.js';
import type { OneShotAudioInfo, OneShotBytes, OneShotService } from '../tasks/one-shot/one-shot.js';
import type { StreamTaskView } from '../tasks/stream-view.js';
import type { OpenAiCatalogue } from './catalogue.js';
import { parseSpeechRequest, type SpeechRequest } from './speech-request.js';
import type { VoiceResolver } from './voice-resolver.js';

export interface OpenAiSpeechDeps {
  oneShot: Pick<OneShotService, 'start' | 'audio'>;
  resolver: Pick<VoiceResolver, 'resolve'>;
  catalogue: Pick<OpenAiCatalogue, 'models'>;
  /** The canonical PCM of a piece from its first sample, live (StreamService.contentPcm). */
  contentPcm(
    task: StreamTaskView,
    contentIndex: number,
    signal: AbortSignal,
  ): Promise<AsyncIterable<Int16Array>>;
  inputMaxChars: number;
}

/** The answer: its Content-Type, the one-shot's headers data, and bytes that already hold the first chunk. */
export interface SpeechAnswer {
  contentType: string;
  info: OneShotAudioInfo;
  body: AsyncIterable<Uint8Array>;
}

/** OpenAI's usage object; the service bills characters, so tokens here count characters. */
interface SpeechUsage {
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
}

export class OpenAiSpeech {
  constructor(private readonly deps: OpenAiSpeechDeps) {}

  /** Validates, resolves the voice, queues the one-shot and resolves once the first bytes exist. */
  async speak(accountId: string, body: unknown, signal: AbortSignal): Promise<SpeechAnswer> {
    const request = parseSpeechRequest(body, {
      models: await this.deps.catalogue.models(),
      inputMaxChars: this.deps.inputMaxChars,
    });
    const voiceId = await this.deps.resolver.resolve(accountId, request.voice, request.model);
    const task = await this.deps.oneShot.start(accountId, {
      item: {
        text: request.input,
        voiceId,
        speechRate: request.speechRate,
        ...(request.instructions !== undefined && { instructions: request.instructions }),
      },
      stream: false,
      directStream: true,
    });
    const audio = await this.deps.oneShot.audio(accountId, task, signal, this.opener(request));
    if (request.streamFormat === 'audio')
      return { contentType: request.format.contentType, info: audio.info, body: audio.body };
    const characters = task.billing.characters;
    const usage = { input_tokens: characters, output_tokens: 0, total_tokens: characters };
    return { contentType: 'text/event-stream', info: audio.info, body: sseEvents(audio.body, usage) };
  }

  /** The bytes of the format asked for: MP3 as one-shot makes it (undefined), others from the PCM. */
  private opener(request: SpeechRequest): OneShotBytes | undefined {
    const { source, sampleRate } = request.format;
    if (source.kind === 'mp3') return undefined;
    return async (task, signal) =>
      encodePcm(await this.deps.contentPcm(task, 0, signal), sampleRate, source.encode);
  }
}

function event(data: unknown): Uint8Array {
  return Buffer.from(`data: ${JSON.stringify(data)}\n\n`, 'utf8');
}

/**
 * OpenAI's speech SSE: one `speech.audio.delta` per chunk of audio (base64), then
 * `speech.audio.done` with the usage. Closing it early (return()) closes `audio`.
 */
function sseEvents(audio: AsyncIterable<Uint8Array>, usage: SpeechUsage): AsyncIterable<Uint8Array> {
  return {
    [Symbol.asyncIterator]() {
      const inner = audio[Symbol.asyncIterator]();
      let done = false;
      return {
        async next(): Promise<IteratorResult<Uint8Array>> {
          if (done) return { done: true, value: undefined };
          const next = await inner.next();
          if (next.done === true) {
            done = true;
            return { done: false, value: event({ type: 'speech.audio.done', usage }) };
          }
          return {
            done: false,
            value: event({ type: 'speech.audio.delta', audio: Buffer.from(next.value).toString('base64') }),
          };
        },
        async return(): Promise<IteratorResult<Uint8Array>> {
          done = true;
          await inner.return?.();
          return { done: true, value: undefined };
        },
      };
    },
  };
}
