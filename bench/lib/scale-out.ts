/**
 * The scale-out configuration for a benchmark (`SCALE_OUT=1`): the test servers of
 * scripts/test-servers.sh (PostgreSQL, Redis and s3rver, started if needed), with a new database,
 * Redis key prefix and bucket for this run, as server environment variables.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import pg from 'pg';

/** Whether the benchmark should run on the scale-out adapters (env SCALE_OUT=1). */
export function scaleOutRequested(): boolean {
  return process.env.SCALE_OUT === '1';
}

/** Starts the test servers if needed; a fresh database, prefix and bucket; the server variables. */
export async function scaleOutServerEnv(): Promise<Record<string, string>> {
  // The SDK's notice that its 2027 releases need Node 22 says nothing about this run.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const servers = spawnSync('bash', ['scripts/test-servers.sh'], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  if (servers.status !== 0) throw new Error('scripts/test-servers.sh failed');
  const found = Object.fromEntries(
    servers.stdout
      .split('\n')
      .map((line) => /^(TEST_[A-Z0-9_]+)=(.*)$/.exec(line))
      .filter((m): m is RegExpExecArray => m !== null)
      .map((m) => [m[1], m[2]]),
  ) as Record<string, string | undefined>;
  const { TEST_DATABASE_URL: adminUrl, TEST_REDIS_URL: redisUrl, TEST_S3_ENDPOINT: endpoint } = found;
  if (adminUrl === undefined || redisUrl === undefined || endpoint === undefined)
    throw new Error('scripts/test-servers.sh did not print the server addresses');
  const suffix = randomBytes(6).toString('hex');
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`create database voicegen_bench_${suffix}`);
  } finally {
    await admin.end();
  }
  const databaseUrl = new URL(adminUrl);
  databaseUrl.pathname = `/voicegen_bench_${suffix}`;
  const bucket = `voicegen-bench-${suffix}`;
  const s3 = new S3Client({
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
  });
  try {
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  } finally {
    s3.destroy();
  }
  return {
    DATABASE_URL: databaseUrl.toString(),
    REDIS_URL: redisUrl,
    REDIS_PREFIX: `voicegen-bench-${suffix}:`,
    S3_ENDPOINT: endpoint,
    S3_BUCKET: bucket,
    S3_REGION: 'us-east-1',
    S3_ACCESS_KEY_ID: 'S3RVER',
    S3_SECRET_ACCESS_KEY: 'S3RVER',
    S3_FORCE_PATH_STYLE: 'true',
  };
}
