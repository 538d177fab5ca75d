import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { describe, it } from 'node:test';
import type { SynthesisRequest } from './engines/engine.js';
import { createEspeakEngine } from './engines/espeak.engine.js';
import { createEncoderPool } from './encoder-pool.js';
import { openLameStream, resolveLameBuild, type LameBuild } from './lame-stream.js';
import { nativeLameLoadError, nativeLameVersion } from './lame-stream.native.js';
import { concatPcm } from './pcm.js';

/** Where Debian's libmp3lame-dev is installed, `npm ci` must have built the addon. */
const headerInstalled = existsSync('/usr/include/lame/lame.h');

async function encodeWith(build: LameBuild, pcm: Int16Array, sizes: readonly number[]): Promise<Buffer> {
  const lame = await openLameStream(build);
  const out: Uint8Array[] = [];
  for (let o = 0, k = 0; o < pcm.length; k++) {
    const n = sizes[k % sizes.length] ?? 1;
    out.push(lame.encode(pcm.slice(o, o + n)));
    o += n;
  }
  out.push(lame.finish());
  return Buffer.concat(out);
}

/** Noise over a tone at full scale, clipping included: every code path of the quantiser. */
function loudSignal(samples: number): Int16Array {
  const out = new Int16Array(samples);
  let seed = 7;
  for (let i = 0; i < samples; i++) {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    const v = 40000 * Math.sin((2 * Math.PI * 97 * i) / 44100) + ((seed % 20001) - 10000);
    out[i] = Math.max(-32768, Math.min(32767, Math.round(v)));
  }
  return out;
}

describe('LAME builds', { skip: headerInstalled ? false : 'libmp3lame-dev not installed here' }, () => {
  it('the native addon was built at install and loads (libmp3lame-dev is installed)', () => {
    assert.equal(nativeLameLoadError(), undefined);
    assert.match(nativeLameVersion() ?? '', /^3\.\d+/);
    assert.equal(resolveLameBuild('auto'), 'native');
    assert.equal(resolveLameBuild('wasm'), 'wasm');
  });

  it('native and wasm LAME produce the same bytes for speech and for a loud signal, the same however chunked', async () => {
    const engine = createEspeakEngine({ threads: 1 });
    try {
      const chunks: Int16Array[] = [];
      const request: SynthesisRequest = {
        text: 'The same bytes from both encoders, sentence after sentence, whatever the chunk size.',
        voice: { engine: 'espeak', voice: 'en-us' },
        speechRate: 1,
      };
      for await (const pcm of engine.synthesize(request, new AbortController().signal)) chunks.push(pcm);
      const speech = concatPcm(chunks);
      for (const [name, pcm] of [
        ['speech', speech],
        ['loud signal', loudSignal(44100 * 2 + 5)],
      ] as const) {
        let whole: Buffer | undefined;
        for (const sizes of [[pcm.length], [1152], [4410, 17, 3333]]) {
          const native = await encodeWith('native', pcm, sizes);
          const wasm = await encodeWith('wasm', pcm, sizes);
          assert.ok(native.length > 1000);
          assert.ok(native.equals(wasm), `${name}, chunks ${sizes.join(',')}: native and wasm bytes differ`);
          // The stream does not depend on how the input was cut.
          whole ??= native;
          assert.ok(native.equals(whole), `${name}, chunks ${sizes.join(',')}: bytes differ from one call's`);
        }
      }
    } finally {
      await engine.close();
    }
  });

  it('an encoder pool on each build gives the same stream', async () => {
    const pcm = loudSignal(44100);
    const results: Buffer[] = [];
    for (const lame of ['native', 'wasm'] as const) {
      const pool = createEncoderPool({ size: 1, lame });
      try {
        assert.equal(pool.lame, lame);
        const enc = pool.open();
        results.push(Buffer.concat([await enc.encode(pcm.slice()), await enc.finish()]));
      } finally {
        await pool.close();
      }
    }
    assert.ok(results[0]?.equals(results[1] ?? Buffer.alloc(0)));
  });

  it('a closed native encoder refuses further work with an error, not a crash', async () => {
    const lame = await openLameStream('native');
    lame.close();
    lame.close();
    assert.throws(() => lame.encode(new Int16Array(10)), /closed/);
    assert.throws(() => lame.finish(), /closed/);
  });
});
