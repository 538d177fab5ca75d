// A dialogue mixing engines and voices (espeak-ng and Flite) through the HTTP API: its full-task
// stream is one continuous MP3 that ffmpeg decodes without a complaint, as long as its pieces and
// silences, and every piece (more than 10 s of speech each) is loudness-matched: within ±1 LU of
// −16 LUFS, true peak at most −1 dBTP, measured by ffmpeg's ebur128 filter. (A voice's gain is
// fixed, and its level moves by about ±0.6 LU from one text to another, so pieces of different
// texts can be a little more than 1 LU apart; voices speaking the same text are held within 1 LU of
// each other in src/audio/engines/loudness-gain.test.ts.)
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ebur128, ffmpegErrors, probeAudio } from './helpers/audio-check.js';
import { bearer, startTestApp, waitForTask, type TestApp } from './helpers/test-app.js';

const LINES = [
  'Good morning. I have been reading about the old lighthouse on the northern cape, the one that ' +
    'guided fishing boats home for more than a hundred years before the new harbour was built. Have you ever been inside it?',
  'I know it well. My grandfather kept its lamp burning through three winters, and he used to say ' +
    'that the sea had a different voice on every night of the year, if you listened long enough. I still have his logbook.',
  'That is a lovely thought. Do you think the town will ever open it to visitors again? I would ' +
    'like to climb the stairs and see the coast the way the keepers saw it every evening, with the boats coming home.',
  'They are talking about it at the council this spring. If the money is found, the repairs could ' +
    'start in the summer, and the first visitors might climb the tower before the end of the year. I hope you will be one of them.',
];

const VOICES = [
  { engine: 'espeak', voice: 'en-us' },
  { engine: 'flite', voice: 'kal16' },
  { engine: 'espeak', voice: 'en-us', variant: 'f3' },
  { engine: 'flite', voice: 'slt' },
];

const INTERVAL = 0.4;

describe('a mixed-engine dialogue is loudness-matched', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ listen: true });
  });
  after(async () => t.close());

  it('streams as one clean continuous MP3 whose pieces are equally loud', async () => {
    const voiceIds: string[] = [];
    for (const [i, engine] of VOICES.entries()) {
      const res = await t.app.http.inject({
        method: 'POST',
        url: '/api/voice',
        headers: bearer(t.key),
        payload: { name: `Speaker ${i}`, engine },
      });
      assert.equal(res.statusCode, 200, res.body);
      voiceIds.push(res.json<{ data: { id: string } }>().data.id);
    }
    const created = await t.app.http.inject({
      method: 'POST',
      url: '/api/tts/generate',
      headers: bearer(t.key),
      payload: {
        contents: LINES.map((text, i) => ({ type: 'text', text, voiceId: voiceIds[i], interval: INTERVAL })),
      },
    });
    assert.equal(created.statusCode, 200, created.body);
    const id = created.json<{ data: { id: string } }>().data.id;
    const detail = await t.app.http.inject({
      method: 'GET',
      url: `/api/tts/generate/${id}?stream=true`,
      headers: bearer(t.key),
    });
    const { streamUrl } = detail.json<{ data: { streamUrl: string } }>().data;
    // Read live, while the pieces are generated.
    const stream = await fetch(streamUrl);
    assert.equal(stream.status, 200);
    const bytes = Buffer.from(await stream.arrayBuffer());
    assert.equal(await ffmpegErrors(bytes), '');
    const info = await probeAudio(bytes);
    assert.deepEqual([info.codec, info.sampleRate, info.channels, info.bitRate], ['mp3', 44100, 2, 320000]);

    const task = await waitForTask(t.app, t.accountId, id);
    assert.equal(task.status, 'generated');
    const pieces: { integrated: number; truePeak: number; seconds: number }[] = [];
    for (const content of task.metadata.contents) {
      const audio = Buffer.from(await (await fetch(String(content.audio))).arrayBuffer());
      const seconds = (await probeAudio(audio)).durationSeconds;
      assert.ok(seconds >= 10, `a piece of ${seconds} s`);
      pieces.push({ ...(await ebur128(audio)), seconds });
    }
    // One stream of every piece and the silences between them (the last has none after it); each
    // piece's own file adds its encoder delay and last-frame padding, up to two frames.
    const expected = pieces.reduce((s, p) => s + p.seconds, 0) + INTERVAL * (pieces.length - 1);
    const slack = (2 * 1152 * pieces.length) / 44100;
    assert.ok(
      info.durationSeconds <= expected && info.durationSeconds >= expected - slack,
      `${info.durationSeconds} s, not ${expected} s`,
    );

    const report = JSON.stringify(pieces);
    for (const p of pieces) {
      assert.ok(Math.abs(p.integrated + 16) <= 1, `a piece off −16 LUFS: ${report}`);
      assert.ok(p.truePeak <= -1, `a piece peaking above −1 dBTP: ${report}`);
    }
    const whole = await ebur128(bytes);
    assert.ok(Math.abs(whole.integrated + 16) <= 1 && whole.truePeak <= -1, JSON.stringify(whole));
  });
});
