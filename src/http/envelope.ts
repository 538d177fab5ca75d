/** Success envelopes: `{status: 200, data}` (or `{status: 200, message, data}`). */

export interface OkEnvelope<T> {
  status: 200;
  message: 'OK';
  data: T;
}

/** `{status:200, message:"OK", data}` — the default success shape. */
export function ok<T>(data: T): OkEnvelope<T> {
  return { status: 200, message: 'OK', data };
}

/** `{status:200, message:"OK"}` — deletes. */
export function okNoData(): { status: 200; message: 'OK' } {
  return { status: 200, message: 'OK' };
}
