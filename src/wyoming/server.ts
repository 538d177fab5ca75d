/**
 * The Wyoming TTS server (Home Assistant's voice protocol) over TCP, opt-in (WYOMING_PORT).
 * Wyoming has no authentication: every request runs as the account the operator names
 * (WYOMING_ACCOUNT), whose rate limit, quotas and usage apply.
 *
 * Events: `describe` → `info`; `synthesize {text, voice}` → `audio-start`, `audio-chunk`s,
 * `audio-stop`; a text stream `synthesize-start {voice}`, `synthesize-chunk {text}`…,
 * `synthesize-stop` → the audio of each group of complete sentences as soon as its text has
 * arrived (each its own `audio-start` … `audio-stop`), then `synthesize-stopped`. A `synthesize`
 * sent inside a text stream repeats the stream's text for older servers and is ignored. Audio is
 * the service's canonical PCM, announced as it is sent: 44.1 kHz, 16-bit, mono.
 *
 * Bounds: WYOMING_MAX_CONNECTIONS connections (more are closed as they arrive); a header line, data
 * or payload over WYOMING_MAX_MESSAGE_BYTES, or anything malformed, closes that connection with one
 * log line; WYOMING_IDLE_TIMEOUT_MS bounds an idle connection, a message still arriving and a
 * client that stops reading audio. Events of a connection are answered in order.
 */
import { once } from 'node:events';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import type { Logger } from 'pino';
import { splitClauses, splitSentences } from '../audio/engines/sentences.js';
import { CANONICAL_RATE } from '../audio/pcm.js';
import type { AccountService } from '../accounts/account-service.js';
import type { WyomingConfig } from '../config/config.js';
import { AppError, isAppError } from '../errors/app-error.js';
import { encodeEvent, EventReader, ProtocolError, type WyomingEvent } from './protocol.js';
import type { WyomingSpeech, WyomingVoice } from './speech.js';

/** What one audio chunk holds at most: 2,048 samples (46 ms), as Wyoming servers commonly send. */
const CHUNK_BYTES = 4096;
/** Events a connection may have waiting for their turn; a client flooding more is closed. */
const MAX_WAITING_EVENTS = 64;
/** How long close() waits for connections to wind down after they were cut. */
const CLOSE_GRACE_MS = 2_000;

const AUDIO_FORMAT = { rate: CANONICAL_RATE, width: 2, channels: 1 } as const;

export interface WyomingServerDeps {
  config: WyomingConfig;
  /** Characters one task may speak (MAX_TEXT_LENGTH): a text stream is spoken in groups within it. */
  textLimit: number;
  accounts: AccountService;
  speech: WyomingSpeech;
  /** The `info` event's data for the account. */
  describe(accountId: string): Promise<Record<string, unknown>>;
  /** Counts one request of the account against its rate limit; the seconds to wait when over it. */
  admit(accountId: string): Promise<number | undefined>;
  log: Pick<Logger, 'info' | 'warn' | 'error' | 'debug'>;
}

export class WyomingServer {
  private server: Server | undefined;
  private readonly connections = new Set<Connection>();
  private nextId = 0;

  constructor(private readonly deps: WyomingServerDeps) {}

  /** Starts listening; resolves with the address bound (the port chosen when WYOMING_PORT is 0). */
  async listen(): Promise<AddressInfo> {
    const { config, log } = this.deps;
    const server = createServer((socket) => this.accept(socket));
    this.server = server;
    server.on('error', (err) => log.error({ err }, 'wyoming: server error'));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.port, config.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    const address = server.address() as AddressInfo;
    log.info(
      { host: address.address, port: address.port, account: config.account },
      `Wyoming TTS server listening on ${address.address}:${address.port}`,
    );
    return address;
  }

  /** Where it listens (undefined before listen() and after close()). */
  get address(): AddressInfo | undefined {
    return (this.server?.address() as AddressInfo | null) ?? undefined;
  }

  /** Connections open now. */
  get openConnections(): number {
    return this.connections.size;
  }

  /** Stops listening and cuts every connection (their tasks are cancelled); waits for them briefly. */
  async close(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    const closed =
      server === undefined ? Promise.resolve() : new Promise<void>((r) => server.close(() => r()));
    const ending = [...this.connections].map((c) => c.end());
    for (const c of this.connections) c.destroy('the service is shutting down');
    const grace = new Promise<void>((r) => setTimeout(r, CLOSE_GRACE_MS).unref());
    await Promise.race([Promise.allSettled(ending), grace]);
    await closed;
  }

  private accept(socket: Socket): void {
    const { config, log } = this.deps;
    const peer = `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? '?'}`;
    if (this.connections.size >= config.maxConnections) {
      log.warn(
        { peer, limit: config.maxConnections },
        `wyoming: refused a connection from ${peer}: ${config.maxConnections} connections are open (WYOMING_MAX_CONNECTIONS)`,
      );
      socket.destroy();
      return;
    }
    const connection = new Connection(socket, peer, ++this.nextId, this.deps);
    this.connections.add(connection);
    void connection.end().then(() => this.connections.delete(connection));
  }
}

/** A text stream being received: its voice, the text not yet spoken, whether it already failed. */
interface TextStream {
  voice: WyomingVoice;
  pending: string;
  failed: boolean;
}

class Connection {
  private readonly reader: EventReader;
  private readonly abort = new AbortController();
  private readonly closed: Promise<void>;
  /** Events answered in order: each waits for the one before. */
  private chain: Promise<void> = Promise.resolve();
  private waiting = 0;
  private stream: TextStream | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  private messageTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly socket: Socket,
    private readonly peer: string,
    private readonly id: number,
    private readonly deps: WyomingServerDeps,
  ) {
    this.reader = new EventReader(deps.config.maxMessageBytes);
    socket.setNoDelay(true);
    this.closed = new Promise((resolve) => socket.once('close', () => resolve()));
    socket.on('data', (chunk: Buffer) => this.received(chunk));
    socket.on('error', () => undefined); // a reset peer: 'close' follows and ends the connection
    socket.once('close', () => {
      clearTimeout(this.idleTimer);
      clearTimeout(this.messageTimer);
      // Whatever is being spoken for this client stops: its tasks are cancelled.
      this.abort.abort(new Error('the Wyoming client disconnected'));
    });
    this.armIdle();
  }

  /** Resolves when the connection has closed and its last event has been dealt with. */
  async end(): Promise<void> {
    await this.closed;
    await this.chain;
  }

  /** Closes the connection with one log line saying why. */
  destroy(reason: string, level: 'info' | 'warn' = 'info'): void {
    if (this.socket.destroyed) return;
    this.deps.log[level](
      { peer: this.peer, connection: this.id, reason },
      `wyoming: closed the connection of ${this.peer}: ${reason}`,
    );
    this.socket.destroy();
  }

  private received(chunk: Buffer): void {
    let events: WyomingEvent[];
    try {
      events = this.reader.push(chunk);
    } catch (err) {
      if (!(err instanceof ProtocolError)) throw err;
      this.destroy(`malformed message: ${err.message}`, 'warn');
      return;
    }
    // A message must arrive whole within the idle timeout from its first byte (no slow drip):
    // the clock restarts with each message completed.
    if (!this.reader.partial || events.length > 0) {
      clearTimeout(this.messageTimer);
      this.messageTimer = undefined;
    }
    if (this.reader.partial && this.messageTimer === undefined) {
      this.messageTimer = setTimeout(
        () => this.destroy(`a message took longer than ${this.deps.config.idleTimeoutMs} ms to arrive`),
        this.deps.config.idleTimeoutMs,
      );
    }
    this.armIdle();
    for (const event of events) {
      if (this.socket.destroyed) return;
      this.handle(event);
    }
  }

  /** The idle deadline runs while nothing is being answered; any traffic or work restarts it. */
  private armIdle(): void {
    clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    if (this.waiting > 0 || this.socket.destroyed) return;
    const ms = this.deps.config.idleTimeoutMs;
    this.idleTimer = setTimeout(() => this.destroy(`idle for ${ms} ms`), ms);
  }

  private handle(event: WyomingEvent): void {
    const { type, data } = event;
    switch (type) {
      case 'describe':
        this.enqueue(async () => this.send('info', await this.deps.describe(await this.accountId())));
        return;
      case 'synthesize': {
        // Inside a text stream it repeats the stream's text for servers without streaming.
        if (this.stream !== undefined) return;
        const text = data.text;
        const voice = voiceOf(data.voice);
        this.enqueue(() => this.synthesize(text, voice));
        return;
      }
      case 'synthesize-start': {
        if (this.stream !== undefined) {
          this.enqueue(() => this.sendError(invalid('synthesize-start: a text stream is already open')));
          return;
        }
        const stream: TextStream = { voice: voiceOf(data.voice), pending: '', failed: false };
        this.stream = stream;
        this.enqueue(() => this.startStream(stream));
        return;
      }
      case 'synthesize-chunk': {
        const stream = this.stream;
        if (stream === undefined) {
          this.enqueue(() =>
            this.sendError(invalid('synthesize-chunk: no text stream is open (synthesize-start)')),
          );
          return;
        }
        if (typeof data.text !== 'string') {
          this.enqueue(() => this.sendError(invalid('synthesize-chunk needs a text string')));
          return;
        }
        stream.pending += data.text;
        for (const group of this.readyGroups(stream, false))
          this.enqueue(() => this.speakGroup(stream, group));
        return;
      }
      case 'synthesize-stop': {
        const stream = this.stream;
        if (stream === undefined) {
          this.enqueue(() =>
            this.sendError(invalid('synthesize-stop: no text stream is open (synthesize-start)')),
          );
          return;
        }
        this.stream = undefined;
        for (const group of this.readyGroups(stream, true))
          this.enqueue(() => this.speakGroup(stream, group));
        this.enqueue(() => this.send('synthesize-stopped'));
        return;
      }
      default:
        // Events of other Wyoming services (ASR, wake words, …) are not for a TTS server.
        this.deps.log.debug({ peer: this.peer, type }, 'wyoming: ignored an event');
    }
  }

  /** Runs `job` after the events before it; errors become `error` events. */
  private enqueue(job: () => Promise<void>): void {
    if (this.waiting >= MAX_WAITING_EVENTS) {
      this.destroy(`more than ${MAX_WAITING_EVENTS} events waiting to be answered`, 'warn');
      return;
    }
    this.waiting += 1;
    clearTimeout(this.idleTimer);
    this.chain = this.chain.then(async () => {
      try {
        if (!this.socket.destroyed) await job();
      } catch (err) {
        await this.sendError(err).catch(() => undefined);
      } finally {
        this.waiting -= 1;
        this.armIdle();
      }
    });
  }

  private async accountId(): Promise<string> {
    const name = this.deps.config.account;
    try {
      return (await this.deps.accounts.resolveAccount(name)).id;
    } catch (err) {
      // A mistyped WYOMING_ACCOUNT would otherwise show only in Home Assistant's error.
      if (isAppError(err) && err.code === 'RESOURCE_NOT_FOUND')
        this.deps.log.warn(
          { account: name },
          `wyoming: the account "${name}" (WYOMING_ACCOUNT) does not exist`,
        );
      throw err;
    }
  }

  /** Resolves the account and counts one request against its rate limit. */
  private async admitted(): Promise<string> {
    const accountId = await this.accountId();
    const retryAfter = await this.deps.admit(accountId);
    if (retryAfter !== undefined)
      throw new AppError('RATE_LIMIT_EXCEEDED', `rate limit exceeded, retry in ${retryAfter} s`);
    return accountId;
  }

  private async synthesize(text: unknown, voice: WyomingVoice): Promise<void> {
    if (typeof text !== 'string') throw invalid('synthesize needs a text string');
    const accountId = await this.admitted();
    await this.speak(accountId, text, voice);
  }

  private async startStream(stream: TextStream): Promise<void> {
    try {
      await this.admitted();
    } catch (err) {
      stream.failed = true;
      throw err;
    }
  }

  /** Speaks one group of a stream's sentences; after a failure the rest of the stream is skipped. */
  private async speakGroup(stream: TextStream, text: string): Promise<void> {
    if (stream.failed) return;
    try {
      await this.speak(await this.accountId(), text, stream.voice);
    } catch (err) {
      stream.failed = true;
      throw err;
    }
  }

  /** `audio-start`, the PCM in chunks as it is synthesised, `audio-stop`. */
  private async speak(accountId: string, text: string, voice: WyomingVoice): Promise<void> {
    const signal = this.abort.signal;
    const audio = await this.deps.speech.speak(accountId, text, voice, signal);
    let samples = 0;
    await this.send('audio-start', { ...AUDIO_FORMAT, timestamp: 0 });
    for await (const pcm of audio.pcm) {
      for (let at = 0; at < pcm.length; at += CHUNK_BYTES) {
        const part = pcm.subarray(at, Math.min(pcm.length, at + CHUNK_BYTES));
        const timestamp = Math.round((samples * 1000) / CANONICAL_RATE);
        await this.send('audio-chunk', { ...AUDIO_FORMAT, timestamp }, part);
        samples += part.length / 2;
      }
    }
    await this.send('audio-stop', { timestamp: Math.round((samples * 1000) / CANONICAL_RATE) });
  }

  /**
   * The groups of a stream's text ready to be spoken: its complete sentences (all of it once the
   * stream has stopped), each group within the text limit of one task. Text without a sentence end
   * that outgrows the limit is spoken in clauses rather than held without bound.
   */
  private readyGroups(stream: TextStream, stopped: boolean): string[] {
    const limit = this.deps.textLimit;
    const language = stream.voice.language?.replace(/_/g, '-');
    let { complete, rest } = stopped
      ? { complete: stream.pending, rest: '' }
      : splitComplete(stream.pending, language);
    if (rest.length > limit) {
      const clauses = splitClauses(rest, limit);
      rest = clauses.pop() ?? '';
      complete += ` ${clauses.join(' ')}`;
    }
    stream.pending = rest;
    return groupSentences(splitSentences(complete, language, limit), limit);
  }

  /** Writes one event; waits while the client is not reading, at most the idle timeout. */
  private async send(type: string, data?: Record<string, unknown>, payload?: Uint8Array): Promise<void> {
    if (this.socket.destroyed) throw new Error('the Wyoming client disconnected');
    if (this.socket.write(encodeEvent(type, data, payload))) return;
    const ms = this.deps.config.idleTimeoutMs;
    const timeout = AbortSignal.timeout(ms);
    try {
      await once(this.socket, 'drain', { signal: AbortSignal.any([this.abort.signal, timeout]) });
    } catch (err) {
      if (timeout.aborted) this.destroy(`the client read no audio for ${ms} ms`, 'warn');
      throw err;
    }
  }

  /** An `error` event for `err`: an AppError's code and message, anything else as an internal error. */
  private async sendError(err: unknown): Promise<void> {
    if (this.socket.destroyed) return;
    if (isAppError(err)) {
      await this.send('error', { text: err.message, code: err.code });
      return;
    }
    this.deps.log.error({ err, peer: this.peer }, 'wyoming: request failed');
    await this.send('error', { text: 'internal error', code: 'SYSTEM_INTERNAL_ERROR' });
  }
}

function invalid(message: string): AppError {
  return new AppError('VALIDATION_INVALID_VALUE', message);
}

/** The voice fields of an event (strings only; anything else is left out). */
function voiceOf(value: unknown): WyomingVoice {
  if (typeof value !== 'object' || value === null) return {};
  const v = value as Record<string, unknown>;
  const str = (x: unknown): string | undefined => (typeof x === 'string' && x.trim() !== '' ? x : undefined);
  return { name: str(v.name), language: str(v.language), speaker: str(v.speaker) };
}

/** A sentence end followed by white space: the sentence is complete even if nothing follows yet. */
const ENDED = /[.!?;:。！？…]["'»”’)\]]*\s+$/u;

/** The text's complete sentences and what follows them (a sentence still being written). */
export function splitComplete(text: string, language?: string): { complete: string; rest: string } {
  let segmenter: Intl.Segmenter;
  try {
    segmenter = new Intl.Segmenter(language, { granularity: 'sentence' });
  } catch {
    segmenter = new Intl.Segmenter('en', { granularity: 'sentence' });
  }
  const segments = [...segmenter.segment(text)].map((s) => s.segment);
  const last = segments.at(-1);
  if (last === undefined) return { complete: '', rest: '' };
  const whole = ENDED.test(last) ? segments.length : segments.length - 1;
  return { complete: segments.slice(0, whole).join(''), rest: segments.slice(whole).join('') };
}

/** Sentences joined into as few groups as fit within `limit` characters each. */
function groupSentences(sentences: readonly string[], limit: number): string[] {
  const groups: string[] = [];
  let current = '';
  for (const sentence of sentences) {
    if (current === '') current = sentence;
    else if (current.length + 1 + sentence.length <= limit) current += ` ${sentence}`;
    else {
      groups.push(current);
      current = sentence;
    }
  }
  if (current !== '') groups.push(current);
  return groups;
}
