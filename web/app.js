// voicegen web console: plain ES module, no build step, no CDN. Talks to the service's own API
// with the API key kept in this tab's session storage (never localStorage, never a cookie).
const KEY_STORAGE = 'voicegen.key';
const $ = (id) => document.getElementById(id);

let key = sessionStorage.getItem(KEY_STORAGE);
let voices = [];
/** The task the player shows, and its polling timer. */
let playing = { id: null, timer: null, live: false, detail: null };

/** Reads `#key=` (the first-run link), keeps it for this tab and removes it from the address bar. */
function takeKeyFromUrl() {
  const match = /(?:^#|&)key=(sk-[a-z0-9]{32})/.exec(location.hash);
  if (match) {
    key = match[1];
    sessionStorage.setItem(KEY_STORAGE, key);
    history.replaceState(null, '', location.pathname + location.search);
  }
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
    await Promise.all([loadVoices(), loadTasks(), loadSplitters(), loadEngines()]);
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

/** Fills the engine choice from the catalogue; unavailable engines are shown with their reason. */
async function loadEngines() {
  const answer = await api('GET', '/api/engines');
  engines = new Map(answer.data.map((engine) => [engine.id, engine]));
  const select = $('voice-engine');
  const chosen = select.value;
  select.replaceChildren(
    ...answer.data.map((engine) =>
      element(
        'option',
        { value: engine.id, disabled: engine.available ? undefined : '', title: engine.reason },
        engine.available ? engine.id : `${engine.id} (unavailable: ${engine.reason})`,
      ),
    ),
  );
  const usable = answer.data.find((engine) => engine.available);
  select.value = engines.get(chosen)?.available ? chosen : (usable?.id ?? '');
  await showEngine();
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
        ` ${voice.engine?.voice ?? ''}${voice.engine?.variant ? `+${voice.engine.variant}` : ''} · ${voice.version}`,
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

for (const radio of document.querySelectorAll('input[name="mode"]')) {
  radio.addEventListener('change', () => {
    $('dialogue-voices').hidden = mode() !== 'dialogue';
    $('plain-voice').hidden = mode() === 'dialogue';
  });
}

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

$('task-splitter').addEventListener('change', () => {
  for (const row of document.querySelectorAll('.inline-voice')) row.hidden = $('task-splitter').value !== '';
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
    await loadTasks();
    await openPlayer(answer.data.id);
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
          element('button', { type: 'button', onclick: () => void openPlayer(task.id) }, 'Play'),
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

function stopPlayer() {
  clearTimeout(playing.timer);
  audio.pause();
  audio.removeAttribute('src');
  playing = { id: null, timer: null, live: false, detail: null };
  $('player').hidden = true;
}

/** Start times of the pieces in the full stream: each piece, then its interval of silence. */
function segments(detail) {
  let start = 0;
  return detail.metadata.contents.map((content) => {
    const segment = { content, start, duration: content.duration ?? null };
    start += (content.duration ?? 0) + (content.interval ?? 0);
    return segment;
  });
}

/** `a` or `b`: the colour of a voice in this task (voices alternate in their order of first use). */
function speakerClass(detail, voiceId) {
  const order = [...new Set(detail.metadata.contents.map((c) => c.voiceId))];
  return order.indexOf(voiceId) % 2 === 0 ? 'a' : 'b';
}

function drawTimeline(detail) {
  const parts = segments(detail);
  const known = parts.reduce((sum, p) => sum + (p.duration ?? 0), 0) || 1;
  $('timeline').replaceChildren(
    ...parts.map((part, n) =>
      element(
        'li',
        {
          'data-index': String(n),
          class: `segment speaker-${speakerClass(detail, part.content.voiceId)}${part.duration === null ? ' pending' : ''}`,
          style: { flexGrow: String(part.duration === null ? 0.5 : (part.duration / known) * 10) },
          title: part.content.text,
        },
        speakerOf(part.content.voiceId),
      ),
    ),
  );
  $('pieces').replaceChildren(
    ...parts.map((part) =>
      element(
        'li',
        { class: `speaker-${speakerClass(detail, part.content.voiceId)}` },
        element('strong', {}, `${speakerOf(part.content.voiceId)}: `),
        part.content.text,
        part.content.audio
          ? element('audio', { controls: '', preload: 'none', src: part.content.audio })
          : '',
      ),
    ),
  );
  highlight();
}

/** Marks the piece the player is in. */
function highlight() {
  if (playing.detail === null) return;
  const now = audio.currentTime;
  const parts = segments(playing.detail);
  let current = -1;
  parts.forEach((part, n) => {
    if (
      part.duration !== null &&
      now >= part.start &&
      now < part.start + part.duration + (part.content.interval ?? 0)
    )
      current = n;
  });
  for (const node of $('timeline').children) {
    const on = Number(node.dataset.index) === current;
    node.classList.toggle('playing', on);
    if (on) node.setAttribute('aria-current', 'true');
    else node.removeAttribute('aria-current');
  }
}

audio.addEventListener('timeupdate', highlight);

/** Shows a task: its live full stream while it is generated, its stored MP3 once it is finished. */
async function openPlayer(id) {
  clearTimeout(playing.timer);
  playing = { id, timer: null, live: false, detail: null };
  $('player').hidden = false;
  await refreshPlayer(true);
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
  drawTimeline(detail);
  const finished = detail.metadata.audio;
  if (finished) {
    $('download').href = finished;
    $('download').hidden = false;
  } else $('download').hidden = true;
  if (first) {
    if (detail.status === 'generated' && finished) {
      audio.src = finished;
    } else if (detail.status === 'pending' || detail.status === 'processing') {
      playing.live = true;
      // The stream answers STREAM_NOT_READY while the task is pending: wait for processing.
      if (detail.status === 'processing') audio.src = detail.streamUrl;
      else playing.live = 'waiting';
    }
  } else if (playing.live === 'waiting' && detail.status === 'processing') {
    playing.live = true;
    audio.src = detail.streamUrl;
  } else if (playing.live === 'waiting' && detail.status === 'generated' && finished) {
    // Finished before it was seen processing: the stored file at once.
    playing.live = false;
    audio.src = finished;
  }
  if (detail.status === 'pending' || detail.status === 'processing') {
    playing.timer = setTimeout(() => void refreshPlayer(), 1000);
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

takeKeyFromUrl();
if (key) void signIn();
else showSignIn();
