/**
 * Ogg Opus (RFC 7845): libopus compiled to WebAssembly by `@evan/opus` (its wasm build, so the
 * same code runs on every platform), in Ogg pages written by ogg.ts. 24 kHz mono input, 20 ms
 * frames at 48 kbit/s; the last frame is padded and the final granule position trims the padding.
 */
import { randomInt } from 'node:crypto';
import { createRequire } from 'node:module';
import type { AudioFormat } from './format.js';
import { MAX_SEGMENTS, OggStreamWriter } from './ogg.js';
import { OPENAI_RATE } from './pcm.js';

interface OpusEncoder {
  encode(pcm: ArrayBufferView): Uint8Array;
  ctl(cmd: number, value?: number): number;
  drop(): void;
}

const require = createRequire(import.meta.url);
// The wasm build directly: the package's entry would prefer a prebuilt native addon.
const { Encoder } = require('@evan/opus/wasm/index.js') as {
  Encoder: new (options: {
    channels: 1 | 2;
    sample_rate: number;
    application: 'voip' | 'audio';
  }) => OpusEncoder;
};

const OPUS_SET_BITRATE = 4002;
const OPUS_GET_LOOKAHEAD = 4027;
/** Ogg Opus positions count 48 kHz samples whatever the input rate. */
const GRANULE_RATE = 48_000;
const FRAME_SAMPLES = (OPENAI_RATE * 20) / 1000;
const BITRATE = 48_000;
/** Packets per page at most: a page goes out at the latest every 10 frames (200 ms). */
const PACKETS_PER_PAGE = 10;

function opusHead(preSkip: number): Uint8Array {
  const head = Buffer.alloc(19);
  head.write('OpusHead', 0, 'ascii');
  head.writeUInt8(1, 8); // version
  head.writeUInt8(1, 9); // channels
  head.writeUInt16LE(preSkip, 10);
  head.writeUInt32LE(OPENAI_RATE, 12); // input sample rate (informative)
  head.writeInt16LE(0, 16); // output gain
  head.writeUInt8(0, 18); // channel mapping family 0 (mono/stereo)
  return head;
}

function opusTags(): Uint8Array {
  const vendor = Buffer.from('voicegen (libopus via @evan/opus)', 'utf8');
  const tags = Buffer.alloc(8 + 4 + vendor.length + 4);
  tags.write('OpusTags', 0, 'ascii');
  tags.writeUInt32LE(vendor.length, 8);
  vendor.copy(tags, 12);
  tags.writeUInt32LE(0, 12 + vendor.length); // no user comments
  return tags;
}

async function* encodeOggOpus(pcm: AsyncIterable<Int16Array>): AsyncIterable<Uint8Array> {
  const encoder = new Encoder({ channels: 1, sample_rate: OPENAI_RATE, application: 'audio' });
  try {
    encoder.ctl(OPUS_SET_BITRATE, BITRATE);
    const scale = GRANULE_RATE / OPENAI_RATE;
    const preSkip = encoder.ctl(OPUS_GET_LOOKAHEAD) * scale;
    const ogg = new OggStreamWriter(randomInt(0, 2 ** 32));
    // The header pages go out with the first audio page, so that a synthesis failing before any
    // audio is still answered with an error instead of headers and a cut stream.
    let headers: Uint8Array[] | undefined = [
      ogg.page([opusHead(preSkip)], { bos: true, granule: 0n }),
      ogg.page([opusTags()], { granule: 0n }),
    ];
    const withHeaders = (page: Uint8Array): Uint8Array => {
      const out = headers === undefined ? page : Buffer.concat([...headers, page]);
      headers = undefined;
      return out;
    };

    const frame = new Int16Array(FRAME_SAMPLES);
    let filled = 0;
    let samples = 0;
    let frames = 0;
    // Pages carry the packets completed so far, always keeping the newest one back: the final
    // page, marked as the end, must carry at least one packet.
    let packets: Uint8Array[] = [];
    const take = (): Uint8Array | undefined => {
      if (packets.length <= PACKETS_PER_PAGE && OggStreamWriter.segmentsOf(packets) < MAX_SEGMENTS / 2)
        return undefined;
      const ready = packets.slice(0, -1);
      packets = packets.slice(-1);
      return ogg.page(ready, { granule: BigInt((frames - 1) * FRAME_SAMPLES * scale) });
    };
    for await (const chunk of pcm) {
      samples += chunk.length;
      for (let offset = 0; offset < chunk.length;) {
        const n = Math.min(FRAME_SAMPLES - filled, chunk.length - offset);
        frame.set(chunk.subarray(offset, offset + n), filled);
        filled += n;
        offset += n;
        if (filled === FRAME_SAMPLES) {
          packets.push(encoder.encode(frame));
          frames++;
          filled = 0;
          const page = take();
          if (page !== undefined) yield withHeaders(page);
        }
      }
    }
    // Pad with silence until the decoder can give back every input sample after its pre-skip
    // (the encoder's lookahead delays the input by that much).
    const end = preSkip + samples * scale;
    while (frames * FRAME_SAMPLES * scale < end) {
      frame.fill(0, filled);
      filled = 0;
      packets.push(encoder.encode(frame));
      frames++;
    }
    // The final granule position trims the padding: a decoder plays exactly `samples` after the pre-skip.
    yield withHeaders(ogg.page(packets, { eos: true, granule: BigInt(preSkip + samples * scale) }));
  } finally {
    encoder.drop();
  }
}

export const opus: AudioFormat = {
  id: 'opus',
  contentType: 'audio/ogg; codecs=opus',
  sampleRate: OPENAI_RATE,
  library: '@evan/opus (libopus in WebAssembly); Ogg pages written by the service',
  source: { kind: 'pcm', encode: encodeOggOpus },
};
