import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseSync } from 'subtitle';
import webvtt from 'webvtt-parser';
import {
  buildCues,
  CUE_LINE_CHARS,
  CUE_LINES,
  CUE_MAX_SECONDS,
  CUE_MIN_SECONDS,
  toSrt,
  toVtt,
  type TimedSentence,
} from './cues.js';

const LONG =
  'This sentence is deliberately long so that it cannot fit on two lines of forty-two characters each, ' +
  'and therefore the cue builder must break it between words into several cues of its own.';

function sentence(start: number, end: number, text: string, speaker?: string): TimedSentence {
  return { start, end, text, speaker, words: [] };
}

describe('subtitle cues', () => {
  it('starts a cue at every sentence and never spans two', () => {
    const cues = buildCues([sentence(0, 1.2, 'Hello there.'), sentence(1.5, 3, 'How are you?')]);
    assert.equal(cues.length, 2);
    assert.deepEqual(cues[0]?.lines, ['Hello there.']);
    assert.equal(cues[0]?.start, 0);
    assert.equal(cues[0]?.end, 1.2);
    assert.equal(cues[1]?.start, 1.5);
  });

  it('breaks a long sentence between words into cues of at most two lines of 42 characters', () => {
    const cues = buildCues([sentence(2, 14, LONG)]);
    assert.ok(cues.length >= 3);
    const words = cues.flatMap((c) => c.lines.join(' ').split(' '));
    assert.deepEqual(words, LONG.split(' '), 'every word once, whole, in order');
    for (const cue of cues) {
      assert.ok(cue.lines.length <= CUE_LINES);
      for (const line of cue.lines) assert.ok(line.length <= CUE_LINE_CHARS, line);
      assert.ok(cue.end - cue.start <= CUE_MAX_SECONDS);
    }
    for (const [i, cue] of cues.entries()) if (i > 0) assert.ok(cue.start >= (cues[i - 1]?.end ?? 0));
    assert.equal(cues[0]?.start, 2);
    assert.equal(cues.at(-1)?.end, 14);
  });

  it('keeps cues at most 7 s even when the text would fit', () => {
    const cues = buildCues([sentence(0, 20, 'Slowly, very slowly, the words came one by one.')]);
    assert.ok(cues.length >= 3);
    for (const cue of cues) assert.ok(cue.end - cue.start <= CUE_MAX_SECONDS + 1e-9);
  });

  it('uses the engine word times for the breaks', () => {
    const text = 'One two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen';
    const words = [...text.matchAll(/\S+/g)].map((m, i) => ({
      start: i === 0 ? 0 : 10 + i * 0.1,
      end: 10 + i * 0.1 + 0.09,
      textStart: m.index,
      textEnd: m.index + m[0].length,
    }));
    const cues = buildCues([{ start: 0, end: 12, text, words }]);
    // "One" is spoken at 0, everything else after 10 s: the first cue cannot hold "two".
    assert.deepEqual(cues[0]?.lines, ['One']);
    assert.equal(cues[1]?.start, 10.1);
  });

  it('lasts at least 0.7 s where the next cue leaves room, and no longer than the gap otherwise', () => {
    const cues = buildCues([sentence(0, 0.3, 'Hi.'), sentence(2, 2.2, 'Yes.'), sentence(2.5, 3.5, 'Then.')]);
    assert.equal(cues[0]?.end, CUE_MIN_SECONDS);
    assert.equal(cues[1]?.end, 2.5, 'stops where the next sentence starts');
  });

  it('names speakers on dialogue cues only', () => {
    const mono = buildCues([sentence(0, 1, 'Alone.', 'A'), sentence(1, 2, 'Still alone.', 'A')]);
    assert.equal(mono[0]?.speaker, undefined);
    const dialogue = buildCues([sentence(0, 1, 'Hi, Bob.', 'Ann'), sentence(1.2, 2, 'Hi, Ann.', 'Bob')]);
    assert.equal(dialogue[0]?.speaker, 'Ann');
    assert.match(toVtt(dialogue), /<v Ann>Hi, Bob\./);
    assert.match(toSrt(dialogue), /\nBob: Hi, Ann\.\n/);
  });

  it('writes SRT and WebVTT that real parsers read back', () => {
    const sentences = [
      sentence(0.05, 1.25, 'Is 5 < 6 > 2? I <3 you & him.', 'Ann'),
      sentence(1.8, 13.5, LONG, 'Bob'),
      sentence(3725.5, 3726.75, 'An hour later.', 'Ann'),
    ];
    const cues = buildCues(sentences);
    const srt = toSrt(cues);
    assert.match(srt, /^1\n00:00:00,050 --> 00:00:01,250\nAnn: Is 5 < 6 > 2\? I <3 you & him\.\n/);
    assert.match(srt, /01:02:05,500 --> 01:02:06,750/);
    const parsedSrt = parseSync(srt).filter((n) => n.type === 'cue');
    assert.equal(parsedSrt.length, cues.length);
    for (const [i, node] of parsedSrt.entries()) {
      assert.equal(node.data.start, Math.round((cues[i]?.start ?? 0) * 1000));
      assert.equal(node.data.end, Math.round((cues[i]?.end ?? 0) * 1000));
    }

    const vtt = toVtt(cues);
    assert.ok(vtt.startsWith('WEBVTT\n\n'));
    const tree = new webvtt.WebVTTParser().parse(vtt, 'subtitles');
    assert.deepEqual(tree.errors, []);
    assert.equal(tree.cues.length, cues.length);
    assert.equal(tree.cues[0]?.startTime, 0.05);
    assert.equal(tree.cues[0]?.endTime, 1.25);
    assert.match(vtt, /<v Ann>Is 5 &lt; 6 &gt; 2\? I &lt;3 you &amp; him\./);
    const vttParsed = parseSync(vtt).filter((n) => n.type === 'cue');
    assert.equal(vttParsed.length, cues.length);
  });

  it('makes no cue of an empty list or a sentence without words', () => {
    assert.equal(toSrt(buildCues([])), '');
    assert.equal(toVtt(buildCues([sentence(0, 1, '   ')])), 'WEBVTT\n');
  });
});
