/**
 * Splitter event-loop benchmark: `npx tsx bench/splitter-event-loop.bench.ts [runs]`.
 * Runs the worst input the default limits allow (`worstAllowedPreview`) through the pure splitter and
 * through `POST /api/splitter/preview` on a real app, while `perf_hooks.monitorEventLoopDelay`
 * samples the event loop, and prints the time per input and the max/p99 event-loop delay.
 * With `--pathological` it also times the review's inputs on the pure splitter without the bounds
 * (what the service now refuses with 400), to show the algorithm itself is linear.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config/config.js';
import { splitText } from '../src/splitter/split-text.js';
import {
  checkSplitterConfigBounds,
  jsonBytes,
  SPLITTER_CONFIG_BOUNDS as BOUNDS,
  validateSplitterConfig,
  type SplitterConfig,
} from '../src/splitter/splitter-config.js';

/** Default MAX_TEXT_LENGTH, SPLITTER_MAX_MARKERS and MAX_CONTENTS, which `worstAllowedPreview` fills. */
export const DEFAULT_LIMITS = { textLength: 10_000, markers: 1000, contents: 200 } as const;

/** The `i`-th long placeholder key: 100 characters, all sharing a 95-character run of `a`. */
const longKey = (i: number): string =>
  `<${String(i).padStart(3, '0')}${'a'.repeat(BOUNDS.placeholderKeyLength - 4)}`;

/**
 * A preview body as costly as the default limits allow, and the utterances it splits into: every
 * config bound filled (as many placeholder keys of 100 characters sharing a long run as the config's
 * bytes leave room for, 64 marks sharing the open `[`, 500 lookupTable entries of 2000 tags all
 * holding `x`, 64 parameter names), and a 10,000-character text with 960 markers whose bracket spans
 * each walk every all-of element.
 */
export function worstAllowedPreview(): {
  body: { text: string; splitter: SplitterConfig };
  expected: Array<{ text: string; voiceId: string; marker: string }>;
} {
  const rest = worstConfigBesidesKeys();
  const perKey = jsonBytes({ [longKey(0)]: { voiceId: 'v999' } }); // its braces pay for the comma
  const keys = Math.min(BOUNDS.placeholderKeys, Math.floor((BOUNDS.configBytes - jsonBytes(rest)) / perKey));
  const config: Record<string, unknown> = {};
  for (let i = 0; i < keys; i++) config[longKey(i)] = { voiceId: `v${i}` };
  Object.assign(config, rest);
  const { text, expected } = worstTextAndExpected();
  return { body: { text, splitter: config }, expected };
}

/** The marks, lookupTable and fallbackConfig of the worst config, each at its bound. */
function worstConfigBesidesKeys(): Record<string, unknown> {
  const config: Record<string, unknown> = {};
  const closes = [
    ']',
    ...Array.from({ length: BOUNDS.splitterMarks - 1 }, (_, i) => String.fromCharCode(0x4e00 + i)),
  ];
  config.splitterMarks = closes.map((close) => `[${close}`);
  const table: Record<string, unknown> = {};
  const tagsPerEntry = BOUNDS.lookupTableTags / BOUNDS.lookupTableEntries;
  for (let i = 0; i < BOUNDS.lookupTableEntries; i++) {
    // Every element holds `x`, so a `[x]` span counts a hit on each and completes none.
    table[`e${i}`] = { tags: [['x', ...Array.from({ length: tagsPerEntry - 1 }, (_, j) => `t${i}-${j}`)]] };
  }
  config.lookupTable = table;
  const fallback: Record<string, unknown> = { voiceId: 'vf', speechRate: 1 };
  for (let i = 2; i < BOUNDS.parameterNames; i++) fallback[`param${i}`] = i;
  config.fallbackConfig = fallback;
  return config;
}

/** The worst text (60 long keys, then 900 bracket spans, then `a` up to the text limit) and its split. */
function worstTextAndExpected(): {
  text: string;
  expected: Array<{ text: string; voiceId: string; marker: string }>;
} {
  const parts: string[] = [];
  const expected: Array<{ text: string; voiceId: string; marker: string }> = [];
  for (let i = 0; i < 60; i++) {
    parts.push(`${longKey(i)} a `);
    expected.push({ text: 'a', voiceId: `v${i}`, marker: longKey(i) });
  }
  for (let i = 0; i < 900; i++) {
    parts.push('[x]');
    if (i % 10 === 9) {
      parts.push(' b');
      expected.push({ text: 'b', voiceId: 'vf', marker: '[x]' });
    }
  }
  let text = parts.join('');
  // Fill up with `a`: the placeholder automaton walks deep into the keys' shared run at every position.
  text += ` ${'a'.repeat(DEFAULT_LIMITS.textLength - text.length - 1)}`;
  const last = expected[expected.length - 1] as { text: string; voiceId: string; marker: string };
  last.text = `b ${'a'.repeat(DEFAULT_LIMITS.textLength - parts.join('').length - 1)}`;
  return { text, expected };
}

/** The review's inputs (each now refused by a bound), for timing the algorithm without the bounds. */
function pathologicalInputs(): Array<{ name: string; text: string; config: SplitterConfig }> {
  const n = DEFAULT_LIMITS.textLength;
  // ASCII closes absent from the text (a body of ~1.5 MB): each open used to check every mark.
  const closes = 'abcdefghijklmnopqrstuvwxyz';
  const marks = Array.from({ length: 300_000 }, (_, i) => `[${closes[i % closes.length] ?? 'z'}`);
  const keys: Record<string, unknown> = { fallbackConfig: { voiceId: 'v' } };
  for (let i = 0; i < 60_000; i++) keys[`a${i.toString(36)}z`] = {};
  const table: Record<string, unknown> = {};
  for (let i = 0; i < 40_000; i++) table[`e${i}`] = { tags: [['x', `t${i}`]] };
  return [
    {
      name: '300,000 marks, one open',
      text: '['.repeat(n),
      config: { splitterMarks: marks, fallbackConfig: { voiceId: 'v' } },
    },
    { name: '60,000 keys, one first character', text: 'a'.repeat(n), config: keys },
    {
      name: '40,000 lookupTable entries, 3,333 brackets',
      text: '[x]'.repeat(Math.floor(n / 3)),
      config: {
        splitterMarks: ['[]'],
        lookupTable: table,
        fallbackConfig: { voiceId: 'v' },
      } as SplitterConfig,
    },
  ];
}

interface Figures {
  msPerInput: number;
  maxDelayMs: number;
  p99DelayMs: number;
}

/** Runs `work` `runs` times, yielding to the event loop between runs, while sampling its delay. */
async function measure(runs: number, work: () => Promise<void> | void): Promise<Figures> {
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  histogram.enable();
  // The histogram's timer must have ticked once, or a block right after enable() goes unrecorded
  // (and reset() would forget that tick again).
  await new Promise((resolve) => setTimeout(resolve, 10));
  const started = performance.now();
  for (let i = 0; i < runs; i++) {
    await work();
    await new Promise((resolve) => setImmediate(resolve));
  }
  const msPerInput = (performance.now() - started) / runs;
  await new Promise((resolve) => setTimeout(resolve, 20)); // let the last sample land
  histogram.disable();
  return { msPerInput, maxDelayMs: histogram.max / 1e6, p99DelayMs: histogram.percentile(99) / 1e6 };
}

const row = (name: string, f: Figures): string =>
  `| ${name} | ${f.msPerInput.toFixed(1)} | ${f.p99DelayMs.toFixed(1)} | ${f.maxDelayMs.toFixed(1)} |`;

async function main(): Promise<void> {
  const runs = Number(process.argv.find((a) => /^\d+$/.test(a)) ?? 20);
  const { body, expected } = worstAllowedPreview();
  const config = validateSplitterConfig(body.splitter);
  checkSplitterConfigBounds(config);
  const utterances = splitText(body.text, config, { maxMarkers: DEFAULT_LIMITS.markers });
  if (utterances.length !== expected.length)
    throw new Error(`expected ${expected.length} utterances, got ${utterances.length}`);
  console.log(
    `worst allowed input: ${body.text.length} characters, ${JSON.stringify(body).length} bytes, ${utterances.length} utterances`,
  );
  console.log('| input | ms per input | event-loop delay p99 ms | max ms |');
  console.log('|---|---|---|---|');
  splitText(body.text, config); // warm-up
  console.log(
    row(
      `pure splitter, worst allowed (${runs} runs)`,
      await measure(runs, () => void splitText(body.text, config)),
    ),
  );

  const dataDir = await mkdtemp(join(tmpdir(), 'voicegen-bench-'));
  const app = await buildApp(loadConfig({ DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'silent' }), {
    logger: false,
  });
  try {
    const account = await app.services.accounts.createAccount('bench');
    const { key } = await app.services.accounts.createKey(account.id);
    const preview = async (): Promise<void> => {
      const res = await app.http.inject({
        method: 'POST',
        url: '/api/splitter/preview',
        headers: { authorization: `Bearer ${key}` },
        payload: body,
      });
      if (res.statusCode !== 200)
        throw new Error(`preview answered ${res.statusCode}: ${res.body.slice(0, 200)}`);
    };
    await preview(); // warm-up
    console.log(
      row(`POST /api/splitter/preview, worst allowed (${runs} runs)`, await measure(runs, preview)),
    );
  } finally {
    await app.close();
    await rm(dataDir, { recursive: true, force: true });
  }

  if (process.argv.includes('--pathological')) {
    for (const { name, text, config: raw } of pathologicalInputs()) {
      console.log(
        row(`pure splitter, unbounded: ${name} (1 run)`, await measure(1, () => void splitText(text, raw))),
      );
    }
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
