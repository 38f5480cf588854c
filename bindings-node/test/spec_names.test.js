'use strict';
// The names a caller who knows only SPEC sections 6 and 11 reaches for: `DelayqError` (one
// class for every delayq error, with `kind`) and `ErrorCode`; the queue, durability, wait
// and close options without their `Ms` (the same milliseconds); a single number as a
// constant back-off; `consume(handler, { concurrency, signal })`.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const delayq = require('..');
const { startRedis, queueName, freePort, until } = require('./helpers');

const { DelayqError, ErrorCode } = delayq;
const KINDS = ['invalid_argument', 'connection', 'timeout', 'wrong_type', 'closed', 'server'];
const T = { timeout: 60_000 }; // a wait that ignored its timeout fails the test, not the run

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

/** A delayq error of `kind`: instanceof DelayqError and Error, its code and kind agreeing. */
function delayqError(kind, message) {
  return (e) => {
    assert.ok(e instanceof DelayqError, `instanceof DelayqError: ${e && e.code} ${e && e.message}`);
    assert.ok(e instanceof Error);
    assert.equal(e.kind, kind, e.message);
    assert.equal(e.code, `ERR_DELAYQ_${kind.toUpperCase()}`);
    if (message) assert.match(e.message, message);
    return true;
  };
}

/** A port on the loopback that nothing listens on (it was free a moment ago). */
const closedPort = freePort;

test('ErrorCode maps each of core\'s kinds to its code, frozen', () => {
  assert.ok(Object.isFrozen(ErrorCode));
  assert.deepEqual(Object.keys(ErrorCode), KINDS.map((k) => k.toUpperCase()));
  for (const kind of KINDS) assert.equal(ErrorCode[kind.toUpperCase()], `ERR_DELAYQ_${kind.toUpperCase()}`);
  assert.equal(ErrorCode.INVALID_ARGUMENT, 'ERR_DELAYQ_INVALID_ARGUMENT');
  assert.throws(() => {
    ErrorCode.CLOSED = 'x';
  }, TypeError);
});

test('every error delayq throws or rejects with is a DelayqError with its kind', T, async () => {
  const name = queueName();
  // The wrapper's own invalid argument, thrown (no Promise): still a TypeError too.
  assert.throws(() => client.reliableQueue(name, { visibilityTimout: 1 }), (e) => delayqError('invalid_argument', /unknown option/)(e) && e instanceof TypeError);
  // Core's invalid argument, thrown by a call that returns no Promise.
  assert.throws(() => client.reliableQueue(name, { visibilityTimeoutMs: -1 }), delayqError('invalid_argument', /visibilityTimeoutMs must not be negative/));
  assert.throws(() => delayq.setLogger(null, { level: 'loud' }), delayqError('invalid_argument'));
  assert.throws(() => delayq.packEntry(5, 'x'), delayqError('invalid_argument'));
  // Core's invalid argument, a rejection: a bad delay.
  const q = client.reliableQueue(name);
  const dq = client.delayedQueue(name);
  await assert.rejects(q.offer('x', -1), delayqError('invalid_argument', /-1/));
  await assert.rejects(dq.offer('x', NaN), delayqError('invalid_argument'));
  await assert.rejects(q.offer(5, 0), delayqError('invalid_argument', /payload must be/));
  // napi's own conversion of an argument of the wrong type.
  await assert.rejects(delayq.connect(5), delayqError('invalid_argument'));
  nothingWritten(name);
  // A closed handle: a call, a wait, a consume.
  q.close();
  dq.close();
  await assert.rejects(q.stats(), delayqError('closed'));
  await assert.rejects(q.receive(10), delayqError('closed'));
  await assert.rejects(q.consume(() => {}, 1), delayqError('closed'));
  await assert.rejects(dq.take({ timeoutMs: 10 }), delayqError('closed'));
  await assert.rejects(dq.offer('x', 0), delayqError('closed'));
  // A wait pending when its client closes.
  const other = await delayq.connect(redis.url);
  const waiting = other.delayedQueue(queueName()).take();
  other.close();
  await assert.rejects(waiting, delayqError('closed'));
  // A key of the queue holding another type.
  const wrong = queueName();
  redis.cli('SET', `redisson_delay_queue_timeout:{${wrong}}`, 'a string');
  const wq = client.delayedQueue(wrong, { scheduler: false });
  await assert.rejects(wq.offer('x', 1000), delayqError('wrong_type'));
  wq.close();
});

test('connecting to a closed port rejects with a DelayqError of kind connection', T, async () => {
  const port = await closedPort();
  await assert.rejects(delayq.connect(`redis://127.0.0.1:${port}`), delayqError('connection'));
  await assert.rejects(delayq.Client.connect(`redis://127.0.0.1:${port}`), delayqError('connection'));
});

test('instanceof DelayqError is false for errors that are not delayq\'s', async () => {
  const c = new AbortController();
  const dq = client.delayedQueue(queueName(), { scheduler: false });
  const taking = dq.take({ signal: c.signal });
  c.abort();
  await assert.rejects(taking, (e) => e.name === 'AbortError' && e.code === 'ABORT_ERR' && !(e instanceof DelayqError));
  dq.close();
  for (const v of [new Error('x'), new TypeError('x'), Object.assign(new Error('x'), { code: 'ERR_OTHER' }), { code: 5 }, null, undefined, 'ERR_DELAYQ_CLOSED', 7]) {
    assert.equal(v instanceof DelayqError, false, String(v));
  }
});

test('new DelayqError(message, kind) and subclasses', () => {
  const e = new DelayqError('gone', 'closed', { cause: 'why' });
  assert.ok(e instanceof DelayqError && e instanceof Error);
  assert.deepEqual([e.name, e.message, e.code, e.kind, e.cause], ['DelayqError', 'gone', ErrorCode.CLOSED, 'closed', 'why']);
  assert.equal(new DelayqError('x').kind, 'server');
  assert.throws(() => new DelayqError('x', 'nope'), delayqError('invalid_argument', /nope/));
  class Mine extends DelayqError {}
  assert.ok(new Mine('m', 'timeout') instanceof Mine);
  assert.ok(new Mine('m', 'timeout') instanceof DelayqError);
  assert.equal(e instanceof Mine, false, 'a subclass keeps the ordinary instanceof');
});

test('queue options without Ms are the same settings, read back through settings()', T, async () => {
  const name = queueName();
  const q = client.reliableQueue(name, {
    visibilityTimeout: 12_345,
    maxAttempts: 3,
    backoff: [250, 5000n],
    deadLetterRetention: 60_000n,
    idempotencyRetention: 70_000,
    reconcileInterval: 500,
  });
  await q.stats(); // the first call stores the settings
  const stored = {
    visibilityTimeoutMs: 12_345,
    maxAttempts: 3,
    backoffMs: [250, 5000],
    shards: 1,
    deadLetterRetentionMs: 60_000,
    idempotencyRetentionMs: 70_000,
  };
  const reader = client.reliableQueue(name);
  assert.deepEqual(await reader.settings(), stored);
  // The same settings under the other spelling match them (no difference to refuse).
  const same = client.reliableQueue(name, { visibilityTimeoutMs: 12_345, backoffMs: [250, 5000], deadLetterRetentionMs: 60_000 });
  assert.deepEqual(await same.settings(), stored);
  const differs = client.reliableQueue(name, { visibilityTimeout: 999 });
  await assert.rejects(differs.stats(), delayqError('invalid_argument'));

  const exp = queueName();
  const e = client.reliableQueue(exp, { backoffBase: 200, backoffMax: 5000n });
  await e.stats();
  const s = await client.reliableQueue(exp).settings();
  assert.equal(s.backoffBaseMs, 200);
  assert.equal(s.backoffMaxMs, 5000);
  assert.equal(s.backoffMs, undefined);
  for (const h of [q, reader, same, differs, e]) h.close();
});

test('an alias reaches core under its Ms name: a bad value names the Ms option', () => {
  const name = queueName();
  const negative = (option) => delayqError('invalid_argument', new RegExp(`${option} must not be negative`));
  assert.throws(() => client.reliableQueue(name, { visibilityTimeout: -5 }), negative('visibilityTimeoutMs'));
  assert.throws(() => client.reliableQueue(name, { backoffBase: -5 }), negative('backoffBaseMs'));
  assert.throws(() => client.reliableQueue(name, { backoffMax: -5 }), negative('backoffMaxMs'));
  assert.throws(() => client.reliableQueue(name, { deadLetterRetention: -5 }), negative('deadLetterRetentionMs'));
  assert.throws(() => client.reliableQueue(name, { idempotencyRetention: -5 }), negative('idempotencyRetentionMs'));
  assert.throws(() => client.reliableQueue(name, { reconcileInterval: -5 }), negative('reconcileIntervalMs'));
  assert.throws(() => client.delayedQueue(name, { reconcileInterval: -5 }), negative('reconcileIntervalMs'));
  assert.throws(() => client.reliableQueue(name, { backoff: [10, -5] }), negative('each delay of backoffMs'));
  assert.throws(() => client.reliableQueue(name, { backoff: -5 }), negative('each delay of backoffMs'));
  assert.throws(() => client.reliableQueue(name, { visibilityTimeout: '5' }), delayqError('invalid_argument', /visibilityTimeoutMs must be a number/));
  assert.throws(() => client.reliableQueue(name, { backoff: '5' }), delayqError('invalid_argument', /backoffMs must be a list/));
  assert.throws(() => client.reliableQueue(name, { backoff: 5, backoffBaseMs: 10 }), delayqError('invalid_argument', /not both/));
  nothingWritten(name);
});

test('both spellings of one option are refused, naming both; an absent one is no conflict', T, async () => {
  const name = queueName();
  const both = (a, b) => delayqError('invalid_argument', new RegExp(`'${a}' or '${b}'.*not both`));
  const pairs = [
    ['visibilityTimeoutMs', 'visibilityTimeout'],
    ['backoffMs', 'backoff'],
    ['backoffBaseMs', 'backoffBase'],
    ['backoffMaxMs', 'backoffMax'],
    ['deadLetterRetentionMs', 'deadLetterRetention'],
    ['idempotencyRetentionMs', 'idempotencyRetention'],
    ['reconcileIntervalMs', 'reconcileInterval'],
  ];
  for (const [ms, alias] of pairs) {
    const v = ms === 'backoffMs' ? [100] : 1000;
    assert.throws(() => client.reliableQueue(name, { [ms]: v, [alias]: v }), both(ms, alias), alias);
  }
  assert.throws(() => client.delayedQueue(name, { reconcileIntervalMs: 5, reconcileInterval: 5 }), both('reconcileIntervalMs', 'reconcileInterval'));
  const q = client.reliableQueue(name, { scheduler: false });
  const dq = client.delayedQueue(name, { scheduler: false });
  await assert.rejects(dq.take({ timeoutMs: 5, timeout: 5 }), both('timeoutMs', 'timeout'));
  await assert.rejects(q.receive({ timeoutMs: 5, timeout: 5 }), both('timeoutMs', 'timeout'));
  await assert.rejects(q.receiveMany(2, { timeoutMs: 5, timeout: 5 }), both('timeoutMs', 'timeout'));
  await assert.rejects(dq.values({ timeoutMs: 5, timeout: 5 }).next(), both('timeoutMs', 'timeout'));
  await assert.rejects(q.deliveries({ timeoutMs: 5, timeout: 5 }).next(), both('timeoutMs', 'timeout'));
  await assert.rejects(q.close({ deadlineMs: 5, deadline: 5 }), both('deadlineMs', 'deadline'));
  await assert.rejects(delayq.connect(redis.url, { durability: { timeoutMs: 5, timeout: 5 } }), both('timeoutMs', 'timeout'));
  nothingWritten(name);
  // One spelling left undefined is no conflict: the other one counts.
  const named = queueName();
  const u = client.reliableQueue(named, { visibilityTimeoutMs: undefined, visibilityTimeout: 4321, backoff: undefined, backoffMs: 75 });
  await u.stats();
  const got = await u.settings();
  assert.equal(got.visibilityTimeoutMs, 4321);
  assert.deepEqual(got.backoffMs, [75]);
  assert.equal(await dq.take({ timeoutMs: undefined, timeout: 5 }), null);
  assert.deepEqual(await q.stats(), { delayed: 0, ready: 0, inFlight: 0, dead: 0 }, 'still open');
  for (const h of [q, dq, u]) h.close();
});

test('a single back-off number is a constant back-off: every retry waits exactly that long', T, async () => {
  const name = queueName();
  const q = client.reliableQueue(name, { backoff: 300, maxAttempts: 4 });
  await q.offer('again', 0);
  let d = await q.receive(30_000);
  for (let attempt = 1; attempt <= 3; attempt++) {
    assert.equal(d.attempt, attempt);
    const before = await client.serverTimeMs();
    assert.equal(await d.nack(), true);
    const after = await client.serverTimeMs();
    d = await q.receive(30_000);
    // Due 300 ms after the nack, every time: no growth, no jitter.
    assert.ok(d.dueAt >= before + 300 && d.dueAt <= after + 300, `attempt ${attempt}: due ${d.dueAt - before} ms after the nack`);
  }
  assert.equal(d.attempt, 4);
  assert.deepEqual((await q.settings()).backoffMs, [300]);
  await d.ack();
  q.close();

  for (const [options, stored] of [[{ backoffMs: 400 }, [400]], [{ backoffMs: 7n }, [7]], [{ backoff: 2n ** 20n }, [2 ** 20]]]) {
    const r = client.reliableQueue(queueName(), options);
    await r.stats();
    assert.deepEqual((await r.settings()).backoffMs, stored, JSON.stringify(String(Object.values(options)[0])));
    r.close();
  }
});

test('durability { timeout } is durability { timeoutMs }', T, async () => {
  // A standalone server has no replica: every write waits the whole timeout, then fails.
  const c = await delayq.connect(redis.url, { durability: { replicas: 1, timeout: 1500 } });
  const q = c.reliableQueue(queueName());
  const t0 = Date.now();
  await assert.rejects(q.offer('x', 0), delayqError('timeout'));
  const waited = Date.now() - t0;
  assert.ok(waited >= 1450, `waited ${waited} ms: the default (1000 ms) was used`);
  c.close();
  await assert.rejects(delayq.connect(redis.url, { durability: { timeout: -1 } }), delayqError('invalid_argument', /durability\.timeoutMs/));
});

test('take, receive and receiveMany take { timeoutMs } and { timeout }', T, async () => {
  const name = queueName();
  const dq = client.delayedQueue(name);
  const q = client.reliableQueue(name);
  // Nothing is ready: each wait ends at its timeout (one that ignored it would never end).
  assert.equal(await dq.take({ timeoutMs: 30 }), null);
  assert.equal(await dq.take({ timeout: 30 }), null);
  assert.equal(await dq.take({ timeout: 30n, signal: new AbortController().signal }), null);
  assert.equal(await q.receive({ timeoutMs: 30 }), null);
  assert.equal(await q.receive({ timeout: 30 }), null);
  assert.deepEqual(await q.receiveMany(3, { timeoutMs: 30 }), []);
  assert.deepEqual(await q.receiveMany(3, { timeout: 30 }), []);
  const values = [];
  for await (const v of dq.values({ timeout: 30 })) values.push(v);
  assert.deepEqual(values, []);
  const deliveries = [];
  for await (const d of q.deliveries({ timeout: 30 })) deliveries.push(d);
  assert.deepEqual(deliveries, []);
  // And they do get what is there.
  await dq.offer('v', 0);
  assert.equal((await dq.take({ timeout: 30_000 })).toString(), 'v');
  await q.offerAll([['a'], ['b']]);
  const got = [await q.receive({ timeout: 30_000 })];
  got.push(...(await q.receiveMany(5, { timeout: 30_000 })));
  assert.deepEqual(got.map((d) => d.payload.toString()).sort(), ['a', 'b']);
  assert.deepEqual(await q.ackMany(got), [true, true]);
  // An options object takes no second argument (its signal would be ignored).
  await assert.rejects(dq.take({ timeout: 5 }, { signal: new AbortController().signal }), delayqError('invalid_argument', /one object/));
  await assert.rejects(q.receive({ timeoutMs: 5 }, {}), delayqError('invalid_argument', /one object/));
  dq.close();
  q.close();
});

test('consume(handler, { concurrency, signal }) runs that many handlers and stops on abort', T, async () => {
  const name = queueName();
  const q = client.reliableQueue(name, { visibilityTimeoutMs: 60_000 });
  await q.offerAll(Array.from({ length: 6 }, (_, i) => [`m${i}`]));
  let running = 0;
  let most = 0;
  let done = 0;
  let open;
  const gate = new Promise((r) => {
    open = r;
  });
  const c = new AbortController();
  const consuming = q.consume(
    async () => {
      running += 1;
      most = Math.max(most, running);
      await gate;
      running -= 1;
      done += 1;
    },
    { concurrency: 3, signal: c.signal },
  );
  try {
    await until(() => running === 3); // one at a time (the default) would never get there
  } finally {
    open(); // a failure leaves no handler running (it would keep the process alive)
  }
  await until(() => done === 6);
  assert.equal(most, 3, 'never more handlers at once than the concurrency');
  await until(async () => (await q.stats()).inFlight === 0);
  c.abort();
  await consuming; // the signal of the options object ends it
  assert.deepEqual(await q.stats(), { delayed: 0, ready: 0, inFlight: 0, dead: 0 });

  await assert.rejects(q.consume(() => {}, { concurency: 2 }), delayqError('invalid_argument', /'concurency'.*concurrency, signal/));
  await assert.rejects(q.consume(() => {}, { concurrency: 2 }, { signal: c.signal }), delayqError('invalid_argument', /not both forms/));
  await assert.rejects(q.consume(() => {}, { concurrency: -1 }), delayqError('invalid_argument', /concurrency/));
  await assert.rejects(q.consume(() => {}, { concurrency: '2' }), delayqError('invalid_argument', /concurrency/));
  // Without concurrency: one at a time; an aborted signal ends it at once.
  await q.consume(() => {}, { signal: c.signal });
  q.close();
});

test('close({ deadline }) is the graceful close of close({ deadlineMs })', T, async () => {
  const name = queueName();
  const q = client.reliableQueue(name, { visibilityTimeoutMs: 60_000 });
  await q.offer('slow', 0);
  let started;
  const startedP = new Promise((r) => {
    started = r;
  });
  let release;
  const released = new Promise((r) => {
    release = r;
  });
  let finished = false;
  const consumer = q.consume(async () => {
    started();
    await released;
    finished = true;
  }, 1);
  await startedP;
  let closedWhenFinished;
  const closing = q.close({ deadline: 60_000 }).then(() => {
    closedWhenFinished = finished;
  });
  // Let an immediate close (a deadline not taken) resolve before the handler is released.
  await new Promise((r) => setImmediate(r));
  release();
  await closing;
  await consumer;
  assert.equal(closedWhenFinished, true, 'the close waited for the running handler');
  await assert.rejects(q.stats(), delayqError('closed'));
  const other = client.reliableQueue(name);
  assert.deepEqual(await other.stats(), { delayed: 0, ready: 0, inFlight: 0, dead: 0 }, 'the handler finished: acked');
  other.close();

  const idle = client.reliableQueue(queueName());
  await idle.close({ deadline: 5n });
  await assert.rejects(idle.stats(), delayqError('closed'));
});
