/**
 * The one interface every speech engine implements: text in, canonical PCM (44.1 kHz mono s16)
 * out, progressively, so the stream can start encoding before the whole text is synthesised.
 */

/** Which engine speaks a voice, and with which engine-specific settings (stored on the voice). */
export type VoiceBinding =
  | {
      engine: 'espeak';
      /** espeak-ng voice or language, e.g. 'en-us'. */
      voice: string;
      /** espeak-ng variant, e.g. 'f3'. */
      variant?: string;
      /** 0–99, espeak's default is 50. */
      pitch?: number;
    }
  | {
      engine: 'remote';
      /** NAME of an operator-configured endpoint, never a URL (voices must not point the server anywhere). */
      endpoint: string;
      voice: string;
      model?: string;
    };

/** One piece of text to speak. Engines ignore the fields they have no use for (decisions §4), e.g. espeak ignores seed and preset. */
export interface SynthesisRequest {
  text: string;
  voice: VoiceBinding;
  /** 0.5–2, a duration multiplier: 2.0 = twice as long. */
  speechRate: number;
  seed?: number;
  preset?: 'creative' | 'balance' | 'stable';
  language?: string;
  instructMode?: boolean;
}

/** A speech engine; abort the signal to stop synthesis (the iterator then throws the abort reason). */
export interface SpeechEngine {
  /** Yields canonical PCM chunks in order, as soon as each is ready. */
  synthesize(req: SynthesisRequest, signal: AbortSignal): AsyncIterable<Int16Array>;
}

/** Lowest and highest accepted speechRate (duration multiplier). */
export const SPEECH_RATE_RANGE = { min: 0.5, max: 2 } as const;
