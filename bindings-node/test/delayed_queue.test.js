'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const delayq = require('..');
const { startRedis, queueName, cliPath, REPO } = require('./helpers');

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

test('shared vectors: packEntry and unpackEntry', () => {
  const { vectors } = JSON.parse(fs.readFileSync(path.join(REPO, 'tests', 'vectors', 'packing.json'), 'utf8'));
  assert.ok(vectors.length >= 8);
  for (const v of vectors) {
    const [id, value, packed] = [v.id, v.value, v.packed].map((h) => Buffer.from(h, 'hex'));
    assert.deepEqual(delayq.packEntry(id, value), packed, v.name);
    const u = delayq.unpackEntry(packed);
    assert.deepEqual([u.id, u.value], [id, value], v.name);
  }
});

test('shared vectors: every value round-trips through a queue', async () => {
  const { vectors } = JSON.parse(fs.readFileSync(path.join(REPO, 'tests', 'vectors', 'packing.json'), 'utf8'));
  const q = client.delayedQueue(queueName());
  for (const v of vectors) {
    const value = Buffer.from(v.value, 'hex');
    await q.offer(value, 3_600_000);
    assert.deepEqual(await q.readAll(), [value], v.name);
    await q.clear();
    await q.offer(value, 0);
    assert.deepEqual(await q.take(5000), value, v.name);
  }
});

test('shared vectors: the entries this binding stores are what Redis\'s struct.pack makes', async () => {
  const { vectors } = JSON.parse(fs.readFileSync(path.join(REPO, 'tests', 'vectors', 'packing.json'), 'utf8'));
  const script = fs.readFileSync(path.join(REPO, 'tests', 'vectors', 'stored_entries.lua'), 'utf8');
  const name = queueName();
  const q = client.delayedQueue(name);
  const values = vectors.map((v) => Buffer.from(v.value, 'hex'));
  for (const value of values) await q.offer(value, 3_600_000);
  const stored = redis.cli('EVAL', script, '1', `redisson_delay_queue:{${name}}`);
  await q.clear();
  const sha1 = (b) => require('node:crypto').createHash('sha1').update(b).digest('hex');
  assert.deepEqual(stored.split('\n'), values.map((v) => '1 ' + sha1(v)));
});

test('every call', async () => {
  const q = client.delayedQueue(queueName());
  const before = await client.serverTimeMs();
  const due = await q.offer('hello', 300);
  assert.ok(due >= before + 300 && due <= before + 1300);
  assert.equal(await q.poll(), null);
  assert.equal((await q.take(5000)).toString(), 'hello');
  assert.ok((await client.serverTimeMs()) >= due);
  const dues = await q.offerAll([['a', 3_600_000], [new Uint8Array([98]), 3_600_000n], { value: Buffer.from('c'), delayMs: 3_600_000 }]);
  assert.equal(dues.length, 3);
  assert.equal(await q.size(), 3);
  assert.equal(await q.contains('b'), true);
  assert.equal(await q.contains('z'), false);
  assert.equal(await q.remove('b'), true);
  assert.deepEqual((await q.readAll()).map(String), ['a', 'c']);
  assert.deepEqual(await q.stats(), { delayed: 2, ready: 0, corrupt: 0 });
  await q.clear();
  assert.equal(await q.size(), 0);
  assert.equal(await q.take(100), null);
});

test('an async iterator over due values', async () => {
  const q = client.delayedQueue(queueName());
  await q.offerAll([['1', 0], ['2', 50], ['3', 100]]);
  const got = [];
  for await (const v of q.values({ timeoutMs: 1000 })) got.push(v.toString());
  assert.deepEqual(got.sort(), ['1', '2', '3']);
});

test('1,000 concurrent offers from one process, each taken once', async () => {
  const q = client.delayedQueue(queueName());
  await Promise.all(Array.from({ length: 1000 }, (_, i) => q.offer(`m${i}`, i % 200)));
  const got = [];
  for await (const v of q.values({ timeoutMs: 2000 })) got.push(v.toString());
  assert.equal(got.length, 1000);
  assert.equal(new Set(got).size, 1000);
});

test('concurrent offers keep the order of the calls', async () => {
  const q = client.delayedQueue(queueName(), { scheduler: false });
  const values = Array.from({ length: 500 }, (_, i) => `o${i}`);
  await Promise.all(values.map((v, i) => q.offer(v, 60_000 + (i % 7))));
  assert.deepEqual((await q.readAll()).map(String), values);
});

test('concurrent offers each get their own due time, and a bad one fails alone', async () => {
  const q = client.delayedQueue(queueName(), { scheduler: false });
  const before = await client.serverTimeMs();
  const delays = [0, 1000, -1, 5000, 1.5, 2000, NaN];
  const results = await Promise.allSettled(delays.map((d, i) => q.offer(`v${i}`, d)));
  results.forEach((r, i) => {
    if (!(delays[i] >= 0)) {
      assert.equal(r.status, 'rejected');
      assert.equal(r.reason.code, 'ERR_DELAYQ_INVALID_ARGUMENT');
    } else {
      // A fraction of a millisecond rounds up.
      const due = before + Math.ceil(delays[i]);
      assert.equal(r.status, 'fulfilled');
      assert.ok(r.value >= due && r.value < due + 1000, `due of v${i}`);
    }
  });
  assert.deepEqual((await q.readAll()).map(String), ['v0', 'v1', 'v3', 'v4', 'v5']);
});

test('take honours an AbortSignal and loses nothing', async () => {
  const q = client.delayedQueue(queueName());
  for (let i = 0; i < 5; i++) {
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 30);
    await assert.rejects(q.take({ signal: ac.signal }), (e) => e.name === 'AbortError' && e.code === 'ABORT_ERR');
  }
  const ac = new AbortController();
  ac.abort();
  await assert.rejects(q.take(undefined, { signal: ac.signal }), { code: 'ABORT_ERR' });
  await q.offer('kept', 0);
  assert.equal((await q.take(5000)).toString(), 'kept');
  assert.equal(await q.poll(), null);
});

test('bad arguments are rejected before reaching Redis', async () => {
  const name = queueName();
  const q = client.delayedQueue(name, { scheduler: false });
  for (const delay of [-1, -0.5, NaN, Infinity, -1n, '5', null]) {
    await assert.rejects(q.offer('x', delay), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' }, String(delay));
  }
  for (const value of [5, null, undefined, {}, [1]]) {
    await assert.rejects(q.offer(value, 0), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' });
  }
  await assert.rejects(q.offerAll([['ok', 0], ['bad', -1]]), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' });
  for (const timeoutMs of [-1, NaN, Infinity, '5']) {
    await assert.rejects(q.take(timeoutMs), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' }, String(timeoutMs));
  }
  assert.throws(() => client.delayedQueue(''), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' });
  assert.throws(() => client.delayedQueue(42), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' });
  assert.equal(redis.cli('EXISTS', `redisson_delay_queue:{${name}}`), '0');
});

test('milliseconds may be bigint: take, values and the reconcile interval', async () => {
  const q = client.delayedQueue(queueName(), { reconcileIntervalMs: 50n });
  assert.equal(await q.take(10n), null);
  assert.equal(await q.take({ timeoutMs: 10n }), null);
  assert.equal(await q.take(10n, {}), null);
  for await (const v of q.values({ timeoutMs: 10n })) assert.fail(`unexpected ${v}`);
  await q.offer('x', 20n);
  assert.equal((await q.take(5000n)).toString(), 'x');
  for (const ms of [-1n, -(2n ** 70n), 2n ** 70n, 2n ** 1100n]) {
    await assert.rejects(q.take(ms), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' }, `take(${ms})`);
    await assert.rejects(q.take({ timeoutMs: ms }), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' });
    await assert.rejects(q.offer('x', ms), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' }, `offer(${ms})`);
    assert.throws(() => client.delayedQueue(queueName(), { reconcileIntervalMs: ms }), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' }, `reconcileIntervalMs: ${ms}`);
  }
  // A bigint beyond 64 bits is too large (or negative), never "not finite".
  await assert.rejects(q.offer('x', 2n ** 64n - 1n), (e) => /overflows/.test(e.message) && !/finite/.test(e.message));
  // ... and the message names it, not the largest number.
  for (const [call, what] of [[() => q.offer('x', 10n ** 30n), 'delayMs'], [() => q.take(2n ** 64n), 'timeoutMs']]) {
    await assert.rejects(call, (e) => e.code === 'ERR_DELAYQ_INVALID_ARGUMENT' && e.message.includes(what) && /of \d{20,} overflows/.test(e.message) && !/e\+308/.test(e.message));
  }
  await assert.rejects(q.offer('x', -(2n ** 64n)), (e) => /must not be negative/.test(e.message));
  // A count beyond 64 bits is too large; argument errors read as core's do.
  const rq = client.reliableQueue(queueName());
  await assert.rejects(rq.receiveMany(2n ** 64n, 0), (e) => e.code === 'ERR_DELAYQ_INVALID_ARGUMENT' && e.message === `invalid argument: n of ${2n ** 64n} is too large`);
  await assert.rejects(q.offer('\ud800', 0), (e) => e.message.startsWith('invalid argument: '));
  rq.close();
  for (const ms of [-1, NaN, '5', {}]) {
    assert.throws(() => client.delayedQueue(queueName(), { reconcileIntervalMs: ms }), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' }, `reconcileIntervalMs: ${String(ms)}`);
  }
  q.close();
});

test('wrong type, closed handle and connection errors have their codes', async () => {
  const name = queueName();
  redis.cli('SET', name, 'a string');
  const q = client.delayedQueue(name, { scheduler: false });
  await assert.rejects(q.offer('x', 0), { code: 'ERR_DELAYQ_WRONG_TYPE' });
  await assert.rejects(q.take(100), { code: 'ERR_DELAYQ_WRONG_TYPE' });
  assert.equal(redis.cli('EXISTS', `redisson_delay_queue:{${name}}`, `redisson_delay_queue_timeout:{${name}}`), '0');
  assert.equal(redis.cli('GET', name), 'a string');
  const other = await delayq.Client.connect(redis.url);
  const oq = other.delayedQueue(queueName());
  oq.close();
  await assert.rejects(oq.size(), { code: 'ERR_DELAYQ_CLOSED' });
  other.close();
  await assert.rejects(other.serverTimeMs(), { code: 'ERR_DELAYQ_CLOSED' });
  await assert.rejects(delayq.Client.connect('redis://user:hunter2@127.0.0.1:1'), (e) => e.code === 'ERR_DELAYQ_CONNECTION' && !e.message.includes('hunter2'));
  await assert.rejects(delayq.Client.connect('http://x'), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' });
});

test('timeout and server errors have their codes', async () => {
  // A listener that accepts and never answers: connecting gives up after core's 5 s.
  const silent = net.createServer(() => {});
  await new Promise((resolve) => silent.listen(0, '127.0.0.1', resolve));
  try {
    await assert.rejects(delayq.Client.connect(`redis://127.0.0.1:${silent.address().port}`), { code: 'ERR_DELAYQ_TIMEOUT' });
  } finally {
    silent.close();
  }
  // A server that refuses writes (out of memory) answers with an error reply.
  const name = queueName();
  const q = client.delayedQueue(name, { scheduler: false });
  redis.cli('CONFIG', 'SET', 'maxmemory', '1');
  try {
    await assert.rejects(q.offer('x', 0), { code: 'ERR_DELAYQ_SERVER' });
  } finally {
    redis.cli('CONFIG', 'SET', 'maxmemory', '0');
  }
  assert.equal(redis.cli('EXISTS', `redisson_delay_queue:{${name}}`), '0');
});

test('a process with a client exits once close() is called', () => {
  const script = `
    const { Client } = require(${JSON.stringify(path.join(__dirname, '..'))});
    (async () => {
      const c = await Client.connect(${JSON.stringify(redis.url)});
      const q = c.delayedQueue('idle');
      const pending = q.take().catch((e) => console.log(e.code));
      setTimeout(() => c.close(), 100);
      await pending;
    })();`;
  const out = execFileSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 10000 });
  assert.equal(out.trim(), 'ERR_DELAYQ_CLOSED');
  const idle = `
    const { Client } = require(${JSON.stringify(path.join(__dirname, '..'))});
    (async () => {
      const c = await Client.connect(${JSON.stringify(redis.url)});
      c.delayedQueue('idle');
      await c.serverTimeMs();
      c.close();
      console.log('closed');
    })();`;
  assert.equal(execFileSync(process.execPath, ['-e', idle], { encoding: 'utf8', timeout: 10000 }).trim(), 'closed');
});

test('interop with the Rust CLI, both ways', async () => {
  const cli = cliPath();
  const name = queueName();
  const q = client.delayedQueue(name, { scheduler: false });
  await q.offer(Buffer.from([0, 255, 1]), 100);
  const out = execFileSync(cli, ['--url', redis.url, '--base64', 'take', name, '--timeout-ms', '5000'], { encoding: 'utf8' });
  assert.deepEqual(Buffer.from(out.trim(), 'base64'), Buffer.from([0, 255, 1]));
  execFileSync(cli, ['--url', redis.url, 'offer', name, '100', 'from rust']);
  const mover = client.delayedQueue(name);
  assert.equal((await mover.take(5000)).toString(), 'from rust');
});
