// The README cannot rot: its shell blocks run here, in order, in one bash with `set -euo pipefail`,
// from a folder laid out like a clone with this checkout's install and build — the start block
// included, so the service they talk to is the one `npm start` starts there, on its default
// `./data` and a free PORT. Every block must exit 0 within the deadline, and every MP3 the blocks
// write with `-o` must be a real MP3. A block that needs what a test cannot have (an install,
// a player, a remote server, a download) is marked `<!-- readme-test: skip -->` right before it.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import {
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
  mkdirSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { buildProblem } from '../scripts/build-stamp.mjs';
import { ffmpegErrors, probeAudio } from './helpers/audio-check.js';
import { isolatedCliEnv } from './helpers/cli.js';
import { freePort } from './helpers/free-port.js';

const root = join(import.meta.dirname, '..');

/** The line that, right before a fenced block (blank lines between allowed), keeps the test from running it. */
const SKIP_MARKER = '<!-- readme-test: skip -->';

/** A fenced block of a Markdown document. */
interface FencedBlock {
  /** The info string's first word (`sh`, `text`, …; '' when none). */
  lang: string;
  /** The text between the fences. */
  body: string;
  /** 1-based line of the opening fence. */
  line: number;
  skipped: boolean;
}

/** The fenced blocks of `markdown` in order; a skip marker not followed by a block is an error. */
function fencedBlocks(markdown: string): FencedBlock[] {
  const lines = markdown.split('\n');
  const blocks: FencedBlock[] = [];
  let markerLine: number | undefined;
  for (let i = 0; i < lines.length; i++) {
    const text = lines[i] ?? '';
    const open = /^(`{3,}|~{3,})\s*([\w-]*)/.exec(text);
    if (open !== null) {
      const fence = open[1] ?? '```';
      const start = i;
      const body: string[] = [];
      for (i++; i < lines.length && !(lines[i] ?? '').startsWith(fence); i++) body.push(lines[i] ?? '');
      if (i >= lines.length) throw new Error(`the block opened at line ${start + 1} is never closed`);
      blocks.push({
        lang: open[2] ?? '',
        body: body.join('\n'),
        line: start + 1,
        skipped: markerLine !== undefined,
      });
      markerLine = undefined;
    } else if (text.trim() === SKIP_MARKER) {
      if (markerLine !== undefined)
        throw new Error(`the skip marker at line ${markerLine} is not before a block`);
      markerLine = i + 1;
    } else if (text.trim() !== '' && markerLine !== undefined) {
      throw new Error(`the skip marker at line ${markerLine} is not right before a block`);
    }
  }
  if (markerLine !== undefined)
    throw new Error(`the skip marker at line ${markerLine} is not before a block`);
  return blocks;
}

const SHELLS = new Set(['sh', 'bash', 'shell']);

/** The shell blocks the test runs, in order. */
function runnableBlocks(markdown: string): FencedBlock[] {
  return fencedBlocks(markdown).filter((b) => SHELLS.has(b.lang) && !b.skipped);
}

/**
 * One bash script of the blocks, each announced on standard error first, so a failure names the
 * block it happened in; the blocks share one shell, as when they are pasted into one terminal.
 */
function scriptOf(blocks: readonly FencedBlock[]): string {
  return [
    'set -euo pipefail',
    ...blocks.flatMap((b, n) => [
      `echo "readme-test: block ${n + 1} (README.md line ${b.line})" >&2`,
      b.body,
    ]),
    'echo "readme-test: every block ran" >&2',
    '',
  ].join('\n');
}

/** The audio files the blocks write with `-o NAME.mp3` or `-o NAME.wav`. */
function audioOutputs(blocks: readonly FencedBlock[]): string[] {
  const names = blocks.flatMap((b) =>
    [...b.body.matchAll(/\s-o\s+"?([\w./-]+\.(?:mp3|wav))"?/g)].map((m) => m[1] ?? ''),
  );
  return [...new Set(names)];
}

void describe('README shell blocks: finding them', () => {
  void it('takes shell blocks in order, skips marked ones and stray markers are errors', () => {
    const doc = [
      '```sh',
      'echo one',
      '```',
      SKIP_MARKER,
      '',
      '```sh',
      'echo never',
      '```',
      '```text',
      'not shell',
      '```',
      '````bash',
      'echo "```"',
      '````',
    ].join('\n');
    assert.deepEqual(
      runnableBlocks(doc).map((b) => [b.body, b.line]),
      [
        ['echo one', 1],
        ['echo "```"', 12],
      ],
    );
    assert.throws(
      () => fencedBlocks(`${SKIP_MARKER}\nSome prose.\n\`\`\`sh\nx\n\`\`\``),
      /line 1 is not right before/,
    );
    assert.throws(() => fencedBlocks(`text\n${SKIP_MARKER}\n`), /line 2 is not before a block/);
    assert.throws(() => fencedBlocks('```sh\nnever closed\n'), /never closed/);
  });

  void it("the README's own blocks: the install commands and players skipped, the main flow run", () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const all = fencedBlocks(readme).filter((b) => SHELLS.has(b.lang));
    assert.ok(all[0]?.skipped, 'the first block (install, run the tests) is marked: CI runs it anyway');
    const run = runnableBlocks(readme)
      .map((b) => b.body)
      .join('\n');
    for (const step of ['npm start &', '?stream=true', 'tasks watch', 'metadata.audio', 'voices import'])
      assert.ok(run.includes(step), `a run block does ${step}`);
    for (const player of ['ffplay', 'mpv'])
      assert.ok(!run.includes(player), `${player} only in skipped blocks`);
  });
});

void describe('README shell blocks: running them', () => {
  const blocks = runnableBlocks(readFileSync(join(root, 'README.md'), 'utf8'));
  let dir: string;
  let project: string;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'voicegen-readme-'));
    project = join(dir, 'voicegen');
    mkdirSync(project);
    // A clone after `npm ci`: its sources, scripts, install and build (links to this checkout's);
    // what the blocks write stays in the copy.
    for (const name of [
      'package.json',
      'package-lock.json',
      'node_modules',
      'dist',
      'src',
      'scripts',
      'bin',
      'web',
      'native',
      'docs',
      'tsconfig.json',
      'tsconfig.build.json',
    ])
      if (existsSync(join(root, name))) symlinkSync(join(root, name), join(project, name));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  void it('every block exits 0 against the service the start block starts, and writes real MP3 and WAV files', async () => {
    const problem = buildProblem(root);
    assert.equal(problem, undefined, `the README's \`npm start\` needs a fresh build: ${problem ?? ''}`);
    const script = join(dir, 'readme.sh');
    writeFileSync(script, scriptOf(blocks));
    const port = await freePort();
    const env = isolatedCliEnv({ PORT: String(port), LOG_LEVEL: 'warn' });
    for (const name of ['HOST', 'REMOTE_ENGINES', 'MODELS_DIR', 'FIRST_RUN_ACCOUNT', 'API', 'KEY'])
      delete env[name];
    // Its own process group: the service the start block leaves running in the background is in
    // it, and goes with the group at the end.
    const shell = spawn('bash', [script], {
      cwd: project,
      env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const group = shell.pid ?? 0;
    let output = '';
    shell.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    shell.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    // A busy machine starts the service and synthesises slower; a hang is stopped here.
    const deadlineMs = 8 * 60_000;
    let timedOut = false;
    const deadline = setTimeout(() => {
      timedOut = true;
      process.kill(-group, 'SIGKILL');
    }, deadlineMs);
    try {
      const [code] = (await once(shell, 'exit')) as [number | null];
      const at =
        [...output.matchAll(/readme-test: block \d+ \(README\.md line \d+\)/g)].at(-1)?.[0] ?? 'no block';
      assert.ok(
        !timedOut,
        `the blocks did not finish within ${deadlineMs / 1000} s, in ${at}:\n${output.slice(-4000)}`,
      );
      assert.equal(code, 0, `${at} failed (exit ${String(code)}):\n${output.slice(-4000)}`);
      assert.match(output, /readme-test: every block ran/);

      // The player block is skipped, so its part is checked here while the service still runs: the
      // stream URL the flow printed opens in ffmpeg (what ffplay and mpv read with) as it is.
      const stream = /http:\/\/\S+\/api\/tts\/generate\/[\w-]+\/stream\.mp3\?auth=\w+/.exec(output)?.[0];
      assert.ok(stream !== undefined, 'the flow prints the stream URL');
      const { stdout } = await promisify(execFile)(
        'ffprobe',
        ['-v', 'error', '-show_entries', 'stream=codec_name:format=duration', '-of', 'json', stream],
        { timeout: 60_000 },
      );
      const probed = JSON.parse(stdout) as {
        streams: { codec_name: string }[];
        format: { duration: string };
      };
      assert.equal(probed.streams[0]?.codec_name, 'mp3');
      assert.ok(Number(probed.format.duration) > 1, `the stream: ${probed.format.duration} s`);
    } finally {
      clearTimeout(deadline);
      await endGroup(group);
    }

    const outputs = audioOutputs(blocks);
    assert.ok(outputs.includes('dialogue.mp3'), 'the main flow saves the dialogue');
    for (const name of outputs) {
      const path = join(project, name);
      assert.ok(existsSync(path), `${name} was written`);
      const bytes = readFileSync(path);
      const info = await probeAudio(bytes);
      assert.equal(info.codec, name.endsWith('.wav') ? 'pcm_s16le' : 'mp3', name);
      assert.ok(info.durationSeconds > 0.3, `${name}: ${info.durationSeconds} s of audio`);
      assert.equal(await ffmpegErrors(bytes), '', `${name} decodes cleanly`);
    }
  });
});

/** Stops what is left of the process group (the service), politely first. */
async function endGroup(group: number): Promise<void> {
  const alive = () => {
    try {
      process.kill(-group, 0);
      return true;
    } catch {
      return false;
    }
  };
  if (!alive()) return;
  process.kill(-group, 'SIGTERM');
  for (let waited = 0; waited < 15_000 && alive(); waited += 100) await sleep(100);
  if (alive()) process.kill(-group, 'SIGKILL');
}
