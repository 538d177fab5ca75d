import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { toAppError } from '../http/error-handler.js';
import { dependencyUnavailable, isDependencyUnavailable } from './dependency-unavailable.js';

const withCode = (code: string, message = 'x') => Object.assign(new Error(message), { code });
const named = (name: string, message = 'x') => Object.assign(new Error(message), { name });

describe('isDependencyUnavailable', () => {
  const unavailable: [string, unknown][] = [
    ['pg: connection refused', withCode('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:5432')],
    ['pg: session terminated (restart, pg_terminate_backend)', withCode('57P01')],
    ['pg: server starting', withCode('57P03')],
    ['pg: connection_exception class', withCode('08006')],
    ['pg: connection ended', new Error('Connection terminated unexpectedly')],
    [
      'pg: a client whose connection broke',
      new Error('Client has encountered a connection error and is not queryable'),
    ],
    ['ioredis: gave up while reconnecting', named('MaxRetriesPerRequestError', 'Reached the max retries')],
    ['ioredis: connection closed', new Error('Connection is closed.')],
    [
      'S3 adapter wrapping a refused connection',
      new Error('storing blob k failed', { cause: withCode('ECONNREFUSED') }),
    ],
    [
      'S3 store failing on its side',
      Object.assign(new Error('SlowDown'), { $metadata: { httpStatusCode: 503 } }),
    ],
    ['inside an AggregateError', new AggregateError([new Error('a'), withCode('ECONNRESET')])],
  ];
  for (const [what, err] of unavailable)
    it(`true: ${what}`, () => assert.equal(isDependencyUnavailable(err), true));

  const other: [string, unknown][] = [
    ['a plain bug', new TypeError('x is undefined')],
    ['pg: constraint violation', withCode('23505')],
    ['S3: 404', Object.assign(new Error('NoSuchKey'), { $metadata: { httpStatusCode: 404 } })],
    ['not an error', 'ECONNREFUSED'],
    ['null', null],
  ];
  for (const [what, err] of other)
    it(`false: ${what}`, () => assert.equal(isDependencyUnavailable(err), false));

  it('ends on a cause cycle', () => {
    const a = new Error('a') as Error & { cause?: unknown };
    const b = new Error('b', { cause: a });
    a.cause = b;
    assert.equal(isDependencyUnavailable(a), false);
  });
});

describe('toAppError of a backing service failure', () => {
  it('is 503 STORAGE_UNAVAILABLE with Retry-After, the original kept as the cause', () => {
    const cause = named('MaxRetriesPerRequestError');
    const err = toAppError(cause);
    assert.equal(err.code, 'STORAGE_UNAVAILABLE');
    assert.equal(err.status, 503);
    assert.equal(err.headers['Retry-After'], '5');
    assert.equal(err.cause, cause);
    assert.deepEqual(dependencyUnavailable(cause).headers, err.headers);
  });

  it('leaves other unknown errors a 500', () => {
    assert.equal(toAppError(new TypeError('bug')).code, 'SYSTEM_INTERNAL_ERROR');
  });
});
