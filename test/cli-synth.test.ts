// `voicegen synth` — a marked dialogue file and a splitter JSON to a valid MP3 of
// the right duration, in-process (no server) and through a running server; --json for scripts;
// clear errors with exit code 1.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ffmpegErrors, probeAudio } from './helpers/audio-check.js';
import { runCli, type CliResult } from './helpers/cli.js';
import { startTestApp, type TestApp } from './helpers/test-app.js';

/** Runs the CLI; resolves with its exit code and output (never rejects on a non-zero exit). */
function cli(...args: string[]): Promise<CliResult> {
  return runCli({}, args, 180_000);
}

interface Summary {
  taskId: string;
  pieces: number;
  piecesDone: number;
  audioSeconds: number;
  wallSeconds: number;
  audioSecondsPerWallSecond: number;
  file: string;
  bytes: number;
}

const DIALOGUE =
  '<A>Good evening, and welcome to the show. <B>Thank you, it is good to be here. <A>Let us begin.';
const SPLITTER = {
  '<A>': { voiceId: 'espeak:en-us+m3', speechRate: 1 },
  '<B>': { voiceId: 'espeak:en-us+f3', speechRate: 1 },
  fallbackConfig: { voiceId: 'espeak:en-us' },
};

/** The file is a clean 320 kbps MP3 whose length is the summary's audio (within the codec's padding). */
async function assertMp3(path: string, summary: Summary): Promise<void> {
  const bytes = await readFile(path);
  assert.equal(bytes.length, summary.bytes);
  assert.equal(await ffmpegErrors(bytes), '');
  const info = await probeAudio(bytes);
  assert.equal(info.codec, 'mp3');
  assert.equal(info.bitRate, 320_000);
  assert.ok(
    Math.abs(info.durationSeconds - summary.audioSeconds) < 0.1,
    `duration ${info.durationSeconds} s ≈ the pieces and their silences ${summary.audioSeconds} s`,
  );
}

describe('voicegen synth', () => {
  let dir: string;
  let dialogue: string;
  let splitter: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'voicegen-synth-test-'));
    dialogue = join(dir, 'dialogue.txt');
    splitter = join(dir, 'splitter.json');
    await writeFile(dialogue, DIALOGUE);
    await writeFile(splitter, JSON.stringify(SPLITTER));
  });
  after(async () => rm(dir, { recursive: true, force: true }));

  it('in-process: a dialogue file and a splitter to an MP3 of the right duration, a JSON summary', async () => {
    const out = join(dir, 'in-process.mp3');
    const answer = await cli('synth', `@${dialogue}`, '--splitter', splitter, '-o', out, '--json');
    assert.equal(answer.code, 0, answer.stderr);
    const summary = JSON.parse(answer.stdout) as Summary;
    assert.equal(summary.pieces, 3, 'one piece per marker');
    assert.equal(summary.piecesDone, 3);
    assert.ok(summary.audioSeconds > 3);
    assert.ok(summary.audioSecondsPerWallSecond > 0);
    await assertMp3(out, summary);
  });

  describe('against a running server', () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp({ listen: true });
    });
    after(async () => t.close());

    it('--url and --key: the same through the public API; plain text with a voice; a human summary', async () => {
      const out = join(dir, 'remote.mp3');
      const json = await cli(
        '--url',
        t.baseUrl,
        'synth',
        `@${dialogue}`,
        '--splitter',
        splitter,
        '--key',
        t.key,
        '-o',
        out,
        '--json',
      );
      assert.equal(json.code, 0, json.stderr);
      const summary = JSON.parse(json.stdout) as Summary;
      assert.equal(summary.pieces, 3);
      await assertMp3(out, summary);
      const task = await t.app.services.tasks.get(t.accountId, summary.taskId);
      assert.equal(task.status, 'generated', 'the task is the server’s');

      const plain = join(dir, 'plain.mp3');
      const human = await cli(
        '--url',
        t.baseUrl,
        'synth',
        'One voice, one sentence.',
        '--voice',
        'espeak:de',
        '--key',
        t.key,
        '-o',
        plain,
      );
      assert.equal(human.code, 0, human.stderr);
      assert.match(
        human.stdout,
        /plain\.mp3: 1 piece\(s\), [\d.]+ s of audio, \d+ KiB, in [\d.]+ s \([\d.]+ audio-seconds per wall-second\)/,
      );
      const wrongKey = await cli(
        '--url',
        t.baseUrl,
        'synth',
        'x',
        '--key',
        `sk-${'0'.repeat(32)}`,
        '-o',
        plain,
      );
      assert.equal(wrongKey.code, 1);
      assert.match(wrongKey.stderr, /AUTH_UNAUTHORIZED|401/);
    });
  });

  it('bad input: clear messages and exit code 1; no server at --url: exit code 2', async () => {
    const out = join(dir, 'never.mp3');
    const missing = await cli('synth', `@${join(dir, 'absent.txt')}`, '-o', out);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /cannot read .*absent\.txt/);
    await writeFile(join(dir, 'broken.json'), '{"<A>": ');
    const broken = await cli('synth', 'text', '--splitter', join(dir, 'broken.json'), '-o', out);
    assert.equal(broken.code, 1);
    assert.match(broken.stderr, /cannot read the splitter/);
    const badVoice = await cli('synth', 'text', '--voice', 'no-such-voice', '-o', out);
    assert.equal(badVoice.code, 1);
    assert.match(badVoice.stderr, /error: creating the task: .*voice/i);
    const unreachable = await cli(
      '--url',
      'http://127.0.0.1:9',
      'synth',
      'text',
      '--key',
      `sk-${'0'.repeat(32)}`,
      '-o',
      out,
    );
    assert.equal(unreachable.code, 2);
    assert.match(unreachable.stderr, /cannot reach http:\/\/127\.0\.0\.1:9/);
  });
});
