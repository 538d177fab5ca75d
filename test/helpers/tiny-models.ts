/**
 * The tests' own Kokoro-, Kitten- and Matcha-shaped models: scripts/make-tiny-models.py (Debian's
 * python3-onnx) writes a model folder of each family that sherpa-onnx loads and runs for real,
 * phonemizing with Debian's espeak-ng data (linked in as `espeak-ng-data/`). Their audio is a tone
 * of a fixed number of samples per phoneme token, pitched by speaker (speakers `tone_0`, `tone_1`…).
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export type TinyFamily = 'kokoro' | 'kitten' | 'matcha';

export const TINY_FAMILIES: readonly TinyFamily[] = ['kokoro', 'kitten', 'matcha'];

/** What each family's tiny model gives: its rate, samples per phoneme, and tone pitch of speaker i. */
export const TINY_MODEL_AUDIO: Readonly<
  Record<TinyFamily, { rate: number; samplesPerPhoneme: number; pitch: (speaker: number) => number }>
> = {
  kokoro: { rate: 24_000, samplesPerPhoneme: 512, pitch: (i) => 220 + 110 * i },
  kitten: { rate: 24_000, samplesPerPhoneme: 512, pitch: (i) => 220 + 110 * i },
  // Two mel frames (256 samples each) per token, and sherpa-onnx puts a blank token after each
  // phoneme. The vocoder lights STFT bin 16 (i + 1) of 1024 at 22050 Hz.
  matcha: { rate: 22_050, samplesPerPhoneme: 1024, pitch: (i) => (16 * (i + 1) * 22_050) / 1024 },
};

const SCRIPT = fileURLToPath(new URL('../../scripts/make-tiny-models.py', import.meta.url));

/**
 * Writes a tiny model of `family` into `modelsDir/name` (its speakers: `speakers`, its model's
 * metadata changed by `meta`); returns the folder.
 */
export function makeTinyModel(
  modelsDir: string,
  family: TinyFamily,
  name: string = family,
  speakers = 2,
  meta: Readonly<Record<string, string>> = {},
): string {
  const dir = join(modelsDir, name);
  const args = [SCRIPT, dir, '--family', family, '--speakers', String(speakers)];
  for (const [key, value] of Object.entries(meta)) args.push('--meta', `${key}=${value}`);
  // Debian's interpreter: the python3-onnx package installs the module for it alone.
  execFileSync('/usr/bin/python3', args, { stdio: 'pipe' });
  return dir;
}

/**
 * What the tiny ZipVoice model gives: 512 samples per phoneme token at 24 kHz, a tone in the mel
 * band where the reference clip is loudest (of 8 bands up to 12 kHz), at STFT bin 16 (band + 1) of
 * 1024: a clip below about 550 Hz gives 375 Hz, a clip around 1500 Hz gives 1500 Hz.
 */
export const TINY_ZIPVOICE_AUDIO = {
  rate: 24_000,
  samplesPerPhoneme: 512,
  pitch: (band: number) => 375 * (band + 1),
};

/** Writes the tiny ZipVoice model (a reference-audio model: no speakers) into `modelsDir/name`. */
export function makeTinyZipvoice(modelsDir: string, name = 'zipvoice'): string {
  const dir = join(modelsDir, name);
  execFileSync('/usr/bin/python3', [SCRIPT, dir, '--family', 'zipvoice'], { stdio: 'pipe' });
  return dir;
}

/**
 * The tiny Pocket TTS model's audio: a tone at the reference clip's pitch (its zero crossings, in
 * Hz), `samplesPerFrame` samples per SentencePiece token of the text and three frames more.
 */
export const TINY_POCKET_AUDIO = { rate: 24_000, samplesPerFrame: 480 };

/** Writes the tiny Pocket TTS model (a reference-audio model: no speakers) into `modelsDir/name`. */
export function makeTinyPocket(modelsDir: string, name = 'pocket'): string {
  const dir = join(modelsDir, name);
  execFileSync('/usr/bin/python3', [SCRIPT, dir, '--family', 'pocket'], { stdio: 'pipe' });
  return dir;
}
