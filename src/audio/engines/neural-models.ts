/**
 * The neural models of MODELS_DIR: each folder in a layout sherpa-onnx runs is one model. A folder
 * is read here without sherpa-onnx (which ends the process on a file it cannot read): its layout
 * from its files, the ONNX model's metadata from the file's top-level protobuf fields, and the
 * tokens file's lines. A folder that fails is kept with the reason, for the catalogue.
 */
import { open, readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { NeuralModelConfig } from './neural-protocol.js';

/** The model families this service recognises by their files. */
export type NeuralFamily = 'vits' | 'kokoro' | 'kitten' | 'matcha' | 'zipvoice' | 'pocket';

/** A model folder that can be loaded. */
export interface NeuralModel {
  /** The folder's name: the engine id of its voices. */
  name: string;
  dir: string;
  family: NeuralFamily;
  /** sherpa-onnx's `model` config of the folder. */
  config: NeuralModelConfig;
  sampleRate: number;
  /** Speaker names by speaker id (the speaker id as a string when the model names none). */
  speakers: string[];
  /**
   * It speaks like a reference clip given with each call (ZipVoice, Pocket TTS) instead of with speakers of its
   * own: its voices are the ones created with a clip, and `speakers` is empty.
   */
  reference: boolean;
  /** Language tags it speaks, best first (empty when unknown). */
  languages: string[];
  /** Estimated memory of one loaded instance: the size of its model files. */
  bytes: number;
  /** Changes when any of its files changes: a replaced folder is probed and loaded afresh. */
  stamp: string;
}

/** A folder of MODELS_DIR, usable or with the reason it is not. */
export type ScannedModel =
  ({ available: true } & NeuralModel) | { available: false; name: string; dir: string; reason: string };

const FAMILY_TITLES: Readonly<Record<NeuralFamily, string>> = {
  vits: 'VITS',
  kokoro: 'Kokoro',
  kitten: 'Kitten',
  matcha: 'Matcha',
  zipvoice: 'ZipVoice',
  pocket: 'Pocket TTS',
};

/** Folder names that can be engine ids (and voice specs' engine part). */
export const MODEL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** Scans `modelsDir`: one entry per folder, by name; none when the directory does not exist. */
export async function scanModels(modelsDir: string): Promise<ScannedModel[]> {
  let names: string[];
  try {
    const entries = await listEntries(modelsDir);
    names = entries
      .filter((e) => e.kind === 'dir' && !e.name.startsWith('.'))
      .map((e) => e.name)
      .sort();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  return Promise.all(names.map((name) => readModel(join(modelsDir, name), name)));
}

/**
 * The files and folders of `dir`, a symbolic link counted as what it points to: operators link a
 * model folder into MODELS_DIR, or one espeak-ng-data/ into several model folders (sherpa-onnx
 * opens the paths, links included). A dangling link is left out, as a missing file.
 */
async function listEntries(dir: string): Promise<{ name: string; kind: 'file' | 'dir' }[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const out: { name: string; kind: 'file' | 'dir' }[] = [];
  for (const e of entries) {
    let target: { isFile(): boolean; isDirectory(): boolean } = e;
    if (e.isSymbolicLink()) {
      try {
        target = await stat(join(dir, e.name));
      } catch {
        continue;
      }
    }
    if (target.isFile()) out.push({ name: e.name, kind: 'file' });
    else if (target.isDirectory()) out.push({ name: e.name, kind: 'dir' });
  }
  return out;
}

/** Reads one model folder (the same check at start, on a rescan and for `models add`). */
export async function readModel(dir: string, name: string): Promise<ScannedModel> {
  const fail = (reason: string): ScannedModel => ({ available: false, name, dir, reason });
  if (!MODEL_NAME.test(name)) {
    return fail('its folder name must be 1–64 letters, digits, "-" or "_" (it is the engine id)');
  }
  try {
    const model = await inspect(dir, name);
    return typeof model === 'string' ? fail(model) : { available: true, ...model };
  } catch (err) {
    return fail(`could not be read (${err instanceof Error ? err.message : String(err)})`);
  }
}

/** The model of `dir`, or why it is not one. */
async function inspect(dir: string, name: string): Promise<NeuralModel | string> {
  const entries = await listEntries(dir);
  const files = new Set(entries.filter((e) => e.kind === 'file').map((e) => e.name));
  const dirs = new Set(entries.filter((e) => e.kind === 'dir').map((e) => e.name));
  const onnx = [...files].filter((f) => f.endsWith('.onnx')).sort();
  if (onnx.length === 0) return 'no .onnx model file';
  // Pocket TTS tokenizes with a SentencePiece vocabulary instead of tokens.txt.
  if (
    ['lm_main', 'lm_flow', 'text_conditioner'].some((part) => pickPart(onnx, part) !== undefined) ||
    files.has('token_scores.json')
  ) {
    return inspectPocket(dir, name, onnx, files);
  }
  if (!files.has('tokens.txt')) return 'no tokens.txt';
  const tokensProblem = checkTokens(await readFile(join(dir, 'tokens.txt'), 'utf8'));
  if (tokensProblem !== undefined) return `tokens.txt: ${tokensProblem}`;
  const dataDir = dirs.has('espeak-ng-data') ? join(dir, 'espeak-ng-data') : '';
  const lexicons = [...files].filter((f) => /^lexicon.*\.txt$/.test(f)).sort();
  const lexicon = lexicons.map((f) => join(dir, f)).join(',');
  const encoder = pickPart(onnx, 'encoder');
  if (encoder !== undefined || onnx.some((o) => o.includes('zipvoice'))) {
    return inspectZipvoice(dir, name, onnx, encoder, dataDir, lexicon);
  }

  const vocoder = onnx.find((f) => /vocos|hifigan|vocoder/i.test(f));
  if (vocoder !== undefined) {
    const acoustic = onnx.filter((f) => f !== vocoder);
    const main = pickModel(acoustic);
    if (main === undefined) return `several acoustic models (${acoustic.join(', ')}): keep one`;
    if (dataDir === '' && lexicon === '') return 'a Matcha model needs espeak-ng-data/ or a lexicon';
    const meta = await onnxMetadata(join(dir, main));
    // sherpa-onnx phonemizes an espeak Matcha model (the English ones) with espeak-ng alone.
    if (meta.has_espeak === '1' && dataDir === '') return 'this Matcha model needs espeak-ng-data/';
    const common = await commonOf(dir, name, meta, [main, vocoder], 'matcha');
    if (typeof common === 'string') return common;
    return {
      ...common,
      config: {
        matcha: {
          acousticModel: join(dir, main),
          vocoder: join(dir, vocoder),
          tokens: join(dir, 'tokens.txt'),
          dataDir,
          lexicon,
        },
      },
    };
  }

  const main = pickModel(onnx);
  if (main === undefined) return `several .onnx files (${onnx.join(', ')}): keep one, or name one model.onnx`;
  const meta = await onnxMetadata(join(dir, main));
  // The exports' model_type names the family when a file that tells it apart is missing: without
  // it a Kokoro or Matcha folder would pass as VITS and fail only when sherpa-onnx loads it.
  const modelType = (meta.model_type ?? '').toLowerCase();
  if (modelType.includes('matcha')) {
    return 'a Matcha model needs its vocoder in the folder (vocos-*.onnx or hifigan*.onnx, published apart)';
  }
  if (files.has('voices.bin') || modelType === 'kokoro' || modelType.includes('kitten')) {
    const family: NeuralFamily = modelType.includes('kitten') ? 'kitten' : 'kokoro';
    const title = FAMILY_TITLES[family];
    if (!files.has('voices.bin')) return `a ${title} model needs voices.bin (its speakers' styles)`;
    if (dataDir === '') return `a ${title} model needs espeak-ng-data/`;
    // sherpa-onnx ends its process on a multi-lingual Kokoro (version 2 and later) given no lexicon.
    if (family === 'kokoro' && Number(meta.version ?? '1') >= 2 && lexicon === '') {
      return 'a multi-lingual Kokoro model (version 2 and later) needs its lexicon*.txt files';
    }
    const common = await commonOf(dir, name, meta, [main, 'voices.bin'], family);
    if (typeof common === 'string') return common;
    const paths = {
      model: join(dir, main),
      voices: join(dir, 'voices.bin'),
      tokens: join(dir, 'tokens.txt'),
      dataDir,
    };
    return {
      ...common,
      config: family === 'kitten' ? { kitten: paths } : { kokoro: { ...paths, lexicon } },
    };
  }

  // VITS (Piper, Coqui, icefall, MeloTTS): sherpa-onnx reads these keys without a default.
  for (const key of ['sample_rate', 'n_speakers', 'language', 'comment']) {
    if (meta[key] === undefined)
      return `${main}: no "${key}" in its metadata (not a sherpa-onnx VITS export)`;
  }
  if (meta.frontend !== 'characters' && dataDir === '' && lexicon === '') {
    return 'a VITS model needs espeak-ng-data/ (Piper) or lexicon.txt';
  }
  const common = await commonOf(dir, name, meta, [main], 'vits');
  if (typeof common === 'string') return common;
  const dictDir = dirs.has('dict') ? join(dir, 'dict') : '';
  return {
    ...common,
    config: {
      vits: { model: join(dir, main), tokens: join(dir, 'tokens.txt'), dataDir, lexicon, dictDir },
    },
  };
}

/**
 * A ZipVoice folder (sherpa-onnx's published layout): encoder*.onnx and decoder*.onnx, tokens.txt,
 * lexicon.txt and espeak-ng-data/, and the Vocos vocoder published apart (vocos_24khz.onnx) put in
 * the folder. sherpa-onnx ends its process when the lexicon or espeak-ng-data/ is missing.
 */
async function inspectZipvoice(
  dir: string,
  name: string,
  onnx: readonly string[],
  encoder: string | undefined,
  dataDir: string,
  lexicon: string,
): Promise<NeuralModel | string> {
  const decoder = pickPart(onnx, 'decoder');
  if (encoder === undefined || decoder === undefined) {
    return 'a ZipVoice model needs encoder.onnx and decoder.onnx (or their int8 twins)';
  }
  const vocoder = onnx.find((f) => /vocos/i.test(f));
  if (vocoder === undefined) {
    return 'a ZipVoice model needs its Vocos vocoder in the folder (vocos_24khz.onnx, published apart)';
  }
  if (dataDir === '') return 'a ZipVoice model needs espeak-ng-data/';
  if (lexicon === '') return 'a ZipVoice model needs its lexicon.txt';
  // The rate and the mel layout are the decoder's metadata; sherpa-onnx's defaults when absent.
  const meta = { sample_rate: '24000', ...(await onnxMetadata(join(dir, decoder))) };
  const encoderMeta = await onnxMetadata(join(dir, encoder));
  const common = await commonOf(
    dir,
    name,
    { ...meta, language: encoderMeta.language ?? 'Chinese,English', voice: encoderMeta.voice ?? '' },
    [encoder, decoder, vocoder],
    'zipvoice',
  );
  if (typeof common === 'string') return common;
  return {
    ...common,
    speakers: [],
    reference: true,
    config: {
      zipvoice: {
        encoder: join(dir, encoder),
        decoder: join(dir, decoder),
        vocoder: join(dir, vocoder),
        tokens: join(dir, 'tokens.txt'),
        dataDir,
        lexicon,
      },
    },
  };
}

/** The graphs of a Pocket TTS folder, each `<part>.onnx` or its int8 twin. */
const POCKET_PARTS = ['lm_main', 'lm_flow', 'encoder', 'decoder', 'text_conditioner'] as const;

/**
 * A Pocket TTS folder (sherpa-onnx's published layout): lm_main, lm_flow, encoder, decoder and
 * text_conditioner graphs and the SentencePiece vocabulary as vocab.json and token_scores.json.
 * It speaks English at 24 kHz (sherpa-onnx fixes both) like the reference clip of each call, and
 * needs no transcript of the clip.
 */
async function inspectPocket(
  dir: string,
  name: string,
  onnx: readonly string[],
  files: ReadonlySet<string>,
): Promise<NeuralModel | string> {
  const lmMain = pickPart(onnx, 'lm_main');
  const lmFlow = pickPart(onnx, 'lm_flow');
  const encoder = pickPart(onnx, 'encoder');
  const decoder = pickPart(onnx, 'decoder');
  const textConditioner = pickPart(onnx, 'text_conditioner');
  if (
    lmMain === undefined ||
    lmFlow === undefined ||
    encoder === undefined ||
    decoder === undefined ||
    textConditioner === undefined
  ) {
    const missing = POCKET_PARTS.filter((part) => pickPart(onnx, part) === undefined);
    return `a Pocket TTS model needs ${missing.map((p) => `${p}.onnx`).join(', ')} (or their int8 twins)`;
  }
  const json = ['vocab.json', 'token_scores.json'].filter((f) => !files.has(f));
  if (json.length > 0) return `a Pocket TTS model needs its tokenizer's ${json.join(' and ')}`;
  const common = await commonOf(
    dir,
    name,
    { sample_rate: '24000', language: 'English', voice: 'en-us' },
    [lmMain, lmFlow, encoder, decoder, textConditioner],
    'pocket',
    ['vocab.json', 'token_scores.json'],
  );
  if (typeof common === 'string') return common;
  return {
    ...common,
    speakers: [],
    reference: true,
    config: {
      pocket: {
        lmMain: join(dir, lmMain),
        lmFlow: join(dir, lmFlow),
        encoder: join(dir, encoder),
        decoder: join(dir, decoder),
        textConditioner: join(dir, textConditioner),
        vocabJson: join(dir, 'vocab.json'),
        tokenScoresJson: join(dir, 'token_scores.json'),
      },
    },
  };
}

/** `<part>.onnx` when present, else the only `<part>*.onnx` file (its int8 twin). */
function pickPart(onnx: readonly string[], part: string): string | undefined {
  if (onnx.includes(`${part}.onnx`)) return `${part}.onnx`;
  const named = onnx.filter((f) => f.startsWith(part));
  return named.length === 1 ? named[0] : undefined;
}

/** The fields every family shares: rate, speakers, languages, size and stamp. */
async function commonOf(
  dir: string,
  name: string,
  meta: Record<string, string>,
  modelFiles: readonly string[],
  family: NeuralFamily,
  tokenFiles: readonly string[] = ['tokens.txt'],
): Promise<Omit<NeuralModel, 'config'> | string> {
  const sampleRate = Number(meta.sample_rate);
  if (!Number.isInteger(sampleRate) || sampleRate < 8000 || sampleRate > 192_000) {
    return `metadata sample_rate "${meta.sample_rate ?? ''}" is not a sample rate`;
  }
  const count = meta.n_speakers === undefined ? 1 : Number(meta.n_speakers);
  if (!Number.isInteger(count) || count < 0 || count > 100_000) {
    return `metadata n_speakers "${meta.n_speakers ?? ''}" is not a speaker count`;
  }
  const named = (meta.speaker_names ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  const speakers =
    named.length === Math.max(count, 1)
      ? named
      : Array.from({ length: Math.max(count, 1) }, (_, i) => String(i));
  let bytes = 0;
  const stamps: string[] = [];
  for (const f of [...modelFiles, ...tokenFiles]) {
    const s = await stat(join(dir, f));
    bytes += s.size;
    stamps.push(`${f}:${s.size}:${s.mtimeMs}`);
  }
  return {
    name,
    dir,
    family,
    sampleRate,
    speakers,
    reference: false,
    languages: languagesOf(meta),
    bytes,
    stamp: stamps.join('|'),
  };
}

/** `model.onnx` when present, else the only .onnx file (an int8 twin aside). */
function pickModel(onnx: readonly string[]): string | undefined {
  if (onnx.includes('model.onnx')) return 'model.onnx';
  if (onnx.length === 1) return onnx[0];
  const full = onnx.filter((f) => !f.includes('int8'));
  return full.length === 1 ? full[0] : undefined;
}

/** Language names sherpa-onnx's exports write, as tags. */
const LANGUAGE_TAGS: Readonly<Record<string, string>> = {
  english: 'en',
  german: 'de',
  french: 'fr',
  spanish: 'es',
  italian: 'it',
  portuguese: 'pt',
  dutch: 'nl',
  russian: 'ru',
  polish: 'pl',
  ukrainian: 'uk',
  chinese: 'zh',
  mandarin: 'zh',
  japanese: 'ja',
  korean: 'ko',
  arabic: 'ar',
  hindi: 'hi',
  turkish: 'tr',
  vietnamese: 'vi',
  czech: 'cs',
  swedish: 'sv',
  finnish: 'fi',
  danish: 'da',
  norwegian: 'no',
  greek: 'el',
  hungarian: 'hu',
  persian: 'fa',
};

/** The tags of a model's metadata: its espeak-ng voice (Piper: `en-us`) first, then its language names. */
function languagesOf(meta: Record<string, string>): string[] {
  const tags: string[] = [];
  const voice = (meta.voice ?? '').trim().toLowerCase();
  if (/^[a-z]{2,3}(-[a-z0-9]{2,8})*$/.test(voice)) tags.push(voice);
  for (const part of (meta.language ?? '').split(/[,+/]/)) {
    const word = part.trim().toLowerCase();
    const tag = LANGUAGE_TAGS[word] ?? (/^[a-z]{2,3}(-[a-z0-9]{2,8})*$/.test(word) ? word : undefined);
    if (tag !== undefined && !tags.includes(tag)) tags.push(tag);
  }
  const primary = tags[0]?.split('-')[0];
  if (primary !== undefined && !tags.includes(primary)) tags.push(primary);
  return tags;
}

/** What sherpa-onnx's token readers accept: `<symbol> <id>` or `<id>` (the space) a line. */
function checkTokens(text: string): string | undefined {
  const lines = text.split('\n').filter((l) => l.trim().length > 0);
  if (lines.length === 0) return 'empty';
  for (const [i, line] of lines.entries()) {
    const parts = line.replace(/\r$/, '').trim().split(/\s+/);
    const id = parts.at(-1) ?? '';
    if (parts.length > 2 || !/^\d+$/.test(id)) return `line ${i + 1} is not "<symbol> <id>"`;
  }
  return undefined;
}

/** Protobuf wire types. */
const VARINT = 0;
const FIXED64 = 1;
const LENGTH = 2;
const FIXED32 = 5;
/** ModelProto's fields read here: its graph and its metadata_props. */
const GRAPH_FIELD = 7;
const METADATA_FIELD = 14;
/** Largest metadata entry read (Kokoro's speaker lists are a few KiB). */
const MAX_METADATA_ENTRY = 1 << 20;

/**
 * The metadata of an ONNX model file, read from its top-level protobuf fields without loading the
 * graph (skipped by its length). Throws on a file that is not a whole ONNX model: truncated, not
 * protobuf, or without a graph.
 */
export async function onnxMetadata(path: string): Promise<Record<string, string>> {
  const file = await open(path, 'r');
  try {
    const size = (await file.stat()).size;
    const head = Buffer.alloc(20);
    let at = 0;
    let graph = false;
    const meta: Record<string, string> = {};
    while (at < size) {
      const { bytesRead } = await file.read(head, 0, head.length, at);
      const reader = new VarintReader(head.subarray(0, bytesRead));
      const tag = reader.varint();
      const field = Math.floor(tag / 8);
      const wire = tag % 8;
      let length: number;
      if (wire === VARINT) {
        reader.varint();
        length = 0;
      } else if (wire === FIXED64) length = 8;
      else if (wire === FIXED32) length = 4;
      else if (wire === LENGTH) length = reader.varint();
      else throw new Error(`${path} is not an ONNX model (wire type ${wire})`);
      const start = at + reader.at;
      if (field === 0 || start + length > size) throw new Error(`${path} is truncated or not an ONNX model`);
      if (field === GRAPH_FIELD && wire === LENGTH) graph = true;
      if (field === METADATA_FIELD && wire === LENGTH && length <= MAX_METADATA_ENTRY) {
        const entry = Buffer.alloc(length);
        await file.read(entry, 0, length, start);
        const [key, value] = stringPair(entry);
        if (key !== undefined) meta[key] = value ?? '';
      }
      at = start + length;
    }
    if (!graph) throw new Error(`${path} has no graph (not an ONNX model)`);
    return meta;
  } finally {
    await file.close();
  }
}

/** Fields 1 and 2 (key, value) of a StringStringEntryProto. */
function stringPair(bytes: Buffer): [string | undefined, string | undefined] {
  const reader = new VarintReader(bytes);
  const out: [string | undefined, string | undefined] = [undefined, undefined];
  while (reader.at < bytes.length) {
    const tag = reader.varint();
    if (tag % 8 !== LENGTH) throw new Error('malformed metadata entry');
    const length = reader.varint();
    if (reader.at + length > bytes.length) throw new Error('malformed metadata entry');
    const text = bytes.toString('utf8', reader.at, reader.at + length);
    const field = Math.floor(tag / 8);
    if (field === 1) out[0] = text;
    else if (field === 2) out[1] = text;
    reader.at += length;
  }
  return out;
}

class VarintReader {
  at = 0;
  constructor(private readonly bytes: Uint8Array) {}
  varint(): number {
    let value = 0;
    for (let shift = 0; shift < 64; shift += 7) {
      const byte = this.bytes[this.at++];
      if (byte === undefined) throw new Error('truncated protobuf');
      value += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return value;
    }
    throw new Error('malformed protobuf varint');
  }
}
