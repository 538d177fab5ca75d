// Flite's word timings through HTTP on the real app: each content is spoken by one Flite voice (the
// default diphone voice and a clustergen one), and the words its timestamps place are checked
// against the silences ffmpeg finds in the content's MP3 — Flite's own pauses at commas, the pause
// between the pieces of a cut first sentence, and a pause tag: the word after each starts where
// the silence ends, the word before it ends where the silence starts.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { silenceDetect } from './helpers/audio-check.js';
import { createTask, createVoice, startTestApp, waitForTask, type TestApp } from './helpers/test-app.js';

interface Word {
  start: number;
  end: number;
  text: string;
}
interface Timestamps {
  complete: boolean;
  sentences: (Word & { words: Word[] })[];
  words: (Word & { content: number; sentence: number })[];
}

/** One MP3 frame (26 ms) and the engine's slack: the tolerance of the timings suite. */
const TOLERANCE = 0.06;

// The first sentence is cut after "pears," (a call's first piece); Flite pauses at every comma.
const TEXT =
  'Apples, pears, and plums, in one bowl. [pause:1s] It cost $42, they said, and then it was gone.';
/** The words that follow a silence: after a comma, the pause tag, or the start. */
const AFTER_SILENCE = ['Apples', 'pears', 'and', 'in', 'It', 'they', 'and'];

describe('Flite word timings on the audio we serve', () => {
  let t: TestApp;

  before(async () => {
    t = await startTestApp();
  });
  after(async () => {
    await t.close();
  });

  it('places every word of a Flite voice where ffmpeg hears it start after a pause', async () => {
    const voices = ['kal16', 'slt'];
    const contents = [];
    for (const voice of voices) {
      const voiceId = await createVoice(t.app, t.key, { name: voice, engine: { engine: 'flite', voice } });
      contents.push({ text: TEXT, voiceId });
    }
    const id = await createTask(t.app, t.key, contents);
    const task = await waitForTask(t.app, t.accountId, id);
    const get = (url: string) =>
      t.app.http.inject({
        method: 'GET',
        url: url.replace(/^https?:\/\/[^/]+/, ''),
        headers: { authorization: `Bearer ${t.key}` },
      });

    for (const [index, voice] of voices.entries()) {
      const timings = (await get(`/api/tts/generate/${id}/${index}/timestamps.json`)).json<Timestamps>();
      assert.equal(timings.complete, true);
      // Every written word, shown as written (the source's "$42", not Flite's "forty two dollars").
      assert.deepEqual(
        timings.words.map((w) => w.text),
        TEXT.replace('[pause:1s] ', '')
          .split(' ')
          .map((w) => w.replace(/[,.]$/, '')),
        voice,
      );
      let previous = 0;
      for (const w of timings.words) {
        const sentence = timings.sentences[w.sentence];
        assert.ok(sentence !== undefined);
        assert.ok(w.start >= previous && w.end > w.start, `${voice}: ${w.text} in order, not empty`);
        assert.ok(
          w.start >= sentence.start && w.end <= sentence.end,
          `${voice}: ${w.text} inside its sentence`,
        );
        previous = w.end;
      }

      const content = task.metadata.contents.find((c) => c.index === index);
      const mp3 = (await get(content?.audio ?? '')).rawPayload;
      const quiet = await silenceDetect(mp3, 0.05);
      let from = 0;
      for (const text of AFTER_SILENCE) {
        const k = timings.words.findIndex((w, i) => i >= from && w.text === text);
        const word = timings.words[k];
        assert.ok(word !== undefined, `${voice}: ${text}`);
        from = k + 1;
        const gap = quiet.find((g) => Math.abs(g.end - word.start) <= TOLERANCE);
        assert.ok(
          gap !== undefined,
          `${voice}: "${text}" starts at ${word.start}, where no silence ends: ${JSON.stringify(quiet)}`,
        );
        const before = timings.words[k - 1];
        if (before !== undefined)
          assert.ok(
            Math.abs(before.end - gap.start) <= TOLERANCE,
            `${voice}: "${before.text}" ends at ${before.end}, the silence starts at ${gap.start}`,
          );
      }
      // No word spans a pause: every silence of a tenth of a second lies between two words.
      for (const gap of await silenceDetect(mp3, 0.1)) {
        const inside = timings.words.find(
          (w) => w.start < gap.start - TOLERANCE && w.end > gap.end + TOLERANCE,
        );
        assert.equal(inside, undefined, `${voice}: a silence ${JSON.stringify(gap)} inside a word`);
      }
    }
  });
});
