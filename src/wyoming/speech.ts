/**
 * Speech for the Wyoming server, through one-shot synthesis: each `synthesize` (and each group of
 * sentences of a text stream) is one one-piece task of the account the server runs as — queued in
 * the short lane, admitted by that account's quotas, billed in its characters and listed with its
 * tasks, exactly as `POST /api/tts/simple-generate` — and its piece's PCM is read while it is
 * synthesised, so audio starts after the first sentence. A caller that goes away cancels the task,
 * which stops its engine call.
 *
 * Voices: a Wyoming voice name is either one of the account's voice ids, or a catalogue voice spec
 * (`espeak:gmw/en-US`, with a speaker as `+f3`). Tasks speak account voices only, so a spec is
 * spoken by the account's voice named by that spec, created once on first use (as the CLI's
 * `synth --voice` does); the account's voice limit applies to it.
 */
import { pcmToBuffer } from '../audio/pcm.js';
import type { EngineRegistry } from '../audio/engines/engine-registry.js';
import { parseVoiceSpec } from '../audio/engines/voice-spec.js';
import { AppError, isAppError } from '../errors/app-error.js';
import type { OneShotService } from '../tasks/one-shot/one-shot.js';
import type { StreamTaskView } from '../tasks/stream-view.js';
import type { TaskService } from '../tasks/task-service.js';
import type { VoiceService } from '../voices/voice-service.js';

/** The voice of a Wyoming `synthesize` / `synthesize-start` (every field optional). */
export interface WyomingVoice {
  name?: string | undefined;
  language?: string | undefined;
  speaker?: string | undefined;
}

export interface SpeechDeps {
  oneShot: OneShotService;
  tasks: TaskService;
  voices: VoiceService;
  synthesis: EngineRegistry;
  /**
   * The canonical PCM (44.1 kHz mono) of piece `idx` of a claimed task from its first sample,
   * following it while it is synthesised; fails with TTS_GENERATE_FAILED if generation does.
   */
  contentPcm(task: StreamTaskView, idx: number, signal: AbortSignal): Promise<AsyncIterable<Int16Array>>;
}

/** Audio being spoken: whole samples, from the first on; ends when the task's piece is complete. */
export interface SpokenAudio {
  taskId: string;
  pcm: AsyncIterable<Buffer>;
}

/** The reason a task of a Wyoming client that left is cancelled with (shown in the task list). */
export const CLIENT_LEFT = 'cancelled: the Wyoming client disconnected';

export class WyomingSpeech {
  /** The account's voice id of each spec used (per account), found or created once. */
  private readonly specVoices = new Map<string, Promise<string>>();

  constructor(private readonly deps: SpeechDeps) {}

  /**
   * Starts speaking `text` and resolves once its first audio exists, so that any failure before
   * it (a quota, an unknown voice, no free slot) is an error, not a cut stream. Aborting `signal`
   * (the client left) cancels the task; so does leaving the returned audio before its end.
   */
  async speak(
    accountId: string,
    text: string,
    voice: WyomingVoice,
    signal: AbortSignal,
  ): Promise<SpokenAudio> {
    const task = await this.startTask(accountId, text, voice);
    let done = false;
    const cancel = (): void => {
      if (done) return;
      done = true;
      void this.deps.tasks.cancel(accountId, task, CLIENT_LEFT).catch(() => undefined);
    };
    let iterator: AsyncIterator<Int16Array> | undefined;
    let first: IteratorResult<Int16Array>;
    try {
      const claimed = await this.deps.oneShot.started(accountId, task, signal);
      if (claimed.status === 'failed') {
        const failed = await this.deps.tasks.get(accountId, task);
        throw new AppError('TTS_GENERATE_FAILED', `generation failed: ${failed.error ?? 'unknown error'}`);
      }
      iterator = (await this.deps.contentPcm(claimed, 0, signal))[Symbol.asyncIterator]();
      first = await iterator.next();
    } catch (err) {
      await iterator?.return?.();
      if (signal.aborted) cancel();
      throw err;
    }
    const source = iterator;
    async function* samples(): AsyncIterable<Buffer> {
      try {
        for (let next = first; next.done !== true; next = await source.next())
          if (next.value.length > 0) yield pcmToBuffer(next.value);
        done = true;
      } finally {
        await source.return?.();
        if (!done) cancel();
      }
    }
    return { taskId: task, pcm: samples() };
  }

  /** Queues the one-piece task; a spec voice found stale (deleted since) is looked up again once. */
  private async startTask(accountId: string, text: string, voice: WyomingVoice): Promise<string> {
    for (let attempt = 0; ; attempt++) {
      const { voiceId, spec } = await this.voiceFor(accountId, voice);
      try {
        const task = await this.deps.oneShot.start(accountId, {
          item: { text, voiceId },
          stream: false,
          directStream: true,
        });
        return task.id;
      } catch (err) {
        if (spec === undefined || attempt > 0 || !isAppError(err) || err.code !== 'VOICE_NOT_FOUND')
          throw err;
        this.specVoices.delete(`${accountId}\n${spec}`);
      }
    }
  }

  /** The account's voice id a Wyoming voice stands for, and the spec it was found by (if any). */
  private async voiceFor(
    accountId: string,
    voice: WyomingVoice,
  ): Promise<{ voiceId: string; spec?: string }> {
    const name = voice.name?.trim() ?? '';
    if (name !== '' && parseVoiceSpec(name) === undefined) return { voiceId: name };
    let spec = name;
    if (spec === '') {
      // No voice named: the default voice of the language asked for (English when none is).
      const language = (voice.language?.trim() || 'en').replace(/_/g, '-').toLowerCase();
      const binding = (await this.deps.synthesis.defaultBinding(language)) as Record<string, unknown>;
      spec = `${String(binding.engine)}:${String(binding.voice)}`;
    }
    const speaker = voice.speaker?.trim() ?? '';
    if (speaker !== '' && parseVoiceSpec(spec)?.choice === undefined) spec = `${spec}+${speaker}`;
    return { voiceId: await this.specVoice(accountId, spec), spec };
  }

  /** The account's voice named `spec`, created with the spec's binding when it has none yet. */
  private specVoice(accountId: string, spec: string): Promise<string> {
    const key = `${accountId}\n${spec}`;
    let found = this.specVoices.get(key);
    if (found === undefined) {
      found = this.deps.voices.forSpec(accountId, spec);
      this.specVoices.set(key, found);
      // A failure (an unknown engine, the voice limit) is not remembered: the next request tries again.
      found.catch(() => this.specVoices.delete(key));
    }
    return found;
  }
}
