// The web console in real Chromium (Debian's, driven by playwright-core): sign in with the
// first-run link, create a voice and a dialogue task through the UI, play the task's full stream
// (it starts by itself) while it is still generating, seek back into what was produced, and see the element
// reloaded with the finished file (its whole duration) once the live stream ends. The embedded
// engine is paced to twice real time here, so the task is still processing while it plays.
import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
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

const OUTPUT = join(process.cwd(), 'test-output', 'console');
/** Synthesis speed in the test: audio seconds per second (the real engine runs far faster). */
const PACE = 2;

/** A property of the page's <audio id="audio"> (evaluated in the page: no DOM types needed here). */
async function audioProperty<T>(page: Page, name: string): Promise<T> {
  return page.evaluate<T>(`document.getElementById('audio').${name}`);
}

interface StreamExchange {
  url: string;
  range: string | undefined;
  status: number;
  contentRange: string | undefined;
}

const DIALOGUE = [
  '<A>Good evening, and welcome to the late show about lighthouses and the people who keep them.',
  '<B>Thank you. It is a pleasure to be here, and I have brought a few stories from the northern coast.',
  '<A>Let us start with the oldest one. Who kept the light before the war?',
  '<B>A family of three generations. The grandmother climbed the stairs every night until she was ninety.',
  '<A>Remarkable. And the storms, were they as bad as the old songs say?',
  '<B>Worse, some winters. But the lamp never went out, not once in eighty years.',
].join(' ');

describe('web console in Chromium', { skip: chromiumMissing }, () => {
  let t: TestApp;
  let browser: Browser;
  let page: Page;
  const exchanges: StreamExchange[] = [];
  /** What the page reported (failed requests, script errors): shown when a step fails. */
  const pageLog: string[] = [];
  /** Content-Security-Policy violations the console's page reported, in any test. */
  const cspViolations: string[] = [];

  before(async () => {
    await mkdir(OUTPUT, { recursive: true });
    t = await startTestApp({
      listen: true,
      env: { RATE_LIMIT_MAX: '100000', STREAM_RATE_LIMIT_MAX: '100000' },
    });
    const registry = t.app.services.synthesis;
    const engineFor = registry.engineFor.bind(registry);
    registry.engineFor = (binding: VoiceBinding) => paced(engineFor(binding), () => PACE);
    browser = await launchChromium(['--autoplay-policy=no-user-gesture-required']);
    page = await browser.newPage({ viewport: { width: 1000, height: 1400 } });
    await watchPage(page, cspViolations, pageLog);
    page.on('response', (response) => {
      const url = response.url();
      if (!url.includes('/stream.mp3')) return;
      exchanges.push({
        url,
        range: response.request().headers().range,
        status: response.status(),
        contentRange: response.headers()['content-range'],
      });
    });
  });

  after(async () => {
    await browser?.close();
    await t?.close();
  });

  test('sign in, voices, a dialogue task played while it generates, seek, reload when finished', async () => {
    // The first-run link: the key arrives in the fragment, is kept for the tab and leaves the URL.
    await page.goto(`${t.baseUrl}/#key=${t.key}`);
    await page.getByText(/Signed in as/).waitFor();
    assert.equal(new URL(page.url()).hash, '', 'the key is removed from the address bar');
    assert.equal(await page.evaluate<string | null>(`sessionStorage.getItem('voicegen.key')`), t.key);

    // The voice form offers what the engines have (the voice catalogue), every variant included;
    // the first engine of the catalogue (Flite, the default English voices) is chosen first.
    await page.locator('#voice-engine option[value="espeak"]').waitFor({ state: 'attached' });
    assert.equal(await page.locator('#voice-engine').inputValue(), 'flite');
    await page.locator('#voice-codes option[value="kal16"]').waitFor({ state: 'attached' });
    await page.locator('#voice-engine').selectOption('espeak');
    await page.locator('#voice-options [data-field="variant"]').waitFor();
    const catalogue = await t.app.services.synthesis.voices({ engine: 'espeak' });
    assert.equal(await page.locator('#voice-codes option').count(), catalogue.length);
    assert.ok(catalogue.length > 100, 'every espeak-ng voice is offered');
    assert.equal(await page.locator('#voice-code').inputValue(), 'gmw/en-US', "the browser's language");
    // Three voices through the UI, one with a variant whose name has a space.
    for (const [name, variant] of [
      ['Serious', 'Mr serious'],
      ['Host', 'm3'],
      ['Guest', 'f3'],
    ] as const) {
      await page.getByLabel('Name', { exact: true }).fill(name);
      await page.getByLabel('Variant').selectOption(variant);
      await page.getByRole('button', { name: 'Create voice' }).click();
      await page.locator('#voices li', { hasText: name }).waitFor();
    }
    await page.getByLabel('Dialogue with speaker markers').check();
    await page.locator('#voice-a').selectOption({ label: 'Host' });
    await page.locator('#voice-b').selectOption({ label: 'Guest' });
    await page.getByLabel('Text', { exact: true }).fill(DIALOGUE);
    await page.getByRole('button', { name: 'Preview the split' }).click();
    await page.locator('#split-preview li').nth(5).waitFor();
    assert.equal(await page.locator('#split-preview li').count(), 6, 'six utterances, one per marker');
    await page.screenshot({ path: join(OUTPUT, '1-new-task.png'), fullPage: true });

    // Generate: the player opens on the live stream while the task is processing, and plays it.
    await page.getByRole('button', { name: 'Generate' }).click();
    await page.getByText(/: processing/).waitFor({ timeout: 60_000 });
    await untilAudio(page, `el.src.includes('stream.mp3')`, 60_000);
    await untilAudio(page, '!el.paused && el.currentTime > 3', 60_000);
    const tasks = await t.app.services.tasks.list(t.accountId, {});
    const taskId = tasks.items[0]?.id ?? '';
    assert.equal(
      (await t.app.services.tasks.get(t.accountId, taskId)).status,
      'processing',
      'still generating',
    );
    // The task list follows it live: a progress bar of pieces generated.
    const bar = page.locator(`#tasks li[data-task="${taskId}"] progress`);
    await bar.waitFor({ timeout: 15_000 });
    assert.equal(await bar.getAttribute('max'), '6');
    await page.screenshot({ path: join(OUTPUT, '2-playing-live.png'), fullPage: true });

    // Seek back to an already produced position: playback goes on from there.
    const before = await audioProperty<number>(page, 'currentTime');
    await page.evaluate(`document.getElementById('audio').currentTime = 1`);
    await untilAudio(page, 'el.currentTime > 1.5 && !el.seeking', 30_000);
    const afterSeek = await audioProperty<number>(page, 'currentTime');
    assert.ok(afterSeek < before, `the seek went back (${before} → ${afterSeek})`);
    await page.locator('.segment.playing').waitFor({ timeout: 30_000 });

    // The end of the live stream: the element is reloaded with the finished MP3 (its full duration).
    await untilPage(page, `document.body.dataset.reloaded === 'true'`, 180_000);
    await untilAudio(page, 'Number.isFinite(el.duration)', 30_000);
    const finished = await t.app.services.tasks.get(t.accountId, taskId);
    assert.equal(finished.status, 'generated');
    const pieces = finished.metadata.contents;
    const expected = pieces.reduce(
      (sum, c, n) => sum + Number(c.duration ?? 0) + (n < pieces.length - 1 ? Number(c.interval ?? 0) : 0),
      0,
    );
    const duration = await audioProperty<number>(page, 'duration');
    assert.ok(Math.abs(duration - expected) < 0.5, `finished duration ${duration} s ≈ ${expected} s`);
    assert.ok((await audioProperty<string>(page, 'src')).includes('/audio.mp3'));
    await page.locator('#download').waitFor();
    await page.screenshot({ path: join(OUTPUT, '3-finished.png'), fullPage: true });

    // What the browser asked of the live stream, and what it was answered.
    assert.ok(exchanges.length > 0, 'the browser read the live stream');
    for (const exchange of exchanges) {
      assert.ok([200, 206].includes(exchange.status), `${exchange.status} for Range ${exchange.range}`);
      const start = /^bytes=(\d+)-/.exec(exchange.range ?? '')?.[1];
      if (exchange.status === 206) {
        assert.ok(start !== undefined, 'a 206 answers a Range request');
        assert.match(exchange.contentRange ?? '', new RegExp(`^bytes ${start}-\\d+/(\\d+|\\*)$`));
      } else {
        assert.ok(
          start === undefined || start === '0',
          `a 200 answers a request from byte 0 (${exchange.range})`,
        );
      }
    }
    console.log(
      `stream requests: ${JSON.stringify(exchanges.map(({ range, status, contentRange }) => ({ range, status, contentRange })))}`,
    );
  });

  test('splitter configurations: checked live by the API, saved, edited, and a task from a saved one', async () => {
    const { items: voiceList } = await t.app.services.voices.list(t.accountId, {});
    const host = voiceList.find((v) => v.name === 'Host')?.id ?? '';
    const guest = voiceList.find((v) => v.name === 'Guest')?.id ?? '';
    const config = page.getByLabel('Configuration (JSON)');
    const check = page.locator('#splitter-check');

    await page.getByRole('button', { name: 'New configuration' }).click();
    await page.getByLabel('Configuration name').fill('Interview');
    // Not JSON: said at once, without asking the API.
    await config.fill('{"<A>": ');
    await check.filter({ hasText: 'Not JSON' }).waitFor();
    assert.equal(await config.getAttribute('aria-invalid'), 'true');
    // JSON the API refuses: its own message and code, as it reports them.
    await config.fill('{"<A>": {"voiceId": 5}}');
    await page
      .locator('#splitter-check.invalid', { hasText: /\((TTS_SPLITTER_INVALID|VALIDATION_\w+)\)/ })
      .waitFor();
    // A valid configuration: the sample splits as generation would, coloured by marker.
    await config.fill(
      JSON.stringify({
        '<Q>': { voiceId: host },
        '<R>': { voiceId: guest, speechRate: 1.2 },
        fallbackConfig: { voiceId: host },
      }),
    );
    await page.getByLabel('Sample text').fill('<Q>Where were you? <R>At the lighthouse. <Q>All night?');
    await page.locator('#splitter-check.valid', { hasText: '3 utterance(s)' }).waitFor();
    assert.equal(await config.getAttribute('aria-invalid'), 'false');
    assert.deepEqual(
      await page.evaluate<string[]>(
        `[...document.querySelectorAll('#splitter-preview li')].map((li) => li.className)`,
      ),
      ['speaker-a', 'speaker-b', 'speaker-a'],
    );
    await page.getByRole('button', { name: 'Save configuration' }).click();
    await page.locator('#splitters li', { hasText: 'Interview' }).waitFor();
    const saved = (await t.app.services.splitters.list(t.accountId, {})).items.find(
      (s) => s.name === 'Interview',
    );
    assert.deepEqual(saved?.config['<R>'], { voiceId: guest, speechRate: 1.2 });

    // Edit: the saved configuration comes back into the editor; a change is saved in place.
    await page.getByRole('button', { name: 'New configuration' }).click();
    await page.getByRole('button', { name: 'Edit Interview' }).click();
    assert.match(await config.inputValue(), /"<R>"/);
    await config.fill(
      JSON.stringify({ '<Q>': { voiceId: host }, '<R>': { voiceId: guest, speechRate: 0.9 } }),
    );
    await page.locator('#splitter-check.valid').waitFor();
    await page.getByRole('button', { name: 'Save changes to Interview' }).click();
    await check.filter({ hasText: 'Saved Interview' }).waitFor();
    const edited = await t.app.services.splitters.get(t.accountId, saved?.id ?? '');
    assert.deepEqual(edited.config['<R>'], { voiceId: guest, speechRate: 0.9 });
    assert.equal((await t.app.services.splitters.list(t.accountId, {})).total, 1, 'edited, not copied');

    // A dialogue task from the saved configuration.
    await page.getByLabel('Dialogue with speaker markers').check();
    await page.locator('#task-splitter').selectOption({ label: 'Saved: Interview' });
    assert.equal(
      await page.locator('#voice-a').isVisible(),
      false,
      'a saved splitter needs no inline voices',
    );
    await page
      .getByLabel('Text', { exact: true })
      .fill('<Q>Where were you last night? <R>At the lighthouse.');
    await page.getByRole('button', { name: 'Preview the split' }).click();
    await page.locator('#split-preview li').nth(1).waitFor();
    await page.screenshot({ path: join(OUTPUT, '4-splitters.png'), fullPage: true });
    const before = (await t.app.services.tasks.list(t.accountId, {})).total;
    await page.getByRole('button', { name: 'Generate' }).click();
    await untilPage(page, `document.querySelectorAll('#tasks li').length === ${String(before + 1)}`, 30_000);
    const newest = (await t.app.services.tasks.list(t.accountId, {})).items[0];
    const task = await t.app.services.tasks.get(t.accountId, newest?.id ?? '');
    assert.equal(task.type, 'splitter');
    assert.equal(task.metadata.request?.splitterId, saved?.id);
    assert.deepEqual(
      task.metadata.contents.map((c) => [c.voiceId, c.speechRate]),
      [
        [host, 1],
        [guest, 0.9],
      ],
    );
  });

  test('a strict CSP that the console runs under, and no other origin can frame it', async () => {
    // The headers, on the page and on its files; API answers carry nosniff.
    for (const path of ['/', '/console/app.js', '/console/style.css']) {
      const res = await fetch(`${t.baseUrl}${path}`);
      await res.arrayBuffer();
      assert.equal(res.status, 200, path);
      const csp = String(res.headers.get('content-security-policy'));
      assert.match(csp, /frame-ancestors 'none'/, path);
      assert.match(csp, /default-src 'none'/, path);
      assert.match(csp, /script-src 'self'(;|$)/, path);
      assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/, path);
      assert.equal(res.headers.get('x-frame-options'), 'DENY', path);
      assert.equal(res.headers.get('x-content-type-options'), 'nosniff', path);
      assert.equal(res.headers.get('referrer-policy'), 'no-referrer', path);
    }
    const api = await fetch(`${t.baseUrl}/api/account/info`, {
      headers: { authorization: `Bearer ${t.key}` },
    });
    await api.arrayBuffer();
    assert.equal(api.headers.get('x-content-type-options'), 'nosniff');

    // A voice preview plays a blob: URL of the one-shot MP3 (media-src allows blob:).
    const preview = page.waitForResponse((r) => r.url().includes('/api/tts/simple-generate.mp3'));
    await page.locator('#voices li', { hasText: 'Host' }).getByRole('button', { name: 'Preview' }).click();
    assert.equal((await preview).status(), 200);
    await sleep(1500);

    // Everything the console did in these tests (sign-in, voices, splitters, tasks, the live
    // player, the timeline, the finished file, the preview) ran without a CSP violation.
    assert.deepEqual(cspViolations, [], pageLog.join('\n'));

    // Another page frames the first-run link: the browser refuses to render the console in it.
    const framer = await browser.newPage();
    try {
      await framer.setContent(`<iframe id="f" src="${t.baseUrl}/#key=${t.key}"></iframe>`);
      await sleep(2000);
      const frame = framer.frames().find((f) => f !== framer.mainFrame());
      assert.ok(frame, 'the iframe exists');
      assert.equal(
        await frame.locator('#sign-in').count(),
        0,
        `the console rendered in a frame: ${frame.url()}`,
      );
    } finally {
      await framer.close();
    }
  });
});
