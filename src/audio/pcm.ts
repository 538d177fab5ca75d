/**
 * Canonical PCM of the service: 44100 Hz, mono, signed 16-bit in an Int16Array. Engines deliver it,
 * the continuous encoder consumes it; everything in between stays in this one format.
 */

/** Sample rate of all PCM inside the service (MP3 at 320 kbps needs ≥ 32 kHz; 44.1 kHz is the output rate). */
export const CANONICAL_RATE = 44100;

/** Samples of one MPEG-1 Layer III frame; encoder input blocks are multiples of it. */
export const MP3_FRAME_SAMPLES = 1152;

/** Number of canonical samples for a duration, rounded to the nearest sample so lengths are exact and reproducible. */
export function samplesFor(seconds: number): number {
  return Math.round(seconds * CANONICAL_RATE);
}

/** Digital silence of exactly round(seconds × 44100) samples (negative or NaN durations give none). */
export function silence(seconds: number): Int16Array {
  return new Int16Array(Number.isFinite(seconds) && seconds > 0 ? samplesFor(seconds) : 0);
}

/** Views PCM as a Buffer over the same memory (no copy), e.g. to write it to a socket or child process. */
export function pcmToBuffer(pcm: Int16Array): Buffer {
  return Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength);
}

/**
 * Views s16le bytes as PCM. No copy when the bytes are 2-byte aligned; Node's pooled Buffers can
 * start at an odd offset, and only then are the bytes copied (a typed array cannot be misaligned).
 */
export function bufferToPcm(bytes: Uint8Array): Int16Array {
  if (bytes.byteLength % 2 !== 0)
    throw new RangeError(`s16 PCM needs an even byte count, got ${bytes.byteLength}`);
  if (bytes.byteOffset % 2 === 0) return new Int16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 2);
  // `new Uint8Array(view)` copies (Buffer#slice would not).
  return new Int16Array(new Uint8Array(bytes).buffer);
}

/** Interleaves mono PCM into stereo (L = R), the layout of raw s16 stereo files and native encoders. */
export function monoToStereo(pcm: Int16Array): Int16Array {
  const out = new Int16Array(pcm.length * 2);
  for (let i = 0; i < pcm.length; i++) {
    const s = pcm[i] ?? 0;
    out[2 * i] = s;
    out[2 * i + 1] = s;
  }
  return out;
}

/** Converts float samples (−1…1) to s16 with clipping; decoders and mixers produce floats. */
export function floatToPcm(samples: Float32Array): Int16Array {
  const out = new Int16Array(samples.length);
  for (let i = 0; i < samples.length; i++) {
    const v = Math.round((samples[i] ?? 0) * 32768);
    out[i] = v > 32767 ? 32767 : v < -32768 ? -32768 : v;
  }
  return out;
}

/** Converts s16 PCM to float samples (−1…1), the input format of the wasm LAME encoder. */
export function pcmToFloat(pcm: Int16Array): Float32Array {
  const out = new Float32Array(pcm.length);
  for (let i = 0; i < pcm.length; i++) out[i] = (pcm[i] ?? 0) / 32768;
  return out;
}

/** Joins PCM chunks into one array (for tests, benchmarks and small whole-buffer jobs). */
export function concatPcm(chunks: readonly Int16Array[]): Int16Array {
  let total = 0;
  for (const c of chunks) total += c.length;
  const out = new Int16Array(total);
  let offset = 0;
  for (const c of chunks) {
    out.set(c, offset);
    offset += c.length;
  }
  return out;
}
