/** Turns a byte stream of s16le PCM (chunks of any length, even odd) into Int16Array chunks. */
import type { Readable } from 'node:stream';

/**
 * Yields whole samples; an odd trailing byte is carried into the next chunk. A chunk whose bytes
 * start on a sample boundary in memory is yielded as a view of them (no copy: the audio of a task
 * passes here once per encoder, and each of its consumers copies or reads it anyway); one that
 * does not is copied. The views share the source's memory, so consumers read them and never change
 * or transfer them; the sources (a piece's PCM file or its in-memory tail) never reuse a chunk's
 * bytes once it is handed out.
 */
export async function* pcmChunks(
  bytes: Readable | AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
): AsyncIterable<Int16Array> {
  let carry: number | null = null;
  for await (const chunk of bytes as AsyncIterable<Uint8Array>) {
    let data = chunk;
    if (carry !== null) {
      const joined = new Uint8Array(chunk.length + 1);
      joined[0] = carry;
      joined.set(chunk, 1);
      data = joined;
      carry = null;
    }
    const even = data.length & ~1;
    if (even < data.length) carry = data[data.length - 1] ?? 0;
    if (even === 0) continue;
    if (data.byteOffset % 2 === 0) {
      yield new Int16Array(data.buffer, data.byteOffset, even / 2);
      continue;
    }
    const samples = new Int16Array(even / 2);
    new Uint8Array(samples.buffer).set(data.subarray(0, even));
    yield samples;
  }
}
