import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { validateHeaderValue } from 'node:http';
import { AppError } from '../errors/app-error.js';
import { contentDispositionFromQuery, normaliseContentDisposition } from './content-disposition.js';

const valid: [input: string, header: string][] = [
  ['inline', 'inline'],
  ['attachment', 'attachment'],
  ['Attachment', 'attachment'],
  ['INLINE', 'inline'],
  ['  inline  ', 'inline'],
  ['attachment; filename="x.mp3"', 'attachment; filename="x.mp3"'],
  ['attachment;filename=x.mp3', 'attachment; filename="x.mp3"'],
  ['inline; filename = "my voice.mp3"', 'inline; filename="my voice.mp3"'],
  ['attachment; FILENAME="x.mp3"', 'attachment; filename="x.mp3"'],
  ['attachment; filename="a\\"b.mp3"', 'attachment; filename="a\\"b.mp3"'],
  ['attachment; filename="a\\\\b.mp3"', 'attachment; filename="a\\\\b.mp3"'],
  ['attachment; filename="it\'s (1); final.mp3"', 'attachment; filename="it\'s (1); final.mp3"'],
  ["attachment; filename=it's.mp3", 'attachment; filename="it\'s.mp3"'],
  [
    "attachment; filename*=UTF-8''%E6%97%A5%E6%9C%AC.mp3",
    'attachment; filename="__.mp3"; filename*=UTF-8\'\'%E6%97%A5%E6%9C%AC.mp3',
  ],
  ["attachment; filename*=utf-8'en'voice%20one.mp3", 'attachment; filename="voice one.mp3"'],
  [
    'attachment; filename="fallback.mp3"; filename*=UTF-8\'\'%C3%A9t%C3%A9.mp3',
    'attachment; filename="fallback.mp3"; filename*=UTF-8\'\'%C3%A9t%C3%A9.mp3',
  ],
  [
    'attachment; filename*=UTF-8\'\'%C3%A9t%C3%A9.mp3; filename="fallback.mp3"',
    'attachment; filename="fallback.mp3"; filename*=UTF-8\'\'%C3%A9t%C3%A9.mp3',
  ],
  ['attachment; filename="été.mp3"', 'attachment; filename="_t_.mp3"; filename*=UTF-8\'\'%C3%A9t%C3%A9.mp3'],
  [
    'inline; filename="🎵 (1).mp3"',
    'inline; filename="_ (1).mp3"; filename*=UTF-8\'\'%F0%9F%8E%B5%20%281%29.mp3',
  ],
  [`inline; filename="${'a'.repeat(255)}"`, `inline; filename="${'a'.repeat(255)}"`],
];

const invalid: [name: string, input: string, message: RegExp][] = [
  ['empty', '', /empty/],
  ['unknown type', 'download', /inline or attachment/],
  ['type list', 'inline, attachment', /malformed/],
  ['unknown parameter', 'inline; foo=bar', /unsupported parameter "foo"/],
  ['creation-date parameter', 'attachment; creation-date="Wed, 12 Feb 1997 16:29:51 -0500"', /unsupported/],
  ['CRLF header injection', 'attachment; filename="a.mp3"\r\nSet-Cookie: x=1', /control characters/],
  ['LF', 'attachment; filename="a\n.mp3"', /control characters/],
  ['NUL', 'attachment; filename="a\u0000.mp3"', /control characters/],
  ['TAB', 'attachment;\tfilename="a.mp3"', /control characters/],
  ['0x1F', 'inline\u001f', /control characters/],
  ['DEL', 'attachment; filename="a\u007f.mp3"', /control characters/],
  ['C1 control', 'attachment; filename="a\u0085.mp3"', /control characters/],
  ['percent-encoded LF in filename*', "attachment; filename*=UTF-8''a%0A.mp3", /control characters/],
  ['percent-encoded NUL in filename*', "attachment; filename*=UTF-8''a%00.mp3", /control characters/],
  ['empty quoted filename', 'attachment; filename=""', /empty filename/],
  ['missing filename value', 'attachment; filename=', /malformed/],
  ['unterminated quote', 'attachment; filename="x.mp3', /unterminated/],
  ['missing semicolon', 'attachment filename=x.mp3', /malformed/],
  ['trailing semicolon', 'attachment;', /malformed/],
  ['missing equals', 'attachment; filename', /malformed/],
  ['token with space', 'attachment; filename=x y.mp3', /malformed/],
  ['non-ASCII token', 'attachment; filename=é.mp3', /malformed/],
  ['duplicate filename', 'attachment; filename=a.mp3; filename=b.mp3', /more than once/],
  ['duplicate filename*', "attachment; filename*=UTF-8''a; filename*=UTF-8''b", /more than once/],
  ['filename* other charset', "attachment; filename*=ISO-8859-1''%E9.mp3", /UTF-8/],
  ['filename* bad escape', "attachment; filename*=UTF-8''%ZZ.mp3", /malformed filename\*/],
  ['filename* quoted', 'attachment; filename*="UTF-8\'\'x.mp3"', /malformed filename\*/],
  ['filename* raw non-ASCII', "attachment; filename*=UTF-8''é.mp3", /malformed filename\*/],
  ['filename* invalid UTF-8', "attachment; filename*=UTF-8''%FF.mp3", /not valid UTF-8/],
  ['filename* empty', "attachment; filename*=UTF-8''", /empty filename/],
  ['filename too long', `inline; filename="${'a'.repeat(256)}"`, /longer than 255/],
  ['lone surrogate', 'attachment; filename="\ud800.mp3"', /Unicode/],
  ['whole value too long', `inline; filename="${'a'.repeat(3000)}"`, /at most/],
];

void describe('normaliseContentDisposition', () => {
  for (const [input, header] of valid) {
    void test(`accepts ${JSON.stringify(input).slice(0, 80)}`, () => {
      const out = normaliseContentDisposition(input);
      assert.equal(out, header);
      // Safe to put in a header: printable ASCII only, accepted by Node's header validation.
      assert.match(out, /^[\x20-\x7e]+$/);
      assert.doesNotThrow(() => validateHeaderValue('Content-Disposition', out));
    });
  }

  for (const [name, input, message] of invalid) {
    void test(`rejects ${name}`, () => {
      assert.throws(
        () => normaliseContentDisposition(input),
        (err: unknown) =>
          err instanceof AppError &&
          err.code === 'VALIDATION_INVALID_VALUE' &&
          err.status === 400 &&
          err.message.startsWith('response-content-disposition ') &&
          message.test(err.message),
      );
    });
  }
});

void describe('contentDispositionFromQuery', () => {
  void test('absent → no header', () => {
    assert.equal(contentDispositionFromQuery(undefined), undefined);
  });
  void test('one string → normalised', () => {
    assert.equal(contentDispositionFromQuery('attachment; filename=a.mp3'), 'attachment; filename="a.mp3"');
  });
  void test('repeated or non-string → 400', () => {
    for (const v of [['inline', 'inline'], 1, null, {}]) {
      assert.throws(
        () => contentDispositionFromQuery(v),
        (err: unknown) => err instanceof AppError && err.status === 400,
      );
    }
  });
});
