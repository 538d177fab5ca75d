/**
 * The Wyoming wire format: each event is one JSON header line
 * `{"type": …, "data": {…}?, "data_length": N?, "payload_length": M?}\n`, then N bytes of JSON
 * merged into `data`, then M bytes of binary payload. The reader takes bytes as they arrive and
 * yields whole events; anything malformed or larger than its bound is a ProtocolError, after which
 * the connection is closed (a reader that has lost the framing cannot find the next event).
 */

/** One Wyoming event. */
export interface WyomingEvent {
  type: string;
  data: Record<string, unknown>;
  /** Binary payload (audio); empty when there is none. */
  payload: Buffer;
}

/** The framing is broken or a part is over its bound: the connection cannot go on. */
export class ProtocolError extends Error {
  override readonly name = 'ProtocolError';
}

const NEWLINE = 0x0a;

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A declared length: absent, or a whole number of bytes within `max`. */
function declaredLength(header: Record<string, unknown>, field: string, max: number): number {
  const value = header[field];
  if (value === undefined || value === null) return 0;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0)
    throw new ProtocolError(`${field} must be a whole number of bytes`);
  if (value > max) throw new ProtocolError(`${field} ${value} is over the limit of ${max} bytes`);
  return value;
}

/** Where the reader is within the current event. */
type Stage =
  | { kind: 'header' }
  | { kind: 'data'; type: string; data: Record<string, unknown>; dataLength: number; payloadLength: number }
  | { kind: 'payload'; type: string; data: Record<string, unknown>; payloadLength: number };

/**
 * Reads events from a byte stream. `maxBytes` bounds the header line, the data and the payload,
 * each: a peer cannot make the reader hold more than about three times it.
 */
export class EventReader {
  private buffered: Buffer[] = [];
  private bufferedBytes = 0;
  private stage: Stage = { kind: 'header' };

  constructor(private readonly maxBytes: number) {}

  /** Whether part of an event has arrived and the rest has not. */
  get partial(): boolean {
    return this.bufferedBytes > 0 || this.stage.kind !== 'header';
  }

  /** Takes `chunk`, returns the events it completes; throws ProtocolError on a broken stream. */
  push(chunk: Buffer): WyomingEvent[] {
    this.buffered.push(chunk);
    this.bufferedBytes += chunk.length;
    const events: WyomingEvent[] = [];
    for (;;) {
      const event = this.next();
      if (event === undefined) return events;
      events.push(event);
    }
  }

  private next(): WyomingEvent | undefined {
    const stage = this.stage;
    if (stage.kind === 'header') {
      const all = this.joined();
      const end = all.indexOf(NEWLINE);
      if (end < 0) {
        if (all.length > this.maxBytes)
          throw new ProtocolError(`header line longer than the limit of ${this.maxBytes} bytes`);
        return undefined;
      }
      if (end > this.maxBytes)
        throw new ProtocolError(`header line longer than the limit of ${this.maxBytes} bytes`);
      this.take(end + 1);
      const line = all.subarray(0, end).toString('utf8').trim();
      // Blank lines carry no event; skipping them keeps hand-typed sessions (netcat) working.
      if (line === '') return this.next();
      const header = this.parseHeader(line);
      const type = header.type;
      if (typeof type !== 'string' || type === '' || type.length > 200)
        throw new ProtocolError('the header has no event type');
      const inline = header.data;
      if (inline !== undefined && inline !== null && !isPlainObject(inline))
        throw new ProtocolError('the header data must be a JSON object');
      const data = isPlainObject(inline) ? inline : {};
      const dataLength = declaredLength(header, 'data_length', this.maxBytes);
      const payloadLength = declaredLength(header, 'payload_length', this.maxBytes);
      this.stage = { kind: 'data', type, data, dataLength, payloadLength };
      return this.next();
    }
    if (stage.kind === 'data') {
      if (this.bufferedBytes < stage.dataLength) return undefined;
      if (stage.dataLength > 0) {
        const merged = this.parseJson(this.take(stage.dataLength).toString('utf8'), 'data');
        if (!isPlainObject(merged)) throw new ProtocolError('the event data must be a JSON object');
        Object.assign(stage.data, merged);
      }
      this.stage = {
        kind: 'payload',
        type: stage.type,
        data: stage.data,
        payloadLength: stage.payloadLength,
      };
      return this.next();
    }
    if (this.bufferedBytes < stage.payloadLength) return undefined;
    const payload = stage.payloadLength > 0 ? this.take(stage.payloadLength) : Buffer.alloc(0);
    this.stage = { kind: 'header' };
    return { type: stage.type, data: stage.data, payload };
  }

  private parseHeader(line: string): Record<string, unknown> {
    const header = this.parseJson(line, 'header line');
    if (!isPlainObject(header)) throw new ProtocolError('the header line must be a JSON object');
    return header;
  }

  private parseJson(text: string, what: string): unknown {
    try {
      return JSON.parse(text);
    } catch {
      throw new ProtocolError(`the ${what} is not valid JSON`);
    }
  }

  /** Everything buffered as one Buffer (kept joined, so repeated scans do not copy again). */
  private joined(): Buffer {
    if (this.buffered.length > 1) this.buffered = [Buffer.concat(this.buffered, this.bufferedBytes)];
    return this.buffered[0] ?? Buffer.alloc(0);
  }

  /** Removes and returns the first `n` buffered bytes. */
  private take(n: number): Buffer {
    const all = this.joined();
    const out = Buffer.from(all.subarray(0, n));
    const rest = all.subarray(n);
    this.buffered = rest.length > 0 ? [rest] : [];
    this.bufferedBytes = rest.length;
    return out;
  }
}

/** The bytes of one event: its header line, its data as JSON after it, then its payload. */
export function encodeEvent(type: string, data?: Record<string, unknown>, payload?: Uint8Array): Buffer {
  const header: Record<string, unknown> = { type };
  const dataBytes =
    data !== undefined && Object.keys(data).length > 0
      ? Buffer.from(JSON.stringify(data), 'utf8')
      : undefined;
  if (dataBytes !== undefined) header.data_length = dataBytes.length;
  if (payload !== undefined && payload.length > 0) header.payload_length = payload.length;
  const parts: Uint8Array[] = [Buffer.from(`${JSON.stringify(header)}\n`, 'utf8')];
  if (dataBytes !== undefined) parts.push(dataBytes);
  if (payload !== undefined && payload.length > 0) parts.push(payload);
  return Buffer.concat(parts);
}
