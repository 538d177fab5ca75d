// A long task streamed live while the batch process (BATCH_PROCESS=on, niceness 19) generates
// batch work: its listener's audio is made in the service, and is the task's stored audio.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ffmpegErrors } from './helpers/audio-check.js';
import { send } from './helpers/http-client.js';
import { createTask, createVoice, startTestApp, waitForTask, type TestApp } from './helpers/test-app.js';

let t: TestApp;
before(async () => {
  t = await startTestApp({
    listen: true,
    // Unpaced: the listener reads as fast as the audio is made.
    env: { BATCH_PROCESS: 'on', BATCH_PROCESS_NICENESS: '19', STREAM_PACE_BYTES_PER_SECOND: '0' },
  });
});
after(async () => t.close());

const SENTENCE = 'The keeper of the lighthouse climbed the stairs at dusk, as he had done for forty years. ';

describe('a long task someone listens to while the batch process runs', () => {
  it('streams live the bytes of its stored audio, every content and silence', async () => {
    const voiceId = await createVoice(t.app, t.key, {
      name: 'Ann',
      engine: { engine: 'espeak', voice: 'en-us' },
    });
    // Over the short lane's 500 characters: batch work, which this listener keeps in the service.
    const id = await createTask(t.app, t.key, [
      { type: 'text', text: SENTENCE.repeat(4), voiceId, interval: 0.5 },
      { type: 'text', text: SENTENCE.repeat(4), voiceId },
    ]);
    const processing = await waitForTask(t.app, t.accountId, id, (task) => {
      assert.notEqual(task.status, 'generated', 'generated before anyone could listen');
      return task.status === 'processing' && task.streamUrl !== undefined;
    });
    const live = await send(String(processing.streamUrl));
    assert.equal(live.status, 200, 'read live, not redirected to the finished audio');
    assert.equal(await ffmpegErrors(live.body), '');
    const task = await waitForTask(t.app, t.accountId, id);
    const stored = await send(String(task.metadata.audio));
    assert.equal(stored.status, 200);
    assert.ok(stored.body.length > 100_000, `${stored.body.length} bytes stored`);
    assert.ok(live.body.equals(stored.body), 'the live stream is the stored audio, byte for byte');
  });
});
