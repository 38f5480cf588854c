'use strict';
// The process exits once its event loop is empty, whether the client was closed or not,
// with waits in flight or not: small programs run DELAYQ_EXIT_RUNS times (default 50) each,
// every run must exit with code 0 and print what it should, within a time limit.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const path = require('node:path');
const { startRedis } = require('./helpers');

const RUNS = Number(process.env.DELAYQ_EXIT_RUNS || 50);
const PARALLEL = 4;
const LIMIT_MS = 20000;
const PKG = JSON.stringify(path.join(__dirname, '..'));

let redis;
before(async () => {
  redis = await startRedis();
});
after(() => redis.stop());

/** Runs `source` in a new node process; resolves to its exit code, signal and output. */
function run(source, { env, killAfterMs } = {}) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['-e', source], { env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b) => (stdout += b));
    child.stderr.on('data', (b) => (stderr += b));
    const timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs || LIMIT_MS);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout: stdout.trim(), stderr: stderr.trim() });
    });
  });
}

async function runMany(program, expected) {
  let next = 0;
  const failures = [];
  await Promise.all(
    Array.from({ length: PARALLEL }, async () => {
      while (next < RUNS) {
        const i = next++;
        const r = await run(program(`exit-${process.pid}-${i}`));
        if (r.code !== 0 || r.signal !== null || r.stdout !== expected) failures.push({ run: i, ...r });
      }
    }),
  );
  assert.deepEqual(failures, [], `${failures.length} of ${RUNS} runs failed`);
}

const connect = (name) => `
  const delayq = require(${PKG});
  const name = ${JSON.stringify(name)};
  const connected = delayq.Client.connect(${JSON.stringify(redis.url)});`;

test('a client never closed: the process exits once its event loop is empty', async () => {
  const program = (name) => `${connect(name)}
    delayq.setLogger(() => {});
    connected.then(async (c) => {
      const q = c.delayedQueue(name);
      await q.offer('v', 0);
      const v = await q.take(5000);
      const r = c.reliableQueue(name + '-r');
      await r.offer('m', 0);
      const d = await r.receive(5000);
      await d.ack();
      console.log('took', String(v), String(d.payload));
    });`;
  await runMany(program, 'took v m');
});

test('a take in flight, then close(): the take fails with ERR_DELAYQ_CLOSED and the process exits', async () => {
  const program = (name) => `${connect(name)}
    connected.then(async (c) => {
      const q = c.delayedQueue(name);
      const r = c.reliableQueue(name + '-r');
      const waits = [q.take(), r.receive(), r.receiveMany(5, 60000)].map((p) => p.catch((e) => e.code));
      await q.size();
      c.close();
      console.log((await Promise.all(waits)).join(' '));
    });`;
  await runMany(program, 'ERR_DELAYQ_CLOSED ERR_DELAYQ_CLOSED ERR_DELAYQ_CLOSED');
});

test('process.exit with waits in flight: exits with its code, nothing aborts', async () => {
  const program = (name) => `${connect(name)}
    connected.then(async (c) => {
      const q = c.delayedQueue(name);
      const r = c.reliableQueue(name + '-r');
      q.take();
      r.receive();
      r.consume(async () => {}, 4);
      await r.offer('soon', 0);
      await q.offer('soon', 0);
      q.take(0);
      console.log('exiting');
      process.exit(0);
    });`;
  await runMany(program, 'exiting');
});

test('a take with no timeout keeps the process alive until it gets its value, then the process exits', async () => {
  const name = `exit-${process.pid}-waiting`;
  const program = `${connect(name)}
    connected.then(async (c) => {
      console.log('waiting');
      console.log(String(await c.delayedQueue(name).take()));
    });`;
  const child = run(program);
  // Still waiting after 1 s with nothing to take; then a value arrives and it exits.
  const alive = await Promise.race([child.then(() => false), new Promise((r) => setTimeout(() => r(true), 1000))]);
  assert.equal(alive, true);
  redis.cli('RPUSH', name, 'arrived');
  assert.deepEqual(await child, { code: 0, signal: null, stdout: 'waiting\narrived', stderr: '' });
});
