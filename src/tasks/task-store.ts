/**
 * Database access for generation tasks and their pieces. The tasks table is the durable record of
 * work (the TaskQueue only says who works on what now); the runner's writes are fenced by the
 * lease token recorded when it claimed the task.
 */
import { sql, type ExpressionBuilder, type Insertable, type Kysely, type Updateable } from 'kysely';
import { lockAccount } from '../storage/account-lock.js';
import type { StorageRefusal } from '../storage/storage-limits.js';
import { fetchPage } from '../storage/paging.js';
import type {
  Database,
  PieceStatus,
  TaskContentRow,
  TaskContentsTable,
  TaskRow,
  TaskStatus,
} from '../storage/schema.js';
import { LeaseLostError } from './queue/task-queue.js';
import { inTransaction } from '../storage/transaction.js';

/** The columns of a task that its list summary shows (never the request echo or piece texts). */
const SUMMARY_COLUMNS = [
  'id',
  'account_id',
  'status',
  'type',
  'auth_token',
  'characters',
  'error',
  'audio_key',
  'created_at',
  'generated_at',
] as const;

/**
 * One task as a list shows it: its own small columns plus piece counts from an SQL aggregate, so a
 * list page costs memory by its length, never by the size of its tasks' texts.
 */
export type TaskSummaryRow = Pick<TaskRow, (typeof SUMMARY_COLUMNS)[number]> & {
  contentsCount: number;
  /** Distinct voice ids of the pieces, in order of first use. */
  voiceIds: string[];
};

/** A piece as a task list shows it: no params, its text cut (see TaskStore.list). */
export type ListedPieceRow = Pick<
  TaskContentRow,
  'task_id' | 'idx' | 'text' | 'voice_id' | 'status' | 'samples' | 'audio_key' | 'generated_at'
>;

/** A listed piece as the list's statement sends it (JSON: numbers, and its time in milliseconds). */
type ListedPieceJson = [
  idx: number,
  text: string,
  voiceId: string,
  status: PieceStatus,
  samples: number | null,
  audioKey: string | null,
  generatedAtMs: number | null,
];

function listedPiece(taskId: string, piece: ListedPieceJson): ListedPieceRow {
  const [idx, text, voiceId, status, samples, audioKey, generatedAtMs] = piece;
  return {
    task_id: taskId,
    idx,
    text,
    voice_id: voiceId,
    status,
    samples: samples === null ? null : String(samples),
    audio_key: audioKey,
    generated_at: generatedAtMs === null ? null : new Date(generatedAtMs),
  };
}

/** The columns of a task its stream and audio routes need (never the request echo): a cheap read per stream request. */
const STREAM_COLUMNS = ['id', 'account_id', 'status', 'auth_token', 'audio_key', 'worker_url'] as const;

/** A task as the stream and audio routes read it. */
export type TaskStreamRow = Pick<TaskRow, (typeof STREAM_COLUMNS)[number]>;

/** A piece as the stream and audio routes read it: the columns they need (never its text). */
export type PieceStreamRow = Pick<TaskContentRow, 'idx' | 'status' | 'audio_key' | 'params'>;

export interface NewTask {
  task: TaskRow;
  pieces: Insertable<TaskContentsTable>[];
}

/** The row of a new task: pending, never claimed, no audio yet. */
export function newTaskRow(fields: {
  id: string;
  accountId: string;
  type: string;
  authToken: string;
  /** The request as the task's detail echoes it (JSON). */
  request: string;
  characters: number;
  at: Date;
}): TaskRow {
  return {
    id: fields.id,
    account_id: fields.accountId,
    status: 'pending',
    type: fields.type,
    auth_token: fields.authToken,
    request: fields.request,
    characters: fields.characters,
    error: null,
    attempts: 0,
    lease_token: null,
    worker_url: null,
    audio_key: null,
    audio_bytes: '0',
    duration_seconds: null,
    created_at: fields.at,
    updated_at: fields.at,
    generated_at: null,
    cancel_reason: null,
  };
}

/** The error of a task its client cancelled (`POST /api/tts/generate/{id}/cancel`). */
export const CANCELLED_BY_CLIENT = 'cancelled by the client';

/** Per-account limits; 0 = unlimited. */
export interface AccountQuotas {
  /** Pending plus processing tasks an account may have. */
  maxQueuedTasks: number;
  /** Tasks of one account processing at once, cluster-wide (enforced by the claim). */
  maxConcurrentTasks: number;
  /** Characters of the tasks an account may have accepted per UTC day. */
  dailyCharacters: number;
}

/** No limit at all. */
export const UNLIMITED_QUOTAS: AccountQuotas = {
  maxQueuedTasks: 0,
  maxConcurrentTasks: 0,
  dailyCharacters: 0,
};

/** Whether a new task was admitted, and if not which quota refused it. */
/** A new task refused by a quota of the account's tasks (429: waiting helps). */
export interface QuotaRefusal {
  admitted: false;
  quota: 'queuedTasks' | 'dailyCharacters';
  limit: number;
  used: number;
}

export type Admission =
  | { admitted: true; /** Its 1-based position among the account's unfinished tasks. */ position: number }
  | QuotaRefusal
  /** Refused because the account's stored task audio is at its limit (403: deleting helps). */
  | { admitted: false; storage: StorageRefusal };

/** The account concurrency limit a claim enforces: at most `maxConcurrent` (0 = no limit) tasks larger than `countAbove` characters. */
export interface ClaimLimit {
  maxConcurrent: number;
  countAbove: number;
}

/** What a claim found: the task is now this delivery's, or why not. */
export type ClaimOutcome =
  | { kind: 'claimed'; task: TaskRow }
  /** Finished or deleted meanwhile: nothing to do. */
  | { kind: 'gone' }
  /** Its account already has its maximum of tasks processing: try again later. */
  | { kind: 'busy' }
  /** Its cancellation was asked for: it is now failed with the cancel reason. */
  | { kind: 'cancelled' };

/** An account's unfinished tasks and the characters it had accepted on one UTC day. */
export interface AccountUsage {
  pendingTasks: number;
  processingTasks: number;
  charactersToday: number;
}

/** The UTC day of `at` as the usage table keys it ('YYYY-MM-DD'). */
export function utcDay(at: Date): string {
  return at.toISOString().slice(0, 10);
}

export class TaskStore {
  constructor(private readonly db: Kysely<Database>) {}

  /**
   * The refusal a new task of `characters` characters of the account would get now, from one read
   * and without a lock; undefined when it could be admitted (the admission then decides again,
   * locked). Asked before every admission, and before a large request's body is read (with the
   * smallest task, one character).
   */
  async refusalBeforeAdmission(
    accountId: string,
    characters: number,
    quotas: AccountQuotas,
    day: string,
    maxTaskBytes: number,
  ): Promise<Exclude<Admission, { admitted: true }> | undefined> {
    if (quotas.maxQueuedTasks === 0 && quotas.dailyCharacters === 0 && maxTaskBytes === 0) return undefined;
    const usage = await usageInOneRead(this.db, accountId, day, maxTaskBytes > 0);
    return admissionRefusal(usage, characters, quotas, maxTaskBytes);
  }

  /**
   * Inserts a task unless its account's quotas refuse it, and adds its characters to the account's
   * usage of `day` (an atomic upsert). The account's row is locked for the transaction, so the
   * admissions and claims of one account are serialized across every node and counts are exact.
   * A refusal is answered by one read before any transaction: an account flooding past its quota
   * (thousands of refusals) then holds no lock, and on the embedded database does not keep its one
   * session for a transaction each; the locked count still decides admissions.
   */
  async insert(
    { task, pieces }: NewTask,
    quotas: AccountQuotas = UNLIMITED_QUOTAS,
    day: string = utcDay(new Date()),
    /** Bytes of task audio the account may store (0 = unlimited): at or past it, no new task. */
    maxTaskBytes = 0,
  ): Promise<Admission> {
    const accountId = task.account_id;
    const early = await this.refusalBeforeAdmission(accountId, task.characters, quotas, day, maxTaskBytes);
    if (early !== undefined) return early;
    return inTransaction(this.db, async (trx): Promise<Admission> => {
      await lockAccount(trx, accountId);
      const usage = await usageInOneRead(trx, accountId, day, maxTaskBytes > 0);
      const refused = admissionRefusal(usage, task.characters, quotas, maxTaskBytes);
      if (refused !== undefined) return refused;
      // The task, its pieces and the day's characters in one statement (one round trip).
      const usageRow = { account_id: accountId, day, characters: task.characters };
      const withTask = trx.with('new_task', (db) => db.insertInto('tasks').values(task));
      const addUsage = <Q extends Pick<typeof withTask, 'insertInto'>>(qc: Q) =>
        qc
          .insertInto('account_daily_usage')
          .values(usageRow)
          .onConflict((oc) =>
            oc.columns(['account_id', 'day']).doUpdateSet((eb) => ({
              characters: eb('account_daily_usage.characters', '+', eb.ref('excluded.characters')),
            })),
          );
      if (pieces.length > 0)
        await addUsage(
          withTask.with('new_pieces', (db) => db.insertInto('task_contents').values(pieces)),
        ).execute();
      else await addUsage(withTask).execute();
      return { admitted: true, position: usage.pendingTasks + usage.processingTasks + 1 };
    });
  }

  /** An account's pending and processing tasks and the characters it had accepted on `day`. */
  async accountUsage(accountId: string, day: string = utcDay(new Date())): Promise<AccountUsage> {
    return usageInOneRead(this.db, accountId, day);
  }

  /** `accountUsage` and the bytes of task audio (merged and piece MP3s) the account stores, in one read. */
  async accountUsageAndBytes(
    accountId: string,
    day: string = utcDay(new Date()),
  ): Promise<AccountUsage & { taskBytes: number }> {
    const usage = await usageInOneRead(this.db, accountId, day, true);
    return { ...usage, taskBytes: usage.taskBytes ?? 0 };
  }

  /**
   * Asks for the cancellation of an unfinished task of `accountId`, in one statement: a pending
   * task fails at once with `reason`; a processing one keeps running until the node generating it
   * sees the reason (TaskRunner) — or, if that node is gone, until the next claim. Returns the
   * status after the statement ('failed': cancelled now; 'processing': asked for), or undefined
   * when the task is not this account's or not unfinished.
   */
  async requestCancel(accountId: string, id: string, reason: string): Promise<TaskStatus | undefined> {
    const row = await this.db
      .updateTable('tasks')
      .set({
        status: sql<TaskStatus>`case when status = 'pending' then 'failed' else status end`,
        error: sql<string | null>`case when status = 'pending' then ${reason} else error end`,
        cancel_reason: sql<string>`coalesce(cancel_reason, ${reason})`,
        updated_at: new Date(),
      })
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .where('status', 'in', ['pending', 'processing'])
      .returning('status')
      .executeTakeFirst();
    return row?.status;
  }

  /** Why the cancellation of `taskId` was asked for; undefined when it was not (or the task is gone). */
  async cancelReason(taskId: string): Promise<string | undefined> {
    const row = await this.db
      .selectFrom('tasks')
      .select('cancel_reason')
      .where('id', '=', taskId)
      .executeTakeFirst();
    return row?.cancel_reason ?? undefined;
  }

  async get(id: string): Promise<TaskRow | undefined> {
    return this.db.selectFrom('tasks').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /**
   * The task and its pieces without texts or the request echo: what a stream request reads. One
   * statement (the task's columns repeat on each piece's row), so both come from one snapshot.
   */
  async streamRows(taskId: string): Promise<{ task: TaskStreamRow; pieces: PieceStreamRow[] } | undefined> {
    const rows = await this.db
      .selectFrom('tasks as t')
      .leftJoin('task_contents as c', 'c.task_id', 't.id')
      .select(STREAM_COLUMNS.map((column) => `t.${column}` as const))
      .select(['c.idx', 'c.status as piece_status', 'c.audio_key as piece_audio_key', 'c.params'])
      .where('t.id', '=', taskId)
      .orderBy('c.idx')
      .execute();
    const [first] = rows;
    if (first === undefined) return undefined;
    const { id, account_id, status, auth_token, audio_key, worker_url } = first;
    const pieces: PieceStreamRow[] = [];
    for (const row of rows) {
      // A task without pieces has one row, its piece columns null.
      if (row.idx === null || row.piece_status === null || row.params === null) continue;
      pieces.push({
        idx: row.idx,
        status: row.piece_status,
        audio_key: row.piece_audio_key,
        params: row.params,
      });
    }
    return { task: { id, account_id, status, auth_token, audio_key, worker_url }, pieces };
  }

  /** Pending tasks of the `limit` accounts with the most of them (metrics: queue depth per account). */
  async pendingByAccount(limit: number): Promise<{ accountId: string; pending: number }[]> {
    const rows = await this.db
      .selectFrom('tasks')
      .select((eb) => ['account_id', eb.fn.countAll<number | string | bigint>().as('pending')])
      .where('status', '=', 'pending')
      .groupBy('account_id')
      .orderBy('pending', 'desc')
      .limit(limit)
      .execute();
    return rows.map((r) => ({ accountId: r.account_id, pending: Number(r.pending) }));
  }

  async pieces(taskId: string): Promise<TaskContentRow[]> {
    return this.db
      .selectFrom('task_contents')
      .selectAll()
      .where('task_id', '=', taskId)
      .orderBy('idx')
      .execute();
  }

  /**
   * A page of the account's tasks, newest first, in one statement: each row brings its pieces per
   * voice (voice id, count; ordered by each voice's first piece) and its first `contents.count`
   * pieces, each text cut to `contents.textChars` + 1 characters (so a caller can tell a cut text
   * from one exactly `contents.textChars` long) — what a list shows, never a whole text.
   */
  async list(
    accountId: string,
    limit: number,
    offset: number,
    status: TaskStatus | undefined,
    contents: { count: number; textChars: number },
  ): Promise<{ rows: (TaskSummaryRow & { firstPieces: ListedPieceRow[] })[]; total: number }> {
    let query = this.db.selectFrom('tasks').where('account_id', '=', accountId);
    if (status !== undefined) query = query.where('status', '=', status);
    const page = await fetchPage(
      query
        .select(SUMMARY_COLUMNS)
        .select(
          sql<[voiceId: string, pieces: number][] | null>`(
            select json_agg(json_build_array(v.voice_id, v.pieces) order by v.first_idx)
            from (
              select voice_id, count(*) as pieces, min(idx) as first_idx
              from task_contents where task_id = tasks.id group by voice_id
            ) v
          )`.as('voice_pieces'),
        )
        .select(
          // Each piece as [idx, text, voice, status, samples, audio key, generated (ms since 1970)].
          sql<ListedPieceJson[] | null>`(
            select json_agg(json_build_array(
              c.idx, left(c.text, ${contents.textChars + 1}), c.voice_id, c.status, c.samples, c.audio_key,
              floor(extract(epoch from c.generated_at) * 1000)
            ) order by c.idx)
            from task_contents c where c.task_id = tasks.id and c.idx < ${contents.count}
          )`.as('first_pieces'),
        ),
      limit,
      offset,
    );
    const rows = page.rows.map(({ voice_pieces, first_pieces, ...row }) => {
      const voices = voice_pieces ?? [];
      return {
        ...row,
        contentsCount: voices.reduce((n, [, pieces]) => n + Number(pieces), 0),
        voiceIds: voices.map(([voiceId]) => voiceId),
        firstPieces: (first_pieces ?? []).map((piece) => listedPiece(row.id, piece)),
      };
    });
    return { rows, total: page.total };
  }

  async exists(taskId: string): Promise<boolean> {
    const row = await this.db.selectFrom('tasks').select('id').where('id', '=', taskId).executeTakeFirst();
    return row !== undefined;
  }

  /** Gives an account's task a new stream token; false when the account has no such task. */
  async setAuthToken(accountId: string, id: string, token: string): Promise<boolean> {
    const result = await this.db
      .updateTable('tasks')
      .set({ auth_token: token })
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }

  /** Deletes a finished task (not pending/processing); false when there was no such deletable row. */
  async deleteFinished(accountId: string, id: string): Promise<boolean> {
    const result = await this.db
      .deleteFrom('tasks')
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .where('status', 'in', ['generated', 'failed'])
      .executeTakeFirst();
    return result.numDeletedRows > 0n;
  }

  /** Ids of every task not finished yet (pending or processing), oldest first: the work to queue at start. */
  /** Which of `ids` are tasks still pending or processing (the others are finished or deleted). */
  async unfinishedAmong(ids: readonly string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const rows = await this.db
      .selectFrom('tasks')
      .select('id')
      .where('id', 'in', [...ids])
      .where('status', 'in', ['pending', 'processing'])
      .execute();
    return new Set(rows.map((r) => r.id));
  }

  async unfinishedIds(): Promise<string[]> {
    return (await this.unfinished()).map((r) => r.id);
  }

  /** Every task not finished yet with its account and size, oldest first: the work to queue at start. */
  async unfinished(): Promise<{ id: string; account_id: string; characters: number }[]> {
    return this.db
      .selectFrom('tasks')
      .select(['id', 'account_id', 'characters'])
      .where('status', 'in', ['pending', 'processing'])
      .orderBy('created_at')
      .orderBy('id')
      .execute();
  }

  /**
   * Claims a delivered task for the lease `token`: marks it processing, counts the attempt and
   * records the token (every later write of the runner requires it) and the holder's URL. Pieces an
   * earlier holder left processing restart. Undefined when the task is gone or already finished.
   */
  async claim(taskId: string, token: string, workerUrl: string): Promise<TaskRow | undefined> {
    const outcome = await this.claimWithin(taskId, token, workerUrl, { maxConcurrent: 0, countAbove: 0 });
    return outcome.kind === 'claimed' ? outcome.task : undefined;
  }

  /**
   * `claim`, but within the account's concurrency limit (`limit.maxConcurrent` tasks of more than
   * `limit.countAbove` characters processing at once, 0 = unlimited), counted under the account's
   * row lock so that every node agrees; and a task whose cancellation was asked for is failed with
   * the reason instead of claimed.
   */
  async claimWithin(
    taskId: string,
    token: string,
    workerUrl: string,
    limit: ClaimLimit,
  ): Promise<ClaimOutcome> {
    const { maxConcurrent, countAbove } = limit;
    // No limit to count under a lock: one conditional update claims an unfinished task that nobody
    // asked to cancel. Anything else (gone, cancelled) is told apart by the full claim below.
    if (maxConcurrent === 0) {
      const task = await this.db
        .updateTable('tasks')
        .set(claimedBy(token, workerUrl))
        .where('id', '=', taskId)
        .where('status', 'in', ['pending', 'processing'])
        .where('cancel_reason', 'is', null)
        .returningAll()
        .executeTakeFirst();
      if (task !== undefined) {
        await restartPieces(this.db, task);
        return { kind: 'claimed', task };
      }
    }
    return inTransaction(this.db, async (trx): Promise<ClaimOutcome> => {
      const current = await trx
        .selectFrom('tasks')
        .select(['account_id', 'cancel_reason'])
        .where('id', '=', taskId)
        .where('status', 'in', ['pending', 'processing'])
        .executeTakeFirst();
      if (current === undefined) return { kind: 'gone' };
      if (current.cancel_reason !== null) {
        // Fenced like a holder's write: a stale holder of the task can no longer write.
        const cancelled = await trx
          .updateTable('tasks')
          .set({ status: 'failed', error: current.cancel_reason, lease_token: token, updated_at: new Date() })
          .where('id', '=', taskId)
          .where('status', 'in', ['pending', 'processing'])
          .executeTakeFirst();
        return cancelled.numUpdatedRows > 0n ? { kind: 'cancelled' } : { kind: 'gone' };
      }
      if (maxConcurrent > 0) {
        await lockAccount(trx, current.account_id);
        const others = await trx
          .selectFrom('tasks')
          .select((eb) => eb.fn.countAll<number | string | bigint>().as('n'))
          .where('account_id', '=', current.account_id)
          .where('status', '=', 'processing')
          .where('characters', '>', countAbove)
          .where('id', '<>', taskId)
          .executeTakeFirstOrThrow();
        if (Number(others.n) >= maxConcurrent) return { kind: 'busy' };
      }
      const task = await trx
        .updateTable('tasks')
        .set(claimedBy(token, workerUrl))
        .where('id', '=', taskId)
        .where('status', 'in', ['pending', 'processing'])
        .returningAll()
        .executeTakeFirst();
      if (task === undefined) return { kind: 'gone' };
      await restartPieces(trx, task);
      return { kind: 'claimed', task };
    });
  }

  /** Fenced: a piece's status, while `token` still holds the task. */
  async setPieceStatus(taskId: string, idx: number, status: PieceStatus, token: string): Promise<void> {
    await this.updateHeldPiece(taskId, idx, token, { status });
  }

  /**
   * Fenced: a finished piece whose MP3 of `bytes` is stored, while `token` still holds the task. One
   * statement: the piece is updated and its bytes replace those of an earlier store of the same
   * piece (a delivery after a node died stores it again under the same key) in the task's total.
   */
  async pieceGenerated(
    taskId: string,
    idx: number,
    samples: number,
    audioKey: string,
    token: string,
    bytes = 0,
  ): Promise<void> {
    const result = await this.db
      .with('held', (db) =>
        db
          .selectFrom('tasks')
          .select('id')
          .where('id', '=', taskId)
          .where('lease_token', '=', token)
          .forUpdate(),
      )
      // Every CTE sees the rows as they were before the statement: this is the earlier store's size.
      .with('earlier', (db) =>
        db
          .selectFrom('task_contents')
          .select('audio_bytes')
          .where('task_id', '=', taskId)
          .where('idx', '=', idx),
      )
      .with('piece', (db) =>
        db
          .updateTable('task_contents')
          .set({
            status: 'generated',
            samples,
            audio_key: audioKey,
            audio_bytes: bytes,
            generated_at: new Date(),
          })
          .where('task_id', 'in', (eb) => eb.selectFrom('held').select('held.id'))
          .where('idx', '=', idx)
          .returning('task_id'),
      )
      .updateTable('tasks')
      .set({
        audio_bytes: sql<string>`audio_bytes + ${bytes} - coalesce((select audio_bytes from earlier), 0)`,
      })
      .where('id', 'in', (eb) => eb.selectFrom('piece').select('piece.task_id'))
      .executeTakeFirst();
    // Every piece exists while its task does: no row means the task is no longer held by `token`.
    if (result.numUpdatedRows === 0n) throw new LeaseLostError(taskId, 'it was claimed by another delivery');
  }

  /**
   * Updates one piece while `token` holds its task, or throws LeaseLostError: one statement that
   * locks the task row (FOR UPDATE, as a claim's update of the same row needs) and updates the
   * piece, so a concurrent claim waits for it or makes it fail — never interleaves. One statement
   * instead of a four-statement transaction: twice per piece, and on the embedded database a
   * transaction keeps its one session between statements.
   */
  private async updateHeldPiece(
    taskId: string,
    idx: number,
    token: string,
    values: Updateable<TaskContentsTable>,
  ): Promise<void> {
    const result = await this.db
      .with('held', (db) =>
        db
          .selectFrom('tasks')
          .select('id')
          .where('id', '=', taskId)
          .where('lease_token', '=', token)
          .forUpdate(),
      )
      .updateTable('task_contents')
      .set(values)
      .where('task_id', 'in', (eb) => eb.selectFrom('held').select('held.id'))
      .where('idx', '=', idx)
      .executeTakeFirst();
    // Every piece exists while its task does: no row means the task is no longer held by `token`.
    if (result.numUpdatedRows === 0n) throw new LeaseLostError(taskId, 'it was claimed by another delivery');
  }

  /** The status of each of pieces `idxs` of a task and the task's own, one row per piece that exists. */
  async pieceStatuses(
    taskId: string,
    idxs: readonly number[],
  ): Promise<{ idx: number; piece: PieceStatus; task: TaskStatus }[]> {
    if (idxs.length === 0) return [];
    return this.db
      .selectFrom('task_contents')
      .innerJoin('tasks', 'tasks.id', 'task_contents.task_id')
      .select(['task_contents.idx as idx', 'task_contents.status as piece', 'tasks.status as task'])
      .where('task_contents.task_id', '=', taskId)
      .where('task_contents.idx', 'in', [...idxs])
      .execute();
  }

  /**
   * Fenced: the task is generated, with its merged audio's key and its duration, in one update
   * while `token` still holds it (a generated task always has its audio: a delete cannot race the
   * merged write, and a stop before this resumes the task).
   */
  async markGenerated(
    taskId: string,
    audioKey: string,
    durationSeconds: number,
    token: string,
    /** Bytes of the merged audio stored for it (0 when it is its one piece's audio, already counted). */
    mergedBytes = 0,
  ): Promise<void> {
    const now = new Date();
    const result = await this.db
      .updateTable('tasks')
      .set({
        status: 'generated',
        audio_key: audioKey,
        audio_bytes: sql<string>`audio_bytes + ${mergedBytes}`,
        duration_seconds: durationSeconds,
        generated_at: now,
        updated_at: now,
      })
      .where('id', '=', taskId)
      .where('lease_token', '=', token)
      .executeTakeFirst();
    if (result.numUpdatedRows === 0n) throw new LeaseLostError(taskId, 'it was claimed by another delivery');
  }

  /** Fenced: the task (and the piece being generated, if any) failed, while `token` still holds it. */
  async markFailed(
    taskId: string,
    error: string,
    failedPiece: number | undefined,
    token: string,
  ): Promise<void> {
    await inTransaction(this.db, async (trx) => {
      const result = await trx
        .updateTable('tasks')
        .set({ status: 'failed', error, updated_at: new Date() })
        .where('id', '=', taskId)
        .where('lease_token', '=', token)
        .executeTakeFirst();
      if (result.numUpdatedRows === 0n)
        throw new LeaseLostError(taskId, 'it was claimed by another delivery');
      if (failedPiece !== undefined) {
        await trx
          .updateTable('task_contents')
          .set({ status: 'failed' })
          .where('task_id', '=', taskId)
          .where('idx', '=', failedPiece)
          .execute();
      }
    });
  }
}

/** Locks an account's row: admissions and claims of one account wait for each other, on every node. */
/**
 * The refusal of a new task, if any: stored task audio at or past `maxTaskBytes` first (the size of
 * audio not generated yet is unknown, so what is stored decides), then the quotas.
 */
function admissionRefusal(
  usage: AccountUsage & { taskBytes?: number },
  characters: number,
  quotas: AccountQuotas,
  maxTaskBytes: number,
): Exclude<Admission, { admitted: true }> | undefined {
  const stored = usage.taskBytes ?? 0;
  if (maxTaskBytes > 0 && stored >= maxTaskBytes)
    return { admitted: false, storage: { limit: 'taskBytes', max: maxTaskBytes, used: stored, adding: 0 } };
  return quotaRefusal(usage, characters, quotas);
}

/** The refusal of a new task of `characters` characters by `quotas` given the account's `usage`, if any (queued tasks first). */
function quotaRefusal(
  { pendingTasks, processingTasks, charactersToday }: AccountUsage,
  characters: number,
  quotas: AccountQuotas,
): QuotaRefusal | undefined {
  const unfinished = pendingTasks + processingTasks;
  if (quotas.maxQueuedTasks > 0 && unfinished >= quotas.maxQueuedTasks)
    return { admitted: false, quota: 'queuedTasks', limit: quotas.maxQueuedTasks, used: unfinished };
  if (quotas.dailyCharacters > 0 && charactersToday + characters > quotas.dailyCharacters)
    return {
      admitted: false,
      quota: 'dailyCharacters',
      limit: quotas.dailyCharacters,
      used: charactersToday,
    };
  return undefined;
}

/**
 * An account's AccountUsage in one statement (one round trip), in `db` or a transaction of it;
 * with `withBytes`, also the bytes of task audio it stores.
 */
async function usageInOneRead(
  db: Kysely<Database>,
  accountId: string,
  day: string,
  withBytes = false,
): Promise<AccountUsage & { taskBytes?: number }> {
  const tasksIn = (status: TaskStatus) =>
    db
      .selectFrom('tasks')
      .select((eb) => eb.fn.countAll<number | string | bigint>().as('n'))
      .where('account_id', '=', accountId)
      .where('status', '=', status);
  const row = await db
    .selectNoFrom((eb) => [
      tasksIn('pending').as('pending'),
      tasksIn('processing').as('processing'),
      eb
        .selectFrom('account_daily_usage')
        .select('characters')
        .where('account_id', '=', accountId)
        .where('day', '=', day)
        .as('characters_today'),
      (withBytes
        ? eb
            .selectFrom('tasks')
            .select(sql<string>`coalesce(sum(audio_bytes), 0)`.as('b'))
            .where('account_id', '=', accountId)
        : sql<string>`0`
      ).as('task_bytes'),
    ])
    .executeTakeFirstOrThrow();
  return {
    pendingTasks: Number(row.pending ?? 0),
    processingTasks: Number(row.processing ?? 0),
    charactersToday: Number(row.characters_today ?? 0),
    ...(withBytes && { taskBytes: Number(row.task_bytes ?? 0) }),
  };
}

/** The claim's write: processing under the delivery's `token` on `workerUrl`, one more attempt. */
function claimedBy(token: string, workerUrl: string) {
  return (eb: ExpressionBuilder<Database, 'tasks'>) => ({
    status: 'processing' as const,
    attempts: eb('attempts', '+', 1),
    lease_token: token,
    worker_url: workerUrl,
    updated_at: new Date(),
  });
}

/**
 * Pieces an earlier holder of the task left processing start again. Only a task delivered before
 * (more than this one attempt) can have any: a first claim skips the statement.
 */
async function restartPieces(db: Kysely<Database>, task: TaskRow): Promise<void> {
  if (task.attempts <= 1) return;
  await db
    .updateTable('task_contents')
    .set({ status: 'pending' })
    .where('task_id', '=', task.id)
    .where('status', '=', 'processing')
    .execute();
}
