import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { redactUrl, scrubLogLine, serializeError } from './log-redaction.js';

const TOKEN = 'Tok3n-not-hex-Zq';
const HEX_TOKEN = '0123456789abcdef0123456789abcdef';
const API_KEY = `sk-${'a1b2c3d4'.repeat(4)}`;

describe('redactUrl', () => {
  const cases: Array<[string, string, string]> = [
    ['no query', '/api/voice', '/api/voice'],
    ['plain auth', `/s.mp3?auth=${TOKEN}`, '/s.mp3?auth=[redacted]'],
    ['upper case name', `/s.mp3?AUTH=${TOKEN}&i=1`, '/s.mp3?AUTH=[redacted]&i=1'],
    ['percent-encoded name', `/s.mp3?%61uth=${TOKEN}`, '/s.mp3?%61uth=[redacted]'],
    ['partly encoded name', `/s.mp3?a%75th=${TOKEN}`, '/s.mp3?a%75th=[redacted]'],
    ['double-encoded name', `/s.mp3?%2561uth=${TOKEN}`, '/s.mp3?%2561uth=[redacted]'],
    ['twice', `/s.mp3?auth=x&i=2&auth=${TOKEN}`, '/s.mp3?auth=[redacted]&i=2&auth=[redacted]'],
    ['semicolon separator', `/s.mp3?i=1;auth=${TOKEN}`, '/s.mp3?i=1;auth=[redacted]'],
    [
      'other credential names',
      `/x?token=${TOKEN}&api_key=${TOKEN}`,
      '/x?token=[redacted]&api_key=[redacted]',
    ],
    ['listed parameters kept, others redacted', '/x?i=abc&author=me', '/x?i=abc&author=[redacted]'],
    ['malformed escape in a name', `/x?%ZZ=1&auth=${TOKEN}`, '/x?%ZZ=[redacted]&auth=[redacted]'],
    [
      'one-shot text redacted, its switches kept',
      '/api/tts/simple-generate.mp3?voiceId=v1&text=My%20secret%20PIN%20is%204242&speechRate=1.2&language=auto',
      '/api/tts/simple-generate.mp3?voiceId=v1&text=[redacted]&speechRate=1.2&language=auto',
    ],
    [
      'text in any spelling the server reads',
      '/x?%74ext=secret&te%78t=secret',
      '/x?%74ext=[redacted]&te%78t=[redacted]',
    ],
    [
      'a listed name is case-sensitive',
      '/x?VOICEID=secret&voiceid=secret',
      '/x?VOICEID=[redacted]&voiceid=[redacted]',
    ],
    ['an encoded listed name is kept', '/x?voice%49d=v1', '/x?voice%49d=v1'],
    [
      'file name of a download redacted',
      '/a.mp3?auth=x&response-content-disposition=attachment%3B%20filename%3D%22Secret.mp3%22',
      '/a.mp3?auth=[redacted]&response-content-disposition=[redacted]',
    ],
    ['no value, nothing to redact', '/x?flag&text=', '/x?flag&text=[redacted]'],
  ];
  for (const [name, url, want] of cases) {
    it(name, () => assert.equal(redactUrl(url), want));
  }
});

describe('scrubLogLine', () => {
  const cases: Array<[string, string]> = [
    [`{"url":"/s.mp3?auth=${TOKEN}"}`, '{"url":"/s.mp3?auth=[redacted]"}'],
    [
      `{"msg":"relayed to http://n2/s.mp3?i=1&%41UTH=${TOKEN}"}`,
      '{"msg":"relayed to http://n2/s.mp3?i=1&%41UTH=[redacted]"}',
    ],
    // A URL carried (encoded) inside another parameter's value.
    [
      `{"url":"/x?next=http%3A%2F%2Fh%2Fs.mp3%3Fauth%3D${TOKEN}%26i%3D1"}`,
      '{"url":"/x?next=http%3A%2F%2Fh%2Fs.mp3%3Fauth%3D[redacted]%26i%3D1"}',
    ],
    [`{"msg":"key ${API_KEY} unknown"}`, '{"msg":"key sk-[redacted] unknown"}'],
    [`{"msg":"Authorization: Bearer ${TOKEN}"}`, '{"msg":"Authorization: Bearer [redacted]"}'],
    [`{"msg":"token ${HEX_TOKEN}."}`, '{"msg":"token [redacted]."}'],
    // UUIDs and 64-digit hashes are not stream tokens.
    ['{"reqId":"0f8e2c55-1b7d-4b7e-9a55-6f1d2c3b4a59"}', '{"reqId":"0f8e2c55-1b7d-4b7e-9a55-6f1d2c3b4a59"}'],
    [`{"hash":"${HEX_TOKEN}${HEX_TOKEN}"}`, `{"hash":"${HEX_TOKEN}${HEX_TOKEN}"}`],
  ];
  for (const [line, want] of cases) {
    it(`scrubs ${line.slice(0, 60)}`, () => assert.equal(scrubLogLine(line), want));
  }

  it('removes configured secrets, also in their JSON-escaped form', () => {
    const secret = 'admin"token\\with-quotes-and-more';
    const line = JSON.stringify({ msg: `echoed ${secret}` });
    assert.equal(scrubLogLine(line, [secret]), '{"msg":"echoed [redacted]"}');
  });
});

describe('serializeError', () => {
  it('keeps type, message, stack and safe fields; drops SQL, parameters and row data; follows causes', () => {
    const db = Object.assign(new Error('new row for relation "splitters" violates check constraint "c"'), {
      code: '23514',
      table: 'splitters',
      constraint: 'c',
      detail: 'Failing row contains (SECRET-ROW).',
      query: 'insert into splitters values ($1)',
      params: ['SECRET-PARAM'],
      parameters: ['SECRET-PARAM'],
      queryOptions: { rowMode: 'object' },
      where: 'SECRET-WHERE',
      internalQuery: 'SECRET-INTERNAL',
      rawPacket: Buffer.from(`Authorization: Bearer ${API_KEY}`),
    });
    const wrapped = new Error('could not save', { cause: db });
    const logged = serializeError(wrapped);
    assert.equal(logged.type, 'Error');
    assert.equal(logged.message, 'could not save');
    assert.equal(typeof logged.stack, 'string');
    assert.deepEqual(
      { ...logged.cause, stack: undefined },
      {
        type: 'Error',
        message: db.message,
        stack: undefined,
        code: '23514',
        table: 'splitters',
        constraint: 'c',
      },
    );
    assert.doesNotMatch(JSON.stringify(logged), /SECRET|insert into|Bearer/);
  });

  it('handles non-errors, null prototypes and cause cycles', () => {
    assert.deepEqual(serializeError('text'), { type: 'string', message: 'text', stack: '' });
    assert.equal(serializeError(Object.create(null) as object).type, 'Object');
    const a = new Error('a');
    const b = new Error('b', { cause: a });
    (a as Error & { cause?: unknown }).cause = b;
    assert.ok(JSON.stringify(serializeError(a)).length < 10_000);
  });
});
