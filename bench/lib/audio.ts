/**
 * What the in-process audio benchmarks share (pipeline, encode): the speech input, its synthesis,
 * and wall/CPU timing of a run (this process's threads, or the reference CLI as a child).
 */
import { readFile } from 'node:fs/promises';
import type { SpeechEngine, SynthesisRequest } from '../../src/audio/engines/engine.js';
import { CANONICAL_RATE, concatPcm } from '../../src/audio/pcm.js';

/** A ~300-word paragraph of plain English: the benchmarks' speech input. */
export const PARAGRAPH = `
The old lighthouse stood at the end of a narrow spit of land, where the river met the sea and the
wind never quite stopped. For more than a century its keepers had climbed the spiral stairs each
evening to light the lamp, polish the great lens, and watch the dark water for ships that might
need a warning. The last keeper, a quiet woman named Ellen, kept a journal of every storm she saw.
She wrote about the colour of the sky before the rain, the sound the glass made when the gusts
pushed against it, and the fishing boats that hurried home as the light faded. Her entries were
short, but they were careful, and over the years they became a kind of map of the weather itself.
When the lighthouse was finally automated, the journal was given to the town library, where it
sat on a shelf for decades before a student found it by accident. She was studying the climate of
the coast, and she realised that the notes described patterns no instrument had recorded at the
time. With the help of her professor, she compared the old entries with modern measurements and
discovered that the storms had grown stronger and more frequent, just as the keeper had suspected.
The study was published, the journal was scanned and shared online, and visitors began to arrive
at the lighthouse again, not for the view alone but to see where the story had begun. Today a
small museum occupies the keeper's cottage. Children press their faces against the glass cases,
reading the neat handwriting, and imagine the long nights spent watching the horizon. Outside, the
lamp still turns, guided by a computer now, but the people who live nearby say that on windy
evenings they can almost hear footsteps on the stairs, as if someone is still making sure the
light will shine for anyone lost at sea.`
  .replace(/\s+/g, ' ')
  .trim();

/** Wall-clock and CPU seconds of one measured run. */
export interface Timing {
  wall: number;
  cpu: number;
}

/** CPU seconds of waited-for child processes (Linux /proc, 10 ms ticks); NaN elsewhere. */
export async function childCpuSeconds(): Promise<number> {
  try {
    const stat = await readFile('/proc/self/stat', 'utf8');
    // Fields after the parenthesised command name; cutime and cstime are fields 16 and 17.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[13]) + Number(fields[14])) / 100;
  } catch {
    return NaN;
  }
}

/** Wall time and CPU time (this process's threads, or its children with `children`). */
export async function timed(fn: () => Promise<void>, children = false): Promise<Timing> {
  const cpu0 = process.cpuUsage();
  const child0 = await childCpuSeconds();
  const t0 = process.hrtime.bigint();
  await fn();
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  if (children) return { wall, cpu: (await childCpuSeconds()) - child0 };
  const cpu = process.cpuUsage(cpu0);
  return { wall, cpu: (cpu.user + cpu.system) / 1e6 };
}

/** The median (upper middle) of `values`; NaN when there are none. */
export function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? NaN;
}

/** Reads a byte stream to its end; resolves with its length. */
export async function drain(stream: AsyncIterable<Uint8Array>): Promise<number> {
  let bytes = 0;
  for await (const b of stream) bytes += b.length;
  return bytes;
}

/** The whole PCM of one synthesis. */
export async function synthesize(engine: SpeechEngine, req: SynthesisRequest): Promise<Int16Array> {
  const chunks: Int16Array[] = [];
  for await (const pcm of engine.synthesize(req, new AbortController().signal)) chunks.push(pcm);
  return concatPcm(chunks);
}

/** Feeds PCM in 100 ms chunks, as an engine would. */
export function* chunks(pcm: Int16Array): Generator<Int16Array> {
  const step = CANONICAL_RATE / 10;
  for (let o = 0; o < pcm.length; o += step) yield pcm.slice(o, o + step);
}
