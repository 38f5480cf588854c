'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
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

test('offer, receive, ack, de-duplication', async () => {
  const q = client.reliableQueue(queueName());
  const id = await q.offer('job', 100);
  assert.equal(await q.offer('a', 0, 'fixed'), 'fixed');
  assert.equal(await q.offer('b', 0, 'fixed'), 'fixed');
  const got = {};
  for (let i = 0; i < 2; i++) {
    const d = await q.receive(5000);
    assert.equal(d.attempt, 1);
    assert.ok(d.dueAt > 0);
    got[d.id] = d.payload.toString();
    assert.equal(await d.ack(), true);
  }
  assert.deepEqual(got, { [id]: 'job', fixed: 'a' });
  assert.deepEqual(await q.stats(), { delayed: 0, ready: 0, inFlight: 0, dead: 0 });
});

test('cancel, reschedule, nack, dead letters', async () => {
  const q = client.reliableQueue(queueName(), { maxAttempts: 2, backoffMs: [50] });
  const far = await q.offer('far', 3_600_000);
  assert.equal(await q.cancel(far), true);
  assert.equal(await q.cancel(far), false);
  const later = await q.offer('later', 3_600_000);
  assert.equal(await q.reschedule(later, 0), true);
  let d = await q.receive(5000);
  assert.equal(d.id, later);
  await d.nack();
  d = await q.receive(5000);
  assert.equal(d.attempt, 2);
  await d.nack(0);
  const dead = await q.deadLetters(10);
  assert.deepEqual(dead.map((x) => [x.id, x.payload.toString(), x.attempts]), [[later, 'later', 2]]);
  assert.equal(await q.requeueDead(), 1);
  d = await q.receive(5000);
  assert.equal(d.attempt, 1);
  await d.ack();
  assert.equal(await q.purgeDead(), 0);
});

test('consume acks resolved handlers and nacks rejected ones', async () => {
  const q = client.reliableQueue(queueName(), { backoffMs: [20] });
  await q.offerAll(Array.from({ length: 30 }, (_, i) => [String(i), 0]));
  const seen = [];
  const ac = new AbortController();
  const done = q.consume(async (d) => {
    seen.push([d.payload.toString(), d.attempt]);
    if (Number(d.payload.toString()) % 10 === 0 && d.attempt === 1) throw new Error('fails once');
    if (new Set(seen.map(([p]) => p)).size === 30 && seen.length === 33) ac.abort();
  }, 4, { signal: ac.signal });
  await done;
  assert.equal(new Set(seen.map(([p]) => p)).size, 30);
  assert.deepEqual(seen.filter(([p]) => Number(p) % 10 === 0).map(([, a]) => a).sort(), [1, 1, 1, 2, 2, 2]);
});

test('a close at once during consume processes nothing finished again', async () => {
  const name = queueName();
  const q = client.reliableQueue(name);
  const n = 3000;
  await q.offerAll(Array.from({ length: n }, (_, i) => [`m${i}`, 0, `m${i}`]));
  const finished = new Set();
  let enough;
  const started = new Promise((resolve) => { enough = resolve; });
  const consuming = q.consume((d) => {
    finished.add(d.id);
    if (finished.size >= 100) enough();
  }, 32);
  await started;
  // Closed from a timer while handlers keep finishing, as an application's shutdown is.
  await new Promise((resolve) => setTimeout(resolve, 50));
  q.close();
  await consuming;
  const done = new Set(finished); // handlers that ran after close() count too
  const other = client.reliableQueue(name);
  let back = [];
  for (let got; (got = await other.receiveMany(100, 0)).length;) back = back.concat(got);
  const again = back.filter((d) => done.has(d.id)).map((d) => d.id);
  assert.deepEqual(again, [], 'finished, then given back by the close');
  assert.equal(back.length + done.size, n);
  for (const d of back) await d.ack();
  other.close();
});

test('a client closed during consume starts no more handlers', async () => {
  const name = queueName();
  const own = await delayq.Client.connect(redis.url);
  const q = own.reliableQueue(name, { visibilityTimeoutMs: 2000 });
  const n = 200;
  const concurrency = 8;
  await q.offerAll(Array.from({ length: n }, (_, i) => [`m${i}`, 0, `m${i}`]));
  let started = 0;
  let afterClose = 0;
  let allBusy;
  const busy = new Promise((resolve) => { allBusy = resolve; });
  let release;
  const released = new Promise((resolve) => { release = resolve; });
  const consuming = q.consume(async () => {
    started += 1;
    if (own.closed) afterClose += 1;
    if (started === concurrency) allBusy();
    await released;
  }, concurrency);
  await busy;
  // Every worker busy: the deliveries received ahead wait behind them.
  const probe = client.reliableQueue(name);
  while ((await probe.stats()).inFlight < 2 * concurrency) await new Promise((r) => setImmediate(r));
  own.close();
  release();
  await consuming;
  assert.equal(afterClose, 0, 'handlers started after the client closed');
  assert.equal(started, concurrency);
  // Every message is back: those received ahead at once, the running ones after their lease.
  let back = 0;
  for (let d; back < n && (d = await probe.receive(5000));) {
    await d.ack();
    back += 1;
  }
  assert.equal(back, n);
  probe.close();
});

test('receive honours an AbortSignal and the message is not stranded', async () => {
  const q = client.reliableQueue(queueName());
  const ac = new AbortController();
  setTimeout(() => ac.abort(), 30);
  await assert.rejects(q.receive({ signal: ac.signal }), { code: 'ABORT_ERR' });
  await q.offer('x', 0);
  const d = await q.receive(5000);
  assert.equal(d.attempt, 1);
  await d.ack();
});

test('bad arguments', async () => {
  const q = client.reliableQueue(queueName());
  await assert.rejects(q.offer('x', 0, ''), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' });
  await assert.rejects(q.offer(1, 0), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' });
  assert.throws(() => client.reliableQueue(queueName(), { maxAttempts: 0 }), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' });
});

test('every call taking an id refuses a non-string id with the invalid-argument code', async () => {
  const name = queueName();
  const q = client.reliableQueue(name, { scheduler: false });
  for (const id of [42, 1n, {}, ['a'], true]) {
    await assert.rejects(q.cancel(id), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' }, `cancel(${typeof id})`);
    await assert.rejects(q.reschedule(id, 0), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' }, `reschedule(${typeof id})`);
    // A plain object is offer's options (`{ id, shardKey }`): its id is checked instead.
    const asOptions = typeof id === 'object' && !Array.isArray(id);
    await assert.rejects(q.offer('x', 0, asOptions ? { id: 42 } : id), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' });
    await assert.rejects(q.offer('x', 0, { id }), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' });
    await assert.rejects(q.offerAll([['x', 0, id]]), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' }, `offerAll(${typeof id})`);
    await assert.rejects(q.offerAll([{ payload: 'x', id }]), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' });
    await assert.rejects(q.requeueDead([id]), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' }, `requeueDead(${typeof id})`);
  }
  for (const id of [undefined, null]) {
    await assert.rejects(q.cancel(id), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' });
    await assert.rejects(q.reschedule(id, 0), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' });
  }
  await assert.rejects(q.requeueDead('not-a-list'), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' });
  // Arguments napi converts itself: its own error code is mapped too.
  await assert.rejects(q.deadLetters('ten'), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' });
  assert.throws(() => client.reliableQueue(queueName(), { maxAttempts: '5' }), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' });
  // Counts: whole and not negative (napi would wrap -1 to 4294967295).
  for (const limit of [-1, 1.5, NaN, -1n]) {
    await assert.rejects(q.deadLetters(limit), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' }, `deadLetters(${limit})`);
  }
  for (const maxAttempts of [-1, 2.5, -1n, 256]) {
    assert.throws(() => client.reliableQueue(queueName(), { maxAttempts }), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' }, `maxAttempts ${maxAttempts}`);
  }
  assert.equal(redis.cli('KEYS', `*${name}*`), '');
  assert.deepEqual(await q.deadLetters(10n), []);
});

const DURATION_OPTIONS = [
  'visibilityTimeoutMs',
  'backoffBaseMs',
  'backoffMaxMs',
  'deadLetterRetentionMs',
  'idempotencyRetentionMs',
  'reconcileIntervalMs',
];

test('milliseconds may be bigint: timeouts, iterators and queue options', async () => {
  const q = client.reliableQueue(queueName(), {
    visibilityTimeoutMs: 30_000n,
    maxAttempts: 2,
    backoffMs: [10n, 20],
    reconcileIntervalMs: 50n,
  });
  assert.equal(await q.receive(10n), null);
  assert.equal(await q.receive({ timeoutMs: 10n }), null);
  for await (const d of q.deliveries({ timeoutMs: 10n })) assert.fail(`unexpected ${d.id}`);
  await q.offer('x', 0n);
  const d = await q.receive(5000n);
  assert.equal(d.payload.toString(), 'x');
  await d.ack();
  client.reliableQueue(queueName(), { backoffBaseMs: 10n, backoffMaxMs: 100n }).close();
  const bad = [-1n, -(2n ** 70n), 2n ** 70n, 2n ** 1100n];
  for (const ms of bad) {
    await assert.rejects(q.receive(ms), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' }, `receive(${ms})`);
    await assert.rejects(q.receive({ timeoutMs: ms }), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' });
    for (const option of DURATION_OPTIONS) {
      assert.throws(() => client.reliableQueue(queueName(), { [option]: ms }), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' }, `${option}: ${ms}`);
    }
    assert.throws(() => client.reliableQueue(queueName(), { backoffMs: [1n, ms] }), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' });
  }
  for (const ms of [-1, NaN, Infinity, '5', null, {}]) {
    for (const option of DURATION_OPTIONS) {
      if (ms === null) continue; // null means the default
      assert.throws(() => client.reliableQueue(queueName(), { [option]: ms }), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' }, `${option}: ${String(ms)}`);
    }
    assert.throws(() => client.reliableQueue(queueName(), { backoffMs: [ms] }), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' }, `backoffMs: [${String(ms)}]`);
  }
  q.close();
});
