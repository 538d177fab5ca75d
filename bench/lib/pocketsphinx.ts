/**
 * Debian's offline recogniser as a listener (bench:voices): `pocketsphinx` with its US English
 * model `pocketsphinx-en-us`, installed on demand. Debian 12 ships 0.8+5prealpha, whose CLI is
 * `pocketsphinx_continuous -infile <16 kHz mono s16 WAV>`: it prints one line per utterance it
 * finds and logs to stderr (silenced with -logfn). Its default acoustic model, language model and
 * dictionary are the en-us ones that package installs.
 */
import { spawn, spawnSync } from 'node:child_process';
import { CANONICAL_RATE } from '../../src/audio/pcm.js';
import { aptInstall, ensureDebianPackages } from './server.js';

const RECOGNISER = 'pocketsphinx_continuous';
/** The rate the en-us acoustic model was trained at. */
const MODEL_RATE = 16_000;

function debianPackageInstalled(pkg: string): boolean {
  const status = spawnSync('dpkg-query', ['-W', '-f=${Status}', pkg], { encoding: 'utf8' });
  return status.status === 0 && status.stdout.trim() === 'install ok installed';
}

/** Installs the recogniser, its English model and ffmpeg (the resampler) when missing; idempotent. */
export function ensureRecogniser(): void {
  ensureDebianPackages({ ffmpeg: 'ffmpeg' });
  aptInstall(['pocketsphinx', 'pocketsphinx-en-us'].filter((p) => !debianPackageInstalled(p)));
  if (spawnSync('sh', ['-c', `command -v ${RECOGNISER}`]).status !== 0) {
    // pocketsphinx 5 (Debian 13 and later) replaced this CLI with `pocketsphinx single`.
    throw new Error(`${RECOGNISER} is missing: this bench runs Debian 12's pocketsphinx (0.8+5prealpha)`);
  }
}

function run(command: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve(out) : reject(new Error(`${command} exited ${code}: ${err.slice(-500)}`)),
    );
  });
}

/**
 * What the recogniser hears in a file of canonical PCM (44.1 kHz mono s16, as the engines yield
 * it): ffmpeg resamples it to 16 kHz into a WAV file beside it, which is then transcribed.
 */
export async function transcribe(rawPcmPath: string): Promise<string> {
  const wav = rawPcmPath.replace(/(\.[^./]*)?$/, '.16k.wav');
  await run('ffmpeg', [
    ...['-hide_banner', '-loglevel', 'error', '-y'],
    ...['-f', 's16le', '-ar', String(CANONICAL_RATE), '-ac', '1', '-i', rawPcmPath],
    ...['-ar', String(MODEL_RATE), '-ac', '1', '-c:a', 'pcm_s16le', wav],
  ]);
  const out = await run(RECOGNISER, ['-infile', wav, '-logfn', '/dev/null']);
  return out
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '')
    .join(' ');
}
