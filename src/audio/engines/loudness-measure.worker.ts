/**
 * Piscina task module that measures a voice's gain (gainForCalibration) off the main thread: three
 * passes over ~35 s of speech, per-sample work that would otherwise hold the event loop each time a
 * binding the stored table lacks is first used. Batch work: the thread runs at lower priority.
 */
import { lowerThreadPriority } from '../../common/worker-priority.js';
import { gainForCalibration } from './loudness-gain.js';

lowerThreadPriority();

/** The gain (dB) of a voice from its calibration audio (canonical PCM). */
export default function measure(pcm: Int16Array): Promise<number> {
  return gainForCalibration(pcm);
}
