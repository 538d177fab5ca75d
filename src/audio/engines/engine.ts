/**
 * The one interface every speech engine implements: text in, canonical PCM (44.1 kHz mono s16)
 * out, progressively, so the stream can start encoding before the whole text is synthesised.
 * Engines that deliver MP3 themselves can also hand over those bytes unchanged (`synthesizeMp3`).
 */
import { AppError, errors } from '../../errors/app-error.js';

import type { VoicedIndex } from '../voiced-index.js';
import type { VoiceBinding } from './engine-registry.js';
import type { LanguageRun } from './language-decision.js';

export type { VoiceBinding } from './engine-registry.js';

/** One piece of text to speak. Engines ignore the fields they have no use for, e.g. espeak ignores seed and preset. */
export interface SynthesisRequest {
  text: string;
  voice: VoiceBinding;
  /** 0.5–2, a duration multiplier: 2.0 = twice as long. */
  speechRate: number;
  seed?: number;
  preset?: 'creative' | 'balance' | 'stable';
  language?: string;
  /**
   * When the text's sentences are in different languages (decided per sentence for `auto`): the
   * language of each stretch of the text. Engines that speak several languages switch their voice
   * at those sentences; the others ignore it (task creation refused what they cannot speak).
   */
  languages?: readonly LanguageRun[];
  instructMode?: boolean;
  /** How to speak, in words (OpenAI's `instructions`): remote OpenAI-compatible engines pass them on; others ignore them. */
  instructions?: string;
  /** A client is waiting on this piece (a one-shot, a short task): engines that queue work serve it first. */
  interactive?: boolean;
  /** Whose work this is (an account id): engines that queue work share their threads fairly between owners. */
  owner?: string;
  /**
   * Whether a live listener is to hear this call's audio at `at` seconds into its task soon, asked
   * as each of its pieces is queued (`at`: where the piece starts): such batch work stays in the
   * service's own threads when the rest of the batch work runs in the batch process, at a lower
   * priority (docs/architecture.md, The batch process).
   */
  listened?: (at: number) => boolean;
  /** Seconds of its task's audio before this text: engines that queue work serve tasks further behind first. */
  startsAt?: number;
  /**
   * When its task's audio began being made, in seconds of this process's `performance.now()`
   * (by default when this call began, less `startsAt`): interactive work is due at that moment plus
   * where it plays in its task, and engines that queue work serve the work due first first.
   */
  since?: number;
  /**
   * The voice's loudness gain in dB, for an engine that applies it itself (`appliesGain`): one
   * GainStage over the whole call, run where the engine makes its samples. Set by the loudness
   * matching layer only.
   */
  gainDb?: number;
}

/** Which boundaries a timing mark stands for. */
export type MarkKind = 'sentence' | 'word';

/**
 * Where a sentence or word starts in an engine call's audio. `sample` counts canonical samples
 * from the call's first sample (0); `textStart`/`textEnd` are UTF-16 offsets into the request's
 * text of what starts there (as exact as the engine knows them).
 */
export interface TimingMark {
  kind: MarkKind;
  sample: number;
  textStart: number;
  textEnd: number;
}

/**
 * A chunk of an engine call's audio with the timing marks whose sample falls inside it (a mark
 * at the very end of the audio comes with the last chunk). Marks are in sample order.
 */
export interface EngineAudio {
  pcm: Int16Array;
  marks: readonly TimingMark[];
  /** Where the chunk is voiced at its start, its end and its marks, when its maker indexed it. */
  voiced?: VoicedIndex | undefined;
}

/** A speech engine; abort the signal to stop synthesis (the iterator then throws the abort reason). */
export interface SpeechEngine {
  /** Yields canonical PCM chunks in order, as soon as each is ready. */
  synthesize(req: SynthesisRequest, signal: AbortSignal): AsyncIterable<Int16Array>;
  /**
   * The same audio as `synthesize`, each chunk with the timing marks the engine knows (see
   * EngineAudio). Every built-in provider's engine has it; `audioWithMarks` falls back to
   * `synthesize` without marks for engines that do not.
   */
  synthesizeWithMarks?: (req: SynthesisRequest, signal: AbortSignal) => AsyncIterable<EngineAudio>;
  /**
   * Present on engines that deliver MP3 themselves (the remote engine): for
   * instruct/design pieces, whose MP3 is forwarded unchanged. One engine call, asked for
   * FORWARDED_MP3_SAMPLE_RATE, yields the engine's own MP3 bytes exactly as they arrive, each
   * chunk with the canonical PCM decoded from it (the full-task stream and merged audio are made
   * from that PCM). Same deadlines, abort and errors as `synthesize`.
   */
  synthesizeMp3?: (req: SynthesisRequest, signal: AbortSignal) => AsyncIterable<EngineMp3Chunk>;
  /**
   * The engine applies `SynthesisRequest.gainDb` itself, exactly as a GainStage over the call's
   * PCM would (same samples, marks with the chunk holding their sample): its synthesis threads
   * do that per-sample work instead of the main thread.
   */
  appliesGain?: true;
}

/** A chunk of an engine's own MP3 as it arrived, and the canonical PCM it decoded to (may be empty). */
export interface EngineMp3Chunk {
  mp3: Uint8Array;
  pcm: Int16Array;
}

/** Sample rate asked of an engine whose MP3 is forwarded unchanged. */
export const FORWARDED_MP3_SAMPLE_RATE = 24_000;

/** Lowest and highest accepted speechRate (duration multiplier). */
export const SPEECH_RATE_RANGE = { min: 0.5, max: 2 } as const;

/** Refuses a speechRate outside SPEECH_RATE_RANGE (NaN included) with VALIDATION_INVALID_VALUE. */
export function checkSpeechRate(rate: number): void {
  if (!(rate >= SPEECH_RATE_RANGE.min && rate <= SPEECH_RATE_RANGE.max)) {
    throw errors.invalidValue(
      `speechRate must be between ${SPEECH_RATE_RANGE.min} and ${SPEECH_RATE_RANGE.max}`,
    );
  }
}

/** Time limits of one engine call (one piece); remote engines also bound connect and first byte. */
export interface EngineTimeouts {
  /** Until the TCP (and TLS) connection to a remote engine is up. */
  connectMs: number;
  /** From connected until a remote engine's response headers arrive. */
  firstByteMs: number;
  /** The whole call, a stalled body included: after it the call is aborted and the piece fails. */
  callMs: number;
}

/** Defaults of ENGINE_CONNECT_TIMEOUT_MS, ENGINE_FIRST_BYTE_TIMEOUT_MS and ENGINE_CALL_TIMEOUT_MS. */
export const DEFAULT_ENGINE_TIMEOUTS: EngineTimeouts = {
  connectMs: 10_000,
  firstByteMs: 30_000,
  callMs: 120_000,
};

/** What operators need to know about a failed engine call (logged, never shown to tenants). */
export interface EngineFailureDetail {
  /** The engine: 'espeak', or the operator's endpoint name. */
  engine: string;
  /** Endpoint URL without credentials or query. */
  url?: string;
  /** Upstream HTTP status. */
  status?: number;
  /** Start of the upstream body (first 512 bytes), secrets redacted. */
  body?: string;
  /** What went wrong, e.g. 'answered HTTP 500', 'the first byte time limit of 30000 ms passed'. */
  reason: string;
}

/** Tenant-visible message of an engine that failed. */
export const ENGINE_FAILED_MESSAGE = 'the speech engine failed (engine error)';
/** Tenant-visible message of an engine call that ran out of time. */
export const ENGINE_TIMEOUT_MESSAGE = 'the speech engine did not answer in time';

/**
 * An engine call failed (TTS_GENERATE_FAILED). Its message is generic, safe to show tenants; the
 * operator's detail (URL, status, upstream body) is in `detail`, which loggers print with the error.
 */
export class EngineCallError extends AppError {
  constructor(
    /** 'timeout' when a time limit passed, 'failed' otherwise. */
    readonly kind: 'failed' | 'timeout',
    readonly detail: EngineFailureDetail,
    cause?: unknown,
  ) {
    super('TTS_GENERATE_FAILED', kind === 'timeout' ? ENGINE_TIMEOUT_MESSAGE : ENGINE_FAILED_MESSAGE, {
      cause,
    });
    this.name = 'EngineCallError';
  }
}

/** An engine's audio with its marks: `synthesizeWithMarks` where the engine has it, else its PCM without marks. */
export async function* audioWithMarks(
  engine: SpeechEngine,
  req: SynthesisRequest,
  signal: AbortSignal,
): AsyncIterable<EngineAudio> {
  if (engine.synthesizeWithMarks !== undefined) {
    yield* engine.synthesizeWithMarks(req, signal);
    return;
  }
  for await (const pcm of engine.synthesize(req, signal)) yield { pcm, marks: [] };
}

/** The PCM of an engine's marked audio, for `synthesize` (empty chunks, marks only, are left out). */
export async function* pcmOf(audio: AsyncIterable<EngineAudio>): AsyncIterable<Int16Array> {
  for await (const { pcm } of audio) if (pcm.length > 0) yield pcm;
}
