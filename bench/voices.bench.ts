/**
 * Every built-in voice side by side: `npm run bench:voices` (env: RUNS, 10 first-audio runs per
 * voice after 2 not counted; CPU_ROUNDS, 2 syntheses of the paragraphs, the first warming up;
 * VOICES, a comma-separated list of `engine:voice` to measure only those, e.g. `flite:kal16`;
 * SHOW_TRANSCRIPTS=1 prints what the recogniser heard).
 *
 * Voices: every Flite voice and every English espeak-ng voice of the catalogue, plus espeak-ng's
 * default voice of a few other languages (for those, CPU, first audio and memory only), plus the
 * first voice of every available neural model in MODELS_DIR (the service's setting, default
 * DATA_DIR/models; its voices share the model, so one voice measures the model; English models are
 * transcribed, others measured in their language's text when the bench has one). The remote
 * engine has no built-in voices and is not measured. Each voice is measured in a child
 * process of its own (one synthesis thread, the engine loaded only there), so its memory figure
 * is that engine's alone:
 * - CPU-seconds per audio-second: CPU time of the whole child (its synthesis thread included)
 *   while it synthesises the fixed paragraphs (bench/lib/voices-text.ts) to canonical 44.1 kHz
 *   PCM, resampling included, over the seconds of audio they make;
 * - first audio: from the engine call to its first PCM chunk of a short sentence, as a one-shot
 *   (interactive) through the engine registry the service uses; the child's first call (threads
 *   and wasm starting) apart as "cold";
 * - peak RSS of the child (Linux maxrss), beside a child that loads the same modules and
 *   synthesises nothing (the baseline);
 * - word error rate: the English paragraphs' audio, resampled to 16 kHz, transcribed by Debian's
 *   pocketsphinx (installed on demand, bench/lib/pocketsphinx.ts), against the text
 *   (bench/lib/word-error-rate.ts), over the words of all paragraphs together.
 */
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { DEFAULT_ENGINE_TIMEOUTS } from '../src/audio/engines/engine.js';
import { createEngineRegistry, type VoiceBinding } from '../src/audio/engines/engine-registry.js';
import { espeakProvider } from '../src/audio/engines/espeak.provider.js';
import type { NeuralSettings } from '../src/audio/engines/provider.js';
import { CANONICAL_RATE, concatPcm, pcmToBuffer } from '../src/audio/pcm.js';
import { loadConfig } from '../src/config/config.js';
import { ensureRecogniser, transcribe } from './lib/pocketsphinx.js';
import { ENGLISH_PARAGRAPHS, OTHER_LANGUAGES, SHORT_SENTENCE } from './lib/voices-text.js';
import { wordErrorRate } from './lib/word-error-rate.js';

const RUNS = Number(process.env.RUNS ?? 10);
const WARM = 2;
const CPU_ROUNDS = Number(process.env.CPU_ROUNDS ?? 2);
/** MODELS_DIR and the neural limits as the service reads them: its models are measured too. */
const NEURAL: NeuralSettings = loadConfig(process.env).neural;

/** One voice to measure, as handed to its child process. */
interface Job {
  engine: string;
  /** The voice's id in the catalogue. */
  voice: string;
  /** The language it is measured in: 'en' (then also transcribed) or another language tag. */
  language: string;
  /** A model of MODELS_DIR rather than a built-in voice (not a candidate for the default). */
  neural?: boolean;
  /** Absent for the baseline child, which synthesises nothing. */
  binding?: VoiceBinding;
  short: string;
  paragraphs: string[];
  /** Where the child writes its paragraphs' PCM (`<i>.s16`) and its result (`result.json`). */
  dir: string;
}

/** What a child measured. */
interface Measurement {
  coldFirstAudioMs: number;
  firstAudioMsP50: number;
  firstAudioMsP95: number;
  cpuSeconds: number;
  audioSeconds: number;
  peakRssMb: number;
}

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

/** Child side: measures one voice (or nothing, for the baseline) and writes result.json. */
async function measure(job: Job): Promise<void> {
  const registry = createEngineRegistry({ remoteEndpoints: {}, synthesisThreads: 1, neural: NEURAL });
  const result: Measurement = {
    coldFirstAudioMs: NaN,
    firstAudioMsP50: NaN,
    firstAudioMsP95: NaN,
    cpuSeconds: NaN,
    audioSeconds: NaN,
    peakRssMb: NaN,
  };
  try {
    const binding = job.binding;
    if (binding !== undefined) {
      const engine = registry.engineFor(binding);
      /** Milliseconds to the first PCM chunk; the whole call is read (a call left running would hold the thread). */
      const firstAudioMs = async (): Promise<number> => {
        const started = performance.now();
        let first: number | undefined;
        for await (const chunk of engine.synthesize(
          { text: job.short, voice: binding, speechRate: 1, interactive: true },
          new AbortController().signal,
        )) {
          if (chunk.length > 0) first ??= performance.now() - started;
        }
        if (first === undefined) throw new Error(`no audio from ${job.engine}:${job.voice}`);
        return first;
      };
      result.coldFirstAudioMs = await firstAudioMs();
      for (let i = 0; i < WARM; i++) await firstAudioMs();
      const times: number[] = [];
      for (let i = 0; i < RUNS; i++) times.push(await firstAudioMs());
      result.firstAudioMsP50 = percentile(times, 50);
      result.firstAudioMsP95 = percentile(times, 95);

      for (let round = 0; round < CPU_ROUNDS; round++) {
        let cpu = 0;
        let samples = 0;
        for (const [i, text] of job.paragraphs.entries()) {
          const chunks: Int16Array[] = [];
          const before = process.cpuUsage();
          for await (const pcm of engine.synthesize(
            { text, voice: binding, speechRate: 1 },
            new AbortController().signal,
          ))
            chunks.push(pcm);
          const used = process.cpuUsage(before);
          cpu += (used.user + used.system) / 1e6;
          const pcm = concatPcm(chunks);
          samples += pcm.length;
          if (round === 0) await writeFile(join(job.dir, `${i}.s16`), pcmToBuffer(pcm));
        }
        const seconds = samples / CANONICAL_RATE;
        // The first round warms the engine up (the long paragraphs' code paths): it counts only
        // when it is the only one; of the others, the cheapest counts.
        const counted = round > 0 || CPU_ROUNDS === 1;
        if (counted && !(cpu / seconds >= result.cpuSeconds / result.audioSeconds)) {
          result.cpuSeconds = cpu;
          result.audioSeconds = seconds;
        }
      }
    }
  } finally {
    await registry.close();
  }
  // maxRSS is in kilobytes: the child's peak, every thread included.
  result.peakRssMb = process.resourceUsage().maxRSS / 1024;
  await writeFile(join(job.dir, 'result.json'), JSON.stringify(result));
}

/** Parent side: runs `job` in a child process of its own and reads what it measured. */
async function inChild(job: Job): Promise<Measurement> {
  const jobFile = join(job.dir, 'job.json');
  await writeFile(jobFile, JSON.stringify(job));
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', fileURLToPath(import.meta.url), '--measure', jobFile],
    { stdio: ['ignore', 'inherit', 'inherit'] },
  );
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', resolve);
  });
  if (code !== 0) throw new Error(`the child measuring ${job.engine}:${job.voice} exited ${code}`);
  return JSON.parse(await readFile(join(job.dir, 'result.json'), 'utf8')) as Measurement;
}

/** The voices to measure: every Flite voice, every English espeak-ng voice, espeak-ng's default of other languages, one voice per neural model. */
async function jobs(root: string): Promise<{ jobs: Job[]; defaultEnglish: string }> {
  const registry = createEngineRegistry({ remoteEndpoints: {}, neural: NEURAL });
  const espeak = espeakProvider.create({ remoteEndpoints: {}, timeouts: DEFAULT_ENGINE_TIMEOUTS });
  try {
    const english = [
      ...(await registry.voices({ engine: 'flite' })),
      ...(await registry.voices({ engine: 'espeak', language: 'en' })),
    ].map((v) => ({
      engine: v.engine,
      voice: v.id,
      language: 'en',
      binding: v.binding as VoiceBinding,
      short: SHORT_SENTENCE,
      paragraphs: [...ENGLISH_PARAGRAPHS],
    }));
    const others = [];
    for (const text of OTHER_LANGUAGES) {
      const binding = await espeak.defaultBinding(text.language);
      if (binding === undefined) throw new Error(`espeak-ng has no voice for ${text.language}`);
      others.push({
        engine: 'espeak',
        voice: binding.voice,
        language: text.language,
        binding,
        short: text.short,
        paragraphs: [text.paragraph],
      });
    }
    const neural = await neuralJobs(registry);
    const wanted = process.env.VOICES?.split(',').map((v) => v.trim());
    const chosen = [...english, ...others, ...neural].filter(
      (j) => wanted === undefined || wanted.includes(`${j.engine}:${j.voice}`),
    );
    const defaultBinding = await registry.defaultBinding('en');
    const defaultVoice = (await registry.voices()).find(
      (v) =>
        v.binding.engine === defaultBinding.engine &&
        v.binding.voice === (defaultBinding as { voice: string }).voice,
    );
    return {
      jobs: chosen.map((j, i) => ({ ...j, dir: join(root, String(i)) })),
      defaultEnglish: `${defaultBinding.engine}:${defaultVoice?.id ?? (defaultBinding as { voice: string }).voice}`,
    };
  } finally {
    await espeak.close();
    await registry.close();
  }
}

/** The first voice of each available neural model: its voices share the model's weights and cost. */
async function neuralJobs(registry: ReturnType<typeof createEngineRegistry>): Promise<Omit<Job, 'dir'>[]> {
  const models = (await registry.engines()).filter((e) => e.provider === 'neural');
  for (const m of models.filter((m) => !m.available))
    console.log(`neural model ${m.id} not measured: ${m.reason ?? 'unavailable'}`);
  const out: Omit<Job, 'dir'>[] = [];
  for (const model of models.filter((m) => m.available)) {
    const voice = (await registry.voices({ engine: model.id }))[0];
    if (voice === undefined) continue;
    const language = voice.languages[0] ?? 'en';
    const base = language.toLowerCase().split(/[-_]/)[0] ?? 'en';
    const other = OTHER_LANGUAGES.find((t) => t.language.split(/[-_]/)[0] === base);
    out.push({
      engine: voice.engine,
      voice: voice.id,
      neural: true,
      language: base === 'en' ? 'en' : language,
      binding: voice.binding as VoiceBinding,
      short: base === 'en' || other === undefined ? SHORT_SENTENCE : other.short,
      paragraphs: base === 'en' || other === undefined ? [...ENGLISH_PARAGRAPHS] : [other.paragraph],
    });
  }
  return out;
}

interface Row {
  job: Job;
  m: Measurement;
  /** Across all English paragraphs; undefined for other languages. */
  wer?: number;
  werPerParagraph?: number[];
  transcripts?: string[];
}

const fmt = (n: number, digits: number) => (Number.isFinite(n) ? n.toFixed(digits) : '–');

async function main(): Promise<void> {
  ensureRecogniser();
  const root = await mkdtemp(join(tmpdir(), 'bench-voices-'));
  try {
    const started = new Date();
    const loadBefore = loadavg();
    console.log(
      `bench:voices ${started.toISOString()}, ${cpus()[0]?.model ?? 'cpu'} × ${availableParallelism()}, ` +
        `Node ${process.version}; load average at start ${loadBefore.map((l) => l.toFixed(2)).join(' ')}`,
    );
    const { jobs: list, defaultEnglish } = await jobs(root);
    const baselineDir = join(root, 'baseline');
    await mkdir(baselineDir);
    const baseline = await inChild({
      engine: '–',
      voice: 'baseline',
      language: '–',
      short: '',
      paragraphs: [],
      dir: baselineDir,
    });
    console.log(
      `baseline child (Node, tsx, the engine registry loaded, nothing synthesised): peak RSS ${fmt(baseline.peakRssMb, 0)} MB`,
    );
    const rows: Row[] = [];
    for (const job of list) {
      await mkdir(job.dir);
      const m = await inChild(job);
      const row: Row = { job, m };
      if (job.language === 'en') {
        const transcripts: string[] = [];
        const perParagraph: number[] = [];
        let errors = 0;
        let words = 0;
        for (const [i, text] of job.paragraphs.entries()) {
          const heard = await transcribe(join(job.dir, `${i}.s16`));
          transcripts.push(heard);
          const e = wordErrorRate(text, heard);
          errors += e.substitutions + e.deletions + e.insertions;
          words += e.referenceWords;
          perParagraph.push(e.wer);
        }
        row.wer = errors / words;
        row.werPerParagraph = perParagraph;
        row.transcripts = transcripts;
      }
      rows.push(row);
      console.log(
        `${job.engine}:${job.voice} (${job.language}): ${fmt(m.cpuSeconds / m.audioSeconds, 4)} CPU-s/audio-s, ` +
          `first audio ${fmt(m.firstAudioMsP50, 1)} ms, RSS ${fmt(m.peakRssMb, 0)} MB` +
          (row.wer === undefined
            ? ''
            : `, WER ${fmt(row.wer, 2)} (per paragraph ${row.werPerParagraph?.map((w) => fmt(w, 2)).join(' / ')})`),
      );
      if (process.env.SHOW_TRANSCRIPTS) for (const t of row.transcripts ?? []) console.log(`  heard: ${t}`);
    }

    console.log('');
    console.log(
      '| engine | voice | language | CPU-s / audio-s | first audio ms p50 (p95) | first call ms (cold) | peak RSS MB | WER |',
    );
    console.log('| --- | --- | --- | --- | --- | --- | --- | --- |');
    for (const { job, m, wer } of rows) {
      console.log(
        `| ${job.engine} | ${job.voice} | ${job.language} | ${fmt(m.cpuSeconds / m.audioSeconds, 4)} | ` +
          `${fmt(m.firstAudioMsP50, 1)} (${fmt(m.firstAudioMsP95, 1)}) | ${fmt(m.coldFirstAudioMs, 0)} | ` +
          `${fmt(m.peakRssMb, 0)} | ${wer === undefined ? 'n/a' : fmt(wer, 2)} |`,
      );
    }
    console.log('');
    const english = rows
      .filter((r) => r.wer !== undefined && r.job.neural !== true)
      .sort((a, b) => a.wer! - b.wer!);
    const best = english[0];
    const current = rows.find((r) => `${r.job.engine}:${r.job.voice}` === defaultEnglish);
    if (best !== undefined) {
      const bestId = `${best.job.engine}:${best.job.voice}`;
      console.log(
        `most intelligible English built-in voice: ${bestId} (WER ${fmt(best.wer!, 2)}); ` +
          `the default English voice of a new voice is ${defaultEnglish}` +
          (current?.wer === undefined ? ' (not measured in this run)' : ` (WER ${fmt(current.wer, 2)})`) +
          // The default must also keep the one-shot first-byte target, which the first audio column shows.
          (current !== undefined && current !== best ? `: ${bestId} is more intelligible` : ''),
      );
    }
    console.log(
      `WER: pocketsphinx en-us on ${ENGLISH_PARAGRAPHS.length} English paragraphs (${englishWords()} words); ` +
        'n/a for other languages (the recogniser knows English only)',
    );
    console.log(
      `load average at end ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}; took ${((Date.now() - started.getTime()) / 1000).toFixed(0)} s`,
    );
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

/** Words of the English paragraphs, normalised as the word error rate counts them. */
function englishWords(): number {
  return ENGLISH_PARAGRAPHS.reduce((n, p) => n + wordErrorRate(p, p).referenceWords, 0);
}

const measuring = process.argv.indexOf('--measure');
if (measuring >= 0) {
  const job = JSON.parse(await readFile(process.argv[measuring + 1]!, 'utf8')) as Job;
  await measure(job);
} else {
  await main();
}
