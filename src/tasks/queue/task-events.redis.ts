/**
 * Task events across nodes over Redis pub/sub (the scale-out adapter of `TaskEvents`).
 *
 * All nodes share ONE channel (`<prefix>task-events`, message = `<sender> <task id>`,
 * `<sender> <kind> <task id>` for a change of the task's row, a cancellation, a deletion or a new
 * token). Each node keeps one subscriber connection on it from start-up and
 * dispatches messages to its local waiters, so `nextChange()` costs no round trip and is listening
 * from the moment it is called. `changed()` wakes this node's waiters at once and publishes for the
 * others; a node skips its own messages when they come back (each would wake its waiters twice).
 *
 * Reconnects: the subscriber resubscribes on every 'ready' itself, with ioredis's own
 * resubscription off: that one is sent without a handler for its failure, so a subscriber closed
 * while its reconnection's handshake is in flight rejected it unhandled ("Connection is closed.").
 * A change published while the subscriber was disconnected is never delivered (pub/sub keeps no
 * backlog). Once the subscription is back this adapter wakes every local waiter, so each re-checks the state it waits on; and every wait has a
 * deadline (an abort signal), so a missed change delays a waiter but cannot strand it forever.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { MemoryTaskEvents } from './task-events.memory.js';
import type { TaskChangeFilter, TaskChangeKind, TaskEvents } from './task-events.js';

/** A kind other than progress travels as `<kind> <task id>` after the sender (`cancel <id>`, …); progress as the bare task id. */
const KIND_PREFIXES: ReadonlyArray<[TaskChangeFilter, string]> = [
  ['status', 'status '],
  ['cancel', 'cancel '],
  ['deleted', 'deleted '],
  ['token', 'token '],
];

/** The sender and the change of a message; messages of nodes before senders were named have no sender. */
function parseMessage(message: string): { sender?: string; body: string } {
  if (!message.includes(' ') || KIND_PREFIXES.some(([, prefix]) => message.startsWith(prefix)))
    return { body: message };
  const space = message.indexOf(' ');
  return { sender: message.slice(0, space), body: message.slice(space + 1) };
}

/** What `RedisTaskEvents.create` needs. */
export interface RedisTaskEventsOptions {
  /** Publishes changes; shared with other users and never closed here. Its options are copied for the subscriber. */
  connection: Redis;
  /** Prefix of every Redis key and channel of this deployment (tests: one per test). */
  prefix: string;
  /** Receives failed publishes and subscriber connection errors; `changed()` itself never throws. */
  onError: (err: Error) => void;
}

/** `TaskEvents` shared by every node through one Redis pub/sub channel. */
export class RedisTaskEvents implements TaskEvents {
  private readonly local = new MemoryTaskEvents();
  /** Names this node's messages, so it can skip them when the channel delivers them back. */
  private readonly sender = randomUUID();
  private closed = false;

  private constructor(
    private readonly publisher: Redis,
    private readonly subscriber: Redis,
    private readonly channel: string,
    private readonly onError: (err: Error) => void,
  ) {}

  /** Opens the subscriber connection; resolves once the channel subscription is active. */
  static async create(options: RedisTaskEventsOptions): Promise<RedisTaskEvents> {
    const channel = `${options.prefix}task-events`;
    // The connection name lets an operator (and the reconnect test) find this subscriber in CLIENT LIST.
    const subscriber = options.connection.duplicate({
      connectionName: `${options.prefix}task-events`,
      autoResubscribe: false,
    });
    const events = new RedisTaskEvents(options.connection, subscriber, channel, options.onError);
    subscriber.on('error', (err: Error) => options.onError(err));
    subscriber.on('message', (from: string, message: string) => {
      if (from !== channel) return;
      const { sender, body } = parseMessage(message);
      if (sender === events.sender) return; // already dispatched here by changed()
      const kind = KIND_PREFIXES.find(([, prefix]) => body.startsWith(prefix));
      if (kind === undefined) events.local.changed(body);
      else events.local.changed(body.slice(kind[1].length), kind[0]);
    });
    try {
      await subscriber.subscribe(channel);
    } catch (err) {
      subscriber.disconnect();
      throw err;
    }
    // Registered after the first subscription: every later 'ready' is a reconnect.
    subscriber.on('ready', () => events.resumed());
    return events;
  }

  changed(taskId: string, kind: TaskChangeKind = 'progress'): void {
    this.local.changed(taskId, kind);
    const prefix = KIND_PREFIXES.find(([k]) => k === kind)?.[1] ?? '';
    const message = `${this.sender} ${prefix}${taskId}`;
    this.publisher.publish(this.channel, message).catch((err: unknown) => this.report(err));
  }

  nextChange(taskId: string, signal?: AbortSignal, options?: { only?: TaskChangeFilter }): Promise<void> {
    return this.local.nextChange(taskId, signal, options);
  }

  onAnnouncement(listener: (taskId: string | null, kind: TaskChangeFilter | null) => void): () => void {
    return this.local.onAnnouncement(listener);
  }

  /** Number of this node's waiters of `taskId` (tests check that aborted waits leave none behind). */
  waiterCount(taskId: string): number {
    return this.local.waiterCount(taskId);
  }

  /** Closes the subscriber connection (the shared publishing connection stays open). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.subscriber.removeAllListeners('ready');
    try {
      await this.subscriber.quit();
    } catch {
      this.subscriber.disconnect();
    }
  }

  /**
   * After a reconnect: subscribes again, then wakes every waiter to re-check what it may have
   * missed while disconnected.
   */
  private resumed(): void {
    void this.subscriber.subscribe(this.channel).then(
      () => this.local.wakeAll(),
      (err: unknown) => this.report(err),
    );
  }

  private report(err: unknown): void {
    if (this.closed) return;
    try {
      this.onError(err instanceof Error ? err : new Error(String(err)));
    } catch {
      // onError must not throw; if it does, there is nowhere left to report to.
    }
  }
}
