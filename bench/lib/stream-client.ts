/**
 * Load client of the stream benchmarks, run as its own process so the service (or nginx) and the
 * client do not share an event loop: `tsx bench/lib/stream-client.ts '<json options>'`; prints one
 * JSON line of results (StreamClientResult) on stdout.
 *
 * - `realtime`: players. Each opens the URL, then plays at `bytesPerSecond` with at most
 *   `readAheadSeconds` buffered (the rest waits in the socket: TCP backpressure reaches the
 *   server); an underrun is a moment a player's buffer is empty while its stream goes on. Each
 *   player leaves after `seconds` of playback. One clock ticks every 100 ms for all players.
 * - `full`: readers at full speed. Each reads the URL until `targetBytes` have arrived (or the
 *   response ends) and records when; then it leaves.
 * Connections open `rampPerSecond` at a time per second (a crowd arriving, not one SYN flood).
 * The client measures its own event-loop delay: a client that stalls counts underruns and late
 * first bytes of its own, so a run only says something about the server while that delay is small.
 */
import http from 'node:http';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';

/** What the parent asks of the client. */
export interface StreamClientOptions {
  mode: 'realtime' | 'full';
  url: string;
  /** Other URLs of the same stream (other nodes): connections go to `url` and these in turn. */
  moreUrls?: string[];
  count: number;
  rampPerSecond: number;
  /** realtime: playback seconds per player, bytes per second of the stream, buffer cap. */
  seconds?: number;
  bytesPerSecond?: number;
  readAheadSeconds?: number;
  /** full: bytes each reader waits for. */
  targetBytes?: number;
}

/** What the client reports. Times are ms from its own start unless said otherwise. */
export interface StreamClientResult {
  /** Request sent → first body byte, per connection that got one. */
  firstByteMs: number[];
  /** full: request sent → targetBytes received, per reader. */
  doneMs: number[];
  /** full: the last reader done, from the first request sent. */
  makespanMs: number;
  underruns: number;
  errors: string[];
  statuses: Record<string, number>;
  bytes: number;
  /** The client's event-loop delay over the run (ms): its largest and its 99th percentile. */
  loopDelayMaxMs: number;
  loopDelayP99Ms: number;
}

interface Player {
  bytes: number;
  played: number;
  stalled: boolean;
  ended: boolean;
  response?: http.IncomingMessage;
}

async function main(): Promise<void> {
  const options = JSON.parse(process.argv[2] ?? '{}') as StreamClientOptions;
  const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
  const result: StreamClientResult = {
    firstByteMs: [],
    doneMs: [],
    makespanMs: 0,
    underruns: 0,
    errors: [],
    statuses: {},
    bytes: 0,
    loopDelayMaxMs: 0,
    loopDelayP99Ms: 0,
  };
  const loopDelay = monitorEventLoopDelay({ resolution: 10 });
  loopDelay.enable();
  const rate = options.bytesPerSecond ?? 40_000;
  const readAhead = options.readAheadSeconds ?? 10;
  const playSeconds = options.seconds ?? 30;
  const target = options.targetBytes ?? Infinity;
  const players = new Set<Player>();
  const started = performance.now();

  // One playback clock for every realtime player.
  let last = performance.now();
  const clock = setInterval(() => {
    const now = performance.now();
    const step = (now - last) / 1000;
    last = now;
    for (const p of players) {
      if (p.response === undefined || p.bytes === 0) continue;
      const buffered = p.bytes / rate - p.played;
      if (buffered >= step) {
        p.played += step;
        p.stalled = false;
      } else if (!p.ended) {
        p.played += Math.max(0, buffered);
        if (!p.stalled) result.underruns++;
        p.stalled = true;
      }
      if (p.played >= playSeconds || p.ended) {
        p.response.destroy();
        players.delete(p);
        continue;
      }
      if (p.bytes / rate - p.played < readAhead && p.response.isPaused()) p.response.resume();
    }
  }, 100);

  const urls = [options.url, ...(options.moreUrls ?? [])];
  const one = (n: number): Promise<void> =>
    new Promise((resolve) => {
      const asked = performance.now();
      const player: Player = { bytes: 0, played: 0, stalled: false, ended: false };
      const fail = (why: string) => {
        result.errors.push(why);
        players.delete(player);
        resolve();
      };
      const request = http.get(urls[n % urls.length] ?? options.url, { agent }, (response) => {
        const status = String(response.statusCode);
        result.statuses[status] = (result.statuses[status] ?? 0) + 1;
        if (response.statusCode !== 200 && response.statusCode !== 206) {
          response.resume();
          fail(`status ${status}`);
          return;
        }
        player.response = response;
        if (options.mode === 'realtime') players.add(player);
        response.on('data', (chunk: Buffer) => {
          if (player.bytes === 0) result.firstByteMs.push(performance.now() - asked);
          player.bytes += chunk.length;
          result.bytes += chunk.length;
          if (options.mode === 'full') {
            if (player.bytes >= target) {
              result.doneMs.push(performance.now() - asked);
              result.makespanMs = Math.max(result.makespanMs, performance.now() - started);
              response.destroy();
              resolve();
            }
          } else if (player.bytes / rate - player.played > readAhead) response.pause();
        });
        response.on('end', () => {
          player.ended = true;
          if (options.mode === 'full' && player.bytes < target)
            result.errors.push(`ended after ${player.bytes} of ${target} bytes`);
          resolve();
        });
        response.on('close', () => resolve());
        response.on('error', () => resolve());
      });
      request.on('error', (err) => fail(err.message));
    });

  const all: Promise<void>[] = [];
  const perTick = Math.max(1, Math.round(options.rampPerSecond / 20));
  for (let i = 0; i < options.count; i += perTick) {
    for (let k = i; k < Math.min(options.count, i + perTick); k++) all.push(one(k));
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await Promise.all(all);
  loopDelay.disable();
  result.loopDelayMaxMs = loopDelay.max / 1e6;
  result.loopDelayP99Ms = loopDelay.percentile(99) / 1e6;
  clearInterval(clock);
  agent.destroy();
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

await main();
