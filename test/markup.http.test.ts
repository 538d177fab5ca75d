// Inline markup through HTTP on the real app, measured on the decoded MP3 a client gets: pause tags
// lengthen tasks (every content), one-shots and splitter-mode utterances by their length, literal
// symbols are spoken instead of lost, unknown tags are spoken, never refused; a remote endpoint
// gets the text without our tags.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { decodeToPcm } from './helpers/audio-check.js';
import {
  bearer,
  createTask,
  createVoice,
  speechMp3,
  startTestApp,
  waitForTask,
  type TestApp,
} from './helpers/test-app.js';

const RATE = 44100;
/** A pause tag lengthens the audio by its length within this (seconds). */
const TOLERANCE = 0.05;

let t: TestApp;
let flite = '';
let espeak = '';
let remote = '';

// A local OpenAI-compatible endpoint: records each `input` it is sent and answers real MP3.
const heard: string[] = [];
let upstreamMp3: Buffer = Buffer.alloc(0);
const upstream = createServer((req, res) => {
  const body: Buffer[] = [];
  req.on('data', (b: Buffer) => body.push(b));
  req.on('end', () => {
    heard.push((JSON.parse(Buffer.concat(body).toString()) as { input: string }).input);
    res.writeHead(200, { 'content-type': 'audio/mpeg' }).end(upstreamMp3);
  });
});

before(async () => {
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const { port } = upstream.address() as AddressInfo;
  t = await startTestApp({
    listen: true,
    env: { REMOTE_ENGINES: JSON.stringify({ local: { baseUrl: `http://127.0.0.1:${port}` } }) },
  });
  flite = await createVoice(t.app, t.key, { name: 'Flite', engine: { engine: 'flite', voice: 'kal16' } });
  espeak = await createVoice(t.app, t.key, { name: 'Espeak', engine: { engine: 'espeak', voice: 'en-us' } });
  remote = await createVoice(t.app, t.key, {
    name: 'Remote',
    engine: { engine: 'remote', endpoint: 'local', voice: 'alloy' },
  });
  upstreamMp3 = await speechMp3(t.app, 'A sentence the remote engine says.');
});

after(async () => {
  await t.close();
  await new Promise((resolve) => upstream.close(resolve));
});

async function seconds(url: string): Promise<number> {
  const res = await fetch(url);
  assert.equal(res.status, 200, url);
  return (await decodeToPcm(Buffer.from(await res.arrayBuffer()))).length / RATE;
}

/** Seconds of a finished task's merged audio and of each content's. */
async function taskSeconds(contents: Record<string, unknown>[]): Promise<{ whole: number; each: number[] }> {
  const id = await createTask(t.app, t.key, contents);
  const task = await waitForTask(t.app, t.accountId, id);
  const each: number[] = [];
  for (const c of task.metadata.contents) each.push(await seconds(String(c.audio)));
  return { whole: await seconds(String(task.metadata.audio)), each };
}

function near(actual: number, expected: number, what: string): void {
  assert.ok(
    Math.abs(actual - expected) <= TOLERANCE,
    `${what}: ${actual.toFixed(3)} s, expected ${expected.toFixed(3)} ± ${TOLERANCE}`,
  );
}

describe('inline markup', () => {
  const plain = 'The first part of the text. The second part of the text.';
  const tagged = (tag: string) => `The first part of the text. ${tag} The second part of the text.`;

  for (const [name, voice] of [
    ['Flite', () => flite],
    ['espeak-ng', () => espeak],
  ] as const) {
    it(`${name}: [pause:2s] and <break time="2s"/> lengthen a task by 2 s`, async () => {
      const without = await taskSeconds([{ text: plain, voiceId: voice() }]);
      const bracket = await taskSeconds([{ text: tagged('[pause:2s]'), voiceId: voice() }]);
      const ssml = await taskSeconds([{ text: tagged('<break time="2s"/>'), voiceId: voice() }]);
      near(bracket.whole - without.whole, 2, '[pause:2s]');
      near(ssml.whole - without.whole, 2, '<break time="2s"/>');
    });

    it(`${name}: literal <, >, <3 and & are spoken`, async () => {
      const symbols = await taskSeconds([{ text: 'Is 5 < 6 > 2? I <3 you & him.', voiceId: voice() }]);
      const words = await taskSeconds([
        { text: 'Is 5 less than 6 greater than 2? I heart you and him.', voiceId: voice() },
      ]);
      assert.ok(
        symbols.whole >= words.whole - 0.1,
        `symbols ${symbols.whole.toFixed(3)} s, words ${words.whole.toFixed(3)} s`,
      );
    });
  }

  it('every content of a task reads its own pauses; the merged audio holds them all', async () => {
    const contents = (a: string, b: string) => [
      { text: a, voiceId: espeak },
      { text: b, voiceId: flite },
    ];
    const without = await taskSeconds(contents(plain, plain));
    const withPauses = await taskSeconds(contents(tagged('[pause:1.5s]'), tagged('[pause:300ms]')));
    near((withPauses.each[0] ?? 0) - (without.each[0] ?? 0), 1.5, 'content 0');
    near((withPauses.each[1] ?? 0) - (without.each[1] ?? 0), 0.3, 'content 1');
    near(withPauses.whole - without.whole, 1.8, 'merged');
  });

  it('one-shots read pause tags', async () => {
    const oneShot = async (text: string) => {
      const res = await fetch(`${t.baseUrl}/api/tts/simple-generate`, {
        method: 'POST',
        headers: { ...bearer(t.key), 'content-type': 'application/json' },
        body: JSON.stringify({ text, voiceId: espeak, direct_stream: true }),
      });
      assert.equal(res.status, 200);
      return (await decodeToPcm(Buffer.from(await res.arrayBuffer()))).length / RATE;
    };
    near((await oneShot(tagged('[pause:2s]'))) - (await oneShot(plain)), 2, 'one-shot');
  });

  it('splitter mode: a pause tag inside an utterance is silence, and markers still resolve', async () => {
    const generate = async (text: string) => {
      const res = await t.app.http.inject({
        method: 'POST',
        url: '/api/tts/generate',
        headers: bearer(t.key),
        payload: {
          text,
          splitter: {
            '<A>': { voiceId: espeak },
            splitterMarks: ['[]'],
            lookupTable: { b: { tags: ['B'], voiceId: flite } },
          },
        },
      });
      assert.equal(res.statusCode, 200, res.body);
      const id = res.json<{ data: { id: string } }>().data.id;
      const task = await waitForTask(t.app, t.accountId, id);
      const each: number[] = [];
      for (const c of task.metadata.contents) each.push(await seconds(String(c.audio)));
      return { task, each };
    };
    const script = (pause: string) =>
      `<A>The first part of the text. ${pause} The second part of the text.[B]Fine, thanks.`;
    const without = await generate(script(''));
    const { task, each } = await generate(script('[pause:1s]'));
    assert.deepEqual(
      task.metadata.contents.map((c) => [c.text, c.voiceId]),
      [
        ['The first part of the text. [pause:1s] The second part of the text.', espeak],
        ['Fine, thanks.', flite],
      ],
    );
    near((each[0] ?? 0) - (without.each[0] ?? 0), 1, 'utterance with the pause');
    near((each[1] ?? 0) - (without.each[1] ?? 0), 0, 'utterance after it');
  });

  it('a remote engine gets the text without our tags, symbols as written, and the pause between its calls', async () => {
    heard.length = 0;
    const once = await taskSeconds([{ text: 'Is 5 < 6? I <3 you & him.', voiceId: remote }]);
    assert.deepEqual(heard, ['Is 5 < 6? I <3 you & him.']);
    heard.length = 0;
    const paused = await taskSeconds([{ text: 'Is 5 < 6? [pause:2s] I <3 you & him.', voiceId: remote }]);
    assert.deepEqual(
      heard.map((h) => h.trim()),
      ['Is 5 < 6?', 'I <3 you & him.'],
    );
    // Two calls of the same MP3 and the silence between them.
    near(paused.whole - 2 * once.whole, 2, 'remote with a pause');
  });

  it('a pause is a gap between sentences in the timestamps, and never a sentence’s text', async () => {
    for (const voiceId of [espeak, flite, remote]) {
      const id = await createTask(t.app, t.key, [{ text: tagged('[pause:2s]'), voiceId }]);
      await waitForTask(t.app, t.accountId, id);
      const res = await t.app.http.inject({
        method: 'GET',
        url: `/api/tts/generate/${id}/timestamps.json`,
        headers: bearer(t.key),
      });
      assert.equal(res.statusCode, 200, res.body);
      const { sentences } = res.json<{ sentences: { start: number; end: number; text: string }[] }>();
      const texts = sentences.map((s) => s.text);
      assert.ok(
        texts.every((s) => !s.includes('[pause')),
        `${voiceId}: ${JSON.stringify(texts)}`,
      );
      const gaps = sentences.slice(1).map((s, i) => s.start - (sentences[i]?.end ?? 0));
      assert.ok(
        gaps.some((g) => g >= 2),
        `${voiceId}: gaps ${JSON.stringify(gaps)} between ${JSON.stringify(texts)}`,
      );
    }
  });

  it('unknown tags are spoken, not refused', async () => {
    const tag = await taskSeconds([{ text: 'Hello <Narrator> world.', voiceId: espeak }]);
    const none = await taskSeconds([{ text: 'Hello world.', voiceId: espeak }]);
    assert.ok(
      tag.whole > none.whole + 0.3,
      `${tag.whole} s vs ${none.whole} s: the tag's word was not spoken`,
    );
  });
});
