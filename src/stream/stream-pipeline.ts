/**
 * The audio pipeline of one stream session: the PCM of the task's pieces
 * in index order as generation produces them, the silence after each (its `interval`) except the
 * last, all through ONE continuous MP3 encoder; or, per content, that piece alone (an
 * instruct/design piece's own engine MP3, when its engine delivered one).
 */
import { encodeContinuous, encodePiece, type ContinuousPiece } from '../audio/continuous-encoder.js';
import type { EncoderPool } from '../audio/encoder-pool.js';
import type { PieceAudioSource } from '../tasks/piece-audio.js';
import { pcmChunks } from '../audio/pcm-stream.js';

/** What a pipeline reads from and encodes with. */
export interface PipelineDeps {
  pieces: PieceAudioSource;
  encoders: EncoderPool;
}

/** One piece of the full-task stream: its index and the seconds of silence after it. */
export interface PipelinePiece {
  idx: number;
  interval: number;
}

/**
 * The pieces in index order, each opened only when the previous one has been encoded to its end
 * (openPiece waits for generation to reach it). The last piece gets no trailing silence.
 */
async function* orderedPieces(
  deps: PipelineDeps,
  taskId: string,
  pieces: readonly PipelinePiece[],
  signal: AbortSignal,
): AsyncIterable<ContinuousPiece> {
  const sorted = [...pieces].sort((a, b) => a.idx - b.idx);
  for (const [n, piece] of sorted.entries()) {
    const bytes = await deps.pieces.openPiece(taskId, piece.idx, signal);
    yield { pcm: pcmChunks(bytes), silenceAfterSeconds: n === sorted.length - 1 ? 0 : piece.interval };
  }
}

/**
 * MP3 bytes of the whole task: every piece and the silences between them, one encoder. While the
 * task is generated on this node, the encoding its generation makes anyway is forwarded instead:
 * the task's merged MP3, or for a task of one piece that piece's canonical MP3 — the same bytes
 * (one encoder over the same PCM and silences, none after the last piece), encoded once per
 * second of audio instead of twice.
 */
export async function* fullTaskAudio(
  deps: PipelineDeps,
  taskId: string,
  pieces: readonly PipelinePiece[],
  signal: AbortSignal,
): AsyncIterable<Uint8Array> {
  const [first, ...others] = [...pieces].sort((a, b) => a.idx - b.idx);
  if (first !== undefined) {
    const mp3 =
      (others.length === 0 ? await deps.pieces.openCanonicalMp3(taskId, first.idx, signal) : null) ??
      (await deps.pieces.openMergedMp3(taskId, first.idx, signal));
    if (mp3 !== null) {
      yield* mp3 as AsyncIterable<Uint8Array>;
      return;
    }
  }
  // A session's encoding has a reader: never the batch process's, whatever the task.
  const encoder = deps.encoders.open({ listened: true });
  yield* encodeContinuous(orderedPieces(deps, taskId, pieces, signal), encoder, signal);
}

/**
 * MP3 bytes of one content piece alone: the MP3 generation makes of it while it is synthesised
 * (the canonical encoding, no silence), forwarded as it grows; for an instruct/design piece whose
 * engine delivered MP3 itself, that MP3 unchanged (the engine's 24 kHz MP3, neither 320 kbps nor
 * 44.1 kHz). A complete piece with no MP3 kept beside its PCM is encoded here.
 */
export async function* contentAudio(
  deps: PipelineDeps,
  taskId: string,
  idx: number,
  signal: AbortSignal,
): AsyncIterable<Uint8Array> {
  const mp3 = await deps.pieces.openPieceMp3(taskId, idx, signal);
  if (mp3 !== null) {
    yield* mp3 as AsyncIterable<Uint8Array>;
    return;
  }
  const bytes = await deps.pieces.openPiece(taskId, idx, signal);
  yield* encodePiece(pcmChunks(bytes), deps.encoders.open({ listened: true }), signal);
}
