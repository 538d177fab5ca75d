import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { RELAY_PROOF_TTL_SECONDS, signRelay, verifyRelay } from './relay-proof.js';

const SECRET = 'cluster-secret';
const URL_A = '/api/tts/generate/t1/stream.mp3?auth=tok&i=a';
const NOW = 1_800_000_000_000;

void describe('relay proof', () => {
  test('a proof signed for a request verifies for exactly that request, within its lifetime', () => {
    const proof = signRelay(SECRET, URL_A, NOW);
    assert.equal(verifyRelay(SECRET, proof, URL_A, NOW), true);
    assert.equal(verifyRelay(SECRET, proof, URL_A, NOW + (RELAY_PROOF_TTL_SECONDS - 1) * 1000), true);
    assert.equal(verifyRelay(SECRET, proof, URL_A, NOW + (RELAY_PROOF_TTL_SECONDS + 1) * 1000), false);
    assert.equal(verifyRelay(SECRET, proof, `${URL_A}x`, NOW), false, 'another request');
    assert.equal(verifyRelay('other-secret', proof, URL_A, NOW), false, 'another cluster');
  });

  test('what a client can send is refused', () => {
    for (const forged of [
      undefined,
      '',
      '1',
      ['1', '1'],
      'x.y',
      `${String(NOW / 1000 + 30)}.${'A'.repeat(43)}`,
    ])
      assert.equal(verifyRelay(SECRET, forged, URL_A, NOW), false, JSON.stringify(forged));
    // A proof whose expiry was moved (to live longer) no longer matches its MAC.
    const [expires, tag] = signRelay(SECRET, URL_A, NOW).split('.');
    assert.equal(verifyRelay(SECRET, `${String(Number(expires) + 10)}.${tag ?? ''}`, URL_A, NOW), false);
    // An expiry further ahead than any signer sets is refused whatever its MAC.
    const far = signRelay(SECRET, URL_A, NOW + 3_600_000);
    assert.equal(verifyRelay(SECRET, far, URL_A, NOW), false);
  });
});
