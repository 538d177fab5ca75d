/**
 * Streaming sample-rate conversion of mono s16 PCM to the canonical 44.1 kHz, over the Speex
 * resampler compiled to wasm (quality 5: flat to 9 kHz, images below −100 dBc, ≈1000× real time).
 * Output length is exact — round(inputSamples × 44100 / inRate) — so durations add up downstream.
 */
import loadSpeex, { type SpeexModule } from '@echogarden/speex-resampler-wasm';
import { CANONICAL_RATE, concatPcm } from './pcm.js';

/** Speex quality used everywhere (0–10); 5 is the measured speed/quality sweet spot. */
export const RESAMPLER_QUALITY = 5;

/** A one-stream converter to 44.1 kHz mono; `flush()` ends the stream and frees its state. */
export interface Resampler {
  readonly inRate: number;
  /** Converts the next chunk; may return fewer samples than the ratio implies (the filter delay). Identity rate returns the chunk itself. */
  process(chunk: Int16Array): Int16Array;
  /** Drains the filter tail so the total output is round(total input × outRate / inRate); the resampler is then closed. */
  flush(): Int16Array;
  /** Frees the wasm state without draining (abandoned streams); idempotent. */
  destroy(): void;
}

// One wasm instance per thread, shared by all resampler states of that thread.
let speexModule: Promise<SpeexModule> | undefined;

/** Input samples handed to wasm per call; bounds the scratch buffers. */
const BLOCK_IN = 4096;

/**
 * Creates a resampler from `inRate` to `outRate` (44.1 kHz unless given; pass-through when the
 * rates are equal). Output formats other than the canonical one convert from 44.1 kHz.
 */
export async function createResampler(inRate: number, outRate: number = CANONICAL_RATE): Promise<Resampler> {
  for (const rate of [inRate, outRate]) {
    if (!Number.isInteger(rate) || rate < 1000 || rate > 384000) {
      throw new RangeError(`unsupported sample rate ${rate}`);
    }
  }
  if (inRate === outRate) return new IdentityResampler(inRate);
  speexModule ??= loadSpeex();
  return new SpeexResampler(await speexModule, inRate, outRate);
}

class IdentityResampler implements Resampler {
  constructor(readonly inRate: number) {}
  process(chunk: Int16Array): Int16Array {
    return chunk;
  }
  flush(): Int16Array {
    return new Int16Array(0);
  }
  destroy(): void {}
}

class SpeexResampler implements Resampler {
  private state: number;
  private readonly inPtr: number;
  private readonly outPtr: number;
  private readonly lensPtr: number; // two uint32: [in_len, out_len], updated in place by speex
  private readonly outCap: number;
  private inTotal = 0;
  private outTotal = 0;

  constructor(
    private readonly m: SpeexModule,
    readonly inRate: number,
    private readonly outRate: number,
  ) {
    this.outCap = Math.ceil((BLOCK_IN * outRate) / inRate) + 64;
    this.inPtr = m._malloc(BLOCK_IN * 2);
    this.outPtr = m._malloc(this.outCap * 2);
    this.lensPtr = m._malloc(8);
    this.state = m._speex_resampler_init(1, inRate, outRate, RESAMPLER_QUALITY, this.lensPtr);
    if (this.state === 0) {
      this.freeBuffers();
      throw new Error(`speex_resampler_init failed for ${inRate} Hz`);
    }
    // Drop the filter's leading delay so output sample 0 lines up with input sample 0.
    m._speex_resampler_skip_zeros(this.state);
  }

  process(chunk: Int16Array): Int16Array {
    this.inTotal += chunk.length;
    return this.run(chunk);
  }

  flush(): Int16Array {
    const need = Math.max(0, Math.round((this.inTotal * this.outRate) / this.inRate) - this.outTotal);
    const tail = new Int16Array(need);
    let filled = 0;
    // Push zeros through until the delayed tail is out (one round of latency+1 zeros is normally enough);
    // anything past `need` is filter ringing on the zero padding and is dropped.
    let zeros = new Int16Array(this.m._speex_resampler_get_input_latency(this.state) + 1);
    for (let round = 0; filled < need && round < 8; round++) {
      const out = this.run(zeros);
      const n = Math.min(out.length, need - filled);
      tail.set(out.subarray(0, n), filled);
      filled += n;
      zeros = new Int16Array(64);
    }
    this.destroy();
    return tail;
  }

  destroy(): void {
    if (this.state === 0) return;
    this.m._speex_resampler_destroy(this.state);
    this.state = 0;
    this.freeBuffers();
  }

  // Runs the filter over `input`; does not count it into inTotal (flush feeds padding through here).
  private run(input: Int16Array): Int16Array {
    if (this.state === 0) throw new Error('resampler is closed');
    const m = this.m;
    const parts: Int16Array[] = [];
    let offset = 0;
    while (offset < input.length) {
      const n = Math.min(BLOCK_IN, input.length - offset);
      // Views are re-read on every call: wasm memory growth replaces the HEAP arrays.
      m.HEAP16.set(input.subarray(offset, offset + n), this.inPtr >> 1);
      m.HEAPU32[this.lensPtr >> 2] = n;
      m.HEAPU32[(this.lensPtr >> 2) + 1] = this.outCap;
      const err = m._speex_resampler_process_int(
        this.state,
        0,
        this.inPtr,
        this.lensPtr,
        this.outPtr,
        this.lensPtr + 4,
      );
      if (err !== 0) throw new Error(`speex_resampler_process_int failed (${err})`);
      const consumed = m.HEAPU32[this.lensPtr >> 2] ?? 0;
      const got = m.HEAPU32[(this.lensPtr >> 2) + 1] ?? 0;
      if (consumed === 0 && got === 0) throw new Error('speex resampler made no progress');
      parts.push(m.HEAP16.slice(this.outPtr >> 1, (this.outPtr >> 1) + got));
      offset += consumed;
    }
    const out = parts.length === 1 && parts[0] !== undefined ? parts[0] : concatPcm(parts);
    this.outTotal += out.length;
    return out;
  }

  private freeBuffers(): void {
    this.m._free(this.inPtr);
    this.m._free(this.outPtr);
    this.m._free(this.lensPtr);
  }
}
