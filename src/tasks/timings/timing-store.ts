/**
 * Timed sentences of tasks, in the database every node shares: the node generating a task writes
 * each piece's sentences as they are synthesised (fenced by its lease token, like every write of
 * the generation), and any node reads them — a prefix of the final list while the task grows.
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../storage/schema.js';
import { LeaseLostError } from '../queue/task-queue.js';
import type { SentenceTiming, WordTiming } from './timing-collector.js';

/**
 * Timed sentences kept per content piece, at most (a task's rows are bounded by this times its
 * contents): beyond them the piece's audio still generates, its later sentences untimed. Above
 * what the longest accepted text makes; it bounds the rows whatever an engine reports.
 */
export const MAX_TIMED_SENTENCES_PER_PIECE = 20_000;

/** A stored sentence of content `contentIdx`. */
export interface StoredSentence extends SentenceTiming {
  contentIdx: number;
}

export class TimingStore {
  constructor(private readonly db: Kysely<Database>) {}

  /**
   * Adds (or replaces, for a piece generated again) sentences of content `contentIdx` while
   * `token` holds the task; throws LeaseLostError when it does not.
   */
  async append(
    taskId: string,
    contentIdx: number,
    sentences: readonly SentenceTiming[],
    token: string,
  ): Promise<void> {
    if (sentences.length === 0) return;
    const rows = JSON.stringify(
      sentences.map((s) => ({
        seq: s.seq,
        start_sample: s.start,
        end_sample: s.end,
        text_start: s.textStart,
        text_end: s.textEnd,
        words: JSON.stringify(s.words.map((w) => [w.start, w.end, w.textStart, w.textEnd])),
      })),
    );
    const result = await sql<{ seq: number }>`
      INSERT INTO task_timings
        (task_id, content_idx, seq, start_sample, end_sample, text_start, text_end, words)
      SELECT t.id, ${contentIdx}::integer, r.seq, r.start_sample, r.end_sample, r.text_start, r.text_end, r.words
      FROM tasks t,
        json_to_recordset(${rows}::json)
          AS r(seq integer, start_sample bigint, end_sample bigint, text_start integer, text_end integer, words text)
      WHERE t.id = ${taskId} AND t.lease_token = ${token}
        AND r.seq < ${MAX_TIMED_SENTENCES_PER_PIECE}
      ON CONFLICT (task_id, content_idx, seq) DO UPDATE SET
        start_sample = excluded.start_sample, end_sample = excluded.end_sample,
        text_start = excluded.text_start, text_end = excluded.text_end, words = excluded.words
      RETURNING seq
    `.execute(this.db);
    // Rows returned, not an affected-row count: both database drivers report those alike.
    if (result.rows.length === 0 && sentences.some((s) => s.seq < MAX_TIMED_SENTENCES_PER_PIECE))
      throw new LeaseLostError(taskId, 'it was claimed by another delivery');
  }

  /** Drops what an earlier generation of the piece recorded, while `token` holds the task. */
  async clearPiece(taskId: string, contentIdx: number, token: string): Promise<void> {
    await this.db
      .deleteFrom('task_timings')
      .where('task_id', '=', taskId)
      .where('content_idx', '=', contentIdx)
      .where((eb) =>
        eb.exists(
          eb.selectFrom('tasks').select('id').where('id', '=', taskId).where('lease_token', '=', token),
        ),
      )
      .execute();
  }

  /** The task's sentences (of one content, or all), by content then order. */
  async list(taskId: string, contentIdx?: number): Promise<StoredSentence[]> {
    let query = this.db
      .selectFrom('task_timings')
      .selectAll()
      .where('task_id', '=', taskId)
      .orderBy('content_idx')
      .orderBy('seq');
    if (contentIdx !== undefined) query = query.where('content_idx', '=', contentIdx);
    const rows = await query.execute();
    return rows.map((r) => ({
      contentIdx: r.content_idx,
      seq: r.seq,
      start: Number(r.start_sample),
      end: Number(r.end_sample),
      textStart: r.text_start,
      textEnd: r.text_end,
      words: (JSON.parse(r.words) as [number, number, number, number][]).map(
        ([start, end, textStart, textEnd]): WordTiming => ({ start, end, textStart, textEnd }),
      ),
    }));
  }
}
