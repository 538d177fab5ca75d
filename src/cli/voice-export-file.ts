/** Reads the file `voicegen voices export` writes: a JSON array of voice import requests. */
import type { VoiceImportRequest } from '../admin/admin-service.js';
import { CliError } from './cli-error.js';
import { readText } from './synth.js';

/** The import requests in `source` (a file, or - for standard input); one object is taken as one voice. */
export async function readVoiceExport(source: string): Promise<VoiceImportRequest[]> {
  const text = await readText(source === '-' ? '-' : `@${source}`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new CliError(`${source} is not JSON: ${err instanceof Error ? err.message : String(err)}`, 1);
  }
  const list = Array.isArray(parsed) ? parsed : [parsed];
  list.forEach((item, i) => {
    if (item === null || typeof item !== 'object' || Array.isArray(item)) {
      throw new CliError(`${source}: item ${i} is not a voice object`, 1);
    }
  });
  // Each item is validated by the import itself (a bad one fails with the server's message).
  return list as VoiceImportRequest[];
}
