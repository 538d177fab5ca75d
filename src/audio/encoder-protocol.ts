/** Messages between the encoder pool (main thread) and its workers; one LAME instance per `id`. */

/**
 * Main → worker. `open` and `abort` get no reply; `encode`, `encode-file` and `finish` get exactly
 * one. A stream opened with `out` writes its MP3 to that file (created owner-only, replacing what
 * was there) instead of answering with it, and may take its PCM from a file (`encode-file`: whole
 * samples of canonical PCM at `offset`): its audio then never passes through the main thread.
 */
export type EncoderRequest =
  | { op: 'open'; id: number; out?: string }
  | { op: 'encode'; id: number; pcm: Int16Array }
  | { op: 'encode-file'; id: number; path: string; offset: number; length: number }
  | { op: 'finish'; id: number }
  | { op: 'abort'; id: number };

/** Worker → main: the MP3 bytes produced by one `encode` or `finish`, or why it failed. */
export type EncoderReply =
  | {
      id: number;
      ok: true;
      mp3: Uint8Array;
      /** PCM samples this call encoded, and the worker's milliseconds on it (encoder metrics). */
      samples: number;
      ms: number;
      /** A stream with an `out` file: the MP3 bytes written to it so far (`mp3` is then empty). */
      written?: number;
    }
  | { id: number; ok: false; error: string };
