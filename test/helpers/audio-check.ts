/**
 * Audio assertions shared by the test suites, backed by the system ffmpeg/ffprobe
 * (`scripts/setup-debian.sh` installs them):
 *
 * - `probeAudio(bytes)`      → codec, sample rate, channels, bit rate, duration (ffprobe)
 * - `ffmpegErrors(bytes)`    → what `ffmpeg -v error -i f -f null -` prints ('' = decodes cleanly)
 * - `decodeToPcm(bytes)`     → mono s16 PCM at 44.1 kHz (or `sampleRate`) decoded by ffmpeg
 * - `rmsDbfs(pcm, a, b)`     → loudness of samples [a, b) in dBFS (−Infinity for digital silence)
 * - `rmsWindows(pcm, n)`     → dBFS of consecutive windows of n samples
 * - `silentRuns(pcm, n, db)` → runs of consecutive windows quieter than `db`, in samples
 * - `ebur128(bytes)`         → integrated loudness (LUFS) and true peak (dBTP), ffmpeg's ebur128 filter
 * - `toneHz(pcm, s, rate)`  → frequency of a tone over the middle s seconds, from zero crossings
 * - `silenceDetect(bytes, d)` → silences of at least d seconds at −50 dBFS, ffmpeg's silencedetect
 *
 * Every function takes the audio as bytes; temporary files are removed before it returns.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** What ffprobe reports about the first audio stream. */
export interface AudioInfo {
  codec: string;
  sampleRate: number;
  channels: number;
  /** Bits per second (320000 for 320 kbps). */
  bitRate: number;
  durationSeconds: number;
}

async function withFile<T>(bytes: Uint8Array, use: (path: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'audio-check-'));
  try {
    const path = join(dir, 'audio');
    await writeFile(path, bytes);
    return await use(path);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** ffprobe's view of the audio (format duration, which for CBR MP3 is size × 8 / bitrate). */
export async function probeAudio(bytes: Uint8Array): Promise<AudioInfo> {
  return withFile(bytes, async (path) => {
    const { stdout } = await run('ffprobe', [
      '-v',
      'error',
      '-select_streams',
      'a:0',
      '-show_entries',
      'stream=codec_name,sample_rate,channels,bit_rate:format=duration',
      '-of',
      'json',
      path,
    ]);
    const info = JSON.parse(stdout) as {
      streams?: { codec_name?: string; sample_rate?: string; channels?: number; bit_rate?: string }[];
      format?: { duration?: string };
    };
    const s = info.streams?.[0];
    if (s === undefined) throw new Error('ffprobe found no audio stream');
    return {
      codec: s.codec_name ?? '',
      sampleRate: Number(s.sample_rate),
      channels: s.channels ?? 0,
      bitRate: Number(s.bit_rate),
      durationSeconds: Number(info.format?.duration),
    };
  });
}

/** Decodes the whole file with `ffmpeg -v error`; returns its complaints, '' when the stream is clean. */
export async function ffmpegErrors(bytes: Uint8Array): Promise<string> {
  return withFile(bytes, async (path) => {
    const { stdout, stderr } = await run('ffmpeg', [
      '-nostdin',
      '-v',
      'error',
      '-i',
      path,
      '-f',
      'null',
      '-',
    ]);
    return `${stdout}${stderr}`.trim();
  });
}

/** What ffmpeg's `ebur128` filter measures of a whole file (EBU R128 / ITU-R BS.1770). */
export interface LoudnessInfo {
  /** Integrated loudness, LUFS (all channels summed, as BS.1770 does). */
  integrated: number;
  /** True peak of the loudest channel, dBTP. */
  truePeak: number;
}

/** Measures `bytes` (any format ffmpeg reads) with `ebur128=peak=true`; `rawMono` reads s16le mono 44.1 kHz. */
export async function ebur128(bytes: Uint8Array, rawMono = false): Promise<LoudnessInfo> {
  return withFile(bytes, async (path) => {
    const input = rawMono ? ['-f', 's16le', '-ar', '44100', '-ac', '1', '-i', path] : ['-i', path];
    const { stderr } = await run(
      'ffmpeg',
      ['-nostdin', '-hide_banner', '-nostats', ...input, '-af', 'ebur128=peak=true', '-f', 'null', '-'],
      { maxBuffer: 1 << 26 },
    );
    // The summary at the end: "I: -16.0 LUFS" … "Peak: -1.9 dBFS" (under "True peak:").
    const summary = stderr.slice(stderr.lastIndexOf('Summary:'));
    const integrated = Number(/I:\s+(-?[\d.]+|-inf) LUFS/.exec(summary)?.[1]?.replace('-inf', '-Infinity'));
    const truePeak = Number(/Peak:\s+(-?[\d.]+|-inf) dBFS/.exec(summary)?.[1]?.replace('-inf', '-Infinity'));
    if (Number.isNaN(integrated) || Number.isNaN(truePeak))
      throw new Error(`no ebur128 summary in: ${summary}`);
    return { integrated, truePeak };
  });
}

/**
 * Silences of at least `minSeconds` that ffmpeg's silencedetect finds at −50 dBFS (the level below
 * which the service counts samples as silent), in seconds of the decoded audio; a silence running
 * to the end has `end` Infinity.
 */
export async function silenceDetect(
  bytes: Uint8Array,
  minSeconds: number,
): Promise<{ start: number; end: number }[]> {
  return withFile(bytes, async (path) => {
    const { stderr } = await run('ffmpeg', [
      '-nostdin',
      '-hide_banner',
      '-i',
      path,
      '-af',
      `silencedetect=noise=-50dB:d=${String(minSeconds)}`,
      '-f',
      'null',
      '-',
    ]);
    const out: { start: number; end: number }[] = [];
    for (const line of stderr.split('\n')) {
      const start = /silence_start: (-?[\d.]+)/.exec(line);
      if (start) out.push({ start: Number(start[1]), end: Infinity });
      const end = /silence_end: ([\d.]+)/.exec(line);
      const last = out.at(-1);
      if (end && last) last.end = Number(end[1]);
    }
    return out;
  });
}

/**
 * Decodes to mono s16 PCM (stereo is averaged) at `sampleRate` (default 44100). ffmpeg keeps the
 * MP3 encoder/decoder delay (≈ 1105 samples at the start) when the file has no LAME tag.
 */
export async function decodeToPcm(bytes: Uint8Array, sampleRate = 44100): Promise<Int16Array> {
  return withFile(bytes, async (path) => {
    const { stdout } = await run(
      'ffmpeg',
      ['-nostdin', '-v', 'error', '-i', path, '-f', 's16le', '-ac', '1', '-ar', String(sampleRate), '-'],
      { encoding: 'buffer', maxBuffer: 1 << 30 },
    );
    // Copy into a fresh, aligned buffer: the child's output Buffer may start at an odd offset.
    return new Int16Array(new Uint8Array(stdout).buffer);
  });
}

/** RMS of pcm[start, end) relative to full scale, in dB (−Infinity for digital silence). */
export function rmsDbfs(pcm: Int16Array, start = 0, end = pcm.length): number {
  const a = Math.max(0, Math.floor(start));
  const b = Math.min(pcm.length, Math.floor(end));
  if (b <= a) return -Infinity;
  let sum = 0;
  for (let i = a; i < b; i++) {
    const s = (pcm[i] ?? 0) / 32768;
    sum += s * s;
  }
  return 10 * Math.log10(sum / (b - a));
}

/** dBFS of consecutive windows of `windowSamples` (the last, partial window is dropped). */
export function rmsWindows(pcm: Int16Array, windowSamples: number): number[] {
  const out: number[] = [];
  for (let i = 0; i + windowSamples <= pcm.length; i += windowSamples)
    out.push(rmsDbfs(pcm, i, i + windowSamples));
  return out;
}

/** A stretch of audio, in samples: [start, end). */
export interface SampleRange {
  start: number;
  end: number;
}

/** Runs of consecutive windows quieter than `thresholdDb`, as sample ranges, in order. */
export function silentRuns(pcm: Int16Array, windowSamples: number, thresholdDb: number): SampleRange[] {
  const runs: SampleRange[] = [];
  let open: SampleRange | undefined;
  rmsWindows(pcm, windowSamples).forEach((db, i) => {
    const start = i * windowSamples;
    if (db < thresholdDb) {
      if (open === undefined) {
        open = { start, end: start + windowSamples };
        runs.push(open);
      } else open.end = start + windowSamples;
    } else open = undefined;
  });
  return runs;
}

/** The frequency of a tone over the middle `seconds` of `pcm` (at `sampleRate`), from its zero crossings. */
export function toneHz(pcm: Int16Array, seconds = 0.2, sampleRate = 44_100): number {
  const half = Math.floor((seconds * sampleRate) / 2);
  const mid = Math.floor(pcm.length / 2);
  let crossings = 0;
  for (let i = mid - half + 1; i < mid + half; i++) {
    if ((pcm[i - 1] ?? 0) < 0 !== (pcm[i] ?? 0) < 0) crossings++;
  }
  return crossings / 2 / seconds;
}
