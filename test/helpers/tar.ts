/** Hand-made tar archives for tests of what reads them. */

/** One tar header (POSIX ustar) and its data padded to whole records. */
export function entry(name: string, type: string, data = new Uint8Array(), prefix = ''): Uint8Array {
  const header = new Uint8Array(512);
  const put = (at: number, text: string) => header.set(Buffer.from(text, 'utf8'), at);
  put(0, name);
  put(100, '0000600\0');
  put(124, `${data.length.toString(8).padStart(11, '0')}\0`);
  put(136, '00000000000\0');
  put(156, type);
  put(257, 'ustar\0');
  put(263, '00');
  put(345, prefix);
  put(148, '        ');
  const sum = header.reduce((total, byte) => total + byte, 0);
  put(148, `${sum.toString(8).padStart(6, '0')}\0 `);
  const padded = new Uint8Array(Math.ceil(data.length / 512) * 512);
  padded.set(data);
  return Buffer.concat([header, padded]);
}

/** Entries followed by the end marker (two zero records). */
export const archive = (...entries: Uint8Array[]) => Buffer.concat([...entries, new Uint8Array(1024)]);
