/** MP3: the service's own stream (320 kbps, 44.1 kHz, LAME), the bytes one-shot synthesis makes. */
import type { AudioFormat } from './format.js';

export const mp3: AudioFormat = {
  id: 'mp3',
  contentType: 'audio/mpeg',
  sampleRate: 44_100,
  library: 'LAME (the service’s MP3 encoder)',
  source: { kind: 'mp3' },
};
