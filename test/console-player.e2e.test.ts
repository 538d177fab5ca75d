// The console's player and forms in real Chromium under the usual autoplay policy (audio only
// after a user gesture): a first-run link taken by an open tab; a remote-engine voice and a neural voice (a model folder of MODELS_DIR) created from
// the catalogue-driven form; the dialogue mode chosen from the text's markers; Generate starting
// the audio by itself, the player scrolled into view; a clear Play button where the browser
// refuses audio; one player whose timeline fits a wide and a narrow page for an 80-piece dialogue,
// with every name in an accessible list; task list entries with a snippet of their text.
// Screenshots go to test-output/console-player/.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Browser, CDPSession, Page } from 'playwright-core';
import type { VoiceBinding } from '../src/audio/engines/engine.js';
import {
  chromiumMissing,
  launchChromium,
  paced,
  untilAudio,
  untilPage,
  watchPage,
} from './helpers/console-browser.js';
import { startFaultUpstream, toneMp3, type FaultUpstream } from './helpers/fault-upstream.js';
import { startTestApp, type TestApp } from './helpers/test-app.js';
import { makeTinyVits } from './helpers/tiny-vits.js';

const OUTPUT = join(process.cwd(), 'test-output', 'console-player');
const NARRATOR = 'Narrator of the northern coast';
const WIDE = { width: 1280, height: 900 };
const NARROW = { width: 390, height: 844 };

const SHORT_DIALOGUE = [
  '<A>Good evening, and welcome to the late show about lighthouses and the people who keep them.',
  '<B>Thank you. It is a pleasure to be here, and I have brought a few stories from the northern coast.',
  '<A>Let us start with the oldest one. Who kept the light before the war?',
].join(' ');

/** Eighty short utterances, alternating between the two inline markers. */
const LONG_DIALOGUE = Array.from(
  { length: 80 },
  (_, n) => `${n % 2 === 0 ? '<A>' : '<B>'}Line ${String(n + 1)}.`,
).join(' ');

interface Detail {
  status: string;
  metadata: { contents: { text: string; duration?: number; interval?: number }[] };
}

/**
 * Evaluates in the page through the DevTools protocol *without* a user gesture: Playwright's own
 * evaluate and locators run with one, which would let the page play audio by itself.
 */
async function evaluateQuietly<T>(cdp: CDPSession, expression: string): Promise<T> {
  const answer = await cdp.send('Runtime.evaluate', { expression, returnByValue: true });
  if (answer.exceptionDetails) throw new Error(`${expression}: ${answer.exceptionDetails.text}`);
  return answer.result.value as T;
}

async function untilQuietly(cdp: CDPSession, expression: string, timeout: number): Promise<void> {
  const deadline = Date.now() + timeout;
  while (!(await evaluateQuietly<boolean>(cdp, `Boolean(${expression})`))) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeout} ms waiting for ${expression}`);
    await sleep(100);
  }
}

describe('console player and forms in Chromium', { skip: chromiumMissing }, () => {
  let t: TestApp;
  let upstream: FaultUpstream;
  let tone: Buffer;
  let browser: Browser;
  let page: Page;
  /** Synthesis speed (audio seconds per second) while a test needs a task still generating; null: full speed. */
  let pace: number | null = null;
  let narrator = '';
  let guest = '';
  let interview = '';
  /** MODELS_DIR of the service: one tiny neural model folder the suite makes itself. */
  let modelsDir = '';
  const cspViolations: string[] = [];
  const pageLog: string[] = [];

  /** A JSON call to the service with the account's key. */
  async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await fetch(`${t.baseUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${t.key}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const answer = (await res.json()) as { data: T; message?: string };
    assert.ok(res.ok, `${method} ${path}: ${res.status} ${answer.message ?? ''}`);
    return answer.data;
  }

  async function newestTask(): Promise<{ id: string; detail: Detail }> {
    const { items } = await t.app.services.tasks.list(t.accountId, {});
    const id = items[0]?.id ?? '';
    return { id, detail: await call<Detail>('GET', `/api/tts/generate/${id}?stream=false`) };
  }

  async function untilGenerated(id: string, timeout: number): Promise<Detail> {
    const deadline = Date.now() + timeout;
    for (;;) {
      const detail = await call<Detail>('GET', `/api/tts/generate/${id}?stream=false`);
      if (detail.status === 'generated') return detail;
      assert.ok(['pending', 'processing'].includes(detail.status), `task ${id}: ${detail.status}`);
      if (Date.now() > deadline) throw new Error(`task ${id} still ${detail.status} after ${timeout} ms`);
      await sleep(200);
    }
  }

  before(async () => {
    await mkdir(OUTPUT, { recursive: true });
    tone = await toneMp3(1);
    upstream = await startFaultUpstream();
    upstream.handle((_request, res) => void res.writeHead(200, { 'content-type': 'audio/mpeg' }).end(tone));
    modelsDir = await mkdtemp(join(tmpdir(), 'voicegen-console-models-'));
    makeTinyVits(modelsDir, 'tiny-neural', 2);
    t = await startTestApp({
      listen: true,
      env: {
        MODELS_DIR: modelsDir,
        RATE_LIMIT_MAX: '100000',
        STREAM_RATE_LIMIT_MAX: '100000',
        REMOTE_ENGINES: JSON.stringify({
          studio: {
            baseUrl: upstream.url,
            voices: [{ id: 'nova', name: 'Nova', languages: ['en-us'], gender: 'female' }],
          },
        }),
      },
    });
    const registry = t.app.services.synthesis;
    const engineFor = registry.engineFor.bind(registry);
    registry.engineFor = (binding: VoiceBinding) => paced(engineFor(binding), () => pace);
    // Two voices and a saved configuration, made before the console signs in.
    narrator = (
      await call<{ id: string }>('POST', '/api/voice', {
        name: NARRATOR,
        engine: { engine: 'espeak', voice: 'en-us', variant: 'm3' },
      })
    ).id;
    guest = (
      await call<{ id: string }>('POST', '/api/voice', {
        name: 'Guest',
        engine: { engine: 'espeak', voice: 'en-us', variant: 'f3' },
      })
    ).id;
    interview = (
      await call<{ id: string }>('POST', '/api/splitter', {
        name: 'Interview',
        config: {
          '<Q>': { voiceId: narrator },
          '<R>': { voiceId: guest },
          splitterMarks: ['[]'],
          lookupTable: { narrator: { tags: ['narrator'], voiceId: narrator } },
          fallbackConfig: { voiceId: narrator },
        },
      })
    ).id;
    browser = await launchChromium(['--autoplay-policy=document-user-activation-required']);
    page = await browser.newPage({ viewport: WIDE });
    await watchPage(page, cspViolations, pageLog);
  });

  after(async () => {
    await browser?.close();
    await t?.close();
    await upstream?.close();
    if (modelsDir !== '') await rm(modelsDir, { recursive: true, force: true });
  });

  test('a first-run link pasted into an open tab signs that tab in, without a reload', async () => {
    await page.goto(`${t.baseUrl}/`);
    await page.locator('#sign-in').waitFor();
    await page.evaluate(`window.sameDocument = true`);
    const other = await t.newAccount('second-account');
    // Only the fragment changes: the browser loads nothing, the page hears a hashchange.
    await page.goto(`${t.baseUrl}/#key=${other.key}`);
    await page.locator('#who', { hasText: 'Signed in as second-account' }).waitFor();
    assert.equal(await page.evaluate(`window.sameDocument`), true, 'the open page took the link');
    assert.equal(new URL(page.url()).hash, '', 'the key leaves the address bar');
    assert.equal(await page.evaluate<string | null>(`sessionStorage.getItem('voicegen.key')`), other.key);
    // Another account's link in the same tab: the tab switches to it.
    await page.goto(`${t.baseUrl}/#key=${t.key}`);
    await page.locator('#who', { hasText: /Signed in as acct-/ }).waitFor();
    await page.locator('#voices li', { hasText: NARRATOR }).waitFor();
    assert.equal(await page.evaluate(`window.sameDocument`), true);
    // Nothing of the other account's session stays: its splitter template gives way to this one's.
    await untilPage(
      page,
      `document.getElementById('splitter-config').value.includes(${JSON.stringify(guest)})`,
      5_000,
    );
    assert.equal(await page.evaluate<string | null>(`sessionStorage.getItem('voicegen.key')`), t.key);
  });

  test('a remote-engine voice from the catalogue-driven voice form', async () => {
    // The operator's endpoint is an engine of the catalogue, grouped under its provider.
    await page.locator('#voice-engine optgroup[label^="remote"] option[value="studio"]').waitFor({
      state: 'attached',
    });
    await page.locator('#voice-engine').selectOption('studio');
    await page.locator('#voice-codes option[value="nova"]').waitFor({ state: 'attached' });
    assert.equal(await page.locator('#voice-code').inputValue(), 'nova', 'its listed voice first');
    assert.equal(await page.locator('#voice-code').getAttribute('placeholder'), 'any voice name it accepts');
    assert.match(await page.locator('#voice-code-hint').innerText(), /\(others accepted\)/);
    // A voice the endpoint accepts without listing it, and its model (a setting of the catalogue).
    await page.getByLabel('Name', { exact: true }).fill('Studio voice');
    await page.getByLabel('Engine voice').fill('alloy');
    await page.getByLabel('Model').fill('tts-1-hd');
    await page.getByRole('button', { name: 'Create voice' }).click();
    const card = page.locator('#voices li', { hasText: 'Studio voice' });
    await card.waitFor();
    assert.match(await card.innerText(), /studio: alloy \(model tts-1-hd\)/);
    const created = (await t.app.services.voices.list(t.accountId, {})).items.find(
      (v) => v.name === 'Studio voice',
    );
    assert.deepEqual(created?.engine, {
      engine: 'remote',
      endpoint: 'studio',
      voice: 'alloy',
      model: 'tts-1-hd',
    });

    // Its preview is spoken by the endpoint, asked for that voice and model.
    let asked: Record<string, unknown> = {};
    upstream.handle(({ body }, res) => {
      asked = body;
      res.writeHead(200, { 'content-type': 'audio/mpeg' }).end(tone);
    });
    const preview = page.waitForResponse((r) => r.url().includes('/api/tts/simple-generate.mp3'));
    await card.getByRole('button', { name: 'Preview' }).click();
    assert.equal((await preview).status(), 200);
    assert.equal(asked.voice, 'alloy');
    assert.equal(asked.model, 'tts-1-hd');
    await page.locator('#voice-engine').selectOption('espeak');
  });

  test('a neural voice from a model folder of MODELS_DIR', async () => {
    // Each model folder is an engine of the catalogue, grouped under the neural provider.
    await page.locator('#voice-engine optgroup[label^="neural"] option[value="tiny-neural"]').waitFor({
      state: 'attached',
    });
    await page.locator('#voice-engine').selectOption('tiny-neural');
    await page.locator('#voice-codes option[value="1"]').waitFor({ state: 'attached' });
    await page.getByLabel('Name', { exact: true }).fill('Tiny neural');
    await page.getByLabel('Engine voice').fill('1');
    await page.getByRole('button', { name: 'Create voice' }).click();
    const card = page.locator('#voices li', { hasText: 'Tiny neural' });
    await card.waitFor();
    const created = (await t.app.services.voices.list(t.accountId, {})).items.find(
      (v) => v.name === 'Tiny neural',
    );
    assert.deepEqual(created?.engine, { engine: 'neural', model: 'tiny-neural', voice: '1' });
    // Its preview is spoken by sherpa-onnx in the service: real MP3 bytes.
    const preview = page.waitForResponse((r) => r.url().includes('/api/tts/simple-generate.mp3'));
    await card.getByRole('button', { name: 'Preview' }).click();
    const answer = await preview;
    assert.equal(answer.status(), 200);
    assert.equal(answer.headers()['content-type'], 'audio/mpeg');
    await page.screenshot({ path: join(OUTPUT, 'neural-voice.png'), fullPage: false });
    await page.locator('#voice-engine').selectOption('espeak');
  });

  test('the dialogue mode is chosen when the text has markers', async () => {
    const dialogue = page.getByLabel('Dialogue with speaker markers');
    const plain = page.getByLabel('Plain text, one voice');
    const text = page.getByLabel('Text', { exact: true });
    const splitter = page.locator('#task-splitter');
    // The sample text has <A> and <B>: dialogue from the start, saying why.
    assert.equal(await dialogue.isChecked(), true);
    assert.match(await page.locator('#mode-hint').innerText(), /<A> <B> of the inline splitter/);

    await text.fill('Just one voice, and no markers at all.');
    assert.equal(await plain.isChecked(), true);
    assert.equal(await page.locator('#dialogue-voices').isVisible(), false);
    await text.fill('<A>Hello there. <B>Hi!');
    assert.equal(await dialogue.isChecked(), true);
    assert.equal(await splitter.inputValue(), '', 'the inline splitter has these markers');
    // A mode picked by hand stands while the text keeps its markers.
    await plain.check();
    await text.fill('<A>Hello there. <B>Hi! <A>Goodbye.');
    assert.equal(await plain.isChecked(), true);

    // A saved configuration's markers: dialogue with that configuration.
    await text.fill('No markers here.');
    await text.fill('<Q>Where were you? <R>At the lighthouse.');
    assert.equal(await dialogue.isChecked(), true);
    assert.equal(await splitter.inputValue(), interview);
    assert.equal(
      await page.locator('#voice-a').isVisible(),
      false,
      'a saved splitter needs no inline voices',
    );
    assert.match(await page.locator('#mode-hint').innerText(), /<Q> <R> of the configuration Interview/);
    // A pause tag is never a marker; a bracket of the configuration's marks is.
    await text.fill('Hello [pause:1s] there.');
    assert.equal(await plain.isChecked(), true);
    await text.fill('[narrator] It was a dark night.');
    assert.equal(await dialogue.isChecked(), true);
    assert.equal(await splitter.inputValue(), interview);
    // Back to the inline markers: the inline splitter again.
    await text.fill('<A>Hello. <B>Hi.');
    assert.equal(await splitter.inputValue(), '');
    assert.equal(await page.locator('#voice-a').isVisible(), true);
    // A splitter picked by hand stays picked; markers it lacks still make the text a dialogue.
    await splitter.selectOption(interview);
    await text.fill('No markers at all.');
    assert.equal(await plain.isChecked(), true);
    await text.fill('<A>Hello. <B>Hi.');
    assert.equal(await dialogue.isChecked(), true);
    assert.equal(await splitter.inputValue(), interview);
    assert.match(await page.locator('#mode-hint').innerText(), /not of the splitter chosen/);
    await splitter.selectOption('');
  });

  test('Generate plays the task by itself as soon as it streams, the player scrolled into view', async () => {
    pace = 2;
    await page.getByLabel('Text', { exact: true }).fill(SHORT_DIALOGUE);
    await page.locator('#voice-a').selectOption({ label: NARRATOR });
    await page.locator('#voice-b').selectOption({ label: 'Guest' });
    await page.evaluate('window.scrollTo(0, 0)');
    const clicked = Date.now();
    await page.getByRole('button', { name: 'Generate' }).click();
    await untilAudio(page, `!el.paused && el.currentTime > 0.2 && el.src.includes('stream.mp3')`, 30_000);
    const startedAfter = Date.now() - clicked;
    const { id, detail } = await newestTask();
    assert.equal(detail.status, 'processing', 'the audio plays while the task is still generated');
    const generated = detail.metadata.contents.filter((c) => c.duration !== undefined).length;
    assert.ok(generated < 3, `playing before the task is done (${String(generated)} of 3 pieces)`);
    assert.equal(await page.locator('#play-gate').isVisible(), false, 'no Play button needed after a click');
    // The player is in view: its heading, controls and timeline inside the window.
    await untilPage(
      page,
      `(() => {
        const top = document.getElementById('player').getBoundingClientRect().top;
        const bottom = document.getElementById('timeline').getBoundingClientRect().bottom;
        return top >= -1 && bottom <= innerHeight;
      })()`,
      5_000,
    );
    await page.locator('.segment.playing').waitFor();
    await page.locator('#now-playing', { hasText: NARRATOR }).waitFor();
    await page.screenshot({ path: join(OUTPUT, '1-autoplay-wide.png') });
    console.log(`the audio played ${String(startedAfter)} ms after the click on Generate`);
    await untilGenerated(id, 60_000);
    pace = null;
  });

  test('one player for an 80-piece dialogue: a timeline that fits, every name listed', async () => {
    await page.getByLabel('Text', { exact: true }).fill(LONG_DIALOGUE);
    await page.getByRole('button', { name: 'Generate' }).click();
    await page.locator('#player-status', { hasText: ': generated' }).waitFor({ timeout: 120_000 });
    await page.locator('#timeline .segment:not(.pending)').nth(79).waitFor({ state: 'attached' });
    const { detail } = await newestTask();
    assert.equal(detail.metadata.contents.length, 80);

    assert.equal(await page.locator('audio').count(), 1, 'one <audio> element in the page');
    assert.equal(await page.locator('#timeline .segment').count(), 80);
    assert.equal(
      await page.locator('#timeline .segment').first().getAttribute('title'),
      `1. ${NARRATOR}: Line 1.`,
      'the whole piece on hover',
    );
    // The accessible list names every piece's voice in full, folded under its count.
    const names = await page.evaluate<string[]>(
      `[...document.querySelectorAll('#pieces li strong')].map((s) => s.textContent)`,
    );
    assert.equal(names.length, 80);
    assert.deepEqual(names.slice(0, 2), [`${NARRATOR}: `, 'Guest: '], 'full names, not cut to fit');
    assert.equal(await page.locator('#pieces-box summary').innerText(), 'Pieces (80)');

    for (const [name, viewport] of [
      ['wide', WIDE],
      ['narrow', NARROW],
    ] as const) {
      await page.setViewportSize(viewport);
      await sleep(300);
      const fit = await page.evaluate<{
        timeline: [number, number];
        right: number;
        page: number;
        width: number;
        cutLabels: number;
        shownLabels: number;
        wider: string[];
      }>(`(() => {
        const timeline = document.getElementById('timeline');
        const labels = [...timeline.querySelectorAll('.label')];
        const shown = labels.filter((l) => !l.classList.contains('cut'));
        return {
          timeline: [timeline.scrollWidth, timeline.clientWidth],
          right: timeline.getBoundingClientRect().right,
          page: document.documentElement.scrollWidth,
          width: innerWidth,
          cutLabels: shown.filter((l) => l.scrollWidth > l.clientWidth).length,
          shownLabels: shown.length,
          wider: [...document.querySelectorAll('body *')]
            .filter((e) => e.getBoundingClientRect().right > innerWidth)
            .map((e) => e.tagName + '#' + e.id),
        };
      })()`);
      assert.ok(
        fit.timeline[0] <= fit.timeline[1],
        `${name}: the timeline does not overflow (${String(fit.timeline)})`,
      );
      assert.ok(fit.right <= fit.width, `${name}: the timeline ends inside the window`);
      assert.ok(
        fit.page <= fit.width,
        `${name}: no sideways scrolling of the page (${fit.wider.join(', ')})`,
      );
      assert.equal(fit.cutLabels, 0, `${name}: a name shown on the timeline is shown whole`);
      await page.locator('#player').scrollIntoViewIfNeeded();
      await page.locator('#player').screenshot({ path: join(OUTPUT, `2-long-dialogue-${name}.png`) });
      console.log(`${name}: ${String(fit.shownLabels)} of 80 names fit on the timeline`);
    }
    await page.setViewportSize(WIDE);

    // Play from a piece in the list: the one player seeks there; the timeline and list mark it.
    await page.locator('#pieces-box summary').click();
    await page.getByRole('button', { name: 'Play from here: piece 41' }).click();
    const start = detail.metadata.contents
      .slice(0, 40)
      .reduce((sum, c) => sum + Number(c.duration ?? 0) + Number(c.interval ?? 0), 0);
    await untilAudio(page, `!el.paused && el.currentTime >= ${String(start - 0.05)}`, 15_000);
    await page.locator('#timeline .segment.playing[data-index="40"]').waitFor();
    await page.locator('#pieces li[data-index="40"][aria-current="true"]').waitFor();
    await page.locator('#now-playing', { hasText: 'Line 41.' }).waitFor();
    await page.screenshot({ path: join(OUTPUT, '3-long-dialogue-page.png'), fullPage: true });
  });

  test('task list entries show a snippet of their text', async () => {
    const long = 'The keeper wrote every night in the log of the lighthouse. '.repeat(6).trim();
    await call('POST', '/api/tts/generate', { contents: [{ type: 'text', text: long, voiceId: guest }] });
    await page.reload();
    await page.locator('#tasks li').nth(3).waitFor();
    const snippets = await page.evaluate<string[]>(
      `[...document.querySelectorAll('#tasks li .snippet')].map((p) => p.textContent)`,
    );
    // Newest first: the long plain text, the 80-piece dialogue, the short one, the first dialogue.
    assert.equal(snippets[0], `${[...long].slice(0, 200).join('').trimEnd()}…`, 'cut at 200 characters');
    assert.match(snippets[1] ?? '', new RegExp(`^${NARRATOR}: Line 1\\. Guest: Line 2\\. `));
    assert.ok((snippets[1] ?? '').endsWith('…'), 'more pieces than shown');
    assert.ok([...(snippets[1] ?? '')].length <= 201);
    assert.match(snippets[2] ?? '', new RegExp(`^${NARRATOR}: Good evening, and welcome`));
    const play = page.locator('#tasks li').first().getByRole('button', { name: 'Play' });
    assert.equal(
      await play.getAttribute('aria-describedby'),
      await page.locator('#tasks li .snippet').first().getAttribute('id'),
    );
    await page.locator('#tasks').screenshot({ path: join(OUTPUT, '4-task-list.png') });
  });

  test('where the browser refuses audio without a gesture, a Play button starts it', async () => {
    // A new tab that nobody has clicked yet, driven without user gestures.
    const quiet = await browser.newPage({ viewport: NARROW });
    try {
      await watchPage(quiet, cspViolations, pageLog);
      const cdp = await quiet.context().newCDPSession(quiet);
      await quiet.goto(`${t.baseUrl}/#key=${t.key}`);
      await untilQuietly(cdp, `document.querySelectorAll('#voice-a option').length > 1`, 15_000);
      await evaluateQuietly(
        cdp,
        `(() => {
          document.getElementById('task-text').value = ${JSON.stringify(SHORT_DIALOGUE)};
          document.getElementById('voice-a').value = ${JSON.stringify(narrator)};
          document.getElementById('voice-b').value = ${JSON.stringify(guest)};
          document.getElementById('task-form').requestSubmit();
        })()`,
      );
      pace = 2;
      await untilQuietly(cdp, `!document.getElementById('play-gate').hidden`, 30_000);
      assert.equal(await evaluateQuietly(cdp, `document.getElementById('audio').paused`), true);
      assert.equal(
        await evaluateQuietly(cdp, `document.querySelectorAll('.segment.playing').length`),
        0,
        'nothing is marked as playing while the audio has not started',
      );
      await untilQuietly(
        cdp,
        `(() => { const r = document.getElementById('play').getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight; })()`,
        5_000,
      );
      await quiet.screenshot({ path: join(OUTPUT, '5-play-button-narrow.png') });
      // The click is the gesture: the audio starts, the button goes.
      await quiet.locator('#play').click();
      await untilQuietly(
        cdp,
        `(() => { const el = document.getElementById('audio'); return !el.paused && el.currentTime > 0.2; })()`,
        30_000,
      );
      assert.equal(await evaluateQuietly(cdp, `document.getElementById('play-gate').hidden`), true);
      await untilGenerated((await newestTask()).id, 60_000);
    } finally {
      pace = null;
      await quiet.close();
    }
  });

  test('no Content-Security-Policy violation in any of it', () => {
    assert.deepEqual(cspViolations, [], pageLog.join('\n'));
  });
});
