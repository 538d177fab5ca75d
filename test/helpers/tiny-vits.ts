/**
 * The tests' own neural voice model: scripts/make-tiny-vits.py (Debian's python3-onnx) writes a
 * tiny VITS-shaped model folder that sherpa-onnx loads and runs for real. Its audio is a tone of
 * TINY_VITS_SAMPLES_PER_TOKEN samples (at TINY_VITS_RATE) per character of text, pitched by speaker.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const TINY_VITS_RATE = 16_000;
export const TINY_VITS_SAMPLES_PER_TOKEN = 256;

const SCRIPT = fileURLToPath(new URL('../../scripts/make-tiny-vits.py', import.meta.url));

/** Writes the tiny model into `modelsDir/name` (its speakers: `speakers`); returns the folder. */
export function makeTinyVits(modelsDir: string, name = 'tiny', speakers = 2): string {
  const dir = join(modelsDir, name);
  // Debian's interpreter: the python3-onnx package installs the module for it alone.
  execFileSync('/usr/bin/python3', [SCRIPT, dir, '--speakers', String(speakers)], { stdio: 'pipe' });
  return dir;
}
