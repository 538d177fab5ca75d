// voicegen web console: plain ES module, no build step, no CDN. Talks to the service's own API
// with the API key kept in this tab's session storage (never localStorage, never a cookie).
import { createReadAlong } from './readalong.js';

const KEY_STORAGE = 'voicegen.key';
const $ = (id) => document.getElementById(id);

let key = sessionStorage.getItem(KEY_STORAGE);
let voices = [];

/**
 * Reads `#key=` (the first-run link), keeps it for this tab and removes it from the address bar.
 * Returns whether the fragment held a key.
 */
function takeKeyFromUrl() {
  const match = /(?:^#|&)key=(sk-[a-z0-9]{32})/.exec(location.hash);
  if (!match) return false;
  key = match[1];
  sessionStorage.setItem(KEY_STORAGE, key);
  history.replaceState(null, '', location.pathname + location.search);
  return true;
}

/** Shows an error the API (or the network) reported, in words. */
function showError(err) {
  $('error').textContent = err instanceof Error ? err.message : String(err);
}

function clearError() {
  $('error').textContent = '';
}

/** A JSON API call with the key; rejects with the spec error body's message on failure. */
async function api(method, path, body) {
  const response = await fetch(path, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  const parsed = text === '' ? {} : JSON.parse(text);
  if (!response.ok) {
    const error = new Error(`${parsed.message ?? response.statusText} (${parsed.code ?? response.status})`);
    error.status = response.status;
    throw error;
  }
  return parsed;
}

function element(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name.startsWith('on')) node.addEventListener(name.slice(2), value);
    // Styles through the CSSOM: the page's CSP refuses style attributes.
    else if (name === 'style') Object.assign(node.style, value);
    else if (value !== undefined && value !== null) node.setAttribute(name, value);
  }
  for (const child of children) node.append(child);
  return node;
}

// ---------------------------------------------------------------- sign in

async function signIn() {
  clearError();
  try {
    const info = await api('GET', '/api/account/info');
    $('who').textContent = `Signed in as ${info.data.name}`;
    $('sign-in').hidden = true;
    $('workspace').hidden = false;
    $('sign-out').hidden = false;
    // The voice cards name each voice's engine from the catalogue: engines first.
    await Promise.all([loadEngines().then(loadVoices), loadTasks(), loadSplitters()]);
    if ($('splitter-config').value === '') editSplitter(null);
  } catch (err) {
    // A refused key is forgotten; any other failure leaves the tab signed in to try again.
    if (err.status === 401 || err.status === 403) {
      sessionStorage.removeItem(KEY_STORAGE);
      key = null;
      showSignIn();
    }
    showError(err);
  }
}

function showSignIn() {
  $('sign-in').hidden = false;
  $('workspace').hidden = true;
  $('sign-out').hidden = true;
  $('who').textContent = '';
  $('key').focus();
}

$('sign-in-form').addEventListener('submit', (event) => {
  event.preventDefault();
  key = $('key').value.trim();
  sessionStorage.setItem(KEY_STORAGE, key);
  void signIn();
});

$('sign-out').addEventListener('click', () => {
  sessionStorage.removeItem(KEY_STORAGE);
  key = null;
  stopPlayer();
  clearTimeout(tasksTimer);
  showSignIn();
});

// ---------------------------------------------------------------- voices

/** The engines of the voice catalogue (GET /api/engines), by id. */
let engines = new Map();

/**
 * Fills the engine choice from the catalogue; unavailable engines are shown with their reason. The
 * engines of a provider that has several (an operator's remote endpoints, each by its name) are
 * grouped under that provider.
 */
async function loadEngines() {
  const answer = await api('GET', '/api/engines');
  engines = new Map(answer.data.map((engine) => [engine.id, engine]));
  const option = (engine) =>
    element(
      'option',
      {
        value: engine.id,
        disabled: engine.available ? undefined : '',
        title: engine.reason ?? engine.description,
      },
      engine.available ? engine.id : `${engine.id} (unavailable: ${engine.reason})`,
    );
  const byProvider = new Map();
  for (const engine of answer.data)
    byProvider.set(engine.provider, [...(byProvider.get(engine.provider) ?? []), engine]);
  const select = $('voice-engine');
  const chosen = select.value;
  select.replaceChildren(
    ...[...byProvider].map(([provider, list]) =>
      list.length === 1 && list[0].id === provider
        ? option(list[0])
        : element('optgroup', { label: `${provider}: ${list[0].description}` }, ...list.map(option)),
    ),
  );
  const usable = answer.data.find((engine) => engine.available);
  select.value = engines.get(chosen)?.available ? chosen : (usable?.id ?? '');
  await showEngine();
}

/** The catalogue engine a voice's binding selects (every field of the engine's binding matches). */
function engineOf(binding) {
  if (!binding) return undefined;
  return [...engines.values()].find((engine) =>
    Object.entries(engine.binding).every(([field, value]) => binding[field] === value),
  );
}

/** The voices and settings of the chosen engine: its catalogue voices, the browser's language first. */
async function showEngine() {
  const engine = engines.get($('voice-engine').value);
  $('voice-codes').replaceChildren();
  $('voice-options').replaceChildren();
  if (engine === undefined) return;
  const all = await api('GET', `/api/engines/voices?${new URLSearchParams({ engine: engine.id })}`);
  const mine = await api(
    'GET',
    `/api/engines/voices?${new URLSearchParams({ engine: engine.id, language: navigator.language || 'en' })}`,
  ).catch(() => ({ data: [] }));
  for (const voice of all.data) {
    const label = `${voice.name} (${voice.languages.join(', ')})${voice.gender ? `, ${voice.gender}` : ''}`;
    $('voice-codes').append(element('option', { value: voice.id, label }));
  }
  $('voice-code').value = (mine.data[0] ?? all.data[0])?.id ?? '';
  // An open engine (a remote endpoint) speaks whatever voice its server accepts, listed or not.
  $('voice-code').placeholder = engine.openVoices ? 'any voice name it accepts' : '';
  $('voice-code-hint').textContent =
    `${engine.description}: ${all.data.length} voices${engine.openVoices ? ' listed (others accepted)' : ''}. ` +
    (all.data[0]?.quality ?? '');
  for (const option of engine.options) $('voice-options').append(...optionControl(option));
}

/** A label and a control for one binding setting: a choice of every value, or a number or text field. */
function optionControl(option) {
  const id = `voice-option-${option.field}`;
  const label = element('label', { for: id, title: option.description }, capitalise(option.field));
  if (option.values) {
    const choices = option.values.map((v) =>
      element(
        'option',
        { value: v.id },
        `${v.id}${v.name !== v.id ? ` (${v.name})` : ''}${v.gender ? `, ${v.gender}` : ''}`,
      ),
    );
    return [
      label,
      element(
        'select',
        { id, 'data-field': option.field },
        element('option', { value: '' }, '(default)'),
        ...choices,
      ),
    ];
  }
  const numeric = option.min !== undefined || option.max !== undefined;
  const input = element('input', {
    id,
    'data-field': option.field,
    type: numeric ? 'number' : 'text',
    min: option.min,
    max: option.max,
    placeholder: 'default',
  });
  return [label, input];
}

function capitalise(text) {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/** The binding the form describes: the engine's own fields, the voice, and the settings given. */
function formBinding() {
  const binding = { ...engines.get($('voice-engine').value)?.binding, voice: $('voice-code').value.trim() };
  for (const control of $('voice-options').querySelectorAll('[data-field]')) {
    const value = control.value.trim();
    if (value !== '') binding[control.dataset.field] = control.type === 'number' ? Number(value) : value;
  }
  return binding;
}

$('voice-engine').addEventListener('change', () => void showEngine().catch(showError));

/** A voice's binding in words: its engine, its voice and the settings it gives (`espeak: en-us (variant f3)`). */
function bindingSummary(binding) {
  if (!binding) return '';
  const engine = engineOf(binding);
  const settings = (engine?.options ?? [])
    .filter((option) => binding[option.field] !== undefined)
    .map((option) => `${option.field} ${binding[option.field]}`);
  return `${engine?.id ?? binding.engine}: ${binding.voice}${settings.length > 0 ? ` (${settings.join(', ')})` : ''}`;
}

async function loadVoices() {
  const answer = await api('GET', '/api/voice?limit=50');
  voices = answer.data;
  const list = $('voices');
  list.replaceChildren(
    ...voices.map((voice) =>
      element(
        'li',
        {},
        element('strong', {}, voice.name),
        ` ${bindingSummary(voice.engine)} · ${voice.version}`,
        element(
          'div',
          { class: 'actions' },
          element('button', { type: 'button', onclick: () => void previewVoice(voice) }, 'Preview'),
          voice.version === 'v3.0'
            ? ''
            : element(
                'button',
                { type: 'button', onclick: () => void migrateVoice(voice) },
                'Migrate to v3.0',
              ),
          element('button', { type: 'button', onclick: () => void deleteVoice(voice) }, 'Delete'),
        ),
      ),
    ),
  );
  for (const select of [$('task-voice'), $('voice-a'), $('voice-b')]) {
    const chosen = select.value;
    select.replaceChildren(...voices.map((v) => element('option', { value: v.id }, v.name)));
    if (voices.some((v) => v.id === chosen)) select.value = chosen;
  }
  if (voices.length > 1 && $('voice-b').value === $('voice-a').value) $('voice-b').value = voices[1].id;
}

$('voice-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  clearError();
  try {
    await api('POST', '/api/voice', { name: $('voice-name').value.trim(), engine: formBinding() });
    $('voice-name').value = '';
    await loadVoices();
  } catch (err) {
    showError(err);
  }
});

/** One-shot synthesis of a sample sentence, fetched with the key and played from memory. */
async function previewVoice(voice) {
  clearError();
  try {
    const query = new URLSearchParams({
      voiceId: voice.id,
      language: 'auto',
      text: `Hello, I am ${voice.name}.`,
    });
    const response = await fetch(`/api/tts/simple-generate.mp3?${query}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    if (!response.ok) throw new Error((await response.json()).message);
    const audio = new Audio(URL.createObjectURL(await response.blob()));
    await audio.play();
  } catch (err) {
    showError(err);
  }
}

async function migrateVoice(voice) {
  clearError();
  try {
    await api('POST', `/api/voice/${voice.id}/migrateV3`);
    await loadVoices();
  } catch (err) {
    showError(err);
  }
}

async function deleteVoice(voice) {
  clearError();
  try {
    await api('DELETE', `/api/voice/${voice.id}`);
    await loadVoices();
  } catch (err) {
    showError(err);
  }
}

// ---------------------------------------------------------------- new task

function mode() {
  return document.querySelector('input[name="mode"]:checked').value;
}

function showMode() {
  $('dialogue-voices').hidden = mode() !== 'dialogue';
  $('plain-voice').hidden = mode() === 'dialogue';
}

function setMode(value) {
  document.querySelector(`input[name="mode"][value="${value}"]`).checked = true;
  showMode();
}

for (const radio of document.querySelectorAll('input[name="mode"]'))
  radio.addEventListener('change', showMode);

/** The saved splitter configurations (GET /api/splitter), for the dialogue's choice of splitter. */
let savedSplitters = [];
/** Whether the text held markers when the mode was last chosen for it; null before the first look. */
let textHadMarkers = null;
/** Set once the user picks a splitter: from then on the text never changes that choice. */
let splitterChosenByUser = false;
/** The pause tag every splitter reads as silence, never as a marker (`[pause:1.5s]`, `[pause:300ms]`). */
const PAUSE_TAG = /^\[pause:\d+(?:\.\d+)?m?s\]$/;
/** SSML's break, a pause tag too (`<break time="2s"/>`), whatever its case. */
const BREAK_TAG = /^<break(?:\s+[A-Za-z_:][\w:.-]*\s*=\s*(?:"[^"<>]*"|'[^'<>]*'))*\s*\/?>$/i;

/**
 * The markers of a splitter `config` that `text` holds, as generation would find them: placeholder
 * keys written in it, and bracket spans of the config's marks (pause tags excepted).
 */
function markersIn(config, text) {
  const found = new Set();
  for (const name of Object.keys(config)) {
    if (!RESERVED_KEYS.has(name) && name !== '' && text.includes(name)) found.add(name);
  }
  for (const mark of Array.isArray(config.splitterMarks) ? config.splitterMarks : []) {
    const [open, close] = [...mark];
    let at = text.indexOf(open);
    while (at !== -1) {
      const end = text.indexOf(close, at + open.length);
      if (end === -1) break;
      const span = text.slice(at, end + close.length);
      if (!PAUSE_TAG.test(span) && !BREAK_TAG.test(span)) found.add(span);
      at = text.indexOf(open, end + close.length);
    }
  }
  return [...found];
}

/**
 * Chooses the kind of text from the text itself: dialogue when it holds markers of the inline
 * splitter or of a saved configuration, plain text otherwise. A mode the user picked stands until
 * the text gains or loses its markers; a splitter the user picked always stands. Without such a
 * pick, the splitter whose markers the text uses is chosen (the inline one on a tie).
 */
function chooseModeForText() {
  const text = $('task-text').value;
  const candidates = [
    { id: '', name: 'the inline splitter', markers: markersIn(dialogueSplitter(), text) },
    ...savedSplitters.map((saved) => ({
      id: saved.id,
      name: saved.name,
      markers: markersIn(saved.config, text),
    })),
  ];
  const current = candidates.find((c) => c.id === $('task-splitter').value) ?? candidates[0];
  const best = candidates.reduce((a, b) => (b.markers.length > a.markers.length ? b : a));
  const splitter = splitterChosenByUser || current.markers.length > 0 ? current : best;
  if (splitter !== current) {
    $('task-splitter').value = splitter.id;
    showInlineVoices();
  }
  // Markers of any splitter make the text a dialogue, even when the splitter picked by hand lacks them.
  const named = splitter.markers.length > 0 ? splitter : best;
  const hasMarkers = named.markers.length > 0;
  if (hasMarkers !== textHadMarkers) setMode(hasMarkers ? 'dialogue' : 'plain');
  textHadMarkers = hasMarkers;
  const shown = `${named.markers.slice(0, 6).join(' ')}${named.markers.length > 6 ? ' …' : ''}`;
  const owner = named.id === '' ? named.name : `the configuration ${named.name}`;
  $('mode-hint').textContent = !hasMarkers
    ? ''
    : named === splitter
      ? `The text has the markers ${shown} of ${owner}.`
      : `The text has the markers ${shown} of ${owner}, not of the splitter chosen.`;
}

$('task-text').addEventListener('input', chooseModeForText);

/** The inline splitter of a dialogue: <A> and <B> bound to the chosen voices. */
function dialogueSplitter() {
  return {
    '<A>': { voiceId: $('voice-a').value, speechRate: 1 },
    '<B>': { voiceId: $('voice-b').value, speechRate: 1 },
    fallbackConfig: { voiceId: $('voice-a').value },
  };
}

function speakerOf(voiceId) {
  return voices.find((v) => v.id === voiceId)?.name ?? voiceId.slice(0, 8);
}

/** Speaker colour classes, by the order in which markers first appear. */
const SPEAKER_CLASSES = ['a', 'b', 'c', 'd'];

/** Renders the utterances of a preview into `list`, each coloured by its marker. */
function showUtterances(list, utterances) {
  const markers = [...new Set(utterances.map((u) => u.marker ?? ''))];
  list.replaceChildren(
    ...utterances.map((item) =>
      element(
        'li',
        { class: `speaker-${SPEAKER_CLASSES[markers.indexOf(item.marker ?? '') % SPEAKER_CLASSES.length]}` },
        element('strong', {}, `${item.marker ?? '(no marker)'} ${speakerOf(item.voiceId)}: `),
        item.text,
      ),
    ),
  );
}

/** The dialogue's splitter as the generate and preview bodies take it: saved (by id) or inline. */
function dialogueSplitterField() {
  const saved = $('task-splitter').value;
  return saved === '' ? { splitter: dialogueSplitter() } : { splitterId: saved };
}

/** The inline splitter's voice choices, shown only when the inline splitter is chosen. */
function showInlineVoices() {
  for (const row of document.querySelectorAll('.inline-voice')) row.hidden = $('task-splitter').value !== '';
}

$('task-splitter').addEventListener('change', () => {
  splitterChosenByUser = true;
  showInlineVoices();
  chooseModeForText();
});

$('preview-split').addEventListener('click', async () => {
  clearError();
  try {
    const answer = await api('POST', '/api/splitter/preview', {
      text: $('task-text').value,
      ...dialogueSplitterField(),
    });
    showUtterances($('split-preview'), answer.data.utterances);
  } catch (err) {
    showError(err);
  }
});

$('task-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  clearError();
  const text = $('task-text').value;
  const body =
    mode() === 'dialogue'
      ? { text, ...dialogueSplitterField() }
      : { contents: [{ type: 'text', text, voiceId: $('task-voice').value }] };
  try {
    const answer = await api('POST', '/api/tts/generate', body);
    // The player first: it starts the audio as soon as the task streams (this click allows it).
    await Promise.all([openPlayer(answer.data.id, { play: true }), loadTasks()]);
  } catch (err) {
    showError(err);
  }
});

// ---------------------------------------------------------------- splitter configurations

const RESERVED_KEYS = new Set(['splitterMarks', 'lookupTable', 'fallbackConfig']);
/** The configuration being edited (its id), or null for a new one. */
let editingSplitter = null;
let splitterCheckTimer = null;
/** Increases with every check, so an older answer arriving late never overwrites a newer one. */
let splitterCheckSeq = 0;

/** A starting configuration: <A> and <B> bound to the first two voices. */
function splitterTemplate() {
  const a = voices[0]?.id ?? 'VOICE_ID';
  const b = voices[1]?.id ?? a;
  return JSON.stringify(
    { '<A>': { voiceId: a, speechRate: 1 }, '<B>': { voiceId: b, speechRate: 1 } },
    null,
    2,
  );
}

function setSplitterCheck(text, valid) {
  $('splitter-check').textContent = text;
  $('splitter-check').className = valid ? 'valid' : 'invalid';
  $('splitter-config').setAttribute('aria-invalid', valid ? 'false' : 'true');
}

/** Checks the configuration as the service would: JSON first, then the API's own preview. */
async function checkSplitter() {
  const seq = ++splitterCheckSeq;
  let config;
  try {
    config = JSON.parse($('splitter-config').value);
  } catch (err) {
    setSplitterCheck(`Not JSON: ${err.message}`, false);
    $('splitter-preview').replaceChildren();
    return;
  }
  try {
    const answer = await api('POST', '/api/splitter/preview', {
      text: $('splitter-sample').value,
      splitter: config,
    });
    if (seq !== splitterCheckSeq) return;
    setSplitterCheck(`Valid: the sample splits into ${answer.data.utterances.length} utterance(s).`, true);
    showUtterances($('splitter-preview'), answer.data.utterances);
  } catch (err) {
    if (seq !== splitterCheckSeq) return;
    setSplitterCheck(err.message, false);
    $('splitter-preview').replaceChildren();
  }
}

function scheduleSplitterCheck() {
  clearTimeout(splitterCheckTimer);
  splitterCheckTimer = setTimeout(() => void checkSplitter(), 300);
}
$('splitter-config').addEventListener('input', scheduleSplitterCheck);
$('splitter-sample').addEventListener('input', scheduleSplitterCheck);

function editSplitter(splitter) {
  editingSplitter = splitter?.id ?? null;
  $('splitter-name').value = splitter?.name ?? '';
  $('splitter-config').value = splitter ? JSON.stringify(splitter.config, null, 2) : splitterTemplate();
  $('splitter-save').textContent = splitter ? `Save changes to ${splitter.name}` : 'Save configuration';
  void checkSplitter();
}

$('splitter-new').addEventListener('click', () => {
  clearError();
  editSplitter(null);
  $('splitter-name').focus();
});

$('splitter-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  clearError();
  let config;
  try {
    config = JSON.parse($('splitter-config').value);
  } catch (err) {
    setSplitterCheck(`Not JSON: ${err.message}`, false);
    return;
  }
  const body = { name: $('splitter-name').value.trim(), config };
  try {
    const answer = editingSplitter
      ? await api('POST', `/api/splitter/${editingSplitter}`, body)
      : await api('POST', '/api/splitter', body);
    editingSplitter = answer.data.id;
    $('splitter-save').textContent = `Save changes to ${answer.data.name}`;
    setSplitterCheck(`Saved ${answer.data.name}.`, true);
    await loadSplitters();
  } catch (err) {
    setSplitterCheck(err.message, false);
  }
});

async function deleteSplitter(splitter) {
  clearError();
  try {
    await api('DELETE', `/api/splitter/${splitter.id}`);
    if (editingSplitter === splitter.id) editSplitter(null);
    await loadSplitters();
  } catch (err) {
    showError(err);
  }
}

async function loadSplitters() {
  const answer = await api('GET', '/api/splitter?limit=50');
  const splitters = answer.data;
  savedSplitters = splitters;
  $('splitters').replaceChildren(
    ...splitters.map((splitter) =>
      element(
        'li',
        { 'data-splitter': splitter.id },
        element('strong', {}, splitter.name),
        ` ${Object.keys(splitter.config)
          .filter((k) => !RESERVED_KEYS.has(k))
          .join(' ')}`,
        element(
          'div',
          { class: 'actions' },
          element(
            'button',
            { type: 'button', 'aria-label': `Edit ${splitter.name}`, onclick: () => editSplitter(splitter) },
            'Edit',
          ),
          element(
            'button',
            {
              type: 'button',
              'aria-label': `Delete ${splitter.name}`,
              onclick: () => void deleteSplitter(splitter),
            },
            'Delete',
          ),
        ),
      ),
    ),
  );
  const select = $('task-splitter');
  const chosen = select.value;
  select.replaceChildren(
    select.options[0],
    ...splitters.map((splitter) => element('option', { value: splitter.id }, `Saved: ${splitter.name}`)),
  );
  if (splitters.some((splitter) => splitter.id === chosen)) select.value = chosen;
  showInlineVoices();
  chooseModeForText();
}

// ---------------------------------------------------------------- tasks

/** Polls the task list while some task is pending or processing. */
let tasksTimer = null;
/** Tasks whose progress the list shows with a bar (the rest show their status only). */
const PROGRESS_TASKS = 5;

/** Pieces generated of a task, from its record (each generated piece has its duration). */
async function piecesDone(id) {
  const detail = await api('GET', `/api/tts/generate/${id}?stream=false`);
  return detail.data.metadata.contents.filter((c) => c.duration !== undefined).length;
}

/** Characters of a task's text the list shows. */
const SNIPPET_CHARS = 200;

/** A voice's name among a task's voices (a deleted voice by its id's start). */
function taskVoiceName(task, voiceId) {
  const voice = task.metadata.voices?.find((v) => v.id === voiceId);
  return voice?.name ?? speakerOf(voiceId);
}

/**
 * What tells tasks apart in the list: the start of their text (the list's entries carry the first
 * contents, each cut short), each piece led by its voice's name when several voices speak. At most
 * SNIPPET_CHARS characters of text, with an ellipsis when there is more.
 */
function taskSnippet(task) {
  const contents = task.metadata.contents ?? [];
  const several = new Set(contents.map((c) => c.voiceId)).size > 1;
  const parts = [];
  let left = SNIPPET_CHARS;
  let more = task.metadata.contentsCount > contents.length;
  for (const content of contents) {
    if (left <= 0) {
      more = true;
      break;
    }
    const name = several ? `${taskVoiceName(task, content.voiceId)}: ` : '';
    const chars = [...`${name}${content.text}`];
    if (chars.length > left || content.textTruncated) more = true;
    const shown = chars.slice(0, left).join('');
    parts.push({ name: shown.slice(0, name.length), text: shown.slice(name.length) });
    // One character more for the space between pieces.
    left -= chars.length + 1;
  }
  const last = parts.at(-1);
  if (more && last) last.text = last.text.trimEnd();
  const nodes = parts.flatMap((part, n) => [
    n > 0 ? ' ' : '',
    part.name === '' ? '' : element('strong', {}, part.name),
    part.text,
  ]);
  return more ? [...nodes, '…'] : nodes;
}

async function loadTasks() {
  clearTimeout(tasksTimer);
  const answer = await api('GET', '/api/tts/generate?limit=20&stream=true');
  const unfinished = answer.data.filter((task) => task.status === 'pending' || task.status === 'processing');
  const progress = new Map(
    await Promise.all(
      unfinished
        .filter((task) => task.status === 'processing')
        .slice(0, PROGRESS_TASKS)
        .map(async (task) => [task.id, await piecesDone(task.id).catch(() => 0)]),
    ),
  );
  $('tasks').replaceChildren(
    ...answer.data.map((task) =>
      element(
        'li',
        { 'data-task': task.id },
        element('p', { class: 'snippet', id: `snippet-${task.id}` }, ...taskSnippet(task)),
        element('strong', {}, task.status),
        ` ${task.metadata.contentsCount} piece(s), ${task.metadata.characters} characters · ${new Date(task.createdAt).toLocaleTimeString()}`,
        progress.has(task.id)
          ? element(
              'div',
              { class: 'task-progress' },
              element('progress', {
                max: String(task.metadata.contentsCount),
                value: String(progress.get(task.id)),
                'aria-label': `Pieces generated of task ${task.id.slice(0, 8)}`,
              }),
              ` ${progress.get(task.id)} of ${task.metadata.contentsCount} pieces generated`,
            )
          : '',
        task.error ? element('div', { class: 'task-error' }, task.error) : '',
        element(
          'div',
          { class: 'actions' },
          element(
            'button',
            {
              type: 'button',
              'aria-describedby': `snippet-${task.id}`,
              onclick: () => void openPlayer(task.id, { play: true }),
            },
            'Play',
          ),
          task.status === 'pending' || task.status === 'processing'
            ? element('button', { type: 'button', onclick: () => void cancelTask(task.id) }, 'Cancel')
            : element('button', { type: 'button', onclick: () => void deleteTask(task.id) }, 'Delete'),
        ),
      ),
    ),
  );
  if (unfinished.length > 0 && key !== null) {
    tasksTimer = setTimeout(() => void loadTasks().catch(showError), 2000);
  }
}

async function cancelTask(id) {
  clearError();
  try {
    await api('POST', `/api/tts/generate/${id}/cancel`);
    await loadTasks();
  } catch (err) {
    showError(err);
  }
}

async function deleteTask(id) {
  clearError();
  try {
    await api('DELETE', `/api/tts/generate/${id}`);
    if (playing.id === id) stopPlayer();
    await loadTasks();
  } catch (err) {
    showError(err);
  }
}

// ---------------------------------------------------------------- player

const audio = $('audio');
/** Pieces listed unfolded under the player; a longer task's list starts folded. */
const OPEN_PIECES = 12;
/** Seconds of speech per character, until a generated piece of the task gives its real pace. */
const SECONDS_PER_CHAR = 0.07;

/**
 * The task the player shows: its polling timer; whether the element plays the live stream (true),
 * waits for the task to start streaming ('waiting') or plays the stored file (false); the task's
 * last detail; whether to start the audio by itself; the nodes of its pieces (timeline segment and
 * list item each) and the piece marked as playing.
 */
let playing = emptyPlayer(null, false);

function emptyPlayer(id, play) {
  return { id, timer: null, live: false, detail: null, play, nodes: null, current: -1 };
}

/** Empties the element: it stops fetching what it played. */
function unloadAudio() {
  audio.pause();
  audio.removeAttribute('src');
  audio.load();
}

function stopPlayer() {
  clearTimeout(playing.timer);
  unloadAudio();
  reader.clear();
  playing = emptyPlayer(null, false);
  $('player').hidden = true;
  $('play-gate').hidden = true;
}

/**
 * Starts the audio. A browser that allows audio only after a user gesture refuses it when none came
 * first (a task opened by a script, a tab that was never clicked): the Play button asks for one.
 */
function startPlayback() {
  audio.play().then(
    () => ($('play-gate').hidden = true),
    (err) => {
      // An AbortError means a newer source replaced this one; its own start follows.
      if (err?.name === 'NotAllowedError') {
        $('play-gate').hidden = false;
        $('player-note').textContent = 'The browser did not start the audio by itself: press Play.';
      }
    },
  );
}

$('play').addEventListener('click', () => {
  $('player-note').textContent = '';
  audio.play().then(() => ($('play-gate').hidden = true), showError);
});
audio.addEventListener('playing', () => ($('play-gate').hidden = true));
audio.addEventListener('error', () => {
  if (playing.id === null || audio.error === null) return;
  $('player-note').textContent =
    `The audio could not be played: ${audio.error.message || `media error ${audio.error.code}`}.`;
});

/**
 * Where each piece lies in the full stream. `start` is known once every piece before it is
 * generated, `duration` once it is; `span` is the share of the timeline it takes: its duration and
 * the silence after it, or, before it is generated, an estimate from its text at the pace of the
 * task's pieces generated so far.
 */
function segments(detail) {
  const contents = detail.metadata.contents;
  const done = contents.filter((c) => c.duration !== undefined);
  const doneChars = done.reduce((n, c) => n + c.text.length, 0);
  const pace = doneChars > 0 ? done.reduce((t, c) => t + c.duration, 0) / doneChars : SECONDS_PER_CHAR;
  let start = 0;
  let known = true;
  return contents.map((content, index) => {
    const duration = content.duration ?? null;
    const length = duration ?? Math.max(0.2, content.text.length * pace);
    const gap = index < contents.length - 1 ? (content.interval ?? 0) : 0;
    const part = { index, content, start: known ? start : null, duration, span: length + gap };
    known &&= duration !== null;
    start += length + gap;
    return part;
  });
}

/** Speaker colours, by the order in which a task's voices first speak. */
function speakerClass(detail, voiceId) {
  const order = [...new Set(detail.metadata.contents.map((c) => c.voiceId))];
  return SPEAKER_CLASSES[order.indexOf(voiceId) % SPEAKER_CLASSES.length];
}

/**
 * The nodes of a task's pieces, made once per task: a timeline segment (its voice's name where it
 * fits, the whole piece on hover) and an item of the accessible list of pieces, which plays from it.
 */
function buildPieces(detail) {
  playing.nodes = detail.metadata.contents.map((content, index) => {
    const name = taskVoiceName(detail, content.voiceId);
    const speaker = `speaker-${speakerClass(detail, content.voiceId)}`;
    const label = element('span', { class: 'label' }, name);
    const segment = element(
      'div',
      {
        class: `segment ${speaker}`,
        title: `${index + 1}. ${name}: ${content.text}`,
        'data-index': String(index),
        onclick: () => seekTo(index),
      },
      label,
    );
    const info = element('span', { class: 'hint' });
    const seek = element(
      'button',
      { type: 'button', 'aria-label': `Play from here: piece ${index + 1}`, onclick: () => seekTo(index) },
      'Play from here',
    );
    const download = element('a', { download: '', hidden: '' }, 'MP3');
    const item = element(
      'li',
      { class: speaker, 'data-index': String(index) },
      element('strong', {}, `${name}: `),
      content.text,
      ' ',
      info,
      element('span', { class: 'actions' }, seek, download),
    );
    return { segment, label, item, info, seek, download };
  });
  $('timeline').replaceChildren(...playing.nodes.map((node) => node.segment));
  $('pieces').replaceChildren(...playing.nodes.map((node) => node.item));
  $('pieces-count').textContent = String(playing.nodes.length);
}

/** Brings the timeline and the list up to date with the task's detail (in place: focus stays). */
function drawTimeline(detail) {
  if (playing.nodes?.length !== detail.metadata.contents.length) buildPieces(detail);
  for (const part of segments(detail)) {
    const node = playing.nodes[part.index];
    // One row whatever the count: each segment's width is its share of the whole.
    node.segment.style.flexGrow = String(part.span);
    node.segment.classList.toggle('pending', part.duration === null);
    node.info.textContent =
      part.duration === null ? '(not generated yet)' : `(${part.duration.toFixed(1)} s)`;
    node.seek.disabled = part.start === null || part.duration === null;
    if (part.content.audio) {
      node.download.href = part.content.audio;
      node.download.hidden = false;
    }
  }
  fitLabels();
  playing.current = null;
  highlight();
}

/** Shows a segment's name only where it fits whole (reads every width first, then writes). */
function fitLabels() {
  const nodes = playing.nodes ?? [];
  for (const node of nodes) node.label.classList.remove('cut');
  const cut = nodes.map((node) => node.label.scrollWidth > node.label.clientWidth);
  nodes.forEach((node, n) => node.label.classList.toggle('cut', cut[n]));
}

new ResizeObserver(() => fitLabels()).observe($('timeline'));

/** The index of the piece (with the silence after it) that `time` falls in, or -1. */
function pieceAt(parts, time) {
  const part = parts.find(
    (p) => p.start !== null && p.duration !== null && time >= p.start && time < p.start + p.span,
  );
  return part?.index ?? -1;
}

/** Marks the piece the player is in, once the audio has started (a player at 0 plays nothing yet). */
function highlight() {
  if (playing.detail === null || playing.nodes === null) return;
  const parts = segments(playing.detail);
  const started = !audio.paused || audio.currentTime > 0;
  const current = started ? pieceAt(parts, audio.currentTime) : -1;
  if (current === playing.current) return;
  playing.current = current;
  playing.nodes.forEach((node, n) => {
    node.segment.classList.toggle('playing', n === current);
    if (n === current) node.item.setAttribute('aria-current', 'true');
    else node.item.removeAttribute('aria-current');
  });
  const part = parts[current];
  $('now-playing').textContent = part
    ? `${part.index + 1} of ${parts.length} · ${taskVoiceName(playing.detail, part.content.voiceId)}: ${part.content.text}`
    : '';
}

audio.addEventListener('timeupdate', highlight);
audio.addEventListener('play', highlight);

/** Whether the element can seek to `time` now (a live stream: within what it has received). */
function canSeek(time) {
  for (let n = 0; n < audio.seekable.length; n++) {
    if (time >= audio.seekable.start(n) && time <= audio.seekable.end(n)) return true;
  }
  return false;
}

/** Plays from the start of piece `index`, once it is generated and the element can reach it. */
function seekTo(index) {
  const part = playing.detail === null ? undefined : segments(playing.detail)[index];
  if (part === undefined) return;
  if (part.start === null || part.duration === null || !canSeek(part.start)) {
    $('player-note').textContent = `Piece ${index + 1} cannot be played yet: it is still being generated.`;
    return;
  }
  $('player-note').textContent = '';
  audio.currentTime = part.start;
  startPlayback();
}

/**
 * Plays from `time` once the element can reach it (a live stream: what it has received); otherwise
 * says that `what` is not generated yet.
 */
function playFrom(time, what) {
  if (!canSeek(time)) {
    $('player-note').textContent = `${what} cannot be played yet: it is still being generated.`;
    return;
  }
  $('player-note').textContent = '';
  audio.currentTime = time;
  startPlayback();
}

/** Subtitles and read-along of the task in the player. */
const reader = createReadAlong({ audio, api, voiceName: taskVoiceName, speakerClass, playFrom });

/**
 * Shows a task in the player and scrolls the player into view; with `play` (a click asked for it)
 * its audio starts as soon as the task streams. While generated, the player plays its live full
 * stream; once finished, its stored MP3.
 */
async function openPlayer(id, { play = false } = {}) {
  clearTimeout(playing.timer);
  unloadAudio();
  playing = emptyPlayer(id, play);
  $('player').hidden = false;
  $('play-gate').hidden = true;
  $('download').hidden = true;
  for (const node of ['player-note', 'now-playing', 'player-status']) $(node).textContent = '';
  $('timeline').replaceChildren();
  $('pieces').replaceChildren();
  reader.clear();
  await refreshPlayer(true);
  // Scrolled once its timeline is drawn: before, the page may be too short to bring it up.
  if (playing.id !== id) return;
  const still = matchMedia('(prefers-reduced-motion: reduce)').matches;
  $('player').scrollIntoView({ block: 'start', behavior: still ? 'auto' : 'smooth' });
}

/** Gives the element its source, and starts it when the player was opened to play. */
function setSource(url) {
  audio.src = url;
  if (playing.play) startPlayback();
}

async function refreshPlayer(first = false) {
  const id = playing.id;
  if (id === null) return;
  let detail;
  try {
    detail = (await api('GET', `/api/tts/generate/${id}?stream=true`)).data;
  } catch (err) {
    showError(err);
    return;
  }
  if (playing.id !== id) return;
  playing.detail = detail;
  $('player-status').textContent =
    `Task ${id.slice(0, 8)}: ${detail.status}${detail.error ? ` — ${detail.error}` : ''}`;
  if (first) $('pieces-box').open = detail.metadata.contents.length <= OPEN_PIECES;
  drawTimeline(detail);
  reader.show(id, detail);
  const finished = detail.metadata.audio;
  if (finished) {
    $('download').href = finished;
    $('download').hidden = false;
  } else $('download').hidden = true;
  // A pending task's stream answers STREAM_NOT_READY: the source waits until the task is taken.
  if (first || playing.live === 'waiting') {
    if (detail.status === 'processing') {
      playing.live = true;
      setSource(detail.streamUrl);
    } else if (detail.status === 'generated' && finished) {
      playing.live = false;
      setSource(finished);
    } else if (detail.status === 'pending') playing.live = 'waiting';
  }
  if (detail.status === 'pending' || detail.status === 'processing') {
    // A pending task is asked about often, so its audio starts the moment it is taken.
    playing.timer = setTimeout(() => void refreshPlayer(), detail.status === 'pending' ? 200 : 1000);
  } else {
    void loadTasks();
  }
}

/**
 * The live stream ended (the task is generated): reload the element with the stored MP3 so it knows
 * the whole duration and seeks anywhere, at the position it had.
 */
audio.addEventListener('ended', () => void reloadFinished());

async function reloadFinished() {
  if (!playing.live || playing.id === null) return;
  const position = audio.currentTime;
  for (let tries = 0; tries < 20; tries++) {
    const detail = (await api('GET', `/api/tts/generate/${playing.id}?stream=true`)).data;
    if (detail.metadata.audio) {
      playing.live = false;
      playing.detail = detail;
      audio.src = detail.metadata.audio;
      audio.addEventListener('loadedmetadata', () => (audio.currentTime = position), { once: true });
      audio.load();
      drawTimeline(detail);
      document.body.dataset.reloaded = 'true';
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

// ---------------------------------------------------------------- start

// A first-run link pasted into a tab that already shows the console changes only the fragment, which
// loads nothing: the key is taken from the fragment here as well, and the tab signs in with it.
window.addEventListener('hashchange', () => {
  const previous = key;
  if (!takeKeyFromUrl()) return;
  stopPlayer();
  clearTimeout(tasksTimer);
  if (key !== previous) {
    // Another account: nothing of the previous one's splitter editing carries over.
    editingSplitter = null;
    splitterChosenByUser = false;
    $('splitter-name').value = '';
    $('splitter-config').value = '';
  }
  void signIn();
});

takeKeyFromUrl();
chooseModeForText();
if (key) void signIn();
else showSignIn();
