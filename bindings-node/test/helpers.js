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
  return execFileSync('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8', timeout: 30_000 }).trim();
}

/**
 * Starts `argv(port)` (a redis-server command line) on a free port, logging to redis.log in
 * `dir`; `info(port)` runs that server's `INFO server` (it may throw). The port is drawn free
 * and let go before the server binds it, so another process may take it first: a server
 * that exits before answering, or a port answered by another server, starts again on
 * another port.
 */
async function spawnRedis(dir, argv, info) {
  const log = path.join(dir, 'redis.log');
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    const proc = spawn('redis-server', [...argv(port), '--logfile', log], { stdio: 'ignore' });
    let exited = false;
    proc.on('exit', () => (exited = true));
    const deadline = Date.now() + 10000;
    while (!exited && Date.now() < deadline) {
      let answer = '';
      try {
        answer = info(port);
      } catch (e) {
        if (e.code === 'ETIMEDOUT') break; // something else holds the port, mute
      }
      if (answer.includes(`process_id:${proc.pid}`)) return { port, proc };
      await new Promise((r) => setTimeout(r, 20));
    }
    proc.kill('SIGKILL');
  }
  const tail = fs.existsSync(log) ? fs.readFileSync(log, 'utf8').slice(-2000) : '(no log)';
  throw new Error(`redis-server did not start; its log ends:\n${tail}`);
}

async function startRedis() {
  if (spawnSync('redis-server', ['--version']).status !== 0) {
    execFileSync('bash', [path.join(REPO, 'scripts', 'ensure-redis.sh')], { stdio: 'inherit' });
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'delayq-node-'));
  const { port, proc } = await spawnRedis(
    dir,
    (port) => ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
    (port) => execFileSync('redis-cli', ['-p', String(port), 'INFO', 'server'], { encoding: 'utf8', timeout: 2000, stdio: ['ignore', 'pipe', 'ignore'] }),
  );
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

module.exports = { startRedis, spawnRedis, queueName, cliPath, REPO, freePort, until };
