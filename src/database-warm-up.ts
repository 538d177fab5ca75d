/**
 * The embedded database's warm-up after start. PGlite runs PostgreSQL as WebAssembly, which V8
 * first runs as baseline code and compiles with its optimising tier only once each function has
 * run enough: on a newly started service the first burst of traffic pays for that compilation
 * (~0.4 CPU-s of V8's helper threads in its first second, docs/benchmarks.md) while it waits.
 * Here the service's own statements, made by its own stores, run on a throwaway account in
 * transactions that are rolled back, so that the code they need is compiled before traffic comes;
 * the main thread's side of them (the stores, the query builder) is compiled on the way.
 */
import { randomUUID } from 'node:crypto';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Transaction } from 'kysely';
import { SqlAccountStore } from './accounts/account-store.sql.js';
import type { DatabaseHandle } from './storage/database.js';
import type { Database, TaskRow } from './storage/schema.js';
import { LISTED_CONTENTS } from './tasks/task-service.js';
import { newTaskRow, TaskStore } from './tasks/task-store.js';
import { TimingStore } from './tasks/timings/timing-store.js';
import { VoiceStore } from './voices/voice-store.js';

/** How many rounds run by default: measured to leave few of the statements' functions in baseline code. */
export const DATABASE_WARM_UP_ROUNDS = 150;

/** A round's tasks: a dashboard's page has several, each task several pieces. */
const TASKS_PER_ROUND = 4;
const PIECES_PER_TASK = 3;

/** Thrown to end a round's transaction with a rollback. */
class RoundDone extends Error {}

/**
 * Runs `rounds` rounds of the service's statements, each in its own transaction rolled back at its
 * end: nothing is ever committed, and other statements wait only for the round being run (a few
 * milliseconds), not for the whole warm-up. Each round is background work: the event loop serves
 * requests between its statements (waited for on the spot, the first rounds held it for tens of
 * milliseconds each). Stops early when `signal` aborts; a failing statement ends it (the warm-up is
 * an optimisation: the first real statement reports a real problem).
 */
export async function warmUpDatabase(
  database: Pick<DatabaseHandle, 'db' | 'inBackground'>,
  signal: AbortSignal,
  rounds = DATABASE_WARM_UP_ROUNDS,
): Promise<void> {
  for (let round = 0; round < rounds && !signal.aborted; round++) {
    try {
      await database.db.transaction().execute(async (trx) => {
        await database.inBackground(() => oneRound(trx));
        throw new RoundDone();
      });
    } catch (err) {
      if (!(err instanceof RoundDone)) throw err;
    }
    // Requests that came meanwhile go first.
    await nextTurn();
  }
}

/** One round: an account and a voice, tasks created, listed, streamed, generated and finished. */
async function oneRound(trx: Transaction<Database>): Promise<void> {
  const accounts = new SqlAccountStore(trx);
  const voices = new VoiceStore(trx);
  const tasks = new TaskStore(trx);
  const timings = new TimingStore(trx);
  const now = new Date();
  const accountId = randomUUID();
  await accounts.insertAccount({ id: accountId, name: `warm-up-${accountId}`, createdAt: now });
  const keyHash = randomUUID();
  await accounts.insertKey({
    id: randomUUID(),
    accountId,
    hash: keyHash,
    prefix: 'sk-warm',
    createdAt: now,
    revokedAt: null,
  });
  await accounts.accountOfActiveKey(keyHash);
  const voiceId = randomUUID();
  await voices.insert(
    {
      id: voiceId,
      account_id: accountId,
      name: 'warm-up',
      status: 'ready',
      version: 'v3.0',
      language: 'en',
      description: '',
      engine: JSON.stringify({ engine: 'espeak', voice: 'en' }),
      with_lora: false,
      created_at: now,
      updated_at: now,
    },
    { voices: 1_000, uploadBytes: 0, splitters: 0, splitterBytes: 0, taskBytes: 0 },
  );
  const quotas = { maxQueuedTasks: 1_000, maxConcurrentTasks: 1_000, dailyCharacters: 1_000_000 };
  const ids: string[] = [];
  for (let t = 0; t < TASKS_PER_ROUND; t++) {
    const task = newTask(accountId, now);
    const pieces = Array.from({ length: PIECES_PER_TASK }, (_, idx) => ({
      task_id: task.id,
      idx,
      text: `Sentence ${String(idx)} of the warm-up, spoken by nobody.`,
      voice_id: voiceId,
      binding: JSON.stringify({ engine: 'espeak', voice: 'en' }),
      params: JSON.stringify({ speechRate: 1 }),
      status: 'pending' as const,
      samples: null,
      audio_key: null,
      audio_bytes: '0',
      generated_at: null,
      speaker: null,
    }));
    await tasks.insert({ task, pieces }, quotas, now.toISOString().slice(0, 10), 1_000_000_000);
    ids.push(task.id);
  }
  await listed(tasks, voices, accountId, ids);
  for (const id of ids) await generated(tasks, timings, id);
  await listed(tasks, voices, accountId, ids);
  await tasks.accountUsage(accountId);
  await tasks.accountUsageAndBytes(accountId);
}

function newTask(accountId: string, now: Date): TaskRow {
  return newTaskRow({
    id: randomUUID(),
    accountId,
    type: 'contents',
    authToken: randomUUID(),
    request: JSON.stringify({ contents: [] }),
    characters: 150,
    at: now,
  });
}

/** What a dashboard and a player read: the task list page with its contents and voices, a task, its stream. */
async function listed(tasks: TaskStore, voices: VoiceStore, accountId: string, ids: string[]): Promise<void> {
  const page = await tasks.list(accountId, 50, 0, undefined, LISTED_CONTENTS);
  await voices.getMany(accountId, [...new Set(page.rows.flatMap((row) => row.voiceIds))]);
  await tasks.list(accountId, 20, 0, 'processing', LISTED_CONTENTS);
  for (const id of ids) {
    await tasks.get(id);
    await tasks.pieces(id);
    await tasks.streamRows(id);
  }
}

/** What the runner writes while a task is generated: its claim, each piece with its timings, its end. */
async function generated(tasks: TaskStore, timings: TimingStore, id: string): Promise<void> {
  const token = randomUUID();
  await tasks.claimWithin(id, token, 'http://127.0.0.1:1', { maxConcurrent: 1_000, countAbove: 0 });
  for (let idx = 0; idx < PIECES_PER_TASK; idx++) {
    await tasks.setPieceStatus(id, idx, 'processing', token);
    await timings.clearPiece(id, idx, token);
    await timings.append(
      id,
      idx,
      [
        {
          seq: 0,
          start: 0,
          end: 22_050,
          textStart: 0,
          textEnd: 8,
          words: [{ start: 100, end: 9_000, textStart: 0, textEnd: 8 }],
        },
      ],
      token,
    );
    await tasks.pieceGenerated(id, idx, 22_050, `tasks/${id}/${String(idx)}.mp3`, token, 8_000);
    await tasks.pieceStatuses(id, [idx]);
  }
  await tasks.markGenerated(id, `tasks/${id}/0.mp3`, 1, token);
}
