// Subtitles and timestamps of a dialogue task through HTTP on the real app: the times are checked
// against what ffmpeg decodes from the MP3s we serve (silencedetect at the content boundaries),
// the SRT and WebVTT against real parsers and ffmpeg's muxer, and their authorisation.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { parseSync } from 'subtitle';
import webvtt from 'webvtt-parser';
import { decodeToPcm, silenceDetect } from './helpers/audio-check.js';
import { bearer, createVoice, startTestApp, type TestApp } from './helpers/test-app.js';

const run = promisify(execFile);

interface Word {
  start: number;
  end: number;
  text: string;
}
interface Sentence extends Word {
  content: number;
  voiceId: string;
  speaker: string | null;
  words: Word[];
}
interface Timestamps {
  taskId: string;
  content: number | null;
  status: string;
  complete: boolean;
  sentences: Sentence[];
  words: (Word & { content: number; sentence: number })[];
}
interface TaskBody {
  id: string;
  status: string;
  metadata: { audio?: string; srt?: string; contents: { index: number; audio?: string }[] };
}

const TOLERANCE = 0.06;

function near(actual: number, expected: number, what: string): void {
  assert.ok(
    Math.abs(actual - expected) <= TOLERANCE,
    `${what}: ${actual} is not within 60 ms of ${expected}`,
  );
}

describe('subtitles and timestamps', () => {
  let t: TestApp;
  let dir: string;
  let voiceA: string;
  let voiceB: string;

  const get = (url: string, headers: Record<string, string> = {}) =>
    t.app.http.inject({ method: 'GET', url, headers });
  const path = (url: string): string => url.replace(/^https?:\/\/[^/]+/, '');

  before(async () => {
    t = await startTestApp();
    dir = await mkdtemp(join(tmpdir(), 'voicegen-timings-'));
    voiceA = await createVoice(t.app, t.key, { name: 'Ann', engine: { engine: 'espeak', voice: 'en-us' } });
    voiceB = await createVoice(t.app, t.key, { name: 'Bob', engine: { engine: 'flite', voice: 'slt' } });
  });
  after(async () => {
    await t.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('times a dialogue of several contents and speakers on the audio we serve, growing while generated', async () => {
    const created = await t.app.http.inject({
      method: 'POST',
      url: '/api/tts/generate',
      headers: bearer(t.key),
      payload: {
        text:
          '<Ann>Good morning, Bob. The weather is lovely today.' +
          '<Bob>Is it? I had not noticed.' +
          '<Ann>Let us walk to the river. [pause:1.5s] It is not far.',
        splitter: {
          '<Ann>': { voiceId: voiceA, interval: 1, srt: true },
          '<Bob>': { voiceId: voiceB, interval: 1 },
        },
      },
    });
    assert.equal(created.statusCode, 200, created.body);
    const id = created.json<{ data: TaskBody }>().data.id;
    const task0 = created.json<{ data: TaskBody }>().data;
    assert.ok(task0.metadata.srt !== undefined, 'srt: true gives metadata.srt');
    const auth = new URL(task0.metadata.srt).searchParams.get('auth') ?? '';
    assert.equal(new URL(task0.metadata.srt).pathname, `/api/tts/generate/${id}/subtitles.srt`);

    // Read while the task generates: every read is a prefix of the final result.
    const snapshots: Timestamps[] = [];
    let task: TaskBody;
    for (;;) {
      const res = await get(`/api/tts/generate/${id}/timestamps.json?auth=${auth}`);
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(
        res.headers['cache-control'],
        res.json<Timestamps>().complete ? 'private, no-cache' : 'no-store',
      );
      snapshots.push(res.json<Timestamps>());
      task = (await get(`/api/tts/generate/${id}`, bearer(t.key))).json<{ data: TaskBody }>().data;
      if (task.status === 'failed') assert.fail(`task failed: ${JSON.stringify(task)}`);
      if (task.status === 'generated' && task.metadata.audio !== undefined) break;
      await new Promise((resolve) => setTimeout(resolve, 30));
    }
    const final = (await get(`/api/tts/generate/${id}/timestamps.json`, bearer(t.key))).json<Timestamps>();
    assert.equal(final.complete, true);
    assert.equal(final.content, null);
    assert.ok(
      snapshots.some(
        (s) => !s.complete && s.sentences.length > 0 && s.sentences.length < final.sentences.length,
      ),
      'some read saw part of the timings while the task was generated',
    );
    for (const snapshot of snapshots) {
      assert.deepEqual(snapshot.sentences, final.sentences.slice(0, snapshot.sentences.length), 'a prefix');
    }

    // Sentences: six in three contents (a pause tag between the last two), with voice and speaker.
    assert.deepEqual(
      final.sentences.map((s) => [s.content, s.speaker, s.text]),
      [
        [0, '<Ann>', 'Good morning, Bob.'],
        [0, '<Ann>', 'The weather is lovely today.'],
        [1, '<Bob>', 'Is it?'],
        [1, '<Bob>', 'I had not noticed.'],
        [2, '<Ann>', 'Let us walk to the river.'],
        [2, '<Ann>', 'It is not far.'],
      ],
    );
    assert.deepEqual(
      final.sentences.map((s) => s.voiceId),
      [voiceA, voiceA, voiceB, voiceB, voiceA, voiceA],
    );
    // Words (espeak times them): ordered, not overlapping, inside their sentence.
    for (const s of final.sentences) {
      assert.ok(s.end > s.start, `${s.text} has a span`);
      let previous = s.start;
      for (const w of s.words) {
        assert.ok(
          w.start >= previous && w.end >= w.start && w.end <= s.end,
          `${w.text} in ${s.text}: ${JSON.stringify(s)}`,
        );
        previous = w.end;
      }
    }
    assert.ok(
      final.sentences[0]?.words
        .map((w) => w.text)
        .join(' ')
        .startsWith('Good morning'),
    );
    assert.equal(
      final.words.length,
      final.sentences.reduce((n, s) => n + s.words.length, 0),
    );
    for (const [i, s] of final.sentences.entries())
      if (i > 0) assert.ok(s.start >= (final.sentences[i - 1]?.end ?? 0));

    // The content boundaries lie where ffmpeg hears the silence between contents.
    const fullMp3 = (await get(path(task.metadata.audio ?? ''))).rawPayload;
    const gaps = await silenceDetect(fullMp3, 0.8);
    for (const content of [0, 1]) {
      const last = final.sentences.filter((s) => s.content === content).at(-1);
      const next = final.sentences.find((s) => s.content === content + 1);
      assert.ok(last !== undefined && next !== undefined);
      const gap = gaps.find((g) => g.start < next.start && g.end > last.end);
      assert.ok(
        gap !== undefined,
        `a silence between content ${content} and ${content + 1}: ${JSON.stringify(gaps)}`,
      );
      near(last.end, gap.start, `end of content ${content} in the full audio`);
      near(next.start, gap.end, `start of content ${content + 1} in the full audio`);
    }
    // The pause tag is a silence of its own: the sentences around it end and start at its edges.
    const [beforePause, afterPause] = final.sentences.slice(4);
    assert.ok(beforePause !== undefined && afterPause !== undefined);
    const pause = gaps.find((g) => g.start < afterPause.start && g.end > beforePause.end);
    assert.ok(pause !== undefined, `the pause is a silence: ${JSON.stringify(gaps)}`);
    assert.ok(pause.end - pause.start >= 1.5, `the pause lasts 1.5 s or more: ${JSON.stringify(pause)}`);
    near(beforePause.end, pause.start, 'end of the sentence before the pause');
    near(afterPause.start, pause.end, 'start of the sentence after the pause');

    // Each content's own MP3: its times start at its own first sample.
    for (const content of task.metadata.contents) {
      const own = (
        await get(`/api/tts/generate/${id}/${content.index}/timestamps.json?auth=${auth}`)
      ).json<Timestamps>();
      assert.equal(own.content, content.index);
      const mine = final.sentences.filter((s) => s.content === content.index);
      assert.deepEqual(
        own.sentences.map((s) => s.text),
        mine.map((s) => s.text),
      );
      const shift = (mine[0]?.start ?? 0) - (own.sentences[0]?.start ?? 0);
      for (const [i, s] of own.sentences.entries())
        near(s.start + shift, mine[i]?.start ?? NaN, 'same offsets');
      const mp3 = (await get(path(content.audio ?? ''))).rawPayload;
      const quiet = await silenceDetect(mp3, 0.02);
      const first = own.sentences[0];
      const last = own.sentences.at(-1);
      assert.ok(first !== undefined && last !== undefined);
      const lead = quiet.find((g) => g.start <= 0.001);
      near(first.start, lead?.end ?? 0, `start of content ${content.index} in its MP3`);
      // Where the voice stops: the silence that runs to the end of the decode, or its end (the
      // engine's trailing pause can be shorter than silencedetect's window).
      const decodedEnd = (await decodeToPcm(mp3)).length / 44100;
      const tail = quiet.find((g) => g.start > last.start && g.end >= decodedEnd - 0.001);
      near(last.end, tail?.start ?? decodedEnd, `end of content ${content.index} in its MP3`);
    }

    // SRT and WebVTT: one cue a sentence here (each is short), speakers named, real parsers.
    const srt = await get(`/api/tts/generate/${id}/subtitles.srt?auth=${auth}`);
    assert.equal(srt.statusCode, 200);
    assert.match(String(srt.headers['content-type']), /^application\/x-subrip/);
    const cues = parseSync(srt.body).filter((n) => n.type === 'cue');
    assert.equal(cues.length, final.sentences.length);
    for (const [i, cue] of cues.entries()) {
      assert.equal(cue.data.start, Math.round((final.sentences[i]?.start ?? 0) * 1000));
      assert.match(cue.data.text, i === 2 || i === 3 ? /^Bob: / : /^Ann: /);
    }
    const vtt = await get(`/api/tts/generate/${id}/subtitles.vtt`, bearer(t.key));
    assert.equal(vtt.statusCode, 200);
    assert.match(String(vtt.headers['content-type']), /^text\/vtt/);
    const tree = new webvtt.WebVTTParser().parse(vtt.body, 'subtitles');
    assert.deepEqual(tree.errors, []);
    assert.equal(tree.cues.length, final.sentences.length);
    assert.match(vtt.body, /<v Bob>Is it\?/);
    const contentVtt = await get(`/api/tts/generate/${id}/1/subtitles.vtt?auth=${auth}`);
    assert.equal(new webvtt.WebVTTParser().parse(contentVtt.body, 'subtitles').cues.length, 2);

    // ffmpeg takes the SRT beside the MP3 (muxed as MP4 text subtitles).
    const mp3Path = join(dir, 'audio.mp3');
    const srtPath = join(dir, 'subs.srt');
    await writeFile(mp3Path, fullMp3);
    await writeFile(srtPath, srt.body);
    const mp4 = join(dir, 'out.mp4'); // the ipod muxer of .m4a takes no MP3 audio
    await run('ffmpeg', [
      '-nostdin',
      '-v',
      'error',
      '-y',
      '-i',
      mp3Path,
      '-i',
      srtPath,
      '-map',
      '0',
      '-map',
      '1',
      '-c:a',
      'copy',
      '-c:s',
      'mov_text',
      mp4,
    ]);
    const { stdout } = await run('ffprobe', [
      '-v',
      'error',
      '-show_entries',
      'stream=codec_name',
      '-of',
      'csv=p=0',
      mp4,
    ]);
    assert.deepEqual(stdout.trim().split('\n'), ['mp3', 'mov_text']);
  });

  it('answers subtitles to the auth token or the owner key, and refuses others', async () => {
    const created = await t.app.http.inject({
      method: 'POST',
      url: '/api/tts/generate',
      headers: bearer(t.key),
      payload: { contents: [{ text: 'Short and sweet.', voiceId: voiceA }] },
    });
    const task = created.json<{ data: TaskBody & { streamUrl?: string } }>().data;
    assert.equal(task.metadata.srt, undefined, 'no srt asked: no metadata.srt');
    const detail = (await get(`/api/tts/generate/${task.id}?stream=true`, bearer(t.key))).json<{
      data: { streamUrl: string };
    }>().data;
    const auth = new URL(detail.streamUrl).searchParams.get('auth') ?? '';
    const base = `/api/tts/generate/${task.id}`;
    for (const file of ['subtitles.srt', 'subtitles.vtt', 'timestamps.json', '0/subtitles.srt']) {
      assert.equal((await get(`${base}/${file}?auth=${auth}`)).statusCode, 200, file);
      const wrong = await get(`${base}/${file}?auth=${auth.slice(0, -2)}xx`);
      assert.equal(wrong.statusCode, 403, file);
      assert.equal(wrong.json<{ code: string }>().code, 'AUTH_FORBIDDEN');
      const none = await get(`${base}/${file}`);
      assert.equal(none.statusCode, 401);
      assert.equal(none.json<{ code: string }>().code, 'AUTH_UNAUTHORIZED');
    }
    const other = await t.newAccount();
    assert.equal((await get(`${base}/subtitles.srt`, bearer(other.key))).statusCode, 404);
    assert.equal((await get(`${base}/subtitles.srt`, bearer(t.key))).statusCode, 200);
    assert.equal((await get(`${base}/7/subtitles.srt?auth=${auth}`)).statusCode, 404);
    assert.equal((await get(`${base}/01/subtitles.srt?auth=${auth}`)).statusCode, 404);
    const repeated = await get(`${base}/subtitles.srt?auth=${auth}&auth=${auth}`);
    assert.equal(repeated.statusCode, 401);
    assert.equal((await get(`/api/tts/generate/nope/subtitles.srt?auth=${auth}`)).statusCode, 404);
  });

  it('puts the SRT URL in both response-data headers of a one-shot with srt: true, and only then', async () => {
    const withSrt = await t.app.http.inject({
      method: 'POST',
      url: '/api/tts/simple-generate',
      headers: bearer(t.key),
      payload: { text: 'Subtitled.', voiceId: voiceA, srt: true, direct_stream: true },
    });
    assert.equal(withSrt.statusCode, 200, withSrt.body);
    for (const header of ['x-service-response-data', 'x-reecho-response-data']) {
      const info = JSON.parse(String(withSrt.headers[header])) as { id: string; srt?: string };
      assert.equal(
        new URL(info.srt ?? 'http://x/').pathname,
        `/api/tts/generate/${info.id}/subtitles.srt`,
        header,
      );
    }
    const viaGet = await get(
      `/api/tts/simple-generate.mp3?text=Subtitled%20by%20query.&voiceId=${voiceA}&srt=true`,
      bearer(t.key),
    );
    assert.equal(viaGet.statusCode, 200, viaGet.body);
    for (const header of ['x-service-response-data', 'x-reecho-response-data']) {
      const info = JSON.parse(String(viaGet.headers[header])) as { id: string; srt?: string };
      assert.match(
        info.srt ?? '',
        new RegExp(`/api/tts/generate/${info.id}/subtitles\\.srt\\?auth=`),
        header,
      );
    }
    const without = await t.app.http.inject({
      method: 'POST',
      url: '/api/tts/simple-generate',
      headers: bearer(t.key),
      payload: { text: 'Plain.', voiceId: voiceA, direct_stream: true },
    });
    for (const header of ['x-service-response-data', 'x-reecho-response-data']) {
      assert.equal((JSON.parse(String(without.headers[header])) as { srt?: string }).srt, undefined);
    }
    const json = await t.app.http.inject({
      method: 'POST',
      url: '/api/tts/simple-generate',
      headers: bearer(t.key),
      payload: { text: 'Subtitled too.', voiceId: voiceA, srt: true },
    });
    assert.equal(json.statusCode, 200, json.body);
    const data = json.json<{ data: { id: string; srt?: string } }>().data;
    const srt = await get(path(data.srt ?? ''));
    assert.equal(srt.statusCode, 200);
    assert.match(srt.body, /^1\n00:00:00,\d{3} --> 00:00:0\d,\d{3}\nSubtitled too\.\n$/);
  });
});
