/**
 * The voice names the embedded espeak-ng engine accepts (`en-us`, `cmn`, `de`, …), read once in a
 * short-lived worker so the wasm instance's memory does not stay in the main thread.
 */
import { Worker } from 'node:worker_threads';

const LIST_VOICES_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
import(workerData.moduleUrl).then(async (mod) => {
  const m = await mod.default();
  const engine = new m.eSpeakNGWorker();
  const names = [];
  for (const v of engine.list_voices()) for (const l of v.languages) names.push(l.name.toLowerCase());
  parentPort.postMessage(names);
}).catch((err) => { throw err; });
`;

let cached: Promise<readonly string[]> | undefined;

/** Lists espeak-ng voice names (lower case), computed once per process. */
export function listEspeakVoices(): Promise<readonly string[]> {
  cached ??= new Promise<readonly string[]>((resolve, reject) => {
    const worker = new Worker(LIST_VOICES_SOURCE, {
      eval: true,
      workerData: { moduleUrl: import.meta.resolve('@echogarden/espeak-ng-emscripten') },
    });
    worker.once('message', (names: string[]) => {
      resolve([...new Set(names)].sort());
      void worker.terminate();
    });
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`espeak voice listing worker exited with code ${code}`)));
  });
  return cached;
}
