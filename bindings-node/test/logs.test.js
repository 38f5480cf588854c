'use strict';
// Core's logs reach a JavaScript hook (setLogger) and, with DEBUG=delayq, stderr.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn, spawnSync } = require('node:child_process');
const path = require('node:path');
const delayq = require('..');
const { startRedis, queueName } = require('./helpers');

let redis;
let client;
before(async () => {
  redis = await startRedis();
  client = await delayq.Client.connect(redis.url);
});
after(() => {
  delayq.setLogger(null);
  client.close();
  redis.stop();
});

test('a transfer task failing on a wrong-typed key is seen by the hook', async () => {
  const name = queueName();
  redis.cli('SET', `redisson_delay_queue_timeout:{${name}}`, 'a string');
  const seen = new Promise((resolve) => {
    delayq.setLogger((record) => {
      if (record.message.includes('transfer failed') && record.message.includes(name)) resolve(record);
    });
  });
  const q = client.delayedQueue(name); // its transfer task runs the transfer script
  const record = await seen;
  assert.equal(record.level, 'warn');
  assert.match(record.target, /^delayq/);
  assert.match(record.message, /WRONGTYPE|wrong/i);
  q.close();
  delayq.setLogger(null);
});

test('setLogger refuses what is not a function, and a level it does not know', () => {
  assert.throws(() => delayq.setLogger(42), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' });
  assert.throws(() => delayq.setLogger(() => {}, { level: 'loud' }), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' });
  delayq.setLogger(null);
});

// Runs a program whose queue's transfer task fails (its timeout set is a string) with
// `env`; returns the first stderr line telling so, once the program exited with 0.
async function transferFailureLine(env) {
  const name = queueName();
  redis.cli('SET', `redisson_delay_queue_timeout:{${name}}`, 'a string');
  const program = `
    const delayq = require(${JSON.stringify(path.join(__dirname, '..'))});
    delayq.Client.connect(${JSON.stringify(redis.url)}).then((c) => {
      c.delayedQueue(${JSON.stringify(name)});
      process.stdin.on('end', () => c.close()).resume();
    });`;
  const child = spawn(process.execPath, ['-e', program], { env });
  let stderr = '';
  const line = await new Promise((resolve, reject) => {
    child.stderr.on('data', (b) => {
      stderr += b;
      const found = stderr.split('\n').find((l) => l.includes('transfer failed') && l.includes(name));
      if (found) resolve(found);
    });
    child.on('close', (code) => reject(new Error(`exited with ${code} before logging: ${stderr}`)));
  });
  child.stdin.end();
  const code = await new Promise((resolve) => child.on('close', resolve));
  assert.equal(code, 0);
  return line;
}

test('DEBUG=delayq prints core logs to stderr', { timeout: 30000 }, async () => {
  const line = await transferFailureLine({ ...process.env, DEBUG: 'delayq' });
  assert.match(line, /^delayq WARN delayq/);
});

test('with no setup, a failing transfer task is a process warning', { timeout: 30000 }, async () => {
  const env = { ...process.env };
  delete env.DEBUG;
  delete env.DELAYQ_LOG;
  assert.match(await transferFailureLine(env), /DelayqWarning/);
});

test('DELAYQ_LOG takes a level in any case or RUST_LOG form; a value it does not know is ignored with a warning', { timeout: 60000 }, async () => {
  const env = { ...process.env };
  delete env.DEBUG;
  assert.match(await transferFailureLine({ ...env, DELAYQ_LOG: 'delayq=Debug' }), /^delayq WARN delayq/);
  // Not a level: the module still loads, says so once, and warns as with no setup.
  const { stderr, status } = spawnSync(process.execPath, ['-e', `require(${JSON.stringify(path.join(__dirname, '..'))}); console.log('loaded')`], {
    env: { ...env, DELAYQ_LOG: 'bogus' },
    encoding: 'utf8',
  });
  assert.equal(status, 0, stderr);
  assert.match(stderr, /DELAYQ_LOG=bogus is not a level .*: ignored/);
  assert.match(await transferFailureLine({ ...env, DELAYQ_LOG: 'bogus' }), /DelayqWarning/);
  // off: nothing, not even the process warning, once the transfer task has failed.
  const name = queueName();
  redis.cli('SET', `redisson_delay_queue_timeout:{${name}}`, 'a string');
  const program = `
    const delayq = require(${JSON.stringify(path.join(__dirname, '..'))});
    delayq.Client.connect(${JSON.stringify(redis.url)}).then((c) => {
      c.delayedQueue(${JSON.stringify(name)});
      const failed = () => delayq.metrics().queues.some((q) => q.name === ${JSON.stringify(name)} && q.transferErrors > 0);
      const check = setInterval(() => { if (failed()) { clearInterval(check); c.close(); console.log('failed'); } }, 20);
    });`;
  const quiet = spawnSync(process.execPath, ['-e', program], { env: { ...env, DELAYQ_LOG: 'off' }, encoding: 'utf8', timeout: 20000 });
  assert.deepEqual([quiet.status, quiet.stdout.trim(), quiet.stderr], [0, 'failed', '']);
});

test('a failed consume handler is logged with its stack', { timeout: 30000 }, async () => {
  const name = queueName();
  const seen = new Promise((resolve) => {
    delayq.setLogger((record) => {
      if (record.message.includes('handler failed') && record.message.includes(name)) resolve(record);
    });
  });
  const q = client.reliableQueue(name, { maxAttempts: 1 });
  await q.offer(Buffer.from('job'), 0, 'job-1');
  const controller = new AbortController();
  async function failingJob(d) {
    throw new RangeError(`cannot process ${d.id}`);
  }
  const consuming = q.consume(failingJob, { signal: controller.signal });
  const record = await seen;
  controller.abort();
  await consuming;
  q.close();
  delayq.setLogger(null);
  assert.equal(record.level, 'warn');
  assert.match(record.message, /error=RangeError: cannot process job-1\n\s+at failingJob /);
});
