/**
 * What the console's Chromium tests share: Debian's Chromium driven by playwright-core, a slowed
 * engine so a task is still generating while it plays, waits on browser-side expressions, and the
 * page's Content-Security-Policy violations collected.
 */
import { existsSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { chromium, type Browser, type Page } from 'playwright-core';
import { audioWithMarks, type SpeechEngine, type SynthesisRequest } from '../../src/audio/engines/engine.js';
import { CANONICAL_RATE } from '../../src/audio/pcm.js';

export const CHROMIUM = '/usr/bin/chromium';

/** The `skip` option of a Chromium suite: skipped, saying why, where Chromium is not installed. */
export const chromiumMissing: string | false = existsSync(CHROMIUM)
  ? false
  : `${CHROMIUM} is not installed (scripts/setup-debian.sh)`;

/** Launches headless Chromium, muted; `args` adds flags (an autoplay policy, say). */
export function launchChromium(args: string[] = []): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--disable-quic',
      '--mute-audio',
      ...args,
    ],
  });
}

/**
 * `engine`, slowed down to `pace()` audio seconds per second while `pace()` is not null; with its
 * timing marks too (generation takes the marked audio).
 */
export function paced(engine: SpeechEngine, pace: () => number | null): SpeechEngine {
  const wait = async (samples: number, signal: AbortSignal): Promise<void> => {
    const factor = pace();
    if (factor !== null) await sleep((samples / CANONICAL_RATE / factor) * 1000, undefined, { signal });
  };
  return {
    ...engine,
    async *synthesize(req: SynthesisRequest, signal: AbortSignal) {
      for await (const pcm of engine.synthesize(req, signal)) {
        await wait(pcm.length, signal);
        yield pcm;
      }
    },
    async *synthesizeWithMarks(req: SynthesisRequest, signal: AbortSignal) {
      for await (const chunk of audioWithMarks(engine, req, signal)) {
        await wait(chunk.pcm.length, signal);
        yield chunk;
      }
    },
  };
}

/**
 * Waits until a browser-side expression holds. Polled from here with `page.evaluate` (run through
 * the DevTools protocol): `page.waitForFunction` evaluates its predicate with eval inside the
 * page, which the console's CSP forbids, as it should.
 */
export async function untilPage(page: Page, expression: string, timeout: number): Promise<void> {
  const deadline = Date.now() + timeout;
  while (!(await page.evaluate<boolean>(`Boolean(${expression})`))) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeout} ms waiting for ${expression}`);
    await sleep(100);
  }
}

/** Waits until a browser-side expression about the <audio id="audio"> element (`el`) holds. */
export async function untilAudio(page: Page, condition: string, timeout: number): Promise<void> {
  await untilPage(
    page,
    `(() => { const el = document.getElementById('audio'); return ${condition}; })()`,
    timeout,
  );
}

/**
 * Collects the page's Content-Security-Policy violations (the DOM event of every document it
 * loads, and Chromium's console line) into `violations`, and what else it reported (failed
 * requests, console lines, script errors) into `log`.
 */
export async function watchPage(page: Page, violations: string[], log: string[]): Promise<void> {
  await page.exposeFunction('reportCspViolation', (text: string) => violations.push(text));
  await page.addInitScript(`document.addEventListener('securitypolicyviolation', (e) =>
    window.reportCspViolation(e.violatedDirective + ' blocked ' + e.blockedURI + ' at ' + e.sourceFile + ':' + e.lineNumber))`);
  page.on('console', (message) => {
    if (/Content.Security.Policy/i.test(message.text())) violations.push(message.text());
    log.push(`console ${message.type()}: ${message.text()}`);
  });
  page.on('pageerror', (error) => log.push(`page error: ${error.message}`));
  page.on('response', (response) => {
    if (response.status() >= 400) log.push(`${response.status()} ${response.url()}`);
  });
}
