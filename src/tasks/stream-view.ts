/** What the stream endpoints need to know about a task (and nothing of billing: stream answers carry none). */
import type { PieceStatus, TaskStatus } from '../storage/schema.js';

export interface StreamPieceView {
  idx: number;
  /** Seconds of silence after this piece in the full-task stream. */
  interval: number;
  status: PieceStatus;
  /** URL of the piece's finished MP3, once stored. */
  audioUrl: string | null;
}

export interface StreamTaskView {
  id: string;
  /** The account owning the task: stream sessions are bounded per account. */
  accountId: string;
  status: TaskStatus;
  /** The task's static stream token (the `auth` query parameter). */
  authToken: string;
  /** URL of the merged finished audio (metadata.audio), once stored. */
  audioUrl: string | null;
  /** URL of the node generating the task (it runs the task's stream sessions in scale-out); null before that. */
  workerUrl: string | null;
  pieces: StreamPieceView[];
}

/** Looks up a task for the stream endpoints by id alone (the auth token is checked by the caller). */
export interface StreamTaskLookup {
  /** Throws GENERATE_NOT_FOUND for an unknown id. */
  streamView(taskId: string): Promise<StreamTaskView>;
  /**
   * The same view, kept while the task's own row is unchanged (its pieces' statuses and audio may
   * be behind: for the full-task stream, which reads neither). Throws as `streamView`.
   */
  liveStreamView(taskId: string): Promise<StreamTaskView>;
  /** Whether the task exists now (read from the database, never remembered). */
  exists(taskId: string): Promise<boolean>;
  /** The full stream.mp3 URL of a task, including its auth token. */
  streamUrl(taskId: string, authToken: string): string;
}
