import assert from 'node:assert/strict';
import { test } from 'node:test';
import { describeCheckFailure, isTransientS3Error } from './s3-errors.js';

/** An error as the AWS SDK throws it: an answer's status and code, or a socket error. */
const answer = (status: number, Code: string) =>
  Object.assign(new Error(Code), { Code, $metadata: { httpStatusCode: status } });
const socket = (code: string) => Object.assign(new Error(code), { code, $metadata: { attempts: 1 } });

test('transient S3 failures are retried; answers that a retry cannot change are not', () => {
  const cases: [string, unknown, boolean][] = [
    ['503 slow down', answer(503, 'SlowDown'), true],
    ['500 internal', answer(500, 'InternalError'), true],
    ['429 throttled', answer(429, 'TooManyRequests'), true],
    ['connection refused (daemon restarting)', socket('ECONNREFUSED'), true],
    ['connection reset mid-body', socket('ECONNRESET'), true],
    ['body cut short', socket('ERR_STREAM_PREMATURE_CLOSE'), true],
    ['SDK timeout', Object.assign(new Error('t'), { name: 'TimeoutError' }), true],
    ['404 no such key', answer(404, 'NoSuchKey'), false],
    ['403 bad signature', answer(403, 'SignatureDoesNotMatch'), false],
    ['412 exists (ifAbsent)', answer(412, 'PreconditionFailed'), false],
    ['416 range', answer(416, 'InvalidRange'), false],
    ['a bug', new TypeError('x is undefined'), false],
  ];
  for (const [name, err, transient] of cases) assert.equal(isTransientS3Error(err), transient, name);
});

test('a failed start-up check says what is wrong and the fix, naming the endpoint and bucket', () => {
  const where = { bucket: 'b1', endpoint: 'http://rgw:7480' };
  const cases: [string, unknown, RegExp, RegExp][] = [
    [
      'unreachable',
      socket('ECONNREFUSED'),
      /service at http:\/\/rgw:7480 is unreachable \(ECONNREFUSED\)/,
      /AWS_ENDPOINT_URL_S3/,
    ],
    [
      'no bucket',
      answer(404, 'NotFound'),
      /bucket b1 does not exist at http:\/\/rgw:7480/,
      /create it \(aws s3 mb s3:\/\/b1/,
    ],
    [
      'bad keys',
      answer(403, 'Forbidden'),
      /refused the keys for bucket b1 \(403 Forbidden\)/,
      /AWS_ACCESS_KEY_ID/,
    ],
    ['wrong region', answer(301, 'PermanentRedirect'), /another region/, /AWS_REGION/],
    [
      'not S3',
      answer(405, 'MethodNotAllowed'),
      /answered 405 MethodNotAllowed for bucket b1/,
      /is an S3 service/,
    ],
  ];
  for (const [name, err, reason, fix] of cases) {
    const d = describeCheckFailure(err, where);
    assert.match(d.reason, reason, name);
    assert.match(d.fix, fix, name);
  }
});
