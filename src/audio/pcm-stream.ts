/** Turns a byte stream of s16le PCM (chunks of any length, even odd) into Int16Array chunks. */
import type { Readable } from 'node:stream';

/** Yields whole samples; an odd trailing byte is carried into the next chunk. */
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
    // Copy into a fresh, aligned buffer the encoder may take over (transfer).
    const samples = new Int16Array(even / 2);
    new Uint8Array(samples.buffer).set(data.subarray(0, even));
    yield samples;
  }
}
