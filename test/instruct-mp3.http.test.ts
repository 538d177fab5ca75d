// A single-content instruct/design progressive stream, through the real
// app against a local OpenAI-compatible upstream that serves a real 24 kHz MP3 progressively and
// holds back its second half until the test releases it:
//  - the per-content stream of an `instruct_mode: true` piece is the upstream's MP3 byte for byte
//    (asked for as 24 kHz mp3), live: its first bytes arrive while the upstream still holds the
//    rest; Range (live `bytes a-b/*`, finished `bytes a-b/size`, 416), HEAD and ETag as on every
//    session; the stored per-piece audio is the same bytes;
//  - a non-instruct piece, the full-task stream and the merged audio are unchanged (320 kbps,
//    44.1 kHz, from the PCM decoded out of the same single upstream call);
//  - one-shot direct MP3 (which reads the piece's content session) forwards the same way;
//  - an upstream that fails mid-piece fails the task cleanly: the live reader is cut after the
//    bytes it got (no JSON appended), later requests get STREAM_NOT_READY, nothing is left open.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { clusterSecret } from '../src/storage/cluster-secret.js';
import { signRelay } from '../src/stream/relay-proof.js';
import type { TaskDetailView } from '../src/tasks/task-service.js';
import { ffmpegErrors, probeAudio } from './helpers/audio-check.js';
import { startFaultUpstream, toneMp3, type FaultUpstream } from './helpers/fault-upstream.js';
import { readLive, send, type Reply } from './helpers/http-client.js';
import { createTask, createVoice, startTestApp, waitForTask, type TestApp } from './helpers/test-app.js';

const FAILED_MESSAGE = 'the speech engine failed (engine error)';
/** The relay header another node would send for `url` (signed with the cluster's secret). */
async function relay(app: TestApp['app'], url: string): Promise<Record<string, string>> {
  const secret = await clusterSecret(app.services.database.db, 'stream-relay');
  const { pathname, search } = new URL(url);
  return { 'x-voicegen-relay': signRelay(secret, `${pathname}${search}`) };
}

/** Whether a cut audio body ends in JSON (an error envelope appended after bytes: never allowed). */
function endsInJson(reply: Reply): boolean {
  return /"code"\s*:/.test(reply.body.subarray(-512).toString('latin1'));
}

/** The per-content stream URL of piece `idx` from a task's full stream URL. */
function contentStreamUrl(streamUrl: string, idx: number): string {
  return streamUrl.replace('/stream.mp3?', `/${String(idx)}/stream.mp3?`);
}

/** A URL of the app as a local path (for inject). */
function local(url: string): string {
  const u = new URL(url);
  return `${u.pathname}${u.search}`;
}

describe('an instruct/design piece on an MP3-delivering engine is forwarded unchanged', () => {
  let t: TestApp;
  let upstream: FaultUpstream;
  let tone: Buffer;
  let voiceId = '';
  /** JSON bodies of the speech requests the upstream received, by input text. */
  const requests = new Map<string, Record<string, unknown>>();
  let release: () => void = () => undefined;
  let released = false;
  let cut: (() => void) | undefined;

  before(async () => {
    upstream = await startFaultUpstream();
    tone = await toneMp3(4, 440); // a real 24 kHz mono MP3, as a 24 kHz-asked upstream sends
    const held = new Promise<void>((resolve) => (release = resolve));
    upstream.handle(({ input, body }, res) => {
      requests.set(input, body);
      res.writeHead(200, { 'content-type': 'audio/mpeg' });
      const half = tone.length >> 1;
      if (input.includes('Held') || input.includes('Cut')) {
        for (let o = 0; o < half; o += 2048) res.write(tone.subarray(o, Math.min(half, o + 2048)));
        if (input.includes('Cut')) {
          cut = () => res.socket?.destroy();
          return;
        }
        void held.then(() => {
          released = true;
          for (let o = half; o < tone.length; o += 2048) res.write(tone.subarray(o, o + 2048));
          res.end();
        });
        return;
      }
      res.end(tone);
    });
    t = await startTestApp({
      listen: true,
      env: {
        GENERATION_CONCURRENCY: '1',
        RATE_LIMIT_MAX: '100000',
        REMOTE_ENGINES: JSON.stringify({ local: { baseUrl: upstream.url, apiKey: 'sk-instruct-test' } }),
      },
    });
    voiceId = await createVoice(t.app, t.key, {
      name: 'Designer',
      engine: { engine: 'remote', endpoint: 'local', voice: 'alloy' },
    });
  });

  after(async () => {
    release();
    await t.close();
    await upstream.close();
  });

  /** The task's full stream URL once it is being generated (the stream endpoints answer then). */
  async function streamUrlOf(id: string): Promise<string> {
    const task = await waitForTask(t.app, t.accountId, id, (v) => v.status !== 'pending');
    return `${t.baseUrl}${local(task.streamUrl ?? assert.fail('no streamUrl'))}`;
  }

  it('streams the upstream MP3 byte for byte while it arrives; Range, HEAD, ETag; stored audio is the same bytes', async () => {
    const id = await createTask(t.app, t.key, [
      { text: 'Held designed piece.', voiceId, instruct_mode: true, interval: 0.5 },
      { text: 'A plain piece.', voiceId },
    ]);
    const streamUrl = await streamUrlOf(id);
    const url0 = contentStreamUrl(streamUrl, 0);
    const half = tone.length >> 1;

    const full = readLive(streamUrl); // the full-task stream, read live from the start
    const live = readLive(url0);
    const { status, headers } = await live.status;
    assert.equal(status, 200);
    assert.equal(headers['content-type'], 'audio/mpeg');
    assert.equal(headers['content-length'], undefined, 'live: no length');
    assert.equal(headers['cache-control'], 'no-store');
    const etag = String(headers.etag);
    assert.match(etag, /^"[A-Za-z0-9_-]+"$/);

    // Playback starts before the upstream finished: the first half is here, the rest is held back.
    await live.until(half);
    assert.equal(released, false, 'the upstream still holds the rest');
    assert.ok(live.bytes().equals(tone.subarray(0, half)), 'the upstream bytes so far, unchanged');

    // The live session answers Range like every session: a closed range that exists at once,
    // one past the held half when it arrives; HEAD mirrors the live GET.
    const head = await send(url0, { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(head.headers.etag, etag);
    assert.equal(head.headers['transfer-encoding'], 'chunked');
    const early = await send(url0, { headers: { range: 'bytes=0-999' } });
    assert.equal(early.status, 206);
    assert.equal(early.headers['content-range'], 'bytes 0-999/*');
    assert.equal(early.headers.etag, etag);
    assert.ok(early.body.equals(tone.subarray(0, 1000)));
    const pending = send(url0, { headers: { range: `bytes=${String(half)}-${String(half + 999)}` } });
    const sameBuild = await send(url0, { headers: { range: 'bytes=10-19', 'if-range': etag } });
    assert.equal(sameBuild.status, 206);
    assert.ok(sameBuild.body.equals(tone.subarray(10, 20)));

    release();
    const reply = await live.done;
    assert.equal(reply.truncated, false);
    assert.ok(
      reply.body.equals(tone),
      `the whole upstream MP3, byte for byte (${String(reply.body.length)} of ${String(tone.length)})`,
    );
    const later = await pending;
    assert.equal(later.status, 206);
    assert.match(
      String(later.headers['content-range']),
      new RegExp(`^bytes ${String(half)}-${String(half + 999)}/(\\*|${String(tone.length)})$`),
    );
    assert.ok(later.body.equals(tone.subarray(half, half + 1000)));

    const task: TaskDetailView = await waitForTask(t.app, t.accountId, id);
    // One upstream call per piece; the instruct piece asked for 24 kHz MP3, the plain one as before.
    assert.equal(requests.get('Held designed piece.')?.response_format, 'mp3');
    assert.equal(requests.get('Held designed piece.')?.sample_rate, 24000);
    assert.equal(requests.get('A plain piece.')?.response_format, 'mp3');
    assert.equal('sample_rate' in (requests.get('A plain piece.') ?? {}), false);

    // The stored per-piece audio is the same upstream bytes; the endpoint now redirects to it.
    const stored0 = task.metadata.contents[0]?.audio ?? assert.fail('piece 0 has no audio');
    const redirect = await send(url0);
    assert.equal(redirect.status, 302);
    assert.equal(redirect.headers.location, stored0);
    const audio0 = await send(`${t.baseUrl}${local(stored0)}`);
    assert.equal(audio0.status, 200);
    assert.ok(audio0.body.equals(tone), 'stored piece audio = upstream bytes');
    const probe0 = await probeAudio(audio0.body);
    assert.equal(probe0.sampleRate, 24000, 'neither 44.1 kHz…');
    assert.notEqual(probe0.bitRate, 320000, '…nor 320 kbps');

    // The finished session itself (as a relaying node reads it): 206 with the size, 416, If-Range.
    const relayHeaders = await relay(t.app, url0);
    const ranged = await send(url0, { headers: { ...relayHeaders, range: 'bytes=100-199' } });
    assert.equal(ranged.status, 206);
    assert.equal(ranged.headers.etag, etag, 'the same build');
    assert.equal(ranged.headers['content-range'], `bytes 100-199/${String(tone.length)}`);
    assert.ok(ranged.body.equals(tone.subarray(100, 200)));
    const beyond = await send(url0, { headers: { ...relayHeaders, range: `bytes=${String(tone.length)}-` } });
    assert.equal(beyond.status, 416);
    assert.equal(beyond.headers['content-range'], `bytes */${String(tone.length)}`);
    const otherBuild = await send(url0, {
      headers: { ...relayHeaders, range: 'bytes=0-9', 'if-range': '"other"' },
    });
    assert.equal(otherBuild.status, 200);
    assert.equal(otherBuild.headers['content-length'], String(tone.length));
    assert.ok(otherBuild.body.equals(tone));

    // The plain piece, the full-task stream and the merged audio: 320 kbps 44.1 kHz as before.
    const plain = await send(contentStreamUrl(streamUrl, 1), {
      headers: await relay(t.app, contentStreamUrl(streamUrl, 1)),
    });
    assert.equal(plain.status, 200);
    const stored1 = await send(
      `${t.baseUrl}${local(task.metadata.contents[1]?.audio ?? assert.fail('no audio 1'))}`,
    );
    const fullReply = await full.done;
    assert.equal(fullReply.status, 200);
    assert.equal(fullReply.truncated, false);
    const merged = await send(`${t.baseUrl}${local(task.metadata.audio ?? assert.fail('no merged audio'))}`);
    assert.ok(merged.body.equals(fullReply.body), 'the live full stream is the merged audio');
    for (const [what, bytes] of [
      ['plain piece session', plain.body],
      ['plain piece stored audio', stored1.body],
      ['full-task stream', fullReply.body],
    ] as const) {
      const probe = await probeAudio(bytes);
      assert.equal(probe.sampleRate, 44100, what);
      assert.equal(probe.bitRate, 320000, what);
      assert.equal(probe.channels, 2, what);
      assert.equal(await ffmpegErrors(bytes), '', what);
    }
    // Both pieces (4 s each, the instruct one decoded from its forwarded MP3) and the 0.5 s between.
    assert.ok(Math.abs((await probeAudio(fullReply.body)).durationSeconds - 8.5) < 0.2);
  });

  it('one-shot direct MP3 of an instruct piece is the forwarded upstream MP3 too', async () => {
    const response = await fetch(`${t.baseUrl}/api/tts/simple-generate`, {
      method: 'POST',
      headers: { authorization: `Bearer ${t.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ text: 'One shot designed.', voiceId, instruct_mode: true, direct_stream: true }),
    });
    assert.equal(response.status, 200, await response.clone().text());
    assert.equal(response.headers.get('content-type'), 'audio/mpeg');
    assert.ok(Buffer.from(await response.arrayBuffer()).equals(tone), 'the upstream bytes');
    assert.equal(requests.get('One shot designed.')?.sample_rate, 24000);
  });

  it('an upstream failure mid-piece fails cleanly: live reader cut after its bytes, no JSON, nothing left', async () => {
    const sessionsBefore = t.app.services.stream.liveSessions();
    const id = await createTask(t.app, t.key, [
      { text: 'Cut designed piece.', voiceId, instruct_mode: true },
    ]);
    const url0 = contentStreamUrl(await streamUrlOf(id), 0);
    const live = readLive(url0);
    assert.equal((await live.status).status, 200);
    const half = tone.length >> 1;
    await live.until(half);
    assert.ok(cut, 'the upstream is mid-piece');
    cut();

    const reply = await live.done;
    assert.equal(reply.truncated, true, 'the live stream is cut (no terminating chunk)');
    assert.equal(endsInJson(reply), false, 'no JSON after the audio bytes');
    assert.ok(reply.body.equals(tone.subarray(0, half)), 'the bytes before the failure, unchanged');
    const failed = await waitForTask(t.app, t.accountId, id, (v) => v.status === 'failed');
    assert.equal(failed.error, `content 0 of task ${id}: ${FAILED_MESSAGE}`);
    const late = await send(url0);
    assert.equal(late.status, 400);
    assert.equal((JSON.parse(late.body.toString()) as { code: string }).code, 'STREAM_NOT_READY');
    await upstream.connectionsClosed();
    assert.equal(t.app.services.stream.liveSessions(), sessionsBefore, 'the failed session is gone');
  });
});
