'use strict';
// A real redis-server on a free loopback port, started and stopped by the tests.
const { spawn, spawnSync, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const REPO = path.resolve(__dirname, '..', '..');

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

function cli(port, ...args) {
  return execFileSync('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8' }).trim();
}

async function startRedis() {
  if (spawnSync('redis-server', ['--version']).status !== 0) {
    execFileSync('bash', [path.join(REPO, 'scripts', 'ensure-redis.sh')], { stdio: 'inherit' });
  }
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'delayq-node-'));
  const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], { stdio: 'ignore' });
  const deadline = Date.now() + 10000;
  for (;;) {
    try {
      if (cli(port, 'ping') === 'PONG') break;
    } catch {}
    if (Date.now() > deadline) throw new Error('redis-server did not start');
    await new Promise((r) => setTimeout(r, 20));
  }
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    cli: (...args) => cli(port, ...args),
    stop() {
      proc.kill('SIGKILL');
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

let n = 0;
function queueName() {
  n += 1;
  return `q-${process.pid}-${n}-${Date.now()}`;
}

function cliPath() {
  const target = process.env.CARGO_TARGET_DIR ? path.resolve(REPO, process.env.CARGO_TARGET_DIR) : path.join(REPO, 'target');
  const p = process.env.DELAYQ_CLI || path.join(target, 'debug', 'delayq');
  if (!fs.existsSync(p)) execFileSync('cargo', ['build', '-q', '-p', 'delayq-cli'], { cwd: REPO, stdio: 'inherit' });
  return p;
}

/** Resolves when `check()` holds, polling every 5 ms; rejects after `timeoutMs`. */
async function until(check, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 5));
  }
}

module.exports = { startRedis, queueName, cliPath, REPO, freePort, until };
