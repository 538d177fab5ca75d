/**
 * Reference clips: the short recording a voice of a reference-audio model (ZipVoice) speaks like.
 * A clip arrives as WAV or MP3 bytes, is decoded to mono, resampled to the model's rate, and
 * stored as a 16-bit mono WAV that the neural engine reads back at synthesis.
 */
import { MPEGDecoder } from 'mpg123-decoder';
import { concatPcm, floatToPcm } from './pcm.js';
import { createResampler } from './resampler.js';
import { wavHeader } from './formats/wav.js';

/** Mono samples in [-1, 1] at `sampleRate`. */
export interface Clip {
  samples: Float32Array;
  sampleRate: number;
}

/** Why bytes are not a clip, in words for the client (the caller turns it into a 400). */
export class ClipError extends Error {}

/** Clip lengths accepted: ZipVoice's prompts are a few seconds; a long one slows every sentence. */
export const MIN_CLIP_SECONDS = 0.5;
export const MAX_CLIP_SECONDS = 30;

/** The clip of WAV (PCM 8/16/24/32-bit or 32-bit float, any channels) or MP3 bytes, mixed to mono. */
export async function decodeClip(bytes: Uint8Array): Promise<Clip> {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const clip =
    buf.length >= 12 && buf.toString('ascii', 0, 4) === 'RIFF' && buf.toString('ascii', 8, 12) === 'WAVE'
      ? decodeWav(buf)
      : isMp3(buf)
        ? await decodeMp3(buf)
        : undefined;
  if (clip === undefined) throw new ClipError('is neither WAV nor MP3 audio');
  const seconds = clip.samples.length / clip.sampleRate;
  if (seconds < MIN_CLIP_SECONDS || seconds > MAX_CLIP_SECONDS) {
    throw new ClipError(
      `lasts ${seconds.toFixed(2)} s: a reference clip must last ${MIN_CLIP_SECONDS}–${MAX_CLIP_SECONDS} s`,
    );
  }
  return clip;
}

/** `clip` at `rate`, as the 16-bit mono WAV a voice keeps. */
export async function clipToWav(clip: Clip, rate: number): Promise<Buffer> {
  const resampler = await createResampler(clip.sampleRate, rate);
  const pcm = concatPcm([resampler.process(floatToPcm(clip.samples)), resampler.flush()]);
  const header = Buffer.from(wavHeader(rate));
  header.writeUInt32LE(36 + pcm.byteLength, 4);
  header.writeUInt32LE(pcm.byteLength, 40);
  return Buffer.concat([header, Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength)]);
}

/** A stored clip (clipToWav's WAV) back as samples. */
export function wavToClip(bytes: Uint8Array): Clip {
  const clip = decodeWav(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  if (clip === undefined) throw new ClipError('is not a WAV clip');
  return clip;
}

const PCM_FORMAT = 1;
const FLOAT_FORMAT = 3;
const EXTENSIBLE_FORMAT = 0xfffe;

function decodeWav(buf: Buffer): Clip | undefined {
  let at = 12;
  let fmt: { format: number; channels: number; rate: number; bits: number } | undefined;
  while (at + 8 <= buf.length) {
    const id = buf.toString('ascii', at, at + 4);
    const size = buf.readUInt32LE(at + 4);
    const body = at + 8;
    if (id === 'fmt ' && size >= 16 && body + 16 <= buf.length) {
      let format = buf.readUInt16LE(body);
      // WAVE_FORMAT_EXTENSIBLE names the real format in the first two bytes of its sub-format GUID.
      if (format === EXTENSIBLE_FORMAT && size >= 40 && body + 26 <= buf.length)
        format = buf.readUInt16LE(body + 24);
      fmt = {
        format,
        channels: buf.readUInt16LE(body + 2),
        rate: buf.readUInt32LE(body + 4),
        bits: buf.readUInt16LE(body + 14),
      };
    } else if (id === 'data') {
      if (fmt === undefined) throw new ClipError('is a WAV file whose data comes before its format');
      // A streamed WAV's sizes say "to the end": the data is what there is.
      return wavSamples(buf.subarray(body, Math.min(buf.length, body + size)), fmt);
    }
    at = body + size + (size % 2);
  }
  throw new ClipError('is a WAV file without a format and data');
}

function wavSamples(
  data: Buffer,
  fmt: { format: number; channels: number; rate: number; bits: number },
): Clip {
  const { format, channels, rate, bits } = fmt;
  const supported =
    (format === PCM_FORMAT && [8, 16, 24, 32].includes(bits)) || (format === FLOAT_FORMAT && bits === 32);
  if (!supported)
    throw new ClipError(`is a WAV file of an unsupported encoding (format ${format}, ${bits}-bit)`);
  if (channels < 1 || channels > 8) throw new ClipError(`is a WAV file of ${channels} channels`);
  if (rate < 8000 || rate > 192_000) throw new ClipError(`is a WAV file at ${rate} Hz (8000–192000 Hz)`);
  const width = bits / 8;
  const frames = Math.floor(data.length / (width * channels));
  const samples = new Float32Array(frames);
  const read = (offset: number): number => {
    if (format === FLOAT_FORMAT) return data.readFloatLE(offset);
    if (bits === 8) return (data.readUInt8(offset) - 128) / 128;
    if (bits === 16) return data.readInt16LE(offset) / 32768;
    if (bits === 24) return data.readIntLE(offset, 3) / 8_388_608;
    return data.readInt32LE(offset) / 2_147_483_648;
  };
  for (let i = 0; i < frames; i++) {
    let sum = 0;
    for (let c = 0; c < channels; c++) sum += read((i * channels + c) * width);
    const v = sum / channels;
    samples[i] = Number.isFinite(v) ? Math.max(-1, Math.min(1, v)) : 0;
  }
  return { samples, sampleRate: rate };
}

/** An ID3 tag or an MPEG audio frame sync at the start. */
function isMp3(buf: Buffer): boolean {
  if (buf.length >= 3 && buf.toString('ascii', 0, 3) === 'ID3') return true;
  return buf.length >= 2 && buf[0] === 0xff && ((buf[1] ?? 0) & 0xe0) === 0xe0;
}

async function decodeMp3(buf: Buffer): Promise<Clip> {
  const decoder = new MPEGDecoder({ enableGapless: true });
  try {
    await decoder.ready;
    const out = decoder.decode(buf);
    const channels = out.channelData.filter((c) => c !== undefined);
    if (out.samplesDecoded === 0 || channels.length === 0)
      throw new ClipError('is MP3 data that decodes to no audio');
    const samples = new Float32Array(out.samplesDecoded);
    for (const channel of channels) {
      for (let i = 0; i < samples.length; i++)
        samples[i] = (samples[i] ?? 0) + (channel[i] ?? 0) / channels.length;
    }
    return { samples, sampleRate: out.sampleRate };
  } finally {
    decoder.free();
  }
}
