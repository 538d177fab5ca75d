/**
 * `voicegen tasks list` and `tasks watch`: an account's tasks through a running server's public
 * API (the API key's account), for people (a table, a progress bar) and scripts (`--json`).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { CliError } from './cli-error.js';
import { parseData, type ApiCall } from './api-call.js';

/** A task as the list shows it (summaries: no texts). */
export interface TaskSummary {
  id: string;
  status: 'pending' | 'processing' | 'generated' | 'failed';
  type: string;
  createdAt: string;
  error?: string;
  metadata: { characters: number; contentsCount: number; audio?: string };
}

/** One page of the list and how many tasks there are in all. */
export interface TaskPage {
  items: TaskSummary[];
  total: number;
}

/** What `tasks list` asks for. */
export interface TaskListQuery {
  status?: string;
  limit: number;
  offset: number;
}

/** Reads one page of the account's tasks, newest first. */
export async function listTasks(call: ApiCall, query: TaskListQuery): Promise<TaskPage> {
  const params = new URLSearchParams({ limit: String(query.limit), offset: String(query.offset) });
  if (query.status !== undefined) params.set('status', query.status);
  const answer = await call('GET', `/api/tts/generate?${params.toString()}`);
  const items = parseData<TaskSummary[]>(answer, 'listing tasks');
  const total = (JSON.parse(answer.body.toString('utf8')) as { total?: number }).total ?? items.length;
  return { items, total };
}

/** The list as a table for people. */
export function formatTaskTable(page: TaskPage): string {
  const rows = page.items.map((t) =>
    [
      t.id,
      t.status.padEnd(10),
      String(t.metadata.contentsCount).padStart(6),
      t.createdAt,
      t.error ?? '',
    ].join('  '),
  );
  return [
    ['id'.padEnd(page.items[0]?.id.length ?? 2), 'status    ', 'pieces', 'created'.padEnd(24), 'error'].join(
      '  ',
    ),
    ...rows,
    `${page.items.length} of ${page.total} task(s)`,
  ].join('\n');
}

/** A task's progress as `tasks watch` reports it. */
export interface TaskProgress {
  id: string;
  status: TaskSummary['status'];
  piecesDone: number;
  pieces: number;
  /** Seconds of audio generated so far. */
  audioSeconds: number;
  /** Seconds of the whole task's audio so far: the generated pieces and the silences between them. */
  totalSeconds: number;
  error?: string;
  audio?: string;
}

interface TaskDetail {
  id: string;
  status: TaskSummary['status'];
  error?: string;
  metadata: { contents: { duration?: number; interval?: number }[]; audio?: string };
}

function progressOf(detail: TaskDetail): TaskProgress {
  const contents = detail.metadata.contents;
  return {
    id: detail.id,
    status: detail.status,
    piecesDone: contents.filter((c) => c.duration !== undefined).length,
    pieces: contents.length,
    audioSeconds: contents.reduce((sum, c) => sum + (c.duration ?? 0), 0),
    totalSeconds: contents.reduce(
      (sum, c, n) => sum + (c.duration ?? 0) + (n < contents.length - 1 ? (c.interval ?? 0) : 0),
      0,
    ),
    ...(detail.error !== undefined && { error: detail.error }),
    ...(detail.metadata.audio !== undefined && { audio: detail.metadata.audio }),
  };
}

/**
 * Follows a task until it is generated or failed, reporting each change of its progress; gives up
 * after `timeoutSeconds` (exit 1). Answers the last progress; a failed task is an error.
 */
export async function watchTask(
  call: ApiCall,
  id: string,
  options: { timeoutSeconds: number; intervalMs?: number },
  onProgress: (progress: TaskProgress) => void,
): Promise<TaskProgress> {
  const deadline = Date.now() + options.timeoutSeconds * 1000;
  let last = '';
  for (;;) {
    const progress = progressOf(
      parseData<TaskDetail>(
        await call('GET', `/api/tts/generate/${encodeURIComponent(id)}`),
        'reading the task',
      ),
    );
    const seen = JSON.stringify(progress);
    if (seen !== last) onProgress(progress);
    last = seen;
    if (progress.status === 'failed')
      throw new CliError(`task ${id} failed: ${progress.error ?? 'no reason given'}`, 1);
    if (progress.status === 'generated') return progress;
    if (Date.now() > deadline) {
      throw new CliError(`task ${id} is still ${progress.status} after ${options.timeoutSeconds} s`, 1);
    }
    await sleep(options.intervalMs ?? 250);
  }
}
