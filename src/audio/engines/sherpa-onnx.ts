/**
 * The part of sherpa-onnx-node (a CommonJS package without types) the neural engine uses. Only
 * worker threads and the probe's child process load it: a model file the native library cannot
 * read ends its process.
 */
import { createRequire } from 'node:module';
import type { NeuralModelConfig, NeuralReference } from './neural-protocol.js';

export interface SherpaOfflineTts {
  readonly numSpeakers: number;
  readonly sampleRate: number;
  generate(request: {
    text: string;
    generationConfig: {
      sid: number;
      speed: number;
      referenceAudio?: Float32Array;
      referenceSampleRate?: number;
      referenceText?: string;
    };
  }): {
    samples: Float32Array;
    sampleRate: number;
  };
}

/** What sherpa-onnx-node throws when a text gave no audio (the C API's null result). */
const NO_AUDIO = 'TTS generation failed';

/**
 * Speaks `text` with speaker `sid` at `speed`; no samples when the model had nothing to say for it
 * (no token of the model in it: an emoji, a lone dash, a script it has no symbols for). The call
 * takes `generationConfig`: given `sid` and `speed` beside the text instead, sherpa-onnx-node reads
 * that null result as audio and the process dies of a segmentation fault, every thread with it.
 * A reference-audio model (ZipVoice) speaks like `reference`, and says nothing without one.
 */
export function speak(
  tts: SherpaOfflineTts,
  text: string,
  sid: number,
  speed: number,
  reference?: NeuralReference,
): { samples: Float32Array; sampleRate: number } {
  const cloned = reference !== undefined && {
    referenceAudio: reference.samples,
    referenceSampleRate: reference.sampleRate,
    referenceText: reference.text,
  };
  try {
    return tts.generate({ text, generationConfig: { sid, speed, ...cloned } });
  } catch (err) {
    if (err instanceof Error && err.message === NO_AUDIO) {
      return { samples: new Float32Array(0), sampleRate: tts.sampleRate };
    }
    throw err;
  }
}

interface SherpaModule {
  OfflineTts: new (config: {
    model: NeuralModelConfig & { numThreads: number; debug: boolean; provider: 'cpu' };
    maxNumSentences: number;
  }) => SherpaOfflineTts;
}

/** Loads a model: an instance that speaks it with `numThreads` onnxruntime threads. */
export function loadOfflineTts(config: NeuralModelConfig, numThreads: number): SherpaOfflineTts {
  const sherpa = createRequire(import.meta.url)('sherpa-onnx-node') as SherpaModule;
  return new sherpa.OfflineTts({
    model: { ...config, numThreads, debug: false, provider: 'cpu' },
    // The engine sends a sentence (or a clause) at a time already.
    maxNumSentences: 1,
  });
}
