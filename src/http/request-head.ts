/**
 * A strict reader of one HTTP/1.1 request head in raw bytes, for deciding which process a
 * connection's next request goes to before any parser consumes it. It reads only what is plainly
 * well formed (RFC 9112: a request line of method, origin-form target and version; field lines of a
 * token, a colon and a visible value; CRLF line ends) and calls everything else `other`, which goes to
 * Node's parser unread — so whatever it accepts, Node's parser would read the same way.
 */

/** One request head. */
export interface RequestHead {
  method: string;
  /** The request target as sent (origin form: a path and an optional query). */
  target: string;
  /** `1.1` or `1.0`. */
  version: string;
  /** Field values by lower-case name, a repeated field's values in order. */
  fields: Map<string, string[]>;
  /** Bytes of the head from its first byte, the blank line included. */
  length: number;
}

export type HeadRead =
  | { kind: 'head'; head: RequestHead }
  /** No blank line yet: more bytes may complete it. */
  | { kind: 'incomplete' }
  /** Not a head this reader vouches for (or too long): Node's parser decides. */
  | { kind: 'other' };

/** Node's default limit of a request head (`--max-http-header-size`). */
export const MAX_HEAD_BYTES = 16 * 1024;

const REQUEST_LINE = /^([A-Z]{1,16}) (\/[!-~]*) HTTP\/(1\.[01])$/;
/** A field name (token), the colon, optional whitespace, a value of visible ASCII and inner blanks. */
const FIELD_LINE = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*((?:[!-~]+(?:[ \t]+[!-~]+)*)?)[ \t]*$/;

const INCOMPLETE: HeadRead = { kind: 'incomplete' };
const OTHER: HeadRead = { kind: 'other' };

/** Reads the request head that starts at `start` of `bytes`. */
export function readRequestHead(bytes: Buffer, start = 0): HeadRead {
  const blank = bytes.indexOf('\r\n\r\n', start, 'latin1');
  if (blank === -1) return bytes.length - start > MAX_HEAD_BYTES ? OTHER : INCOMPLETE;
  const length = blank + 4 - start;
  if (length > MAX_HEAD_BYTES) return OTHER;
  // A bare CR or LF stays inside a line, where neither pattern accepts it.
  const lines = bytes.toString('latin1', start, blank).split('\r\n');
  const requestLine = REQUEST_LINE.exec(lines[0] ?? '');
  if (requestLine === null) return OTHER;
  const fields = new Map<string, string[]>();
  for (let i = 1; i < lines.length; i++) {
    const field = FIELD_LINE.exec(lines[i]!);
    if (field === null) return OTHER;
    const name = field[1]!.toLowerCase();
    const values = fields.get(name);
    if (values === undefined) fields.set(name, [field[2]!]);
    else values.push(field[2]!);
  }
  const [, method = '', target = '', version = ''] = requestLine;
  return { kind: 'head', head: { method, target, version, fields, length } };
}
