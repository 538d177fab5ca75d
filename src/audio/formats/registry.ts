/**
 * Every audio format the speech route can answer in, by its `response_format` name. Adding a
 * format is one module exporting an AudioFormat and one line here.
 */
import type { AudioFormat } from './format.js';
import { flac } from './flac.js';
import { mp3 } from './mp3.js';
import { opus } from './opus.js';
import { rawPcm } from './pcm.js';
import { wav } from './wav.js';

export const AUDIO_FORMATS: ReadonlyMap<string, AudioFormat> = new Map(
  [mp3, opus, flac, wav, rawPcm].map((format) => [format.id, format]),
);

/**
 * Formats clients may ask for that no library here produces, with the reason given in the 400:
 * no maintained npm AAC encoder exists (ffmpeg builds in WebAssembly, such as libav.js, would
 * mean shipping ffmpeg, which the service does not run).
 */
export const REFUSED_FORMATS: ReadonlyMap<string, string> = new Map([
  ['aac', 'no AAC encoder is available (no maintained npm library encodes AAC without ffmpeg)'],
]);

export type { AudioFormat } from './format.js';
