/**
 * The audio formats the OpenAI-compatible speech route answers in. A format is one module that
 * exports an `AudioFormat`, listed once in registry.ts: MP3 is the service's own 320 kbps stream
 * (the bytes one-shot synthesis makes anyway); every other format encodes the piece's PCM,
 * resampled from the canonical 44.1 kHz to the format's rate, chunk by chunk as it arrives.
 */

/** An encoder from mono s16 PCM (at the format's `sampleRate`) to the format's bytes, streaming. */
export type PcmEncoder = (pcm: AsyncIterable<Int16Array>) => AsyncIterable<Uint8Array>;

export interface AudioFormat {
  /** The `response_format` value that selects it. */
  id: string;
  /** The Content-Type of its bytes. */
  contentType: string;
  /** Its sample rate (Hz). */
  sampleRate: number;
  /** The npm library that encodes it (documented beside the format); none for raw PCM and WAV. */
  library?: string;
  /**
   * `mp3`: the piece's canonical MP3 bytes as they are. Otherwise: the encoder of its PCM (mono,
   * s16, at `sampleRate`).
   */
  source: { kind: 'mp3' } | { kind: 'pcm'; encode: PcmEncoder };
}
