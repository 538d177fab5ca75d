import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { notFoundCodeFor } from './unstorable-params.js';

describe('notFoundCodeFor', () => {
  const cases: Array<[routeUrl: string, code: string]> = [
    ['/api/tts/generate/:id', 'GENERATE_NOT_FOUND'],
    ['/api/tts/generate/:id/audio.mp3', 'GENERATE_NOT_FOUND'],
    ['/api/tts/voice/:id', 'VOICE_NOT_FOUND'],
    ['/api/voice/:id/migrateV3', 'VOICE_NOT_FOUND'],
    ['/api/splitter/:id', 'SPLITTER_NOT_FOUND'],
    ['/admin/accounts/:id', 'RESOURCE_NOT_FOUND'],
    ['', 'RESOURCE_NOT_FOUND'],
  ];
  for (const [url, code] of cases) {
    it(`${url || '(no route)'} → ${code}`, () => {
      assert.equal(notFoundCodeFor(url), code);
    });
  }
});
