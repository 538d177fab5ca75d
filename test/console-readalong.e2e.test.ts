// Subtitles and read-along in the console's player, in real Chromium: while a dialogue task is
// generated its cues grow on the element's text track (from the growing timestamps.json) and the
// caption area shows the cue playing; once generated, the WebVTT <track> loads with one cue per
// sentence; the highlighted word follows currentTime; a click on a word seeks to its start; the
// SRT and WebVTT download links answer with their types; the text fits a narrow page.
// Screenshots go to test-output/console-readalong/.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Browser, Page } from 'playwright-core';
import type { VoiceBinding } from '../src/audio/engines/engine.js';
import {
  chromiumMissing,
  launchChromium,
  paced,
  untilAudio,
  untilPage,
  watchPage,
} from './helpers/console-browser.js';
import { startTestApp, type TestApp } from './helpers/test-app.js';
import { makeTinyVits } from './helpers/tiny-vits.js';

const OUTPUT = join(process.cwd(), 'test-output', 'console-readalong');
const WIDE = { width: 1280, height: 900 };
const NARROW = { width: 390, height: 844 };

/** Short sentences: each fits one cue (two lines of 42 characters, under 7 s). */
const DIALOGUE = [
  '<A>Good evening, and welcome to the show. It is a quiet night on the coast.',
  '<B>Thank you for having me. I have brought a few old stories.',
  '<A>Then let us begin with the oldest one.',
].join(' ');

interface Stamps {
  complete: boolean;
  sentences: { content: number; start: number; end: number; text: string; words: Word[] }[];
  words: (Word & { sentence: number })[];
}
interface Word {
  start: number;
  end: number;
  text: string;
}

describe('console subtitles and read-along in Chromium', { skip: chromiumMissing }, () => {
  let t: TestApp;
  let modelsDir = '';
  let browser: Browser;
  let page: Page;
  let pace: number | null = null;
  let taskId = '';
  const cspViolations: string[] = [];
  const pageLog: string[] = [];

  async function call<T>(path: string): Promise<T> {
    const res = await fetch(`${t.baseUrl}${path}`, { headers: { authorization: `Bearer ${t.key}` } });
    const text = await res.text();
    assert.ok(res.ok, `${path}: ${res.status} ${text}`);
    return JSON.parse(text) as T;
  }

  async function status(id: string): Promise<string> {
    return (await call<{ data: { status: string } }>(`/api/tts/generate/${id}`)).data.status;
  }

  /** Cues of the WebVTT file (each has one `-->` line). */
  function vttCues(vtt: string): number {
    return vtt.split('\n').filter((line) => line.includes(' --> ')).length;
  }

  before(async () => {
    await mkdir(OUTPUT, { recursive: true });
    // A neural voice (the tests' tiny model) is timed per sentence: its model gives no durations.
    modelsDir = mkdtempSync(join(tmpdir(), 'voicegen-readalong-models-'));
    makeTinyVits(modelsDir, 'tiny', 1);
    t = await startTestApp({
      listen: true,
      env: { RATE_LIMIT_MAX: '100000', STREAM_RATE_LIMIT_MAX: '100000', MODELS_DIR: modelsDir },
    });
    const registry = t.app.services.synthesis;
    const engineFor = registry.engineFor.bind(registry);
    registry.engineFor = (binding: VoiceBinding) => paced(engineFor(binding), () => pace);
    for (const [name, variant] of [
      ['Keeper', 'm3'],
      ['Visitor', 'f3'],
    ] as const) {
      await t.app.services.voices.create(t.accountId, {
        name,
        engine: { engine: 'espeak', voice: 'en-us', variant },
      });
    }
    browser = await launchChromium(['--autoplay-policy=no-user-gesture-required']);
    page = await browser.newPage({ viewport: WIDE });
    await watchPage(page, cspViolations, pageLog);
  });

  after(async () => {
    await browser?.close();
    await t?.close();
    if (modelsDir !== '') rmSync(modelsDir, { recursive: true, force: true });
  });

  test('live: cues grow on the text track while the task is generated', async () => {
    await page.goto(`${t.baseUrl}/#key=${t.key}`);
    await untilPage(page, `document.querySelectorAll('#voice-a option').length > 1`, 15_000);
    await page.locator('#voice-a').selectOption({ label: 'Keeper' });
    await page.locator('#voice-b').selectOption({ label: 'Visitor' });
    await page.getByLabel('Text', { exact: true }).fill(DIALOGUE);
    pace = 1;
    await page.getByRole('button', { name: 'Generate' }).click();
    await untilAudio(page, `el.src.includes('stream.mp3') && el.textTracks[0]?.cues?.length > 0`, 30_000);
    const { items } = await t.app.services.tasks.list(t.accountId, {});
    taskId = items[0]?.id ?? '';
    const counts: number[] = [];
    let shot = false;
    while ((await status(taskId)) !== 'generated') {
      counts.push(await page.evaluate<number>(`document.getElementById('audio').textTracks[0].cues.length`));
      // While generating: the caption shows the cue playing, its speaker named in a dialogue, and
      // the read-along marks the word playing.
      const live = await page.evaluate<{ caption: string; word: string | null }>(`({
        caption: document.getElementById('caption').textContent,
        word: document.querySelector('#readalong .word.playing')?.textContent ?? null,
      })`);
      if (!shot && live.caption !== '' && live.word !== null) {
        assert.match(live.caption, /^[AB]: /);
        await page.screenshot({ path: join(OUTPUT, '1-live-wide.png') });
        shot = true;
      }
      await sleep(400);
    }
    pace = null;
    assert.ok(counts.length > 1, 'sampled while generating');
    assert.ok(
      counts.some((n) => n < Math.max(...counts)),
      `the live cues grew (${counts.join(', ')})`,
    );
    assert.ok(
      counts.every((n, i) => i === 0 || n >= (counts[i - 1] ?? 0)),
      'never shrank',
    );
    assert.ok(shot, 'a caption and a marked word while the task was generated');

    // Generated: the WebVTT <track> takes over, fetched once, one cue per sentence.
    const stamps = await call<Stamps>(`/api/tts/generate/${taskId}/timestamps.json`);
    assert.equal(stamps.sentences.length, 5);
    await untilAudio(
      page,
      `el.querySelector('track')?.readyState === 2 && el.textTracks[0].cues?.length > 0`,
      15_000,
    );
    const vtt = await (
      await fetch(`${t.baseUrl}/api/tts/generate/${taskId}/subtitles.vtt?auth=${await token()}`)
    ).text();
    assert.equal(
      await page.evaluate<number>(`document.getElementById('audio').textTracks[0].cues.length`),
      vttCues(vtt),
    );
    assert.equal(vttCues(vtt), stamps.sentences.length, 'one cue per sentence');
  });

  async function token(): Promise<string> {
    const detail = await call<{ data: { streamUrl: string } }>(`/api/tts/generate/${taskId}?stream=true`);
    return new URL(detail.data.streamUrl).searchParams.get('auth') ?? '';
  }

  test('finished: the track loads and the highlighted word follows currentTime', async () => {
    await page.reload();
    await page.locator('#tasks li').first().getByRole('button', { name: 'Play' }).click();
    await untilAudio(page, `el.src.includes('audio.mp3') && el.readyState >= 1`, 15_000);
    await untilAudio(page, `el.querySelector('track')?.readyState === 2`, 15_000);
    await page.evaluate(`document.getElementById('audio').pause()`);
    const stamps = await call<Stamps>(`/api/tts/generate/${taskId}/timestamps.json`);
    assert.equal(stamps.complete, true);
    assert.equal(
      await page.evaluate<number>(`document.getElementById('audio').textTracks[0].cues.length`),
      stamps.sentences.length,
    );
    assert.ok(stamps.words.length > 20, 'espeak-ng times words');
    // Every sentence's words are in the text as buttons; speakers named on the dialogue's lines.
    assert.equal(await page.locator('#readalong .word').count(), stamps.words.length);
    const names = await page.evaluate<string[]>(
      `[...document.querySelectorAll('#readalong .line strong')].map((s) => s.textContent)`,
    );
    assert.deepEqual(names, ['Keeper: ', 'Visitor: ', 'Keeper: ']);

    const picks = [0, 7, Math.floor(stamps.words.length / 2), stamps.words.length - 1];
    for (const n of picks) {
      const word = stamps.words[n];
      assert.ok(word);
      await page.evaluate(`document.getElementById('audio').currentTime = ${String(word.start)}`);
      await untilPage(
        page,
        `(() => {
          const w = document.querySelectorAll('#readalong .word')[${String(n)}];
          return w.classList.contains('playing') && w.getAttribute('aria-current') === 'true'
            && document.querySelectorAll('#readalong .word.playing').length === 1;
        })()`,
        5_000,
      ).catch(async (err: unknown) => {
        const seen = await page.evaluate<unknown>(`({
          currentTime: document.getElementById('audio').currentTime,
          paused: document.getElementById('audio').paused,
          playing: document.querySelector('#readalong .word.playing')?.textContent ?? null,
        })`);
        throw new Error(`word ${String(n)} ${JSON.stringify(word)}: ${JSON.stringify(seen)}`, { cause: err });
      });
      assert.equal(await page.locator('#readalong .word.playing').innerText(), word.text);
      // The caption shows that sentence's cue.
      const sentence = stamps.sentences[word.sentence];
      assert.ok((await page.locator('#caption').innerText()).endsWith(sentence?.text ?? '?'));
    }
    await page.screenshot({ path: join(OUTPUT, '2-finished-wide.png') });

    // A click on a word plays from its start.
    const target = stamps.words[12];
    assert.ok(target);
    await page.evaluate(`(() => {
      const el = document.getElementById('audio');
      el.addEventListener('seeked', () => (window.seekedTo = el.currentTime), { once: true });
    })()`);
    await page.locator('#readalong .word').nth(12).click();
    await untilPage(page, `window.seekedTo !== undefined`, 5_000);
    const seekedTo = await page.evaluate<number>(`window.seekedTo`);
    assert.ok(
      Math.abs(seekedTo - target.start) < 0.03,
      `seeked to ${String(seekedTo)}, not ${String(target.start)}`,
    );
    await untilAudio(page, `!el.paused && el.currentTime > ${String(target.start)}`, 5_000);
    await page.evaluate(`document.getElementById('audio').pause()`);

    // One tab stop for the text: the word clicked; arrow keys move to the next and previous words.
    const focused = `[...document.querySelectorAll('#readalong .word')].indexOf(document.activeElement)`;
    assert.equal(await page.evaluate<number>(focused), 12);
    await page.keyboard.press('ArrowRight');
    assert.equal(await page.evaluate<number>(focused), 13);
    await page.keyboard.press('Home');
    assert.equal(await page.evaluate<number>(focused), 0);
    assert.equal(await page.locator('#readalong .word[tabindex="0"]').count(), 1);
  });

  test('SRT and WebVTT download links', async () => {
    for (const [id, type, start] of [
      ['download-srt', /^application\/x-subrip/, /^1\r?\n00:00:0/],
      ['download-vtt', /^text\/vtt/, /^WEBVTT/],
    ] as const) {
      const href = await page.evaluate<string>(`document.getElementById('${id}').href`);
      assert.ok(await page.locator(`#${id}`).isVisible());
      const res = await fetch(href);
      assert.equal(res.status, 200, href);
      assert.match(res.headers.get('content-type') ?? '', type);
      assert.match(await res.text(), start);
    }
  });

  test('a voice timed per sentence: the sentence playing is marked', async () => {
    const neural = await t.app.services.voices.create(t.accountId, {
      name: 'Susan',
      engine: { engine: 'neural', model: 'tiny', voice: '0' },
    });
    const res = await fetch(`${t.baseUrl}/api/tts/generate`, {
      method: 'POST',
      headers: { authorization: `Bearer ${t.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        contents: [{ type: 'text', voiceId: neural.id, text: 'The lamp was lit. The ship came home.' }],
      }),
    });
    assert.equal(res.status, 200);
    const id = ((await res.json()) as { data: { id: string } }).data.id;
    while ((await status(id)) !== 'generated') await sleep(200);
    const stamps = await call<Stamps>(`/api/tts/generate/${id}/timestamps.json`);
    assert.equal(stamps.sentences.length, 2);
    assert.equal(stamps.words.length, 0, 'the neural voice is timed per sentence');
    await page.reload();
    await page.locator('#tasks li').first().getByRole('button', { name: 'Play' }).click();
    await untilAudio(page, `el.src.includes('audio.mp3') && el.readyState >= 1`, 15_000);
    await untilAudio(page, `el.querySelector('track')?.readyState === 2`, 15_000);
    await page.evaluate(`document.getElementById('audio').pause()`);
    assert.equal(await page.locator('#readalong .word').count(), 2, 'one button per sentence');
    const second = stamps.sentences[1];
    assert.ok(second);
    await page.evaluate(`document.getElementById('audio').currentTime = ${String(second.start)}`);
    await page.locator('#readalong .sentence.playing .word.playing').waitFor();
    assert.equal(await page.locator('#readalong .word.playing').innerText(), second.text);
    assert.equal(await page.locator('#readalong .line strong').count(), 0, 'one voice: no names');
    await page.locator('#player').screenshot({ path: join(OUTPUT, '3-sentences.png') });
  });

  test('the read-along fits a narrow page', async () => {
    await page.setViewportSize(NARROW);
    await sleep(300);
    const fit = await page.evaluate<{ page: number; width: number }>(
      `({ page: document.documentElement.scrollWidth, width: innerWidth })`,
    );
    assert.ok(fit.page <= fit.width, 'no sideways scrolling');
    await page.locator('#readalong-box').scrollIntoViewIfNeeded();
    await page.locator('#player').screenshot({ path: join(OUTPUT, '4-narrow.png') });
    await page.setViewportSize(WIDE);
  });

  test('no Content-Security-Policy violation in any of it', () => {
    assert.deepEqual(cspViolations, [], pageLog.join('\n'));
  });
});
