/** Versioned migrations, applied in name order at start-up. Add new ones; never edit applied ones. */
import type { Migration } from 'kysely';
import * as foundation from './0001-foundation.js';
import * as tasks from './0002-tasks.js';
import * as taskLeases from './0003-task-leases.js';
import * as accountQuotas from './0004-account-quotas.js';
import * as storageLimits from './0005-storage-limits.js';
import * as clusterSettings from './0006-cluster-settings.js';
import * as taskAudioBytes from './0007-task-audio-bytes.js';
import * as taskTimings from './0008-task-timings.js';
import * as voiceReferenceBytes from './0009-voice-reference-bytes.js';

export const migrations: Record<string, Migration> = {
  '0001-foundation': foundation,
  '0002-tasks': tasks,
  '0003-task-leases': taskLeases,
  '0004-account-quotas': accountQuotas,
  '0005-storage-limits': storageLimits,
  '0006-cluster-settings': clusterSettings,
  '0007-task-audio-bytes': taskAudioBytes,
  '0008-task-timings': taskTimings,
  '0009-voice-reference-bytes': voiceReferenceBytes,
};
