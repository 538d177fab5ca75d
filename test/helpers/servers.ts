/**
 * Isolated resources on the real test servers that scripts/test-servers.sh starts (npm test passes
 * their addresses as TEST_DATABASE_URL, TEST_REDIS_URL and TEST_S3_ENDPOINT): a new PostgreSQL
 * database, a Redis key prefix and an S3 bucket per call, so test files running in parallel never
 * see each other's data. A missing server is a test failure, never a skip.
 */
import { randomBytes } from 'node:crypto';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import pg from 'pg';

function required(name: string): string {
  const value = process.env[name];
  if (value === undefined || value === '') {
    throw new Error(
      `${name} is not set: run the tests with \`npm test\` (it starts the servers with scripts/test-servers.sh)`,
    );
  }
  return value;
}

/** A short random suffix for names of databases, prefixes and buckets. */
export function uniqueSuffix(): string {
  return randomBytes(6).toString('hex');
}

/** A new empty PostgreSQL database; `drop()` removes it (connections must be closed first). */
export async function freshPostgresDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  const adminUrl = required('TEST_DATABASE_URL');
  const name = `voicegen_test_${uniqueSuffix()}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const client = new pg.Client({ connectionString: adminUrl });
      await client.connect();
      try {
        await client.query(`drop database if exists ${name} with (force)`);
      } finally {
        await client.end();
      }
    },
  };
}

/** The Redis server's URL and a key prefix of its own for one test. */
export function freshRedis(): { url: string; prefix: string } {
  return { url: required('TEST_REDIS_URL'), prefix: `voicegen-test-${uniqueSuffix()}:` };
}

/** Settings of the S3-compatible test server (s3rver accepts any credentials). */
export interface TestS3 {
  endpoint: string;
  bucket: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
  forcePathStyle: true;
}

/** A new empty bucket on the S3-compatible test server. */
export async function freshS3Bucket(): Promise<TestS3> {
  const settings: TestS3 = {
    endpoint: required('TEST_S3_ENDPOINT'),
    bucket: `voicegen-test-${uniqueSuffix()}`,
    region: 'us-east-1',
    accessKeyId: 'S3RVER',
    secretAccessKey: 'S3RVER',
    forcePathStyle: true,
  };
  const client = new S3Client({
    endpoint: settings.endpoint,
    region: settings.region,
    forcePathStyle: true,
    credentials: { accessKeyId: settings.accessKeyId, secretAccessKey: settings.secretAccessKey },
  });
  try {
    await client.send(new CreateBucketCommand({ Bucket: settings.bucket }));
  } finally {
    client.destroy();
  }
  return settings;
}
