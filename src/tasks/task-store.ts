/** Database access for generation tasks and their pieces; the tasks table is the durable queue. */
import { sql, type Insertable, type Kysely } from 'kysely';
import { fetchPage } from '../storage/paging.js';
import type {
  Database,
  PieceStatus,
  TaskContentRow,
  TaskContentsTable,
  TaskRow,
  TaskStatus,
} from '../storage/schema.js';

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

  async piecesOf(taskIds: string[]): Promise<TaskContentRow[]> {
    if (taskIds.length === 0) return [];
    return this.db
      .selectFrom('task_contents')
      .selectAll()
      .where('task_id', 'in', taskIds)
      .orderBy('idx')
      .execute();
  }

  async list(
    accountId: string,
    limit: number,
    offset: number,
    status: TaskStatus | undefined,
  ): Promise<{ rows: TaskRow[]; total: number }> {
    let query = this.db.selectFrom('tasks').where('account_id', '=', accountId);
    if (status !== undefined) query = query.where('status', '=', status);
    return fetchPage(query.selectAll(), limit, offset);
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

  /** Takes the oldest pending task and marks it processing, atomically (SKIP LOCKED for several nodes). */
  async claimNext(): Promise<TaskRow | undefined> {
    const result = await sql<TaskRow>`
      update tasks set status = 'processing', attempts = attempts + 1, updated_at = now()
      where id = (
        select id from tasks where status = 'pending' order by created_at, id limit 1 for update skip locked
      )
      returning *`.execute(this.db);
    return result.rows[0];
  }

  /**
   * Start-up recovery: tasks left processing by a stopped process go back to pending (their
   * unfinished pieces restart), unless they were already tried `maxAttempts` times.
   */
  async recoverInterrupted(maxAttempts: number): Promise<{ requeued: number; failed: number }> {
    const now = new Date();
    const failed = await this.db
      .updateTable('tasks')
      .set({ status: 'failed', error: `generation was interrupted ${maxAttempts} times`, updated_at: now })
      .where('status', '=', 'processing')
      .where('attempts', '>=', maxAttempts)
      .executeTakeFirst();
    const requeued = await this.db
      .updateTable('tasks')
      .set({ status: 'pending', updated_at: now })
      .where('status', '=', 'processing')
      .executeTakeFirst();
    await this.db
      .updateTable('task_contents')
      .set({ status: 'pending' })
      .where('status', '=', 'processing')
      .execute();
    return { requeued: Number(requeued.numUpdatedRows), failed: Number(failed.numUpdatedRows) };
  }

  async setPieceStatus(taskId: string, idx: number, status: PieceStatus): Promise<void> {
    await this.db
      .updateTable('task_contents')
      .set({ status })
      .where('task_id', '=', taskId)
      .where('idx', '=', idx)
      .execute();
  }

  async pieceGenerated(taskId: string, idx: number, samples: number, audioKey: string): Promise<void> {
    await this.db
      .updateTable('task_contents')
      .set({ status: 'generated', samples, audio_key: audioKey, generated_at: new Date() })
      .where('task_id', '=', taskId)
      .where('idx', '=', idx)
      .execute();
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

  async markGenerated(taskId: string, durationSeconds: number): Promise<void> {
    await this.db
      .updateTable('tasks')
      .set({
        status: 'generated',
        duration_seconds: durationSeconds,
        generated_at: new Date(),
        updated_at: new Date(),
      })
      .where('id', '=', taskId)
      .execute();
  }

  async setAudio(taskId: string, audioKey: string): Promise<void> {
    await this.db
      .updateTable('tasks')
      .set({ audio_key: audioKey, updated_at: new Date() })
      .where('id', '=', taskId)
      .execute();
  }

  async markFailed(taskId: string, error: string, failedPiece: number | undefined): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      await trx
        .updateTable('tasks')
        .set({ status: 'failed', error, updated_at: new Date() })
        .where('id', '=', taskId)
        .execute();
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
