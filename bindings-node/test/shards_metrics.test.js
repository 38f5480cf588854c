'use strict';
// Shard keys, Delivery.shard, exact due times and metrics() from Node.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const zlib = require('node:zlib');
const delayq = require('..');
const { startRedis, queueName } = require('./helpers');

let redis;
let client;
before(async () => {
  redis = await startRedis();
  client = await delayq.Client.connect(redis.url);
});
after(() => {
  client.close();
  redis.stop();
});

async function receiveAll(q, n) {
  const got = [];
  while (got.length < n) {
    const batch = await q.receiveMany(n - got.length, 5000);
    assert.ok(batch.length > 0, `only ${got.length} of ${n} delivered`);
    got.push(...batch);
  }
  return got;
}

test('a shard key keeps its messages in one shard', async () => {
  const q = client.reliableQueue(queueName(), { shards: 4 });
  const keyed = [];
  for (let i = 0; i < 20; i++) keyed.push(await q.offer(`k${i}`, 0, { shardKey: 'customer-7' }));
  const loose = await q.offerAll(Array.from({ length: 40 }, (_, i) => [`l${i}`, 0]));
  const both = await q.offerAll([
    ['x', 0, 'with-id', 'customer-7'],
    { payload: 'y', shardKey: 'customer-7' },
  ]);
  assert.equal(await q.offer('z', 0, { id: 'plain-id' }), 'plain-id');
  const got = await receiveAll(q, 63);
  const shard = new Map(got.map((d) => [d.id, d.shard]));
  assert.equal(shard.size, 63, 'each message once');
  // Seed 002's rule: CRC-32 of the key mod the shard count.
  const expected = zlib.crc32('customer-7') % 4;
  assert.deepEqual(new Set([...keyed, ...both].map((id) => shard.get(id))), new Set([expected]));
  assert.ok(new Set(loose.map((id) => shard.get(id))).size > 1, 'ids spread over the shards');
  assert.deepEqual(await q.ackMany(got), got.map(() => true));
  assert.equal((await q.stats()).inFlight, 0);
});

test('a bad shard key is refused before Redis', async () => {
  const q = client.reliableQueue(queueName(), { shards: 2 });
  await assert.rejects(q.offer('x', 0, { shardKey: '' }), { code: 'ERR_DELAYQ_INVALID_ARGUMENT', message: /shard key/ });
  await assert.rejects(q.offer('x', 0, { shardKey: 7 }), { code: 'ERR_DELAYQ_INVALID_ARGUMENT', message: /shard key/ });
  await assert.rejects(q.offerAll([['ok', 0, null, 'k'], ['bad', 0, null, 'x'.repeat(300)]]), {
    code: 'ERR_DELAYQ_INVALID_ARGUMENT',
  });
  const s = await q.stats();
  assert.deepEqual([s.delayed, s.ready], [0, 0], 'nothing written');
});

test('an offer outcome has the due time the server computed', async () => {
  const q = client.reliableQueue(queueName());
  const before = await client.serverTimeMs();
  const first = await q.offerWithOutcome('a', 60_000, 'a');
  const after = await client.serverTimeMs();
  assert.ok(first.created && first.dueAt >= before + 60_000 && first.dueAt <= after + 60_000, JSON.stringify(first));
  const again = await q.offerWithOutcome('b', 0, { id: 'a' });
  assert.equal(again.created, false);
  assert.equal(again.dueAt ?? null, null);
});

test('metrics() counts what this process did', async () => {
  const name = queueName();
  const q = client.reliableQueue(name, { maxAttempts: 1, backoffMs: [0] });
  await q.offerAll([['m', 0], ['m', 0], ['m', 0]]);
  const got = await receiveAll(q, 3);
  assert.equal(await got[0].ack(), true);
  assert.equal(await got[1].nack(), true);
  const mine = delayq.metrics().queues.filter((m) => m.name === name);
  assert.equal(mine.length, 1);
  const m = mine[0];
  assert.equal(m.kind, 'reliable');
  assert.deepEqual([m.offered, m.delivered, m.acked, m.dead], [3, 3, 1, 1]);
  assert.equal(m.lateness.count, 3);
  assert.equal(m.lateness.buckets[0].le, 0.001);
  const all = delayq.metrics();
  assert.equal(typeof all.connectionErrors, 'number');
  assert.equal(typeof all.timeouts, 'number');
});
