/**
 * The heart of the stream: all pieces of a task, and the silences between them, go through ONE
 * MP3 encoder that is flushed once at the very end. Separately encoded files cannot be joined
 * without gaps (encoder priming and frame padding at every join; reservoir frames cannot be
 * spliced), so this is the only way to get a gapless, continuous 320 kbps stream.
 */
import type { Mp3Encoder } from './encoder-pool.js';
import { MP3_FRAME_SAMPLES, samplesFor } from './pcm.js';

/** One content piece: its canonical PCM (progressive) and the silence that follows it if another piece comes. */
export interface ContinuousPiece {
  pcm: AsyncIterable<Int16Array> | Iterable<Int16Array>;
  silenceAfterSeconds: number;
}

/**
 * PCM is handed to the encoder in blocks of exactly this many samples (10 frames, ≈ 0.26 s), so
 * the encoder sees the same calls whatever the chunking of the input, and bytes are reproducible.
 */
export const ENCODE_BLOCK_SAMPLES = MP3_FRAME_SAMPLES * 10;

/**
 * Encodes `pieces` in order through `encoder`, each followed by its silence except the last,
 * yielding MP3 bytes as they come out. Owns the encoder: finishes it at the end, aborts it on
 * error, abort or early return. Aborting `signal` stops between blocks with the abort reason.
 */
export async function* encodeContinuous(
  pieces: AsyncIterable<ContinuousPiece> | Iterable<ContinuousPiece>,
  encoder: Mp3Encoder,
  signal?: AbortSignal,
): AsyncIterable<Uint8Array> {
  const blocks = new BlockBuilder(ENCODE_BLOCK_SAMPLES);
  let finished = false;
  try {
    let silenceBefore = 0;
    for await (const piece of pieces) {
      yield* encodeAll(blocks.addSilence(silenceBefore), encoder, signal);
      for await (const pcm of piece.pcm) yield* encodeAll(blocks.add(pcm), encoder, signal);
      silenceBefore = silenceSamples(piece.silenceAfterSeconds);
    }
    yield* encodeAll(blocks.rest(), encoder, signal);
    finished = true;
    const last = await encoder.finish();
    if (last.length > 0) yield last;
  } finally {
    if (!finished) encoder.abort();
  }
}

/** Encodes a single piece (no trailing silence); same guarantees as `encodeContinuous`. */
export function encodePiece(
  pcm: AsyncIterable<Int16Array> | Iterable<Int16Array>,
  encoder: Mp3Encoder,
  signal?: AbortSignal,
): AsyncIterable<Uint8Array> {
  return encodeContinuous([{ pcm, silenceAfterSeconds: 0 }], encoder, signal);
}

async function* encodeAll(
  blocks: Iterable<Int16Array>,
  encoder: Mp3Encoder,
  signal: AbortSignal | undefined,
): AsyncIterable<Uint8Array> {
  for (const block of blocks) {
    signal?.throwIfAborted();
    const mp3 = await encoder.encode(block);
    if (mp3.length > 0) yield mp3;
  }
}

/** Samples of `seconds` of silence between two pieces (a finite, non-negative duration). */
export function silenceSamples(seconds: number): number {
  if (!Number.isFinite(seconds) || seconds < 0)
    throw new RangeError(`silence must be a finite, non-negative duration, got ${seconds}`);
  return samplesFor(seconds);
}

/** Re-chunks PCM into fixed-size blocks; each yielded block is a fresh array the encoder may take over. */
class BlockBuilder {
  private block: Int16Array;
  private fill = 0;

  constructor(private readonly size: number) {
    this.block = new Int16Array(size);
  }

  *add(pcm: Int16Array): Generator<Int16Array> {
    for (let offset = 0; offset < pcm.length;) {
      const n = Math.min(this.size - this.fill, pcm.length - offset);
      this.block.set(pcm.subarray(offset, offset + n), this.fill);
      this.fill += n;
      offset += n;
      if (this.fill === this.size) yield this.take();
    }
  }

  /** Silence costs no copying: a fresh block is all zeros past `fill`. */
  *addSilence(samples: number): Generator<Int16Array> {
    for (let left = samples; left > 0;) {
      const n = Math.min(this.size - this.fill, left);
      this.fill += n;
      left -= n;
      if (this.fill === this.size) yield this.take();
    }
  }

  /** The last, partial block (if any). */
  *rest(): Generator<Int16Array> {
    const n = this.fill;
    if (n > 0) yield this.take().slice(0, n);
  }

  private take(): Int16Array {
    const full = this.block;
    this.block = new Int16Array(this.size);
    this.fill = 0;
    return full;
  }
}
