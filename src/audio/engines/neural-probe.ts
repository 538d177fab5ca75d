/**
 * Child process that loads a neural model and speaks a word with it, then exits 0. sherpa-onnx
 * ends its process on a model file it cannot read (a corrupt graph, a bad tokens file), so a model
 * is loaded here once before the service's threads load it: a failure ends this process only.
 * Arguments: the model's sherpa-onnx config as JSON, then `reference` for a model that speaks like
 * a reference clip (it is given half a second of a tone and its transcript).
 */
import type { NeuralModelConfig } from './neural-protocol.js';
import { loadOfflineTts, speak } from './sherpa-onnx.js';

const config = JSON.parse(process.argv[2] ?? '{}') as NeuralModelConfig;
const tts = loadOfflineTts(config, 1);
const rate = tts.sampleRate;
const reference =
  process.argv[3] === 'reference'
    ? {
        samples: Float32Array.from(
          { length: rate / 2 },
          (_, i) => 0.3 * Math.sin((2 * Math.PI * 220 * i) / rate),
        ),
        sampleRate: rate,
        text: 'Hello.',
      }
    : undefined;
// A model without the symbols of this word (another script) says nothing, and still loaded.
speak(tts, 'Hello.', 0, 1, reference);
process.exit(0);
