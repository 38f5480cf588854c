'use strict';
// The reliable queue under real workloads (SPEC section 11): settings stored with the
// queue, leases that extend, batch receive and ack, offers that tell created from
// de-duplicated, a consume that keeps long handlers leased, and the graceful close.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const delayq = require('..');
const { startRedis, queueName, until } = require('./helpers');

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


/** Resolves after `ms` with `'pending'` unless `promise` settled first (then with `'settled'`). */
function settledWithin(promise, ms) {
  let timer;
  const t = new Promise((r) => {
    timer = setTimeout(() => r('pending'), ms);
  });
  return Promise.race([promise.then(() => 'settled', () => 'settled'), t]).finally(() => clearTimeout(timer));
}

test('settings belong to the queue, not to a handle', async () => {
  const name = queueName();
  const b = await delayq.Client.connect(redis.url);
  const c = await delayq.Client.connect(redis.url);
  try {
    const fresh = await b.reliableQueue(queueName()).settings();
    assert.deepEqual(fresh, {
      visibilityTimeoutMs: 30_000,
      maxAttempts: 5,
      backoffBaseMs: 1000,
      backoffMaxMs: 600_000,
      shards: 1,
      deadLetterRetentionMs: 0,
      idempotencyRetentionMs: 0,
    });

    const qa = client.reliableQueue(name, { visibilityTimeoutMs: 40_000, maxAttempts: 2, backoffMs: [20] });
    await qa.offer('x', 0, 'job-1');
    // Another process names nothing: it uses what the first stored.
    const qb = b.reliableQueue(name);
    const s = await qb.settings();
    assert.equal(s.visibilityTimeoutMs, 40_000);
    assert.equal(s.maxAttempts, 2);
    assert.deepEqual(s.backoffMs, [20]);
    assert.equal(s.backoffBaseMs, undefined);
    for (const attempt of [1, 2]) {
      const d = await qb.receive(5000);
      assert.equal(d.attempt, attempt);
      const left = d.deadline - (await b.serverTimeMs());
      assert.ok(left >= 39_000 && left <= 40_100, `a lease of the stored 40 s, ${left} ms left`);
      assert.equal(await d.nack(), true);
    }
    assert.equal((await qb.stats()).dead, 1);

    // A handle naming other settings fails on its first call...
    const qc = c.reliableQueue(name, { visibilityTimeoutMs: 30_000, maxAttempts: 2 });
    await assert.rejects(qc.stats(), (err) => err.code === 'ERR_DELAYQ_INVALID_ARGUMENT' && /visibility timeout is 40000 ms/.test(err.message));
    // ...unless it updates them, which every handle then sees.
    const qd = c.reliableQueue(name, { maxAttempts: 3n, updateSettings: true });
    assert.equal((await qd.settings()).maxAttempts, 3);
    assert.equal((await qb.settings()).maxAttempts, 3);
    const qe = c.reliableQueue(name, {
      backoffBaseMs: 500,
      deadLetterRetentionMs: 3_600_000n,
      idempotencyRetentionMs: 60_000,
      shards: 1,
      updateSettings: true,
    });
    const e = await qe.settings();
    assert.deepEqual([e.backoffMs, e.backoffBaseMs, e.backoffMaxMs], [undefined, 500, 600_000]);
    assert.deepEqual([e.deadLetterRetentionMs, e.idempotencyRetentionMs, e.visibilityTimeoutMs], [3_600_000, 60_000, 40_000]);
  } finally {
    b.close();
    c.close();
  }
});

test('bad settings are refused before anything reaches Redis', async () => {
  const name = queueName();
  for (const options of [
    { maxAttempts: 0 },
    { shards: 3 },
    { shards: -1 },
    { visibilityTimeoutMs: 0 },
    { deadLetterRetentionMs: -1 },
    { idempotencyRetentionMs: 'x' },
    { backoffMs: [1], backoffBaseMs: 1 },
    { updateSettings: 'yes' },
  ]) {
    assert.throws(() => client.reliableQueue(name, options), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' }, JSON.stringify(options));
  }
  assert.equal(redis.cli('KEYS', `*${name}*`), '');
});

test('a lease extends, and a lost one says so', async () => {
  const q = client.reliableQueue(queueName(), { visibilityTimeoutMs: 800 });
  await q.offer('x', 0);
  let d = await q.receive(5000);
  const before = d.deadline;
  assert.equal(await d.extend(3000), true);
  assert.ok(d.deadline >= before + 2000, 'the deadline moved');
  // Past the visibility timeout, inside the extended lease: nobody else gets it.
  assert.equal(await q.receive(1200), null);
  assert.equal(await d.ack(), true);
  assert.equal(q.lostLeases(), 0);

  await q.offer('y', 0);
  d = await q.receive(5000);
  assert.equal(await d.extend(0n), true);
  const again = await q.receive(5000);
  assert.equal(again.id, d.id);
  assert.equal(again.attempt, 2);
  assert.equal(await d.extend(5000), false);
  assert.equal(await d.ack(), false);
  assert.equal(q.lostLeases(), 1);
  assert.equal(await again.ack(), true);
  await assert.rejects(again.extend(-1), {
    code: 'ERR_DELAYQ_INVALID_ARGUMENT',
    message: /duration must not be negative/,
  });
  // console.log shows which message and attempt.
  const shown = require('node:util').inspect(again);
  assert.ok(shown.includes(`id: '${again.id}'`) && shown.includes('attempt: 2'), shown);
  await assert.rejects(again.extend('1'), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' });
});

test('receiveMany and ackMany', async () => {
  const q = client.reliableQueue(queueName());
  const ids = await q.offerAll(Array.from({ length: 10 }, (_, i) => [String(i), 0]));
  const got = await q.receiveMany(4, 5000);
  assert.ok(got.length >= 1 && got.length <= 4);
  while (got.length < 10) {
    const more = await q.receiveMany(100n, { timeoutMs: 5000 });
    assert.ok(more.length > 0, 'the rest came');
    got.push(...more);
  }
  assert.ok(got.every((d) => d instanceof delayq.Delivery && d.attempt === 1 && d.deadline > 0));
  assert.deepEqual(got.map((d) => d.id).sort(), [...ids].sort());
  assert.deepEqual(await q.receiveMany(5, 100), []);
  assert.deepEqual(await q.ackMany(got), Array(10).fill(true));
  assert.deepEqual(await q.ackMany(got.slice(0, 2)), [false, false]);
  assert.equal(q.lostLeases(), 0, 'acked here already: no lease was lost');
  assert.deepEqual(await q.ackMany([]), []);
  assert.deepEqual(await q.stats(), { delayed: 0, ready: 0, inFlight: 0, dead: 0 });
  for (const n of [0, 1001, -1, 1.5, '3']) {
    await assert.rejects(q.receiveMany(n, 100), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' }, `n ${n}`);
  }
  await assert.rejects(q.ackMany([{ id: 'x' }]), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' });
  await assert.rejects(q.ackMany('no'), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' });
});

test('receiveMany honours an AbortSignal and strands nothing', async () => {
  const q = client.reliableQueue(queueName());
  const ac = new AbortController();
  const pending = q.receiveMany(5, { signal: ac.signal });
  setTimeout(() => ac.abort(), 30);
  await assert.rejects(pending, { code: 'ABORT_ERR' });
  await q.offerAll([['a', 0], ['b', 0]]);
  const got = [];
  while (got.length < 2) got.push(...(await q.receiveMany(5, 5000)));
  assert.ok(got.every((d) => d.attempt === 1));
  assert.deepEqual(await q.ackMany(got), [true, true]);
});

test('offerWithOutcome tells created from de-duplicated; the idempotency retention', async () => {
  const q = client.reliableQueue(queueName());
  const first = await q.offerWithOutcome('a', 0, 'order-1');
  assert.deepEqual(first, { id: 'order-1', created: true, dueAt: first.dueAt });
  assert.equal(typeof first.dueAt, 'number');
  assert.deepEqual(await q.offerWithOutcome('b', 0, 'order-1'), { id: 'order-1', created: false });
  const gen = await q.offerWithOutcome('c');
  assert.ok(gen.created && gen.id.length > 0);
  const outs = await q.offerAllWithOutcome([['d', 0, 'order-1'], { payload: 'e', id: 'order-2' }, ['f']]);
  assert.deepEqual(outs.map((o) => o.created), [false, true, true]);
  assert.deepEqual(outs.slice(0, 2).map((o) => o.id), ['order-1', 'order-2']);
  const got = [];
  while (got.length < 4) got.push(...(await q.receiveMany(10, 5000)));
  assert.ok((await q.ackMany(got)).every(Boolean));
  // Without a retention, an acked id is forgotten.
  assert.equal((await q.offerWithOutcome('again', 3_600_000, 'order-1')).created, true);

  const kept = client.reliableQueue(queueName(), { idempotencyRetentionMs: 60_000 });
  assert.equal((await kept.offerWithOutcome('x', 0, 'pay-1')).created, true);
  const d = await kept.receive(5000);
  assert.equal(await d.ack(), true);
  assert.equal((await kept.offerWithOutcome('x', 0, 'pay-1')).created, false);
  assert.equal(await kept.receive(200), null);
});

test('consume keeps a long handler leased, so it runs once', async () => {
  const name = queueName();
  const other = await delayq.Client.connect(redis.url);
  try {
    // Two consumers in two clients; the handler runs 3.5 times the visibility timeout.
    const qa = client.reliableQueue(name, { visibilityTimeoutMs: 1000 });
    const qb = other.reliableQueue(name);
    await qa.offer('slow', 0);
    const runs = [];
    let done;
    const finished = new Promise((r) => {
      done = r;
    });
    const handler = async (d) => {
      runs.push(d.attempt);
      await new Promise((r) => setTimeout(r, 3500)); // the work itself
      done();
    };
    const consumers = [qa.consume(handler, 2), qb.consume(handler, 2)];
    await finished;
    await until(async () => (await qa.stats()).inFlight === 0);
    qa.close();
    qb.close();
    await Promise.all(consumers);
    assert.deepEqual(runs, [1], 'the handler ran once');
    assert.equal(qa.lostLeases() + qb.lostLeases(), 0);
    assert.deepEqual(await other.reliableQueue(name).stats(), { delayed: 0, ready: 0, inFlight: 0, dead: 0 });
  } finally {
    other.close();
  }
});

test('consume nacks a rejected handler with the stored back-off, and a thrown non-Error too', async () => {
  const q = client.reliableQueue(queueName(), { backoffMs: [20], maxAttempts: 2 });
  await q.offerAll([['a', 0], ['b', 0]]);
  const seen = [];
  const consumer = q.consume((d) => {
    seen.push(`${d.payload}:${d.attempt}`);
    if (d.payload.toString() === 'a') throw new Error('always fails');
    if (d.attempt === 1) throw 'a string'; // eslint-disable-line no-throw-literal
  }, 2);
  await until(async () => {
    const s = await q.stats();
    return s.dead === 1 && s.inFlight === 0 && s.ready === 0 && s.delayed === 0;
  });
  q.close();
  await consumer;
  assert.deepEqual(seen.sort(), ['a:1', 'a:2', 'b:1', 'b:2']);
  assert.deepEqual((await client.reliableQueue(q.name).deadLetters(10)).map((x) => x.payload.toString()), ['a']);
});

for (const finish of [true, false]) {
  test(`close({ deadlineMs }) ${finish ? 'lets the running handler finish' : 'gives up a handler at the deadline'}`, async () => {
    const name = queueName();
    const q = client.reliableQueue(name, { visibilityTimeoutMs: 60_000 });
    await q.offerAll(Array.from({ length: 5 }, (_, i) => [String(i), 0]));
    let started;
    const startedP = new Promise((r) => {
      started = r;
    });
    let release;
    const released = new Promise((r) => {
      release = r;
    });
    const handled = [];
    const consumer = q.consume(async (d) => {
      started();
      await released;
      handled.push(d.id);
    }, 1);
    await startedP;
    const closing = q.close({ deadlineMs: finish ? 20_000 : 500 });
    assert.ok(closing instanceof Promise);
    assert.equal(await settledWithin(closing, 300), 'pending', 'close waits for the running handler');
    if (finish) release();
    await closing;
    await consumer;
    release();
    await assert.rejects(q.offer('late', 0), { code: 'ERR_DELAYQ_CLOSED' });

    const other = client.reliableQueue(name);
    assert.equal((await other.stats()).inFlight, 0);
    const expected = finish ? 5 - handled.length : 5;
    const left = [];
    while (left.length < expected) {
      const d = await other.receive(5000);
      assert.ok(d, 'the rest came back');
      assert.equal(d.attempt, 1, 'a message given back at close is not counted as an attempt');
      left.push(d.id);
      assert.equal(await d.ack(), true);
    }
    assert.equal(await other.receive(200), null);
    if (finish) {
      assert.ok(handled.length >= 1, 'the running handler finished');
      assert.ok(!handled.some((id) => left.includes(id)), 'nothing finished comes back');
    }
  });
}

test('close() is immediate; a closed handle still settles its deliveries', async () => {
  const q = client.reliableQueue(queueName());
  await q.offer('x', 0);
  const d = await q.receive(5000);
  assert.equal(q.close(), undefined);
  await q.close({ deadlineMs: 1000 }); // idempotent
  await assert.rejects(q.receive(100), { code: 'ERR_DELAYQ_CLOSED' });
  assert.equal(await d.extend(10_000), true);
  assert.equal(await d.ack(), true);
  const other = client.reliableQueue(queueName());
  await assert.rejects(other.close({ deadlineMs: -1 }), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' });
  await assert.rejects(other.close('5'), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' });
  await assert.rejects(other.close({ dedline: 5 }), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' });
  await other.close({});
  await assert.rejects(other.stats(), { code: 'ERR_DELAYQ_CLOSED' });
});
