/**
 * An Ogg page writer (RFC 3533) for one logical stream: enough to carry Opus packets as Ogg Opus
 * (RFC 7845). Pages are made as packets arrive, so the stream can be sent while it is encoded.
 */

/** CRC-32 of Ogg pages: polynomial 0x04C11DB7, not reflected, initial value 0. */
const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let r = i << 24;
    for (let bit = 0; bit < 8; bit++) r = r & 0x80000000 ? (r << 1) ^ 0x04c11db7 : r << 1;
    table[i] = r >>> 0;
  }
  return table;
})();

function oggCrc(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) crc = ((crc << 8) ^ (CRC_TABLE[((crc >>> 24) ^ byte) & 0xff] ?? 0)) >>> 0;
  return crc;
}

/** Most segments one page can list; each packet takes floor(length / 255) + 1 of them. */
const MAX_SEGMENTS = 255;

export interface OggPageOptions {
  /** First page of the stream. */
  bos?: boolean;
  /** Last page of the stream. */
  eos?: boolean;
  /** The codec's position after the last packet that ends on this page. */
  granule: bigint;
}

/** Writes the pages of one logical Ogg stream, numbering them in order. */
export class OggStreamWriter {
  private sequence = 0;

  constructor(private readonly serial: number) {}

  /** Segments `packets` would take on one page. */
  static segmentsOf(packets: readonly Uint8Array[]): number {
    return packets.reduce((n, p) => n + Math.floor(p.length / 255) + 1, 0);
  }

  /** One page holding `packets` whole (callers keep them within MAX_SEGMENTS segments). */
  page(packets: readonly Uint8Array[], options: OggPageOptions): Uint8Array {
    const lacing: number[] = [];
    for (const packet of packets) {
      for (let left = packet.length; ; left -= 255) {
        lacing.push(Math.min(left, 255));
        if (left < 255) break;
      }
    }
    if (lacing.length > MAX_SEGMENTS) throw new RangeError('too many packets for one Ogg page');
    const bodyLength = packets.reduce((n, p) => n + p.length, 0);
    const page = Buffer.alloc(27 + lacing.length + bodyLength);
    page.write('OggS', 0, 'ascii');
    page.writeUInt8(0, 4); // version
    page.writeUInt8((options.bos === true ? 0x02 : 0) | (options.eos === true ? 0x04 : 0), 5);
    page.writeBigInt64LE(options.granule, 6);
    page.writeUInt32LE(this.serial, 14);
    page.writeUInt32LE(this.sequence++, 18);
    page.writeUInt32LE(0, 22); // CRC, computed over the page with this field zero
    page.writeUInt8(lacing.length, 26);
    Buffer.from(lacing).copy(page, 27);
    let offset = 27 + lacing.length;
    for (const packet of packets) {
      page.set(packet, offset);
      offset += packet.length;
    }
    page.writeUInt32LE(oggCrc(page), 22);
    return page;
  }
}

export { MAX_SEGMENTS };
