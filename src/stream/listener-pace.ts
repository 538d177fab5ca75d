/**
 * The pace of the listeners of one live session. A listener that joins late starts at byte 0 of a
 * session that may already hold minutes of audio; sent at full speed, a crowd of them would each
 * get the whole history at once, and the bytes of a few thousand histories would hold up every
 * other socket (and every new arrival's first byte). So, as Icecast's burst-on-connect does, a
 * listener gets a bounded burst at once and the rest of what already exists at a rate a little
 * above realtime: a token bucket per listener (it holds at most the burst, refilled at the rate),
 * woken by one timer per session that serves the waiting listeners in arrival order, in chunks of
 * at least `quantumBytes` (few, large socket writes). A listener at the live edge keeps its bucket
 * full, so new bytes reach it as soon as they exist. Every byte is still sent, in order: only when
 * is shaped.
 */
import type { ReadPace } from '../storage/growing-file.js';

/** How a paced listener is served. */
export interface PaceSettings {
  /** Bytes a listener may get at once: on connect, and again after it kept up (the bucket's size). */
  burstBytes: number;
  /** Sustained bytes per second of a listener behind the live edge. */
  bytesPerSecond: number;
}

/**
 * Defaults: the streams are 320 kbps MP3 (40,000 bytes a second of audio) and no MP3 is denser.
 * The burst is 5 s of audio, ahead of the player from its first second; the rate is 1.25× realtime,
 * so a listener delayed by a busy moment catches up again instead of staying closer to an underrun.
 */
export const DEFAULT_PACE: PaceSettings = { burstBytes: 200_000, bytesPerSecond: 50_000 };

/** Smallest chunk a listener behind the edge waits for (unless fewer bytes are ready): 32 KiB. */
const QUANTUM_BYTES = 32 * 1024;
/** How often the session's timer looks at the waiting listeners. */
const TICK_MS = 50;

/** Wakes the waiting listeners of one session when their bucket allows a chunk again. */
export class ListenerPacer {
  /** Waiting listeners in the order they started waiting (served round-robin). */
  private readonly waiting = new Set<Listener>();
  private timer: NodeJS.Timeout | undefined;
  /** Smallest grant worth a socket write: the quantum, or the whole burst when that is smaller. */
  readonly quantumBytes: number;

  constructor(
    readonly settings: PaceSettings,
    private readonly now: () => number = () => performance.now(),
  ) {
    const { burstBytes, bytesPerSecond } = settings;
    if (!Number.isSafeInteger(burstBytes) || burstBytes < 1)
      throw new RangeError('pace burst must be a positive integer of bytes');
    if (!Number.isFinite(bytesPerSecond) || bytesPerSecond <= 0)
      throw new RangeError('pace rate must be a positive number of bytes per second');
    this.quantumBytes = Math.min(QUANTUM_BYTES, burstBytes);
  }

  /** Listeners waiting for their bucket now (diagnostics and tests). */
  get waitingCount(): number {
    return this.waiting.size;
  }

  /** The pace of one new listener: its bucket starts full (the burst). */
  listener(): ReadPace {
    return new Listener(this, this.now);
  }

  /** Called by a listener that waits: the timer runs while anyone waits. */
  enqueue(listener: Listener): void {
    this.waiting.add(listener);
    if (this.timer === undefined) {
      // Runs only while a listener waits; a listener that goes away stops waiting (close).
      this.timer = setInterval(() => this.tick(), TICK_MS);
    }
  }

  /** Called by a listener that stops waiting (woken, or gone). */
  dequeue(listener: Listener): void {
    this.waiting.delete(listener);
    if (this.waiting.size === 0 && this.timer !== undefined) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  /** Wakes, in waiting order, every listener whose bucket now allows a chunk. */
  private tick(): void {
    for (const listener of [...this.waiting]) if (listener.due()) listener.wake();
  }
}

/** One listener's token bucket. */
class Listener implements ReadPace {
  private tokens: number;
  private refilledAt: number;
  /** Bytes the listener waits to be granted (a quantum, or fewer when fewer are ready). */
  private need = 0;
  private wakeUp: (() => void) | null = null;
  private closed = false;

  constructor(
    private readonly pacer: ListenerPacer,
    private readonly now: () => number,
  ) {
    this.tokens = pacer.settings.burstBytes;
    this.refilledAt = now();
  }

  private refill(): void {
    const at = this.now();
    const { burstBytes, bytesPerSecond } = this.pacer.settings;
    this.tokens = Math.min(burstBytes, this.tokens + ((at - this.refilledAt) / 1000) * bytesPerSecond);
    this.refilledAt = at;
  }

  grant(available: number): number {
    this.refill();
    this.need = Math.min(this.pacer.quantumBytes, available);
    return this.tokens >= this.need ? Math.floor(Math.min(this.tokens, available)) : 0;
  }

  take(bytes: number): void {
    this.tokens -= bytes;
  }

  /** Whether the bucket allows the chunk the listener waits for. */
  due(): boolean {
    this.refill();
    return this.tokens >= this.need;
  }

  wake(): void {
    this.pacer.dequeue(this);
    const wakeUp = this.wakeUp;
    this.wakeUp = null;
    wakeUp?.();
  }

  ready(signal: AbortSignal): Promise<void> {
    if (this.closed || this.due()) return Promise.resolve();
    if (signal.aborted) return Promise.reject(signal.reason as Error);
    return new Promise<void>((resolve, reject) => {
      const onAbort = (): void => {
        this.wakeUp = null;
        this.pacer.dequeue(this);
        reject(signal.reason as Error);
      };
      this.wakeUp = () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.pacer.enqueue(this);
    });
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.wake();
  }
}
