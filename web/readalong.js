// Subtitles and read-along for the console's player: the task's cues on the <audio> element's text
// tracks, the cue playing shown under the player (an <audio> element draws no captions), the
// task's text with the word playing marked, and the task's SRT and WebVTT files to download.
//
// A finished task's WebVTT is a <track>, fetched once. A task still generating has no final file:
// its timestamps.json grows as sentences are produced, so it is polled and each new sentence is
// added as a cue of a script-made track, then the <track> takes over once the task is generated.

const $ = (id) => document.getElementById(id);
/** How often a generating task's timestamps are asked for. */
const LIVE_POLL_MS = 1000;
/**
 * Added to the element's position before it is matched to times: Chromium reports a seek to a
 * word's start (times are whole milliseconds) truncated to the microsecond below it, 2.026 as
 * 2.025999, which would mark the word before, or nothing, instead of the word sought.
 */
const POSITION_SLACK = 0.0005;

function element(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name.startsWith('on')) node.addEventListener(name.slice(2), value);
    else if (value !== undefined && value !== null) node.setAttribute(name, value);
  }
  for (const child of children) node.append(child);
  return node;
}

/** `75.4` → `1:15.4`: where a word starts, in its tooltip. */
function clock(seconds) {
  const minutes = Math.floor(seconds / 60);
  return `${minutes}:${(seconds - minutes * 60).toFixed(1).padStart(4, '0')}`;
}

/** A splitter marker as the subtitles name its speaker: `<Ann>` or `[Ann]` is Ann. */
function markerName(marker) {
  if (!marker) return null;
  const name = marker
    .replace(/^[<[{(]\s*/, '')
    .replace(/\s*[>\]})]$/, '')
    .trim();
  return name === '' ? marker : name;
}

function escapeVtt(text) {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** A cue's text as a line to read: its voice span as `Name: `, other tags dropped, entities decoded. */
function cueLine(text) {
  return text
    .replace(/<v(?:\.[^\s>]*)?\s+([^>]*)>/g, '$1: ')
    .replace(/<[^>]*>/g, '')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&nbsp;/g, '\u00a0')
    .replace(/&lrm;|&rlm;/g, '')
    .replace(/&amp;/g, '&');
}

/**
 * The read-along of one player. `api(method, path)` calls the API with the console's key;
 * `voiceName(detail, voiceId)` and `speakerClass(detail, voiceId)` name and colour a voice as the
 * rest of the player does; `playFrom(time, what)` seeks the player there (or says why it cannot).
 */
export function createReadAlong({ audio, api, voiceName, speakerClass, playFrom }) {
  const view = $('readalong');
  const caption = $('caption');
  // One script-made track for every live task: such a track cannot be removed from the element,
  // only emptied and switched off.
  const liveTrack = audio.addTextTrack('subtitles', 'Subtitles (live)', document.documentElement.lang);
  liveTrack.mode = 'disabled';
  let state = null;
  let frame = 0;

  function emptyLiveTrack() {
    liveTrack.mode = 'hidden';
    for (const cue of [...(liveTrack.cues ?? [])]) liveTrack.removeCue(cue);
    liveTrack.mode = 'disabled';
  }

  /** Forgets the task shown: its polling, its track, its cues and its text. */
  function clear() {
    if (state !== null) {
      clearTimeout(state.timer);
      state.trackElement?.remove();
    }
    state = null;
    emptyLiveTrack();
    view.replaceChildren();
    caption.textContent = '';
    $('readalong-box').hidden = true;
    $('subtitle-links').hidden = true;
  }

  /**
   * Shows task `id` (its latest detail, with `streamUrl`): called on each refresh of the player;
   * the first call for a task sets it up and starts reading its timestamps.
   */
  function show(id, detail) {
    if (state?.id !== id) {
      clear();
      // The subtitle URLs take the task's stream token, as a <track src> must; on this page's own
      // origin, where the track's same-origin fetch and the download attribute work.
      const token = new URL(detail.streamUrl, location.href).searchParams.get('auth');
      const base = `/api/tts/generate/${id}`;
      const query = `?${new URLSearchParams({ auth: token })}`;
      state = {
        id,
        base,
        query,
        detail,
        timer: null,
        sentences: [],
        sentenceNodes: [],
        marks: [],
        lines: [],
        live: false,
        complete: false,
        trackElement: null,
        current: null,
      };
      $('download-srt').href = `${base}/subtitles.srt${query}`;
      $('download-srt').download = `${id}.srt`;
      $('download-vtt').href = `${base}/subtitles.vtt${query}`;
      $('download-vtt').download = `${id}.vtt`;
      $('subtitle-links').hidden = false;
      $('readalong-box').hidden = false;
      drawLines();
      void poll(state);
      return;
    }
    state.detail = detail;
    drawLines();
  }

  /** One line per content of the task, its speaker named in a dialogue; text not timed yet is dimmed. */
  function drawLines() {
    const { detail } = state;
    const contents = detail.metadata.contents;
    if (state.lines.length !== contents.length) {
      const dialogue = new Set(contents.map((c) => c.voiceId)).size > 1;
      state.lines = contents.map((content) => {
        const line = element('p', { class: `line speaker-${speakerClass(detail, content.voiceId)}` });
        if (dialogue) line.append(element('strong', {}, `${voiceName(detail, content.voiceId)}: `));
        const pending = element('span', { class: 'untimed' }, content.text);
        line.append(pending);
        return { line, pending, timed: false };
      });
      view.replaceChildren(...state.lines.map((l) => l.line));
      for (const sentence of state.sentenceNodes) place(sentence);
    }
  }

  async function poll(s) {
    let stamps;
    try {
      stamps = await api('GET', `${s.base}/timestamps.json`);
    } catch (err) {
      // The task is gone (deleted meanwhile): nothing more to read. Any other failure is retried.
      if (err.status === 404) return;
      stamps = null;
    }
    if (state !== s) return;
    if (stamps !== null) {
      s.live ||= !stamps.complete;
      apply(stamps);
      if (stamps.complete) {
        attachTrack();
        return;
      }
    }
    s.timer = setTimeout(() => void poll(s), LIVE_POLL_MS);
  }

  /** Takes the sentences timed since the last read (a prefix of the final list grows by its end). */
  function apply(stamps) {
    const known = state.sentences;
    const same = (a, b) => b !== undefined && a.start === b.start && a.text === b.text;
    if (!known.every((sentence, n) => same(sentence, stamps.sentences[n]))) {
      // Not a continuation (a piece generated again): start over from this answer.
      emptyLiveTrack();
      Object.assign(state, { sentences: [], sentenceNodes: [], marks: [], lines: [], current: null });
      drawLines();
      return apply(stamps);
    }
    const contents = state.detail.metadata.contents;
    const dialogue = new Set(contents.map((c) => c.voiceId)).size > 1;
    for (const sentence of stamps.sentences.slice(known.length)) {
      known.push(sentence);
      const node = sentenceNode(sentence);
      state.sentenceNodes.push(node);
      place(node);
      if (state.live) {
        liveTrack.mode = 'hidden';
        const name = dialogue
          ? (markerName(sentence.speaker) ?? voiceName(state.detail, sentence.voiceId))
          : null;
        const text =
          name === null ? escapeVtt(sentence.text) : `<v ${escapeVtt(name)}>${escapeVtt(sentence.text)}`;
        liveTrack.addCue(new VTTCue(sentence.start, Math.max(sentence.end, sentence.start + 0.1), text));
      }
    }
    state.marks = state.sentenceNodes.flatMap((node) => node.marks);
    state.current = null;
    tick();
  }

  /** The finished task's WebVTT as a <track>; the live cues give way once it has loaded. */
  function attachTrack() {
    const track = element('track', {
      kind: 'subtitles',
      label: 'Subtitles',
      srclang: document.documentElement.lang,
      src: `${state.base}/subtitles.vtt${state.query}`,
      default: '',
    });
    const s = state;
    track.addEventListener('load', () => {
      if (state !== s) return;
      track.track.mode = 'hidden';
      emptyLiveTrack();
      tick();
    });
    track.track.addEventListener('cuechange', tick);
    s.trackElement = track;
    audio.prepend(track);
    // Hidden, not showing: the cues are read here and shown in the caption area.
    track.track.mode = 'hidden';
  }

  /** A sentence's nodes: its words as buttons in its text, or the whole sentence as one. */
  function sentenceNode(sentence) {
    const node = element('span', { class: 'sentence' });
    const marks = [];
    const button = (text, start) =>
      element(
        'button',
        {
          type: 'button',
          class: 'word',
          tabindex: '-1',
          title: `Play from ${clock(start)}`,
          onclick: () => playFrom(start, `“${text}”`),
        },
        text,
      );
    if (sentence.words.length === 0) {
      const whole = button(sentence.text, sentence.start);
      node.append(whole);
      marks.push({ start: sentence.start, until: sentence.end, node: whole, sentence: node });
      return { node, marks, content: sentence.content };
    }
    let from = 0;
    sentence.words.forEach((word, n) => {
      const at = sentence.text.indexOf(word.text, from);
      if (at > from) node.append(sentence.text.slice(from, at));
      else if (at === -1 && n > 0) node.append(' ');
      const wordButton = button(word.text, word.start);
      node.append(wordButton);
      if (at !== -1) from = at + word.text.length;
      const next = sentence.words[n + 1];
      const until = Math.max(word.end, next ? next.start : sentence.end);
      marks.push({ start: word.start, until, node: wordButton, sentence: node });
    });
    if (from < sentence.text.length) node.append(sentence.text.slice(from));
    return { node, marks, content: sentence.content };
  }

  /** Puts a sentence in its content's line, in place of the line's untimed text. */
  function place(sentence) {
    const line = state.lines[sentence.content];
    if (line === undefined) return;
    if (!line.timed) {
      line.pending.remove();
      line.timed = true;
    } else line.line.append(' ');
    line.line.append(sentence.node);
    const first = state.marks[0]?.node ?? sentence.marks[0]?.node;
    if (first && !view.querySelector('.word[tabindex="0"]')) first.tabIndex = 0;
  }

  /** The mark (word, or sentence without words) playing at `time`, or null. */
  function markAt(time) {
    const { marks } = state;
    let low = 0;
    let high = marks.length - 1;
    let found = -1;
    while (low <= high) {
      const mid = (low + high) >> 1;
      if (marks[mid].start <= time) {
        found = mid;
        low = mid + 1;
      } else high = mid - 1;
    }
    const mark = marks[found];
    return mark !== undefined && time < mark.until ? mark : null;
  }

  /** The track whose cues are current: the finished file's once loaded, the live one before. */
  function cueTrack() {
    const element = state?.trackElement;
    return element && element.readyState === 2 ? element.track : liveTrack;
  }

  /** Marks the word playing and shows the cue playing; touches the page only when they change. */
  function tick() {
    if (state === null) return;
    const time = audio.currentTime + POSITION_SLACK;
    const started = !audio.paused || audio.currentTime > 0;
    const mark = started ? markAt(time) : null;
    if (mark !== state.current) {
      const before = state.current;
      if (before) {
        before.node.classList.remove('playing');
        before.node.removeAttribute('aria-current');
        before.sentence.classList.remove('playing');
      }
      state.current = mark;
      if (mark) {
        mark.node.classList.add('playing');
        mark.node.setAttribute('aria-current', 'true');
        mark.sentence.classList.add('playing');
        keepInView(mark.node);
      }
    }
    const cues = cueTrack().cues;
    let line = '';
    if (started && cues) {
      for (let n = 0; n < cues.length; n++) {
        const cue = cues[n];
        if (cue.startTime <= time && time < cue.endTime) line = cueLine(cue.text);
      }
    }
    if (caption.textContent !== line) caption.textContent = line;
  }

  /** Scrolls the text box (never the page) so the word playing stays in sight. */
  function keepInView(node) {
    const top = node.offsetTop;
    if (top < view.scrollTop || top + node.offsetHeight > view.scrollTop + view.clientHeight) {
      view.scrollTop = Math.max(0, top - view.clientHeight / 3);
    }
  }

  function loop() {
    tick();
    frame = audio.paused ? 0 : requestAnimationFrame(loop);
  }

  audio.addEventListener('timeupdate', tick);
  audio.addEventListener('seeked', tick);
  audio.addEventListener('play', () => {
    if (frame === 0) frame = requestAnimationFrame(loop);
  });
  liveTrack.addEventListener('cuechange', tick);

  // One tab stop for the whole text; arrow keys move between its words (a toolbar's keys). The
  // word last focused, by keys or by a click, is the one Tab comes back to.
  view.addEventListener('focusin', (event) => {
    if (!event.target.classList.contains('word')) return;
    for (const word of view.querySelectorAll('.word[tabindex="0"]')) word.tabIndex = -1;
    event.target.tabIndex = 0;
  });
  view.addEventListener('keydown', (event) => {
    const words = [...view.querySelectorAll('.word')];
    const at = words.indexOf(document.activeElement);
    if (at === -1) return;
    const to = {
      ArrowRight: at + 1,
      ArrowDown: at + 1,
      ArrowLeft: at - 1,
      ArrowUp: at - 1,
      Home: 0,
      End: words.length - 1,
    }[event.key];
    if (to === undefined || words[to] === undefined) return;
    event.preventDefault();
    words[at].tabIndex = -1;
    words[to].tabIndex = 0;
    words[to].focus();
  });

  return { show, clear };
}
