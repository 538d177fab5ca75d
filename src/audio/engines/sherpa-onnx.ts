/**
 * The part of sherpa-onnx-node (a CommonJS package without types) the neural engine uses. Only
 * worker threads and the probe's child process load it: a model file the native library cannot
 * read ends its process.
 */
import { createRequire } from 'node:module';
import type { NeuralModelConfig } from './neural-protocol.js';

export interface SherpaOfflineTts {
  readonly numSpeakers: number;
  readonly sampleRate: number;
  generate(request: { text: string; sid: number; speed: number }): {
    samples: Float32Array;
    sampleRate: number;
  };
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
