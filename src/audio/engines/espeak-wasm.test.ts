import assert from 'node:assert/strict';
import { test } from 'node:test';
import loadPackageBuild, { type ESpeakModule } from '@echogarden/espeak-ng-emscripten';
import { loadEspeakWasm } from './espeak-wasm.js';

/** Every sample and every event of one synthesis, with the voice's answer. */
function speak(m: ESpeakModule, voice: string, rate: number, pitch: number, text: string) {
  const worker = new m.eSpeakNGWorker();
  const accepted = worker.set_voice(voice);
  worker.set_rate(rate);
  worker.set_pitch(pitch);
  const chunks: number[] = [];
  const events: string[] = [];
  worker.synthesize(text, (pcm, chunkEvents) => {
    chunks.push(...pcm);
    for (const e of chunkEvents)
      if (e.type === 'word' || e.type === 'sentence')
        events.push(`${e.type} ${e.text_position}+${e.word_length} @${e.audio_position}`);
    return false;
  });
  return { accepted, samples: chunks, events };
}

void test('the WebAssembly build speaks the same samples and marks as the npm package it reads the data of', async () => {
  const [built, packaged] = await Promise.all([loadEspeakWasm(), loadPackageBuild()]);
  const cases: [string, number, number, string][] = [
    ['en-us', 175, 50, 'Story number one. The keeper climbed the stairs at dusk, as every evening.'],
    ['en-us+klatt', 260, 70, 'Dr. Smith paid $5 million on 3 March 2024; was it worth it?'],
    ['de', 175, 50, 'Der Leuchtturmwärter stieg in der Dämmerung die Treppe hinauf.'],
    ['fr', 200, 40, 'Le gardien du phare montait l’escalier au crépuscule.'],
    ['ja', 175, 50, 'こんにちは、世界。'],
  ];
  for (const [voice, rate, pitch, text] of cases) {
    const ours = speak(built, voice, rate, pitch, text);
    const theirs = speak(packaged, voice, rate, pitch, text);
    assert.equal(ours.accepted, 0, `${voice} is a voice`);
    assert.equal(ours.samples.length, theirs.samples.length, `${voice}: length`);
    assert.ok(ours.samples.length > 10_000, `${voice}: speech`);
    assert.deepEqual(ours.samples, theirs.samples, `${voice}: samples`);
    assert.deepEqual(ours.events, theirs.events, `${voice}: marks`);
  }
  assert.deepEqual(
    new built.eSpeakNGWorker().list_voices(),
    new packaged.eSpeakNGWorker().list_voices(),
    'the same catalogue',
  );
});
