/**
 * How the service's log lines look: one JSON object a line for log collectors (the default when
 * standard output is a file, a pipe or a container's log), or short coloured lines for a person
 * watching a terminal. LOG_FORMAT=json|pretty forces either.
 */
import pino, { type DestinationStream } from 'pino';

export type LogFormatSetting = 'auto' | 'json' | 'pretty';

/** The format lines are written in: the setting, or with `auto` pretty exactly when a terminal reads them. */
export function chooseLogFormat(setting: LogFormatSetting, isTTY: boolean | undefined): 'json' | 'pretty' {
  if (setting !== 'auto') return setting;
  return isTTY === true ? 'pretty' : 'json';
}

/** A request's fields as one short line, `GET /api/voice 200 3.1 ms`, in front of its message. */
export function prettyMessage(log: Record<string, unknown>, messageKey: string): string {
  const message = typeof log[messageKey] === 'string' ? log[messageKey] : '';
  const req = log.req as { method?: unknown; url?: unknown } | undefined;
  const res = log.res as { statusCode?: unknown } | undefined;
  if (req === undefined || typeof req.method !== 'string' || typeof req.url !== 'string') return message;
  const status = res !== undefined && typeof res.statusCode === 'number' ? ` ${res.statusCode}` : '';
  const time = typeof log.responseTime === 'number' ? ` ${log.responseTime.toFixed(1)} ms` : '';
  const line = `${req.method} ${req.url}${status}${time}`;
  // The usual completion message adds nothing to the request line; any other is kept.
  return message === '' || message === 'request completed' ? line : `${line} ${message}`;
}

/**
 * pino-pretty writing to `destination` (standard output by default), loaded only when chosen (JSON
 * needs none of it). Synchronous writes: the last lines before an exit are not lost, and a person
 * reads far fewer lines than a log collector would.
 */
export async function prettyLogStream(
  colorize: boolean | undefined,
  destination: number | NodeJS.WritableStream = 1,
): Promise<DestinationStream> {
  const { default: pretty } = await import('pino-pretty');
  return pretty({
    colorize: colorize === true,
    destination,
    sync: true,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname,reqId,req,res,responseTime',
    messageFormat: prettyMessage,
  });
}

/**
 * Bytes of JSON lines gathered before one write (a write system call per line cost a busy node
 * dearly): with the line that crosses it, a write stays under a pipe's atomic 4 KiB, so lines of
 * two processes sharing the pipe (the finished-audio process's) never split each other.
 */
export const JSON_BATCH_BYTES = 3_072;
/** At most this long between a line and its write, however quiet the service. */
export const JSON_FLUSH_MS = 100;

let stdoutLines: ReturnType<typeof pino.destination> | undefined;

/**
 * JSON lines on standard output, written in batches: up to 3 KiB gathered, at least every 100 ms,
 * synchronously when written. One destination per process, whose exit writes what is left (a
 * normal exit, a fatal error); only a kill that skips exit handlers (SIGKILL, the kernel's OOM
 * killer) loses up to the last 100 ms of lines.
 */
export function batchedJsonStdout(): DestinationStream {
  if (stdoutLines === undefined) {
    const sonic = pino.destination({
      dest: 1,
      sync: true,
      minLength: JSON_BATCH_BYTES,
      periodicFlush: JSON_FLUSH_MS,
    });
    process.once('exit', () => flushJsonStdout());
    stdoutLines = sonic;
  }
  return stdoutLines;
}

/** Whether `stream` is this process's batchedJsonStdout (which another process may share with lines of its own). */
export function isBatchedJsonStdout(stream: unknown): boolean {
  return stream !== undefined && stream === stdoutLines;
}

/** Writes the lines batchedJsonStdout still holds, now (synchronously: safe on the way out). */
function flushJsonStdout(): void {
  try {
    stdoutLines?.flushSync();
  } catch {
    // Standard output is gone (a closed pipe): there is nowhere left to write the lines.
  }
}
