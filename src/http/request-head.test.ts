import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_HEAD_BYTES, readRequestHead } from './request-head.js';

const bytes = (text: string) => Buffer.from(text, 'latin1');

describe('readRequestHead', () => {
  it('reads a plain head, its fields by lower-case name, and where it ends', () => {
    const head = 'GET /a?b=c HTTP/1.1\r\nHost: x\r\nRange:  bytes=0-9 \r\nX-A: 1\r\nx-a: 2\r\n\r\n';
    const read = readRequestHead(bytes(`${head}GET /next HTTP/1.1\r\n`));
    assert.equal(read.kind, 'head');
    if (read.kind !== 'head') return;
    assert.equal(read.head.method, 'GET');
    assert.equal(read.head.target, '/a?b=c');
    assert.equal(read.head.version, '1.1');
    assert.equal(read.head.length, head.length);
    assert.deepEqual(read.head.fields.get('range'), ['bytes=0-9']);
    assert.deepEqual(read.head.fields.get('x-a'), ['1', '2']);
  });

  it('reads a head that starts further on', () => {
    const first = 'GET /1 HTTP/1.1\r\nHost: x\r\n\r\n';
    const read = readRequestHead(bytes(`${first}GET /2 HTTP/1.1\r\nHost: x\r\n\r\n`), first.length);
    assert.equal(read.kind === 'head' && read.head.target, '/2');
  });

  it('waits for the blank line, and leaves a head too long to the parser', () => {
    assert.equal(readRequestHead(bytes('GET / HTTP/1.1\r\nHost: x\r\n')).kind, 'incomplete');
    const long = `GET / HTTP/1.1\r\nX: ${'a'.repeat(MAX_HEAD_BYTES)}`;
    assert.equal(readRequestHead(bytes(long)).kind, 'other');
    assert.equal(readRequestHead(bytes(`${long}\r\n\r\n`)).kind, 'other');
  });

  it('calls every irregular head other', () => {
    for (const head of [
      'get / HTTP/1.1\r\nHost: x\r\n\r\n',
      'GET http://x/ HTTP/1.1\r\nHost: x\r\n\r\n',
      'GET / HTTP/2.0\r\nHost: x\r\n\r\n',
      'GET  / HTTP/1.1\r\nHost: x\r\n\r\n',
      '\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n',
      'GET / HTTP/1.1\r\nHost : x\r\n\r\n',
      'GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n',
      'GET / HTTP/1.1\r\nHost: x\ny\r\n\r\n',
      'GET / HTTP/1.1\r\nHost: x\ry\r\n\r\n',
      'GET / HTTP/1.1\r\nHost: \u00e9\r\n\r\n',
      'GET / HTTP/1.1\r\nHost: x\u0000\r\n\r\n',
      'GET /\u00e9 HTTP/1.1\r\nHost: x\r\n\r\n',
    ])
      assert.equal(readRequestHead(bytes(head)).kind, 'other', JSON.stringify(head));
  });
});
