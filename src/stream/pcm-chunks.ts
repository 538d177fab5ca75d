/**
 * Piece PCM arrives as s16le bytes in chunks of any length (file reads, cache reads); the encoder
 * wants whole samples. This re-cuts the byte stream without ever splitting a sample.
 */
import { bufferToPcm } from '../audio/pcm.js';

/**
 * Yields the s16le bytes of `bytes` as Int16Array chunks of whole samples. An odd byte at the end
 * of a chunk is carried over to the next one (a sample split across two reads); an odd byte at the
 * very end of the stream is half a sample and is dropped.
 */
export async function* pcmChunks(bytes: AsyncIterable<unknown> | Iterable<unknown>): AsyncIterable<Int16Array> {
  let carry: number | null = null;
  for await (const item of bytes) {
    if (!(item instanceof Uint8Array)) throw new TypeError('piece PCM must be a byte stream');
    if (item.byteLength === 0) continue;
    let chunk: Uint8Array = item;
    if (carry !== null) {
      const joined = new Uint8Array(chunk.byteLength + 1);
      joined[0] = carry;
      joined.set(chunk, 1);
      chunk = joined;
      carry = null;
    }
    const even = chunk.byteLength - (chunk.byteLength % 2);
    if (even < chunk.byteLength) carry = chunk[even] ?? 0;
    if (even > 0) yield bufferToPcm(chunk.subarray(0, even));
  }
}
