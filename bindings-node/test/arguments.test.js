'use strict';
// Arguments: bare close deadlines, offerAll of something not a list, fractional delays,
// timeout messages in milliseconds, unknown option keys. A refused call has the
// invalid-argument code and writes nothing to Redis.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const delayq = require('..');
const { startRedis, queueName, until } = require('./helpers');

const INVALID = { code: 'ERR_DELAYQ_INVALID_ARGUMENT' };

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

/** Nothing of the queue `name` is in Redis. */
function nothingWritten(name) {
  assert.equal(redis.cli('KEYS', `*${name}*`), '', `keys of ${name}`);
}

/** 'pending' if `p` has not settled within `ms`, else 'settled'. */
function settledWithin(p, ms) {
  return Promise.race([p.then(() => 'settled', () => 'settled'), new Promise((r) => setTimeout(() => r('pending'), ms))]);
}

test('close(ms) takes a bare deadline (number or bigint) like close({ deadlineMs })', async () => {
  const name = queueName();
  const q = client.reliableQueue(name, { visibilityTimeoutMs: 60_000 });
  await q.offer('slow', 0);
  let started;
  const startedP = new Promise((r) => {
    started = r;
  });
  // Released only after the close, so given up at the deadline. (A promise that nothing
  // can settle any more is collected, and its handler counts as failed at once.)
  let release;
  const released = new Promise((r) => {
    release = r;
  });
  const consumer = q.consume(async () => {
    started();
    await released;
  }, 1);
  await startedP;
  const closing = q.close(500);
  assert.ok(closing instanceof Promise);
  assert.equal(await settledWithin(closing, 200), 'pending', 'close waits for the running handler');
  await closing;
  await consumer;
  release();
  await assert.rejects(q.stats(), { code: 'ERR_DELAYQ_CLOSED' });
  const other = client.reliableQueue(name);
  assert.equal((await other.stats()).inFlight, 0, 'the message given up went back');
  other.close();

  const big = client.reliableQueue(queueName());
  await big.close(1000n);
  await assert.rejects(big.stats(), { code: 'ERR_DELAYQ_CLOSED' });
});

test('close with a bad deadline rejects and leaves the handle open', async () => {
  const name = queueName();
  const q = client.reliableQueue(name);
  for (const bad of [-1, -1n, NaN, Infinity, 2n ** 70n, '5000', true, null, { deadline: -1 }, { dedline: 5000 }, [5000]]) {
    const closing = q.close(bad);
    assert.ok(closing instanceof Promise, String(bad));
    await assert.rejects(closing, INVALID, `close(${typeof bad} ${String(bad)})`);
  }
  await assert.rejects(q.close(-1), /deadlineMs must be a non-negative number of milliseconds, got -1$/);
  nothingWritten(name);
  assert.deepEqual(await q.stats(), { delayed: 0, ready: 0, inFlight: 0, dead: 0 }, 'still open');
  q.close();
});

test('a string with a lone surrogate is refused, not sent as U+FFFD', async () => {
  const dName = queueName();
  const rName = queueName();
  const dq = client.delayedQueue(dName, { scheduler: false });
  const rq = client.reliableQueue(rName, { scheduler: false });
  const lone = 'a\uD800b';
  const refused = (e) => e.code === INVALID.code && /lone surrogate/.test(e.message);
  await assert.rejects(dq.offer(lone, 0), refused);
  await assert.rejects(dq.contains(lone), refused);
  await assert.rejects(rq.offer(lone, 0), refused);
  await assert.rejects(rq.offer('p', 0, lone), refused);
  await assert.rejects(rq.offer('p', 0, { shardKey: '\uDC00' }), refused);
  await assert.rejects(rq.cancel(lone), refused);
  await assert.rejects(rq.requeueDead([lone]), refused);
  assert.throws(() => client.reliableQueue(lone), refused);
  nothingWritten(dName);
  nothingWritten(rName);
  // A pair is one character: offered as its UTF-8, the id comes back as it went in.
  assert.equal(await rq.offer('p', 0, 'id-\u{1F600}'), 'id-\u{1F600}');
  dq.close();
  rq.close();
});

test('offerAll of something not a list rejects on both queue kinds and writes nothing', async () => {
  const dName = queueName();
  const rName = queueName();
  const dq = client.delayedQueue(dName, { scheduler: false });
  const rq = client.reliableQueue(rName, { scheduler: false });
  for (const bad of [5, {}, null, undefined, 'ab', true, 5n, { length: 1, 0: ['x', 0] }]) {
    for (const q of [dq, rq]) {
      let p;
      assert.doesNotThrow(() => {
        p = q.offerAll(bad);
      }, 'a rejection, not a throw');
      await assert.rejects(p, (e) => e.code === INVALID.code && /must be a list/.test(e.message), `offerAll(${typeof bad})`);
    }
    await assert.rejects(rq.offerAllWithOutcome(bad), INVALID);
  }
  for (const item of [null, 5, 'x', undefined]) {
    await assert.rejects(dq.offerAll([['ok', 0], item]), INVALID, `entry ${String(item)}`);
    await assert.rejects(rq.offerAll([['ok', 0], item]), INVALID, `entry ${String(item)}`);
  }
  nothingWritten(dName);
  nothingWritten(rName);
  // Any iterable but a string is a list.
  assert.equal((await dq.offerAll(new Set([['a', 0]]))).length, 1);
  assert.equal((await rq.offerAll((function* () { yield ['a', 0]; })())).length, 1);
  dq.close();
  rq.close();
});

test('a fractional delay rounds up to the next whole millisecond', async () => {
  const name = queueName();
  const dq = client.delayedQueue(name, { scheduler: false });
  const rq = client.reliableQueue(queueName(), { scheduler: false });
  const zset = `redisson_delay_queue_timeout:{${name}}`;
  for (const [ms, whole] of [[1.5, 2], [0.0001, 1], [2.999, 3], [60_000.2, 60_001]]) {
    const t0 = await client.serverTimeMs();
    const due = await dq.offer(`v${ms}`, ms);
    const { dueAt } = await rq.offerWithOutcome(`v${ms}`, ms);
    const t1 = await client.serverTimeMs();
    for (const d of [due, dueAt]) {
      assert.ok(Number.isInteger(d) && d >= t0 + whole && d <= t1 + whole, `${ms} ms: due ${d}, server time ${t0}..${t1}`);
    }
    assert.ok(Number(redis.cli('ZCOUNT', zset, String(due), String(due))) >= 1, 'the stored due time is the one returned');
  }
  const [both] = await dq.offerAll([['all', 0.5]]);
  assert.ok(Number.isInteger(both));
  const rr = client.reliableQueue(queueName());
  const id = await rr.offer('r', 3_600_000);
  assert.equal(await rr.reschedule(id, 0.25), true);
  const d = await rr.receive(5000);
  assert.equal(d.id, id);
  assert.equal(await d.extend(1000.5), true);
  assert.equal(await d.nack(0.5), true);
  dq.close();
  rq.close();
  rr.close();
});

test('NaN, negative, infinite and overflowing delays are still refused and write nothing', async () => {
  const dName = queueName();
  const rName = queueName();
  const dq = client.delayedQueue(dName, { scheduler: false });
  const rq = client.reliableQueue(rName, { scheduler: false });
  for (const bad of [NaN, -0.5, -1, -Infinity, Infinity, 2 ** 50 + 0.5, 2 ** 60]) {
    await assert.rejects(dq.offer('x', bad), INVALID, `offer(${bad})`);
    await assert.rejects(dq.offerAll([['x', bad]]), INVALID);
    await assert.rejects(rq.offer('x', bad), INVALID, `offer(${bad})`);
    await assert.rejects(rq.offerAll([['x', bad]]), INVALID);
    await assert.rejects(rq.reschedule('id', bad), INVALID);
  }
  nothingWritten(dName);
  nothingWritten(rName);
  dq.close();
  rq.close();
});

test('a bad duration or count option names the option, and nothing is written', () => {
  const name = queueName();
  const named = (option) => (e) => e.code === INVALID.code && e.message.includes(`${option} must not be negative, got -5000 ms`);
  for (const option of ['visibilityTimeoutMs', 'backoffBaseMs', 'backoffMaxMs', 'deadLetterRetentionMs', 'idempotencyRetentionMs', 'reconcileIntervalMs']) {
    assert.throws(() => client.reliableQueue(name, { [option]: -5000 }), named(option), option);
  }
  assert.throws(() => client.delayedQueue(name, { reconcileIntervalMs: -5000 }), named('reconcileIntervalMs'));
  assert.throws(() => client.reliableQueue(name, { backoffMs: [10, -5000] }), named('each delay of backoffMs'));
  assert.throws(() => client.reliableQueue(name, { maxAttempts: -1 }), (e) => e.code === INVALID.code && e.message.includes('maxAttempts must not be negative'));
  nothingWritten(name);
});

test('timeout errors speak milliseconds and name no other language', async () => {
  const dName = queueName();
  const rName = queueName();
  const dq = client.delayedQueue(dName);
  const rq = client.reliableQueue(rName);
  const waits = [(t) => dq.take(t), (t) => dq.take({ timeoutMs: t }), (t) => rq.receive(t), (t) => rq.receiveMany(1, t)];
  for (const wait of waits) {
    await assert.rejects(wait(-1), (e) => e.code === INVALID.code && /: timeout must be a non-negative number of milliseconds, got -1$/.test(e.message));
    await assert.rejects(wait(-0.5), (e) => e.code === INVALID.code && /milliseconds, got -0\.5$/.test(e.message));
    await assert.rejects(wait(Infinity), (e) => e.code === INVALID.code && /: timeout must be finite; pass no timeout to wait forever$/.test(e.message));
    await assert.rejects(wait(NaN), (e) => e.code === INVALID.code && !/\bseconds|None/.test(e.message));
  }
  nothingWritten(dName);
  nothingWritten(rName);
  dq.close();
  rq.close();
});

test('unknown option keys are refused, naming the key and the known ones', async () => {
  const name = queueName();
  const known = (key, ...names) => (e) =>
    e.code === INVALID.code && e.message.includes(`'${key}'`) && names.every((n) => e.message.includes(n));
  assert.throws(() => client.reliableQueue(name, { visibilityTimout: 5000 }), known('visibilityTimout', 'visibilityTimeoutMs', 'maxAttempts', 'updateSettings'));
  assert.throws(() => client.reliableQueue(name, { visibilityTimeoutMs: 5000, backof: [1] }), known('backof', 'backoffMs'));
  assert.throws(() => client.delayedQueue(name, { reconcileIntrval: 50 }), known('reconcileIntrval', 'reconcileIntervalMs', 'scheduler'));
  assert.throws(() => client.delayedQueue(name, { maxAttempts: 3 }), known('maxAttempts', 'reconcileIntervalMs'), 'a reliable queue option');
  assert.throws(() => client.reliableQueue(name, [1]), INVALID);

  const q = client.reliableQueue(name, { scheduler: false });
  const dq = client.delayedQueue(name, { scheduler: false });
  await assert.rejects(q.receive({ timeot: 10 }), known('timeot', 'timeoutMs', 'signal'));
  await assert.rejects(q.receive(10, { timeoutMs: 10 }), known('timeoutMs', 'signal'));
  await assert.rejects(q.receiveMany(1, { timeot: 10 }), known('timeot', 'timeoutMs'));
  await assert.rejects(dq.take({ timeot: 10 }), known('timeot', 'timeoutMs'));
  await assert.rejects(dq.take(10, { sginal: null }), known('sginal', 'signal'));
  await assert.rejects(dq.values({ timeot: 10 }).next(), known('timeot', 'timeoutMs'));
  await assert.rejects(q.deliveries({ timeot: 10 }).next(), known('timeot', 'timeoutMs'));
  await assert.rejects(q.consume(() => {}, 1, { sigal: null }), known('sigal', 'signal'));
  await assert.rejects(q.offer('x', 0, { shard: 'a' }), known('shard', 'shardKey', 'id'));
  await assert.rejects(q.close({ dedline: 10 }), known('dedline', 'deadlineMs'));
  assert.throws(() => delayq.setLogger(null, { levl: 'debug' }), known('levl', 'level'));
  nothingWritten(name);

  // connect: refused before connecting.
  const connections = () => Number(/total_connections_received:(\d+)/.exec(redis.cli('INFO', 'stats'))[1]);
  const n0 = connections();
  await assert.rejects(delayq.Client.connect(redis.url, { clustr: true }), known('clustr', 'cluster', 'tls', 'durability'));
  await assert.rejects(delayq.connect(redis.url, { tls: { ca: 'x' } }), known('ca', 'caFile', 'certFile', 'keyFile'));
  await assert.rejects(delayq.connect(redis.url, { durability: { replica: 1 } }), known('replica', 'replicas', 'aof', 'timeoutMs'));
  await assert.rejects(delayq.connect(redis.url, 5), INVALID);
  assert.equal(connections(), n0 + 1, 'no connection but redis-cli');

  // Every known key is accepted.
  client
    .reliableQueue(queueName(), {
      scheduler: false,
      reconcileIntervalMs: 1000,
      visibilityTimeoutMs: 30_000,
      maxAttempts: 5,
      backoffBaseMs: 1000,
      backoffMaxMs: 600_000,
      shards: 1,
      deadLetterRetentionMs: 0,
      idempotencyRetentionMs: 0,
      updateSettings: false,
    })
    .close();
  client.reliableQueue(queueName(), { backoffMs: [10] }).close();
  client.delayedQueue(queueName(), { scheduler: false, reconcileIntervalMs: 1000 }).close();
  const c = await delayq.connect(redis.url, { cluster: false, tls: {}, durability: { replicas: 0, aof: false, timeoutMs: 100 } });
  c.close();
  assert.equal(await q.receive({ timeoutMs: 1, signal: new AbortController().signal }), null);
  assert.equal(await dq.take(1, { signal: undefined }), null);
  q.close();
  dq.close();
});

test('a signal that is not an AbortSignal is refused before the wait starts: nothing is taken', async () => {
  const name = queueName();
  const dq = client.delayedQueue(name);
  const rq = client.reliableQueue(`${name}-r`, { visibilityTimeoutMs: 60_000 });
  await dq.offer('precious', 0);
  await rq.offer('job', 0);
  await until(async () => (await dq.stats()).ready === 1);
  const notSignal = (e) => e.code === INVALID.code && /signal must be an AbortSignal, not object/.test(e.message);
  await assert.rejects(dq.take({ timeoutMs: 500, signal: {} }), notSignal);
  await assert.rejects(dq.take(500, { signal: { aborted: false } }), notSignal);
  await assert.rejects(rq.receive({ timeoutMs: 500, signal: {} }), notSignal);
  await assert.rejects(rq.receiveMany(2, { timeoutMs: 500, signal: {} }), notSignal);
  let handled = 0;
  await assert.rejects(rq.consume(() => { handled += 1; }, { signal: {} }), notSignal);
  // A wait that would also have failed in core is refused the same way, and no rejection is
  // left unhandled (node --test fails the file on one).
  await assert.rejects(dq.take({ timeoutMs: -1, signal: {} }), notSignal);
  assert.equal(String(await dq.poll()), 'precious', 'the value is still in the queue');
  assert.equal((await rq.stats()).inFlight, 0, 'no delivery was taken');
  assert.equal(String((await rq.receive(0)).payload), 'job');
  assert.equal(handled, 0, 'no consumer runs');
  dq.close();
  rq.close();
});

test('an AbortSignal, a Map or another non-plain object in place of an options object is refused', async () => {
  const name = queueName();
  const dq = client.delayedQueue(name, { scheduler: false });
  const rq = client.reliableQueue(name, { scheduler: false });
  const ac = new AbortController();
  const plain = (hint) => (e) => e.code === INVALID.code && e.message.includes('must be a plain object') && e.message.includes(hint);
  await assert.rejects(dq.take(2000, ac.signal), plain('pass it as { signal }'));
  await assert.rejects(rq.receive(2000, ac.signal), plain('AbortSignal'));
  await assert.rejects(rq.consume(() => {}, 2, ac.signal), plain('AbortSignal'));
  await assert.rejects(rq.consume(() => {}, ac.signal), plain('AbortSignal'));
  assert.throws(() => client.reliableQueue(name, new Map([['maxAttempts', 3]])), plain('a Map'));
  await assert.rejects(delayq.connect(redis.url, new Map()), plain('a Map'));
  nothingWritten(name);
  dq.close();
  rq.close();
});

test('offerAll entries name their fields exactly: a misspelt one is refused, nothing is offered', async () => {
  const name = queueName();
  const rq = client.reliableQueue(name, { scheduler: false });
  const dq = client.delayedQueue(name, { scheduler: false });
  const known = (key, ...names) => (e) =>
    e.code === INVALID.code && e.message.includes(`'${key}'`) && names.every((n) => e.message.includes(n));
  await assert.rejects(rq.offerAll([{ payload: 'due in an hour', delay: 3_600_000, ID: 'order-1' }]), known('delay', 'delayMs', 'shardKey'));
  await assert.rejects(rq.offerAllWithOutcome([{ payload: 'p', delayMs: 0, shardkey: 'k' }]), known('shardkey', 'shardKey'));
  await assert.rejects(dq.offerAll([{ value: 'v', delay: 5 }]), known('delay', 'delayMs', 'value'));
  nothingWritten(name);
  assert.deepEqual((await rq.offerAllWithOutcome([{ payload: 'p', delayMs: 60_000, id: 'a', shardKey: 'k' }])).map((o) => o.id), ['a']);
  assert.equal((await dq.offerAll([{ value: 'v', delayMs: 60_000 }])).length, 1);
  rq.close();
  dq.close();
});

test('options of the wrong type are refused in delayq words, not Rust types', async () => {
  const name = queueName();
  const says = (text) => (e) => e.code === INVALID.code && e.message.includes(text) && !/rust|napi/i.test(e.message);
  assert.throws(() => client.delayedQueue(name, { scheduler: 'no' }), says('scheduler must be a boolean, not string'));
  assert.throws(() => client.reliableQueue(name, { updateSettings: 1 }), says('updateSettings must be a boolean, not number'));
  await assert.rejects(delayq.connect(redis.url, { cluster: 'yes' }), says('cluster must be a boolean'));
  await assert.rejects(delayq.connect(redis.url, { durability: { replicas: 1, aof: 'yes' } }), says('durability.aof must be a boolean'));
  await assert.rejects(delayq.connect(redis.url, { tls: { caFile: 5 } }), says('tls.caFile must be a file path'));
  await assert.rejects(delayq.connect(5), says('url must be a string, or a list of seed URLs'));
  await assert.rejects(delayq.connect([redis.url, 5]), says('url must be a string'));
  const q = client.reliableQueue(name, { scheduler: false });
  await assert.rejects(q.close(-1), says('deadlineMs must be a non-negative number of milliseconds, got -1'));
  nothingWritten(name);
  q.close();
});

test('a value over 512 MiB is refused before it is copied', () => {
  const { spawnSync } = require('node:child_process');
  const script = `
    const delayq = require(${JSON.stringify(require.resolve('..'))});
    (async () => {
      const client = await delayq.Client.connect(process.argv[1]);
      const big = Buffer.allocUnsafe(512 * 1024 * 1024 + 1).fill(120);
      const peak = process.resourceUsage().maxRSS;
      const queues = [client.delayedQueue('oversized', { scheduler: false }),
        client.reliableQueue('oversized', { scheduler: false })];
      for (const q of queues) {
        await q.offer(big, 0).then(() => { throw new Error('offered'); }, (e) => {
          if (e.code !== 'ERR_DELAYQ_INVALID_ARGUMENT' || !/over the limit/.test(e.message)) throw e;
        });
      }
      console.log(Math.floor((process.resourceUsage().maxRSS - peak) / 1024));
      client.close();
    })().catch((e) => { console.error(e); process.exit(1); });`;
  const run = spawnSync(process.execPath, ['-e', script, redis.url], { encoding: 'utf8', timeout: 120_000 });
  assert.equal(run.status, 0, run.stderr);
  const grownMib = Number(run.stdout.trim());
  assert.ok(grownMib < 64, `the peak memory grew by ${grownMib} MiB while refusing`);
  nothingWritten('oversized');
});

test('an option given as null is the default, as if left out', async () => {
  const dq = client.delayedQueue(queueName(), { reconcileIntervalMs: null, scheduler: null });
  assert.equal(await dq.size(), 0);
  const rq = client.reliableQueue(queueName(), { visibilityTimeoutMs: null, maxAttempts: null, shards: null });
  assert.equal((await rq.settings()).visibilityTimeoutMs, 30_000);
  dq.close();
  rq.close();
  for (const options of [{ cluster: null }, { tls: null }, { durability: null }, { tls: { caFile: null } }, { durability: { replicas: null } }]) {
    const c = await delayq.Client.connect(redis.url, options);
    assert.equal(await c.delayedQueue(queueName()).size(), 0, JSON.stringify(options));
    c.close();
  }
});
