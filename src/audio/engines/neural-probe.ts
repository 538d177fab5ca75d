/**
 * Child process that loads a neural model and speaks a word with it, then exits 0. sherpa-onnx
 * ends its process on a model file it cannot read (a corrupt graph, a bad tokens file), so a model
 * is loaded here once before the service's threads load it: a failure ends this process only.
 * Argument: the model's sherpa-onnx config as JSON.
 */
import type { NeuralModelConfig } from './neural-protocol.js';
import { loadOfflineTts, speak } from './sherpa-onnx.js';

const config = JSON.parse(process.argv[2] ?? '{}') as NeuralModelConfig;
const tts = loadOfflineTts(config, 1);
// A model without the symbols of this word (another script) says nothing, and still loaded.
speak(tts, 'Hello.', 0, 1);
process.exit(0);
