// Language handling through the real app over HTTP: `auto` decided per sentence with the voice's
// engine language as the prior, 400 UNSUPPORTED_LANGUAGE before anything is queued for a language
// (asked for, or the script of the text) the voice's engine cannot speak, and the GET one-shot
// form's `language`.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { TaskDetailView } from '../src/tasks/task-service.js';
import { probeAudio } from './helpers/audio-check.js';
import { bearer, createVoice, speechMp3, startTestApp, type TestApp } from './helpers/test-app.js';

interface ErrorBody {
  status: number;
  code: string;
  message: string;
}

const ARABIC = 'مرحبا بكم في بيتنا الجديد.';
const FRENCH =
  'Le chat dort sur le canapé depuis ce matin. Je voudrais réserver une table pour deux personnes ce soir. ' +
  'Il pleut depuis trois jours et les rues sont inondées.';

let upstreamMp3: Buffer = Buffer.alloc(0);
const upstream = createServer((req, res) => {
  req.resume();
  req.on('end', () => res.writeHead(200, { 'content-type': 'audio/mpeg' }).end(upstreamMp3));
});

let t: TestApp;
/** Flite's default English voice, an espeak-ng English voice and a remote one. */
const voices = { flite: '', espeak: '', remote: '' };

before(async () => {
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const { port } = upstream.address() as AddressInfo;
  t = await startTestApp({
    listen: true,
    env: { REMOTE_ENGINES: JSON.stringify({ studio: { baseUrl: `http://127.0.0.1:${port}` } }) },
  });
  upstreamMp3 = await speechMp3(t.app, 'The remote engine answers with this sentence.');
  voices.flite = await createVoice(t.app, t.key, { name: 'Default English' });
  voices.espeak = await createVoice(t.app, t.key, {
    name: 'Polyglot',
    engine: { engine: 'espeak', voice: 'en-us' },
  });
  voices.remote = await createVoice(t.app, t.key, {
    name: 'Studio',
    engine: { engine: 'remote', endpoint: 'studio', voice: 'nova' },
  });
});

after(async () => {
  await t.close();
  await new Promise((resolve) => upstream.close(resolve));
});

async function api(method: string, url: string, payload?: unknown) {
  return t.app.http.inject({
    method: method as 'GET' | 'POST',
    url,
    headers: bearer(t.key),
    ...(payload !== undefined && { payload: payload as object }),
  });
}

async function taskCount(): Promise<number> {
  const res = await api('GET', '/api/tts/generate?limit=1');
  assert.equal(res.statusCode, 200, res.body);
  return res.json<{ total: number }>().total;
}

function assertUnsupported(status: number, body: ErrorBody, message: RegExp): void {
  assert.equal(status, 400, JSON.stringify(body));
  assert.equal(body.status, 400);
  assert.equal(body.code, 'UNSUPPORTED_LANGUAGE');
  assert.match(body.message, message);
}

describe('language handling (HTTP)', () => {
  it('generate: 400 UNSUPPORTED_LANGUAGE before anything is queued, naming the piece and language', async () => {
    const before = await taskCount();
    const cases: [Record<string, unknown>, RegExp][] = [
      // A detected script no Flite voice speaks.
      [
        {
          contents: [
            { text: 'Hello.', voiceId: voices.flite },
            { text: ARABIC, voiceId: voices.flite, language: 'auto' },
          ],
        },
        /^contents\[1\]\.text: .*Arabic \(ar\).*flite/,
      ],
      // An explicit language no Flite voice speaks.
      [
        { contents: [{ text: 'Hello.', voiceId: voices.flite, language: 'ar' }] },
        /^contents\[0\]\.language: Arabic \(ar\).*flite/,
      ],
      [
        { contents: [{ text: 'Bonjour.', voiceId: voices.flite, language: 'fr' }] },
        /^contents\[0\]\.language: French \(France\) \(fr-fr\)/,
      ],
      // Splitter mode: each utterance with its own voice.
      [
        {
          text: `<A>Hello there. <B>${ARABIC}`,
          splitter: { '<A>': { voiceId: voices.espeak }, '<B>': { voiceId: voices.flite, language: 'auto' } },
        },
        /^utterances\[1\]\.text: .*Arabic \(ar\)/,
      ],
    ];
    for (const [payload, message] of cases) {
      const res = await api('POST', '/api/tts/generate', payload);
      assertUnsupported(res.statusCode, res.json<ErrorBody>(), message);
    }
    assert.equal(await taskCount(), before, 'nothing was queued');
  });

  it('generate: auto decides per sentence with the voice binding as the prior; the record shows it', async () => {
    const res = await api('POST', '/api/tts/generate', {
      contents: [
        { text: 'Is it raining? I like you.', voiceId: voices.espeak, language: 'auto' },
        { text: 'Nice to see you, Maria.', voiceId: voices.flite, language: 'auto' },
        { text: FRENCH, voiceId: voices.espeak, language: 'auto' },
        { text: ARABIC, voiceId: voices.espeak, language: 'auto' },
        {
          text: `Welcome home, my friend, we missed you. ${ARABIC}`,
          voiceId: voices.espeak,
          language: 'auto',
        },
        { text: 'Hello.', voiceId: voices.espeak, language: 'ar' },
        // A remote engine decides itself: never refused.
        { text: ARABIC, voiceId: voices.remote, language: 'ar' },
      ],
    });
    assert.equal(res.statusCode, 200, res.body);
    const contents = res.json<{ data: TaskDetailView }>().data.metadata.contents as (Record<
      string,
      unknown
    > & {
      language?: string;
      languages?: { at: number; language: string }[];
    })[];
    const spoken = contents.map((c) => c.language ?? c.languages?.map((r) => r.language).join('+') ?? null);
    assert.deepEqual(spoken, [null, null, 'fr-fr', 'ar', 'en-us+ar', 'ar', 'ar']);
  });

  it('one-shot POST: 400 for Arabic on the Flite voice, the field named as the one-shot caller sent it', async () => {
    const res = await fetch(`${t.baseUrl}/api/tts/simple-generate`, {
      method: 'POST',
      headers: { ...bearer(t.key), 'content-type': 'application/json' },
      body: JSON.stringify({ voiceId: voices.flite, text: ARABIC, language: 'auto', direct_stream: true }),
    });
    assertUnsupported(res.status, (await res.json()) as ErrorBody, /^text: .*Arabic \(ar\).*flite/);
  });

  it('one-shot GET honours `language`: refused on Flite, spoken by the Arabic voice on espeak-ng', async () => {
    const get = (query: Record<string, string>) =>
      fetch(`${t.baseUrl}/api/tts/simple-generate.mp3?${new URLSearchParams(query).toString()}`, {
        headers: bearer(t.key),
      });
    const refused = await get({ voiceId: voices.flite, text: 'Hello there.', language: 'ar' });
    assertUnsupported(refused.status, (await refused.json()) as ErrorBody, /^language: Arabic \(ar\)/);
    const auto = await get({ voiceId: voices.flite, text: ARABIC, language: 'auto' });
    assertUnsupported(auto.status, (await auto.json()) as ErrorBody, /^text: .*Arabic \(ar\)/);

    const spoken = await get({ voiceId: voices.espeak, text: ARABIC, language: 'ar' });
    assert.equal(spoken.status, 200);
    assert.equal(spoken.headers.get('content-type'), 'audio/mpeg');
    const id = spoken.headers.get('x-service-audio-id') ?? '';
    const mp3 = Buffer.from(await spoken.arrayBuffer());
    const task = await t.app.services.tasks.get(t.accountId, id);
    assert.equal((task.metadata.contents[0] as { language?: string }).language, 'ar');
    // espeak-ng's Arabic voice speaks the sentence in a few seconds; the English voice spelling it
    // out letter by letter took several times longer.
    const { durationSeconds } = await probeAudio(mp3);
    assert.ok(durationSeconds > 0.5 && durationSeconds < 8, `${durationSeconds} s`);
  });
});
