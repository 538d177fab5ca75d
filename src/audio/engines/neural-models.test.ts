// Reading model folders of each family without sherpa-onnx (the tests' own tiny Kokoro, Kitten,
// Matcha and ZipVoice models): the family and sherpa-onnx config each layout gets, links followed, and a folder
// missing what its family needs reported with that reason instead of passing as another family.
import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import {
  makeTinyModel,
  makeTinyPocket,
  makeTinyZipvoice,
  TINY_FAMILIES,
} from '../../../test/helpers/tiny-models.js';
import { readModel, scanModels, type ScannedModel } from './neural-models.js';

const work = mkdtempSync(join(tmpdir(), 'voicegen-families-'));
after(() => rmSync(work, { recursive: true, force: true }));

const reasonOf = (m: ScannedModel): string => (m.available ? '(available)' : m.reason);

describe('neural model folders of each family', () => {
  it('reads each family with its speakers, languages, rate and sherpa-onnx config', async () => {
    const dir = join(work, 'all');
    for (const family of TINY_FAMILIES) makeTinyModel(dir, family);
    const scanned = await scanModels(dir);
    assert.deepEqual(
      scanned.map((m) => [m.name, m.available && m.family]),
      [
        ['kitten', 'kitten'],
        ['kokoro', 'kokoro'],
        ['matcha', 'matcha'],
      ],
    );
    for (const m of scanned) {
      assert.ok(m.available, reasonOf(m));
      assert.deepEqual(m.speakers, ['tone_0', 'tone_1']);
      assert.deepEqual(m.languages, ['en-us', 'en']);
      assert.equal(m.sampleRate, m.family === 'matcha' ? 22_050 : 24_000);
    }
    const [kitten, kokoro, matcha] = scanned;
    const data = (name: string) => join(dir, name, 'espeak-ng-data');
    assert.deepEqual(kokoro?.available && kokoro.config, {
      kokoro: {
        model: join(dir, 'kokoro', 'model.onnx'),
        voices: join(dir, 'kokoro', 'voices.bin'),
        tokens: join(dir, 'kokoro', 'tokens.txt'),
        dataDir: data('kokoro'),
        lexicon: '',
      },
    });
    assert.deepEqual(kitten?.available && kitten.config, {
      kitten: {
        model: join(dir, 'kitten', 'model.onnx'),
        voices: join(dir, 'kitten', 'voices.bin'),
        tokens: join(dir, 'kitten', 'tokens.txt'),
        dataDir: data('kitten'),
      },
    });
    assert.deepEqual(matcha?.available && matcha.config, {
      matcha: {
        acousticModel: join(dir, 'matcha', 'model-steps-3.onnx'),
        vocoder: join(dir, 'matcha', 'vocos-22khz-univ.onnx'),
        tokens: join(dir, 'matcha', 'tokens.txt'),
        dataDir: data('matcha'),
        lexicon: '',
      },
    });
  });

  it('follows links: a model folder linked into MODELS_DIR, a shared espeak-ng-data/ linked into it', async () => {
    const store = join(work, 'store');
    const models = join(work, 'linked');
    makeTinyModel(store, 'kokoro', 'kokoro-en');
    // The tiny models link Debian's espeak-ng data, as operators share one copy between models.
    assert.equal(reasonOf(await readModel(join(store, 'kokoro-en'), 'kokoro-en')), '(available)');
    makeTinyModel(models, 'kitten');
    symlinkSync(join(store, 'kokoro-en'), join(models, 'kokoro-en'));
    // A dangling link is no folder.
    symlinkSync(join(store, 'gone'), join(models, 'gone'));
    const scanned = await scanModels(models);
    assert.deepEqual(
      scanned.map((m) => [m.name, reasonOf(m)]),
      [
        ['kitten', '(available)'],
        ['kokoro-en', '(available)'],
      ],
    );
  });

  it('reports a folder missing what its family needs, by its model_type, not as a VITS model', async () => {
    const dir = join(work, 'broken');
    unlinkSync(join(makeTinyModel(dir, 'kokoro', 'kokoro-no-voices'), 'voices.bin'));
    unlinkSync(join(makeTinyModel(dir, 'kitten', 'kitten-no-voices'), 'voices.bin'));
    unlinkSync(join(makeTinyModel(dir, 'matcha', 'matcha-no-vocoder'), 'vocos-22khz-univ.onnx'));
    unlinkSync(join(makeTinyModel(dir, 'kokoro', 'kokoro-no-espeak'), 'espeak-ng-data'));
    unlinkSync(join(makeTinyModel(dir, 'kitten', 'kitten-no-espeak'), 'espeak-ng-data'));
    const matchaNoEspeak = makeTinyModel(dir, 'matcha', 'matcha-no-espeak');
    unlinkSync(join(matchaNoEspeak, 'espeak-ng-data'));
    // A lexicon alone does not phonemize an espeak Matcha model.
    writeFileSync(join(matchaNoEspeak, 'lexicon.txt'), 'hello h e l o\n');
    makeTinyModel(dir, 'kokoro', 'kokoro-v2', 2, { version: '2' });
    const scanned = new Map((await scanModels(dir)).map((m) => [m.name, reasonOf(m)]));
    assert.deepEqual(Object.fromEntries(scanned), {
      'kitten-no-espeak': 'a Kitten model needs espeak-ng-data/',
      'kitten-no-voices': "a Kitten model needs voices.bin (its speakers' styles)",
      'kokoro-no-espeak': 'a Kokoro model needs espeak-ng-data/',
      'kokoro-no-voices': "a Kokoro model needs voices.bin (its speakers' styles)",
      'kokoro-v2': 'a multi-lingual Kokoro model (version 2 and later) needs its lexicon*.txt files',
      'matcha-no-espeak': 'this Matcha model needs espeak-ng-data/',
      'matcha-no-vocoder':
        'a Matcha model needs its vocoder in the folder (vocos-*.onnx or hifigan*.onnx, published apart)',
    });
    // The multi-lingual Kokoro's lexicons are passed to sherpa-onnx, every one.
    writeFileSync(join(dir, 'kokoro-v2', 'lexicon-us-en.txt'), 'hello həlˈoʊ\n');
    writeFileSync(join(dir, 'kokoro-v2', 'lexicon-zh.txt'), '你 n i3\n');
    const v2 = await readModel(join(dir, 'kokoro-v2'), 'kokoro-v2');
    assert.ok(v2.available, reasonOf(v2));
    assert.ok('kokoro' in v2.config);
    assert.equal(
      v2.config.kokoro.lexicon,
      [join(dir, 'kokoro-v2', 'lexicon-us-en.txt'), join(dir, 'kokoro-v2', 'lexicon-zh.txt')].join(','),
    );
  });

  it('reads a ZipVoice folder as a reference-audio model without speakers; int8 twins serve', async () => {
    const dir = join(work, 'zipvoice');
    const plain = makeTinyZipvoice(dir, 'zipvoice');
    const read = await readModel(plain, 'zipvoice');
    assert.ok(read.available, reasonOf(read));
    assert.deepEqual(
      [read.family, read.reference, read.speakers, read.sampleRate, read.languages],
      ['zipvoice', true, [], 24_000, ['en-us', 'en']],
    );
    assert.deepEqual(read.config, {
      zipvoice: {
        encoder: join(plain, 'encoder.onnx'),
        decoder: join(plain, 'decoder.onnx'),
        vocoder: join(plain, 'vocos_24khz.onnx'),
        tokens: join(plain, 'tokens.txt'),
        dataDir: join(plain, 'espeak-ng-data'),
        lexicon: join(plain, 'lexicon.txt'),
      },
    });
    // The published int8 archive's names.
    const int8 = makeTinyZipvoice(dir, 'zipvoice-int8');
    renameSync(join(int8, 'encoder.onnx'), join(int8, 'encoder.int8.onnx'));
    renameSync(join(int8, 'decoder.onnx'), join(int8, 'decoder.int8.onnx'));
    const twin = await readModel(int8, 'zipvoice-int8');
    assert.ok(twin.available && 'zipvoice' in twin.config, reasonOf(twin));
    assert.equal(twin.config.zipvoice.encoder, join(int8, 'encoder.int8.onnx'));
    // Every file sherpa-onnx needs (it ends its process without the lexicon or espeak-ng-data/).
    unlinkSync(join(makeTinyZipvoice(dir, 'no-vocoder'), 'vocos_24khz.onnx'));
    unlinkSync(join(makeTinyZipvoice(dir, 'no-decoder'), 'decoder.onnx'));
    unlinkSync(join(makeTinyZipvoice(dir, 'no-lexicon'), 'lexicon.txt'));
    unlinkSync(join(makeTinyZipvoice(dir, 'no-espeak'), 'espeak-ng-data'));
    writeFileSync(join(makeTinyModel(dir, 'kokoro', 'pocket'), 'lm_main.pocket.onnx'), '');
    const scanned = new Map((await scanModels(dir)).map((m) => [m.name, reasonOf(m)]));
    assert.deepEqual(Object.fromEntries(scanned), {
      'no-decoder': 'a ZipVoice model needs encoder.onnx and decoder.onnx (or their int8 twins)',
      'no-espeak': 'a ZipVoice model needs espeak-ng-data/',
      'no-lexicon': 'a ZipVoice model needs its lexicon.txt',
      'no-vocoder':
        'a ZipVoice model needs its Vocos vocoder in the folder (vocos_24khz.onnx, published apart)',
      pocket:
        'a Pocket TTS model needs lm_flow.onnx, encoder.onnx, decoder.onnx, text_conditioner.onnx (or their int8 twins)',
      zipvoice: '(available)',
      'zipvoice-int8': '(available)',
    });
  });

  it('reads a Pocket TTS folder as a reference-audio model; a partial one is unavailable', async () => {
    const dir = join(work, 'pocket');
    const plain = makeTinyPocket(dir, 'pocket');
    const read = await readModel(plain, 'pocket');
    assert.ok(read.available, reasonOf(read));
    assert.deepEqual(
      [read.family, read.reference, read.speakers, read.sampleRate, read.languages],
      ['pocket', true, [], 24_000, ['en-us', 'en']],
    );
    assert.deepEqual(read.config, {
      pocket: {
        lmMain: join(plain, 'lm_main.onnx'),
        lmFlow: join(plain, 'lm_flow.onnx'),
        encoder: join(plain, 'encoder.onnx'),
        decoder: join(plain, 'decoder.onnx'),
        textConditioner: join(plain, 'text_conditioner.onnx'),
        vocabJson: join(plain, 'vocab.json'),
        tokenScoresJson: join(plain, 'token_scores.json'),
      },
    });
    // The published int8 archive's names.
    const int8 = makeTinyPocket(dir, 'pocket-int8');
    for (const part of ['lm_main', 'lm_flow', 'decoder']) {
      renameSync(join(int8, `${part}.onnx`), join(int8, `${part}.int8.onnx`));
    }
    const twin = await readModel(int8, 'pocket-int8');
    assert.ok(twin.available && 'pocket' in twin.config, reasonOf(twin));
    assert.equal(twin.config.pocket.lmMain, join(int8, 'lm_main.int8.onnx'));
    unlinkSync(join(makeTinyPocket(dir, 'no-flow'), 'lm_flow.onnx'));
    unlinkSync(join(makeTinyPocket(dir, 'no-scores'), 'token_scores.json'));
    const scanned = new Map((await scanModels(dir)).map((m) => [m.name, reasonOf(m)]));
    assert.deepEqual(Object.fromEntries(scanned), {
      'no-flow': 'a Pocket TTS model needs lm_flow.onnx (or their int8 twins)',
      'no-scores': "a Pocket TTS model needs its tokenizer's token_scores.json",
      pocket: '(available)',
      'pocket-int8': '(available)',
    });
  });
});
