import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  MAX_PAUSE_MS,
  MAX_TOTAL_PAUSE_MS,
  parseMarkup,
  pauseTagAt,
  speakableText,
  symbolWords,
} from './markup.js';

/** Segments as `text` strings and `pause:<ms>` entries. */
const shape = (text: string) => parseMarkup(text).map((s) => (s.kind === 'pause' ? `pause:${s.ms}` : s.text));

void describe('parseMarkup', () => {
  const table: [string, string[]][] = [
    ['Hello world.', ['Hello world.']],
    ['', []],
    ['   ', []],
    ['One [pause:1.5s] two', ['One ', 'pause:1500', ' two']],
    ['One [pause:300ms] two', ['One ', 'pause:300', ' two']],
    ['[pause:2s]', ['pause:2000']],
    ['A[pause:0s]B', ['A', 'pause:0', 'B']],
    ['A <break time="2s"/> B', ['A ', 'pause:2000', ' B']],
    ["A <break time='500ms'/> B", ['A ', 'pause:500', ' B']],
    ['A <break time="750ms"> B', ['A ', 'pause:750', ' B']],
    ['A <BREAK TIME="1S"/> B', ['A ', 'pause:1000', ' B']],
    ['A <break strength="strong"/> B', ['A ', 'pause:1000', ' B']],
    ['A <break/> B', ['A ', 'pause:500', ' B']],
    ['A <break time="x"/> B', ['A ', 'pause:500', ' B']],
    [`A [pause:60s] B`, ['A ', `pause:${MAX_PAUSE_MS}`, ' B']],
    [`A <break time="99999ms"/> B`, ['A ', `pause:${MAX_PAUSE_MS}`, ' B']],
    // Not the exact forms: text, spoken.
    ['A [pause: 1s] B', ['A [pause: 1s] B']],
    ['A [Pause:1s] B', ['A [Pause:1s] B']],
    ['A [pause:1] B', ['A [pause:1] B']],
    ['A [pause:-1s] B', ['A [pause:-1s] B']],
    ['A [pause:1.s] B', ['A [pause:1.s] B']],
    ['A <breaking time="1s"/> B', ['A <breaking time="1s"/> B']],
    ['<A> Hi <B> there', ['<A> Hi <B> there']],
    ['Two [pause:1s][pause:1s] in a row', ['Two ', 'pause:1000', 'pause:1000', ' in a row']],
  ];
  for (const [text, expected] of table) {
    void it(`reads ${JSON.stringify(text)}`, () => assert.deepEqual(shape(text), expected));
  }

  void it('stops the pauses of one text at MAX_TOTAL_PAUSE_MS together', () => {
    const pauses = parseMarkup('[pause:10s]'.repeat(1000)).map((s) => (s.kind === 'pause' ? s.ms : -1));
    assert.equal(pauses.length, 1000);
    assert.equal(
      pauses.reduce((a, b) => a + b, 0),
      MAX_TOTAL_PAUSE_MS,
    );
    assert.equal(pauses.at(-1), 0);
  });

  void it('places every segment at its written offsets', () => {
    const text = 'One [pause:1s] two <break time="2s"/> three';
    for (const s of parseMarkup(text)) {
      if (s.kind === 'text') assert.equal(text.slice(s.start, s.end), s.text);
      else assert.ok(pauseTagAt(text, s.start)?.end === s.end);
    }
  });
});

void describe('speakableText', () => {
  const en = (text: string) =>
    speakableText(text, () => 'en-us')
      .text.replace(/\s+/g, ' ')
      .trim();
  const table: [string, string][] = [
    ['Is 5 < 6 > 2? I <3 you & him.', 'Is 5 less than 6 greater than 2? I heart you and him.'],
    ['a<b', 'a less than b'],
    ['x <= 3 and y >= 4', 'x less than or equal to 3 and y greater than or equal to 4'],
    ['5 <3', '5 less than 3'],
    ['I <35 of them', 'I less than 35 of them'],
    ['Hello <A> world', 'Hello A world'],
    ['<Narrator> Once upon a time', 'Narrator Once upon a time'],
    ['Some <b>bold</b> text', 'Some b bold b text'],
    ['<voice name="Ann">hi</voice>', 'voice name Ann hi voice'],
    ['x<y and y>z', 'x less than y and y greater than z'],
    ['AT&T', 'AT and T'],
    ['5 &lt; 6 &amp; 7 &gt; 2', '5 less than 6 and 7 greater than 2'],
    ['&copy; stays', 'and copy; stays'],
    ['Plain text.', 'Plain text.'],
  ];
  for (const [text, expected] of table) {
    void it(`speaks ${JSON.stringify(text)}`, () => assert.equal(en(text), expected));
  }

  void it('uses the words of the language at each symbol', () => {
    const text = 'Eins & zwei. One & two.';
    const spoken = speakableText(text, (at) => (at < 12 ? 'de' : 'en')).text;
    assert.match(spoken, /Eins\s+und\s+zwei\. One\s+and\s+two\./);
    assert.equal(symbolWords('gmw/en-US').less, 'less than');
    assert.equal(symbolWords('cmn').greater, '大于');
    assert.equal(symbolWords('fi').less, 'less than', 'a language without its words gets English ones');
  });

  void it('maps every spoken character back to what was written', () => {
    const text = 'I <3 you & <A>.';
    const { text: spoken, from, to } = speakableText(text, () => 'en', 100);
    assert.equal(from.length, spoken.length);
    const heart = spoken.indexOf('heart');
    assert.deepEqual([from[heart], to[heart]], [102, 104]);
    const and = spoken.indexOf('and');
    assert.deepEqual([from[and], to[and]], [109, 110]);
    const a = spoken.lastIndexOf('A');
    assert.deepEqual([from[a], to[a]], [111, 114]);
    const you = spoken.indexOf('you');
    assert.deepEqual([from[you], to[you + 2]], [105, 108]);
  });
});

void describe('markup on any text', () => {
  const pieces = fc.constantFrom(
    '[pause:1s]',
    '[pause:',
    '<break time="2s"/>',
    '<break',
    '<A>',
    '</b>',
    '<3',
    '<',
    '>',
    '=',
    '&',
    '&lt;',
    '"',
    ' ',
    '.',
    'word',
    '5',
    'é',
    '\u{1F600}',
  );
  const texts = fc.array(pieces, { maxLength: 40 }).map((p) => p.join(''));

  void it('parses every text into ordered segments that cover it, tags and text', () => {
    fc.assert(
      fc.property(texts, (text) => {
        let at = 0;
        for (const s of parseMarkup(text)) {
          assert.ok(s.start >= at && s.end > s.start, 'ordered, not empty');
          assert.equal(text.slice(at, s.start).trim(), '', 'only blanks left out');
          if (s.kind === 'text') assert.equal(s.text, text.slice(s.start, s.end));
          else assert.ok(s.ms >= 0 && s.ms <= MAX_PAUSE_MS);
          at = s.end;
        }
        assert.equal(text.slice(at).trim(), '');
      }),
      { numRuns: 500 },
    );
  });

  void it('speaks every text without <, > or &, keeping its other characters, mapped inside it', () => {
    fc.assert(
      fc.property(texts, (text) => {
        const { text: spoken, from, to } = speakableText(text, () => 'en');
        assert.doesNotMatch(spoken, /[<>&]/);
        assert.equal(from.length, spoken.length);
        for (let k = 0; k < spoken.length; k++) {
          assert.ok(0 <= (from[k] ?? -1) && (from[k] ?? 0) < (to[k] ?? 0) && (to[k] ?? 0) <= text.length);
        }
        // Every run of letters written (entities aside) is spoken, in the same order.
        const letters = text.replace(/&(lt|gt|amp|quot|apos);/g, ' ').match(/\p{L}+/gu) ?? [];
        let after = 0;
        for (const run of letters) {
          const found = spoken.indexOf(run, after);
          assert.ok(found !== -1, `${run} spoken`);
          after = found + run.length;
        }
      }),
      { numRuns: 500 },
    );
  });
});
