import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { encodeEvent, EventReader, ProtocolError } from './protocol.js';

describe('Wyoming framing', () => {
  it('reads events split anywhere, merging the data after the header line into the inline data', () => {
    const bytes = Buffer.concat([
      Buffer.from('{"type":"synthesize","data":{"text":"inline","voice":{"name":"a"}},"data_length":17}\n'),
      Buffer.from('{"text":"merged"}'),
      Buffer.from('\n{"type":"describe"}\n'),
      Buffer.from('{"type":"audio-chunk","data_length":2,"payload_length":4}\n{}'),
      Buffer.from([1, 2, 3, 4]),
    ]);
    // Every split point, byte by byte: the reader keeps its place across chunks.
    for (const size of [1, 3, 7, bytes.length]) {
      const reader = new EventReader(1024);
      const events = [];
      for (let at = 0; at < bytes.length; at += size)
        events.push(...reader.push(bytes.subarray(at, at + size)));
      assert.equal(events.length, 3, `chunks of ${size}`);
      assert.equal(events[0]?.type, 'synthesize');
      assert.deepEqual(events[0]?.data, { text: 'merged', voice: { name: 'a' } });
      assert.equal(events[1]?.type, 'describe');
      assert.deepEqual(events[2]?.payload, Buffer.from([1, 2, 3, 4]));
      assert.equal(reader.partial, false);
    }
  });

  it('refuses what breaks the framing or its bounds', () => {
    const bad = [
      'nonsense\n',
      '[1,2]\n',
      '{"data":{}}\n',
      '{"type":""}\n',
      '{"type":"x","data":[1]}\n',
      '{"type":"x","data_length":-1}\n',
      '{"type":"x","data_length":1.5}\n',
      '{"type":"x","payload_length":"3"}\n',
      '{"type":"x","data_length":65}\n',
      '{"type":"x","payload_length":65}\n',
      '{"type":"x","data_length":3}\n[1]',
      '{"type":"x","data_length":3}\n{]}',
      `{"type":"${'x'.repeat(70)}"}\n`,
      'x'.repeat(65),
    ];
    for (const text of bad) {
      assert.throws(() => new EventReader(64).push(Buffer.from(text)), ProtocolError, text.slice(0, 40));
    }
  });

  it('writes the data after the header line with its length, then the payload', () => {
    const bytes = encodeEvent('audio-chunk', { rate: 44100, text: 'é' }, new Uint8Array([9, 8]));
    const reader = new EventReader(1024);
    const [event] = reader.push(bytes);
    assert.equal(event?.type, 'audio-chunk');
    assert.deepEqual(event?.data, { rate: 44100, text: 'é' });
    assert.deepEqual([...(event?.payload ?? [])], [9, 8]);
    const header = JSON.parse(bytes.subarray(0, bytes.indexOf(10)).toString()) as Record<string, unknown>;
    assert.deepEqual(header, { type: 'audio-chunk', data_length: 26, payload_length: 2 });
    assert.equal(encodeEvent('synthesize-stopped').toString(), '{"type":"synthesize-stopped"}\n');
  });
});
