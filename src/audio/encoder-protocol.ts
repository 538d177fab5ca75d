/** Messages between the encoder pool (main thread) and its workers; one LAME instance per `id`. */

/** Main → worker. `open` and `abort` get no reply; `encode` and `finish` get exactly one. */
export type EncoderRequest =
  | { op: 'open'; id: number }
  | { op: 'encode'; id: number; pcm: Int16Array }
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
    }
  | { id: number; ok: false; error: string };
