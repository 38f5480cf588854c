'use strict';
// Jobs per second of one consumer process: BullMQ 5 (one Worker, concurrency 50) beside
// delayq's reliable queue (`consume(handler, 50)`, core's consume), the same number of jobs
// due now, an empty async handler, on one throwaway redis-server started here (a free
// loopback port, never 6379), in the same run:
//   npm run build            # the addon, release build (once)
//   node bench/reliable_vs_bullmq.js [jobs=20000] [concurrency=50] [rounds=1]
// BullMQ is not a dependency of the package: when it does not resolve, it is installed
// once with `npm install --no-save` into bench/.deps (git-ignored); package.json and
// package-lock.json are left alone.
//
// BullMQ: the jobs are added with addBulk (1,000 a call), then one Worker starts; the rate
// runs from the first handler start to the last `completed` event. delayq: the messages
// are offered with offerAll (due now), then consume starts; the rate runs from the first
// handler start to the moment stats show nothing ready or in flight (every ack landed).
const { execFileSync, spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const DEPS = path.join(__dirname, '.deps');

function loadBullmq() {
  try {
    return require(require.resolve('bullmq'));
  } catch {}
  const local = () => require(require.resolve('bullmq', { paths: [DEPS] }));
  try {
    return local();
  } catch {}
  fs.mkdirSync(DEPS, { recursive: true });
  console.error(`installing bullmq@5 into ${DEPS} (once)`);
  execFileSync('npm', ['install', '--no-save', '--no-audit', '--no-fund', '--prefix', DEPS, 'bullmq@5', 'ioredis@5'], { stdio: 'inherit' });
  return local();
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function startRedis() {
  let port;
  do port = await freePort();
  while (port === 6379);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'delayq-bench-'));
  const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], { stdio: 'ignore' });
  const stop = () => {
    proc.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  };
  for (let i = 0; ; i++) {
    const up = await new Promise((resolve) => {
      const c = net.connect(port, '127.0.0.1', () => {
        c.end();
        resolve(true);
      });
      c.on('error', () => resolve(false));
    });
    if (up) break;
    if (i > 200) {
      stop();
      throw new Error('redis-server did not start');
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return { port, stop };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// CPU used so far by the redis-server (INFO cpu, user + sys) and by this process (all its
// threads), in microseconds: what one job costs each side, beside the rate.
function cpuNow(port) {
  const info = execFileSync('redis-cli', ['-p', String(port), 'info', 'cpu']).toString();
  const field = (name) => Number(info.match(new RegExp(`^${name}:([\\d.]+)`, 'm'))[1]);
  const node = process.cpuUsage();
  return { redis: (field('used_cpu_user') + field('used_cpu_sys')) * 1e6, node: node.user + node.system };
}

function cpuPerJob(before, after, n) {
  return { redis: (after.redis - before.redis) / n, node: (after.node - before.node) / n };
}

async function bullmqRun({ Queue, Worker }, port, n, concurrency, payload) {
  const connection = { host: '127.0.0.1', port, maxRetriesPerRequest: null };
  const name = `bench-bullmq-${process.pid}-${Date.now()}`;
  const queue = new Queue(name, { connection });
  for (let i = 0; i < n; i += 1000) {
    const jobs = [];
    for (let j = i; j < Math.min(n, i + 1000); j++) jobs.push({ name: 'job', data: { p: payload } });
    await queue.addBulk(jobs);
  }
  let first = null;
  let completed = 0;
  let last = null;
  const cpuBefore = cpuNow(port);
  const done = new Promise((resolve) => {
    const worker = new Worker(
      name,
      async () => {
        if (first === null) first = process.hrtime.bigint();
      },
      { connection, concurrency },
    );
    worker.on('completed', () => {
      completed += 1;
      if (completed === n) {
        last = process.hrtime.bigint();
        resolve(worker);
      }
    });
    worker.on('error', (e) => console.error('bullmq worker error', e));
  });
  const worker = await done;
  const cpu = cpuPerJob(cpuBefore, cpuNow(port), n);
  await worker.close();
  await queue.obliterate({ force: true });
  await queue.close();
  return { rate: n / (Number(last - first) / 1e9), cpu };
}

async function delayqRun(Client, port, n, concurrency, payload) {
  const url = `redis://127.0.0.1:${port}`;
  const client = await Client.connect(url);
  const q = client.reliableQueue(`bench-consume-${process.pid}-${Date.now()}`);
  for (let i = 0; i < n; i += 1000) {
    const batch = [];
    for (let j = i; j < Math.min(n, i + 1000); j++) batch.push([payload, 0]);
    await q.offerAll(batch);
  }
  for (let i = 0; i < 3000 && (await q.stats()).ready < n; i++) await sleep(10);
  let first = null;
  let handled = 0;
  const cpuBefore = cpuNow(port);
  const consuming = q.consume(async () => {
    if (first === null) first = process.hrtime.bigint();
    handled += 1;
  }, concurrency);
  while (handled < n) await sleep(1);
  const handledAt = process.hrtime.bigint();
  for (;;) {
    const s = await q.stats();
    if (s.ready === 0 && s.inFlight === 0) break;
    await sleep(1);
  }
  const acked = process.hrtime.bigint();
  const cpu = cpuPerJob(cpuBefore, cpuNow(port), n);
  await q.close({ deadlineMs: 5000 });
  await consuming;
  client.close();
  return { acked: n / (Number(acked - first) / 1e9), handled: n / (Number(handledAt - first) / 1e9), cpu };
}

async function main() {
  const n = Number(process.argv[2] || 20000);
  const concurrency = Number(process.argv[3] || 50);
  const rounds = Number(process.argv[4] || 1);
  const bullmq = loadBullmq();
  const bullVersion = require(require.resolve('bullmq/package.json', { paths: [DEPS, __dirname] })).version;
  const { Client } = require('..');
  const payload = 'x'.repeat(44);
  const redis = await startRedis();
  try {
    const redisVersion = execFileSync('redis-server', ['--version']).toString().match(/v=(\S+)/)[1];
    console.log(
      `redis-server ${redisVersion} on port ${redis.port}, node ${process.version}, bullmq ${bullVersion}, ${os.cpus().length} cores, ` +
        `load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}; ${n} jobs, concurrency ${concurrency}, 44-byte payload, empty async handler`,
    );
    for (let r = 0; r < rounds; r++) {
      const theirs = await bullmqRun(bullmq, redis.port, n, concurrency, payload);
      const ours = await delayqRun(Client, redis.port, n, concurrency, payload);
      const cpu = (c) => `CPU per job: redis ${c.redis.toFixed(1)} us, node ${c.node.toFixed(1)} us`;
      console.log(
        `delayq consume ${ours.acked.toFixed(0)} jobs/s (handlers alone ${ours.handled.toFixed(0)}/s; ${cpu(ours.cpu)}), ` +
          `BullMQ Worker ${theirs.rate.toFixed(0)} jobs/s (${cpu(theirs.cpu)}), ratio ${(ours.acked / theirs.rate).toFixed(2)} (goal >= 3)`,
      );
    }
  } finally {
    redis.stop();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
