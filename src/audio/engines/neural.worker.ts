/**
 * Piscina task module for the neural engine (sherpa-onnx, in-process). Each task speaks one piece
 * (a sentence, or a clause of a long one) with one speaker of one model and posts it as canonical
 * PCM (resampled here, off the main thread) through the task's port. A thread loads a model on its
 * first piece and keeps it for the next pieces of every voice of that model; past the task's
 * memory budget the least recently used models are unloaded (at least the one in use stays).
 */
import { workerData } from 'piscina';
import { lowerThreadPriority } from '../../common/worker-priority.js';
import type { NeuralModelRef, NeuralTask } from './neural-protocol.js';
import { PieceOutput } from './piece-output.js';
import { postWholeSentence } from './sentence-output.js';
import { loadOfflineTts, speak, type SherpaOfflineTts } from './sherpa-onnx.js';

// Synthesis is batch work: the event loop goes first; the interactive lane's thread keeps normal priority.
if ((workerData as { interactive?: boolean } | undefined)?.interactive !== true) lowerThreadPriority();

interface Loaded {
  tts: SherpaOfflineTts;
  bytes: number;
}

/** Loaded models by key, least recently used first (Map order: a use moves one to the end). */
const loaded = new Map<string, Loaded>();

function modelFor(ref: NeuralModelRef, memoryBytes: number): SherpaOfflineTts {
  const have = loaded.get(ref.key);
  if (have !== undefined) {
    loaded.delete(ref.key);
    loaded.set(ref.key, have);
    return have.tts;
  }
  let total = ref.bytes;
  for (const m of loaded.values()) total += m.bytes;
  for (const [key, m] of loaded) {
    if (total <= memoryBytes) break;
    // Dropping the last reference frees the native instance when the collector runs.
    loaded.delete(key);
    total -= m.bytes;
  }
  const tts = loadOfflineTts(ref.config, ref.numThreads);
  loaded.set(ref.key, { tts, bytes: ref.bytes });
  return tts;
}

/** Float samples in [-1, 1] as 16-bit PCM. */
function toInt16(samples: Float32Array): Int16Array {
  const out = new Int16Array(samples.length);
  for (let i = 0; i < samples.length; i++) {
    const s = Math.max(-1, Math.min(1, samples[i] ?? 0));
    out[i] = Math.round(s * 32767);
  }
  return out;
}

/** Speaks one piece, posting its PCM through `task.port` (then SENTENCE_END); resolves with the samples posted. */
export async function synthesize(task: NeuralTask): Promise<number> {
  const output = new PieceOutput(task);
  try {
    const tts = modelFor(task.model, task.memoryBytes);
    const audio = speak(tts, task.text, task.sid, task.speed, task.reference);
    return await postWholeSentence(output, toInt16(audio.samples), audio.sampleRate, task.sentenceEnd);
  } finally {
    output.close();
  }
}

// Piscina resolves the default export when a thread starts (the `synthesize` task runs as default).
export default synthesize;
