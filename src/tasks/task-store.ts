/**
 * Database access for generation tasks and their pieces. The tasks table is the durable record of
 * work (the TaskQueue only says who works on what now); the runner's writes are fenced by the
 * lease token recorded when it claimed the task.
 */
import type { Insertable, Kysely, Transaction } from 'kysely';
import { fetchPage } from '../storage/paging.js';
import type {
  Database,
  PieceStatus,
  TaskContentRow,
  TaskContentsTable,
  TaskRow,
  TaskStatus,
} from '../storage/schema.js';
import { LeaseLostError } from './task-queue.js';

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

export interface NewTask {
  task: TaskRow;
  pieces: Insertable<TaskContentsTable>[];
}

export class TaskStore {
  constructor(private readonly db: Kysely<Database>) {}

  async insert({ task, pieces }: NewTask): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      await trx.insertInto('tasks').values(task).execute();
      if (pieces.length > 0) await trx.insertInto('task_contents').values(pieces).execute();
    });
  }

  async get(id: string): Promise<TaskRow | undefined> {
    return this.db.selectFrom('tasks').selectAll().where('id', '=', id).executeTakeFirst();
  }

  async pieces(taskId: string): Promise<TaskContentRow[]> {
    return this.db
      .selectFrom('task_contents')
      .selectAll()
      .where('task_id', '=', taskId)
      .orderBy('idx')
      .execute();
  }

  async list(
    accountId: string,
    limit: number,
    offset: number,
    status: TaskStatus | undefined,
  ): Promise<{ rows: TaskSummaryRow[]; total: number }> {
    let query = this.db.selectFrom('tasks').where('account_id', '=', accountId);
    if (status !== undefined) query = query.where('status', '=', status);
    const page = await fetchPage(query.select(SUMMARY_COLUMNS), limit, offset);
    const counts = await this.pieceCountsByVoice(page.rows.map((r) => r.id));
    const rows = page.rows.map((row) => {
      const own = counts.filter((c) => c.task_id === row.id);
      return {
        ...row,
        contentsCount: own.reduce((n, c) => n + Number(c.pieces), 0),
        voiceIds: own.map((c) => c.voice_id),
      };
    });
    return { rows, total: page.total };
  }

  /** Pieces per (task, voice), ordered by each voice's first piece: counts only, no texts read. */
  private async pieceCountsByVoice(
    taskIds: string[],
  ): Promise<{ task_id: string; voice_id: string; pieces: number | string | bigint }[]> {
    if (taskIds.length === 0) return [];
    return this.db
      .selectFrom('task_contents')
      .select((eb) => [
        'task_id',
        'voice_id',
        eb.fn.countAll<number | string | bigint>().as('pieces'),
        eb.fn.min('idx').as('first_idx'),
      ])
      .where('task_id', 'in', taskIds)
      .groupBy(['task_id', 'voice_id'])
      .orderBy('first_idx')
      .execute();
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
    const rows = await this.db
      .selectFrom('tasks')
      .select('id')
      .where('status', 'in', ['pending', 'processing'])
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    return rows.map((r) => r.id);
  }

  /**
   * Claims a delivered task for the lease `token`: marks it processing, counts the attempt and
   * records the token (every later write of the runner requires it) and the holder's URL. Pieces an
   * earlier holder left processing restart. Undefined when the task is gone or already finished.
   */
  async claim(taskId: string, token: string, workerUrl: string): Promise<TaskRow | undefined> {
    return this.db.transaction().execute(async (trx) => {
      const task = await trx
        .updateTable('tasks')
        .set((eb) => ({
          status: 'processing',
          attempts: eb('attempts', '+', 1),
          lease_token: token,
          worker_url: workerUrl,
          updated_at: new Date(),
        }))
        .where('id', '=', taskId)
        .where('status', 'in', ['pending', 'processing'])
        .returningAll()
        .executeTakeFirst();
      if (task === undefined) return undefined;
      await trx
        .updateTable('task_contents')
        .set({ status: 'pending' })
        .where('task_id', '=', taskId)
        .where('status', '=', 'processing')
        .execute();
      return task;
    });
  }

  /** Fenced: a piece's status, while `token` still holds the task. */
  async setPieceStatus(taskId: string, idx: number, status: PieceStatus, token: string): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      await lockHeld(trx, taskId, token);
      await trx
        .updateTable('task_contents')
        .set({ status })
        .where('task_id', '=', taskId)
        .where('idx', '=', idx)
        .execute();
    });
  }

  /** Fenced: a finished piece, while `token` still holds the task. */
  async pieceGenerated(
    taskId: string,
    idx: number,
    samples: number,
    audioKey: string,
    token: string,
  ): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      await lockHeld(trx, taskId, token);
      await trx
        .updateTable('task_contents')
        .set({ status: 'generated', samples, audio_key: audioKey, generated_at: new Date() })
        .where('task_id', '=', taskId)
        .where('idx', '=', idx)
        .execute();
    });
  }

  async pieceStatus(
    taskId: string,
    idx: number,
  ): Promise<{ piece: PieceStatus; task: TaskStatus } | undefined> {
    return this.db
      .selectFrom('task_contents')
      .innerJoin('tasks', 'tasks.id', 'task_contents.task_id')
      .select(['task_contents.status as piece', 'tasks.status as task'])
      .where('task_contents.task_id', '=', taskId)
      .where('task_contents.idx', '=', idx)
      .executeTakeFirst();
  }

  /** Fenced: the task is complete, while `token` still holds it. */
  async markGenerated(taskId: string, durationSeconds: number, token: string): Promise<void> {
    const result = await this.db
      .updateTable('tasks')
      .set({
        status: 'generated',
        duration_seconds: durationSeconds,
        generated_at: new Date(),
        updated_at: new Date(),
      })
      .where('id', '=', taskId)
      .where('lease_token', '=', token)
      .executeTakeFirst();
    if (result.numUpdatedRows === 0n) throw new LeaseLostError(taskId, 'it was claimed by another delivery');
  }

  /** Fenced: the key of the merged audio, while `token` still holds the task. */
  async setAudio(taskId: string, audioKey: string, token: string): Promise<void> {
    const result = await this.db
      .updateTable('tasks')
      .set({ audio_key: audioKey, updated_at: new Date() })
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
    await this.db.transaction().execute(async (trx) => {
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

/**
 * Locks the task row while `token` holds its lease, or throws LeaseLostError. Piece writes go
 * through it in one transaction, so a concurrent claim (which updates the same row) waits for
 * them or makes them fail — never interleaves.
 */
async function lockHeld(trx: Transaction<Database>, taskId: string, token: string): Promise<void> {
  const held = await trx
    .selectFrom('tasks')
    .select('id')
    .where('id', '=', taskId)
    .where('lease_token', '=', token)
    .forUpdate()
    .executeTakeFirst();
  if (held === undefined) throw new LeaseLostError(taskId, 'it was claimed by another delivery');
}
