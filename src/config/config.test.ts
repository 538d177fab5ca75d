import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig } from './config.js';

const S3 = { S3_BUCKET: 'voices', S3_ENDPOINT: 'http://127.0.0.1:9000', S3_FORCE_PATH_STYLE: 'true' };
const SCALE_OUT = { DATABASE_URL: 'postgres://db/voicegen', REDIS_URL: 'redis://127.0.0.1:6379', ...S3 };

function problems(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}

describe('loadConfig: scale-out switch', () => {
  it('embedded by default: no scale-out, lease defaults', () => {
    const config = loadConfig({});
    assert.equal(config.scaleOut, null);
    assert.deepEqual(config.leases, { taskMs: 30_000, sessionMs: 15_000 });
    assert.equal(config.adminToken, undefined);
    assert.equal(config.embeddedDbCacheMb, 16);
  });

  it('EMBEDDED_DB_CACHE_MB sets the embedded page cache; 0 or a fraction is refused', () => {
    assert.equal(loadConfig({ EMBEDDED_DB_CACHE_MB: '64' }).embeddedDbCacheMb, 64);
    assert.match(problems({ EMBEDDED_DB_CACHE_MB: '0' }).join('\n'), /EMBEDDED_DB_CACHE_MB/);
    assert.match(problems({ EMBEDDED_DB_CACHE_MB: '1.5' }).join('\n'), /EMBEDDED_DB_CACHE_MB/);
  });

  it('PostgreSQL alone is a single node on a server database, not scale-out', () => {
    assert.equal(loadConfig({ DATABASE_URL: 'postgres://db/x' }).scaleOut, null);
  });

  it('REDIS_URL, S3_* and DATABASE_URL together switch scale-out on', () => {
    const config = loadConfig({
      ...SCALE_OUT,
      S3_ACCESS_KEY_ID: 'id',
      S3_SECRET_ACCESS_KEY: 'secret',
      PORT: '9001',
    });
    assert.deepEqual(config.scaleOut, {
      redisUrl: 'redis://127.0.0.1:6379',
      redisPrefix: 'voicegen:',
      nodeUrl: 'http://127.0.0.1:9001',
      s3: {
        endpoint: 'http://127.0.0.1:9000',
        bucket: 'voices',
        region: 'us-east-1',
        credentials: { accessKeyId: 'id', secretAccessKey: 'secret' },
        forcePathStyle: true,
      },
    });
  });

  it('refuses a partial set, naming what is missing', () => {
    assert.match(
      problems({ DATABASE_URL: 'postgres://db/x', REDIS_URL: 'redis://r' }).join('\n'),
      /S3_BUCKET: required/,
    );
    assert.match(problems({ DATABASE_URL: 'postgres://db/x', ...S3 }).join('\n'), /REDIS_URL: required/);
    assert.match(
      problems({ REDIS_URL: 'redis://r', ...S3 }).join('\n'),
      /DATABASE_URL: required for scale-out/,
    );
    assert.match(problems({ ...SCALE_OUT, S3_ACCESS_KEY_ID: 'id' }).join('\n'), /set both or neither/);
    assert.match(
      problems({ S3_REGION: 'eu-west-1' }).join('\n'),
      /S3_BUCKET: required when any S3_\* variable is set/,
    );
  });

  it('needs NODE_URL when listening on every interface', () => {
    assert.match(problems({ ...SCALE_OUT, HOST: '0.0.0.0' }).join('\n'), /NODE_URL: required/);
    assert.equal(
      loadConfig({ ...SCALE_OUT, HOST: '0.0.0.0', NODE_URL: 'http://10.0.0.5:8080/' }).scaleOut?.nodeUrl,
      'http://10.0.0.5:8080',
    );
  });

  it('validates ADMIN_TOKEN, REDIS_URL and lease variables', () => {
    assert.match(problems({ ADMIN_TOKEN: 'short' }).join('\n'), /ADMIN_TOKEN/);
    assert.match(problems({ ...SCALE_OUT, REDIS_URL: 'http://x' }).join('\n'), /REDIS_URL/);
    assert.match(problems({ TASK_LEASE_MS: '5' }).join('\n'), /TASK_LEASE_MS/);
    assert.equal(loadConfig({ ADMIN_TOKEN: 'a'.repeat(32) }).adminToken, 'a'.repeat(32));
  });
});

describe('loadConfig: per-account concurrency', () => {
  it('defaults to half a node’s generation slots (at least 1), so one account never holds them all', () => {
    assert.equal(loadConfig({}).generationConcurrency, 64);
    assert.equal(loadConfig({}).accountQuotas.maxConcurrentTasks, 32);
    assert.equal(loadConfig({ GENERATION_CONCURRENCY: '8' }).accountQuotas.maxConcurrentTasks, 4);
    assert.equal(loadConfig({ GENERATION_CONCURRENCY: '3' }).accountQuotas.maxConcurrentTasks, 1);
    assert.equal(loadConfig({ GENERATION_CONCURRENCY: '2' }).accountQuotas.maxConcurrentTasks, 1);
    assert.equal(loadConfig({ GENERATION_CONCURRENCY: '1' }).accountQuotas.maxConcurrentTasks, 1);
    const single = loadConfig({ GENERATION_CONCURRENCY: '4', ACCOUNT_MAX_CONCURRENT_TASKS: '4' });
    assert.equal(single.accountQuotas.maxConcurrentTasks, 4);
    assert.equal(loadConfig({ ACCOUNT_MAX_CONCURRENT_TASKS: '0' }).accountQuotas.maxConcurrentTasks, 0);
  });
});

describe('loadConfig: MP3 encoder build', () => {
  it('is auto by default, takes native or wasm, and names anything else', () => {
    assert.equal(loadConfig({}).mp3Encoder, 'auto');
    assert.equal(loadConfig({ MP3_ENCODER: 'wasm' }).mp3Encoder, 'wasm');
    assert.equal(loadConfig({ MP3_ENCODER: 'native' }).mp3Encoder, 'native');
    assert.match(problems({ MP3_ENCODER: 'ffmpeg' }).join('\n'), /MP3_ENCODER/);
  });
});

describe('loadConfig: finished-audio process', () => {
  it('is off by default; on or off, and names anything else', () => {
    assert.equal(loadConfig({}).finishedAudioProcess, true);
    assert.equal(loadConfig({ FINISHED_AUDIO_PROCESS: 'off' }).finishedAudioProcess, false);
    assert.match(problems({ FINISHED_AUDIO_PROCESS: 'yes' }).join('\n'), /FINISHED_AUDIO_PROCESS/);
  });
});

describe('loadConfig: batch process', () => {
  it('is off by default at niceness 10; on takes a niceness of 0 to 19 and names anything else', () => {
    const defaults = loadConfig({});
    assert.equal(defaults.batchProcess, false);
    assert.equal(defaults.batchProcessNiceness, 10);
    const on = loadConfig({ BATCH_PROCESS: 'on', BATCH_PROCESS_NICENESS: '19' });
    assert.equal(on.batchProcess, true);
    assert.equal(on.batchProcessNiceness, 19);
    assert.match(problems({ BATCH_PROCESS: 'yes' }).join('\n'), /BATCH_PROCESS/);
    assert.match(problems({ BATCH_PROCESS_NICENESS: '20' }).join('\n'), /BATCH_PROCESS_NICENESS/);
  });
});

describe('loadConfig: Wyoming server', () => {
  it('is off unless WYOMING_PORT is set, and then binds loopback with its bounds', () => {
    assert.equal(loadConfig({}).wyoming, null);
    assert.deepEqual(loadConfig({ WYOMING_PORT: '10200', WYOMING_ACCOUNT: 'default' }).wyoming, {
      host: '127.0.0.1',
      port: 10200,
      account: 'default',
      maxConnections: 16,
      maxMessageBytes: 256 * 1024,
      idleTimeoutMs: 60_000,
    });
    const open = loadConfig({
      WYOMING_PORT: '0',
      WYOMING_HOST: '0.0.0.0',
      WYOMING_ACCOUNT: 'home',
      WYOMING_MAX_CONNECTIONS: '4',
      WYOMING_MAX_MESSAGE_BYTES: '4096',
      WYOMING_IDLE_TIMEOUT_MS: '5000',
    }).wyoming;
    assert.deepEqual(open, {
      host: '0.0.0.0',
      port: 0,
      account: 'home',
      maxConnections: 4,
      maxMessageBytes: 4096,
      idleTimeoutMs: 5000,
    });
  });

  it('needs the account it runs as, and refuses bad bounds by name', () => {
    assert.match(problems({ WYOMING_PORT: '10200' }).join('\n'), /WYOMING_ACCOUNT: required/);
    assert.match(problems({ WYOMING_PORT: '70000', WYOMING_ACCOUNT: 'a' }).join('\n'), /WYOMING_PORT/);
    assert.match(
      problems({ WYOMING_PORT: '1', WYOMING_ACCOUNT: 'a', WYOMING_MAX_CONNECTIONS: '0' }).join('\n'),
      /WYOMING_MAX_CONNECTIONS/,
    );
    assert.match(
      problems({ WYOMING_PORT: '1', WYOMING_ACCOUNT: 'a', WYOMING_MAX_MESSAGE_BYTES: '10' }).join('\n'),
      /WYOMING_MAX_MESSAGE_BYTES/,
    );
  });
});
