// The package loads as an ES module by its name, with every export named.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import delayq, { Client, DelayedQueue, DelayqError, ErrorCode, connect, packEntry, unpackEntry, offerScriptSource } from 'delayq';
import { createRequire } from 'node:module';
import { startRedis, queueName } from './helpers.js';

test('import { Client } from "delayq" works and talks to Redis', async () => {
  assert.equal(typeof Client.connect, 'function');
  assert.equal(typeof connect, 'function');
  assert.equal(typeof DelayedQueue, 'function');
  assert.equal(delayq.Client, Client);
  assert.equal(delayq.DelayqError, DelayqError);
  assert.equal(ErrorCode.CLOSED, 'ERR_DELAYQ_CLOSED');
  assert.equal(createRequire(import.meta.url)('delayq').Client, Client);
  assert.deepEqual(unpackEntry(packEntry(Buffer.alloc(8, 1), 'v')), { id: Buffer.alloc(8, 1), value: Buffer.from('v') });
  assert.match(offerScriptSource(), /zadd/i);
  const redis = await startRedis();
  const client = await connect(redis.url);
  try {
    const q = client.delayedQueue(queueName());
    await q.offer('esm', 0);
    assert.equal((await q.take(5000)).toString(), 'esm');
  } finally {
    client.close();
    redis.stop();
  }
});
