/**
 * What the neural engine (main thread) and its synthesis threads exchange. Kept apart from the
 * worker module so that the main thread never loads it (it lowers its thread's priority and loads
 * sherpa-onnx's native library when evaluated).
 */
import type { SentenceTask } from './sentence-protocol.js';

/** sherpa-onnx's `model` config of one folder: one family's files (paths), '' for those it lacks. */
export type NeuralModelConfig =
  | { vits: { model: string; tokens: string; dataDir: string; lexicon: string; dictDir: string } }
  | { kokoro: { model: string; voices: string; tokens: string; dataDir: string; lexicon: string } }
  | { kitten: { model: string; voices: string; tokens: string; dataDir: string } }
  | { matcha: { acousticModel: string; vocoder: string; tokens: string; dataDir: string; lexicon: string } }
  | {
      zipvoice: {
        encoder: string;
        decoder: string;
        vocoder: string;
        tokens: string;
        dataDir: string;
        lexicon: string;
      };
    }
  | {
      pocket: {
        lmMain: string;
        lmFlow: string;
        encoder: string;
        decoder: string;
        textConditioner: string;
        vocabJson: string;
        tokenScoresJson: string;
      };
    };

/** A voice's reference clip, for the models that speak like a clip (ZipVoice, Pocket TTS). */
export interface NeuralReference {
  /** The clip, mono, in [-1, 1]. */
  samples: Float32Array;
  sampleRate: number;
  /** What is said in the clip. */
  text: string;
}

/** A model as a thread loads it. */
export interface NeuralModelRef {
  /** Identifies the loaded instance: the folder and its files' stamp. */
  key: string;
  config: NeuralModelConfig;
  /** onnxruntime threads of the instance (NEURAL_THREADS). */
  numThreads: number;
  /** Its estimated memory (model file sizes). */
  bytes: number;
}

/** One piece of text (a sentence, or a clause of a long one) for one speaker of one model. */
export interface NeuralTask extends SentenceTask {
  model: NeuralModelRef;
  /** Bytes of models this thread may keep loaded: the least recently used go beyond it. */
  memoryBytes: number;
  /** Speaker id. */
  sid: number;
  /** sherpa-onnx's speed: 2 speaks twice as fast. */
  speed: number;
  /** The clip the voice speaks like, for a reference-audio model. */
  reference?: NeuralReference;
  /** Set on a sentence's first piece: its mark ends this many UTF-16 units after the piece's start. */
  sentenceEnd?: number;
}
