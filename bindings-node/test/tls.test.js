'use strict';
// Connection options: mutual TLS against a redis-server that requires client certificates
// (a CA, server and client certificates made here with `openssl`), and the durability
// option reaching core.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const delayq = require('..');
const { startRedis, spawnRedis, queueName } = require('./helpers');

function openssl(cwd, ...args) {
  execFileSync('openssl', args, { cwd, stdio: 'ignore' });
}

/** `ca.crt`, `server.crt`/`.key` for 127.0.0.1 and `client.crt`/`.key` signed by it;
 * `other-ca.crt`, a CA that signed neither. */
function makeCerts(dir) {
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  for (const ca of ['ca', 'other-ca']) {
    openssl(dir, 'req', '-x509', ...ec, '-days', '2', '-subj', `/CN=delayq test ${ca}`, '-keyout', `${ca}.key`, '-out', `${ca}.crt`);
  }
  const leaves = {
    server: 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n',
    client: 'extendedKeyUsage=clientAuth\n',
  };
  for (const [leaf, ext] of Object.entries(leaves)) {
    fs.writeFileSync(path.join(dir, `${leaf}.ext`), `basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n${ext}`);
    openssl(dir, 'req', ...ec, '-subj', `/CN=delayq test ${leaf}`, '-keyout', `${leaf}.key`, '-out', `${leaf}.csr`);
    openssl(dir, 'x509', '-req', '-in', `${leaf}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2', '-extfile', `${leaf}.ext`, '-out', `${leaf}.crt`);
  }
}

/** A redis-server that speaks only TLS and requires a client certificate. */
async function startTlsRedis() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'delayq-node-tls-'));
  makeCerts(dir);
  const f = (name) => path.join(dir, name);
  const tlsCli = (port, args, options) =>
    execFileSync('redis-cli', ['-p', String(port), '--tls', '--cacert', f('ca.crt'), '--cert', f('client.crt'), '--key', f('client.key'), ...args], {
      encoding: 'utf8',
      ...options,
    }).trim();
  const { port, proc } = await spawnRedis(
    dir,
    (port) => ['--port', '0', '--tls-port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir,
      '--tls-cert-file', f('server.crt'), '--tls-key-file', f('server.key'), '--tls-ca-cert-file', f('ca.crt'), '--tls-auth-clients', 'yes'],
    (port) => tlsCli(port, ['INFO', 'server'], { timeout: 2000, stdio: ['ignore', 'pipe', 'ignore'] }),
  );
  const cli = (...args) => tlsCli(port, args, { timeout: 30_000 });
  return {
    url: `rediss://127.0.0.1:${port}`,
    file: f,
    cli,
    stop() {
      proc.kill('SIGKILL');
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

let tls;
let plain;
before(async () => {
  tls = await startTlsRedis();
  plain = await startRedis();
});
after(() => {
  tls.stop();
  plain.stop();
});

const mutual = () => ({ caFile: tls.file('ca.crt'), certFile: tls.file('client.crt'), keyFile: tls.file('client.key') });

test('mutual TLS carries a delayed queue and a reliable queue', async () => {
  const client = await delayq.Client.connect(tls.url, { tls: mutual() });
  try {
    const name = queueName();
    const q = client.delayedQueue(name);
    await q.offer('secure', 100);
    assert.deepEqual(await q.take({ timeoutMs: 5000 }), Buffer.from('secure'));
    assert.equal(tls.cli('LLEN', name), '0');
    const r = client.reliableQueue(queueName());
    const id = await r.offer('job', 0);
    const d = await r.receive({ timeoutMs: 5000 });
    assert.equal(d.id, id);
    assert.equal(await d.ack(), true);
  } finally {
    client.close();
  }
});

test('a server certificate from another CA is refused with a connection error', async () => {
  await assert.rejects(delayq.connect(tls.url, { tls: { ...mutual(), caFile: tls.file('other-ca.crt') } }), (err) => {
    assert.equal(err.code, 'ERR_DELAYQ_CONNECTION');
    assert.match(err.message, /UnknownIssuer/);
    return true;
  });
});

test('a client without a certificate is refused when the server requires one', async () => {
  await assert.rejects(delayq.connect(tls.url, { tls: { caFile: tls.file('ca.crt') } }), (err) => {
    assert.equal(err.code, 'ERR_DELAYQ_CONNECTION');
    assert.match(err.message, /CertificateRequired/);
    return true;
  });
});

test('bad certificate options are invalid arguments', async () => {
  await assert.rejects(delayq.connect(tls.url, { tls: { caFile: tls.file('no-such.crt') } }), (err) => {
    assert.equal(err.code, 'ERR_DELAYQ_INVALID_ARGUMENT');
    assert.match(err.message, /no-such\.crt/);
    return true;
  });
  await assert.rejects(delayq.connect(tls.url, { tls: { caFile: tls.file('ca.crt'), certFile: tls.file('client.crt') } }), {
    code: 'ERR_DELAYQ_INVALID_ARGUMENT',
  });
  await assert.rejects(delayq.connect(tls.url, { tls: { caFile: 42 } }), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' });
});

test('the durability option reaches core', async () => {
  // No replica: a write waits for one, is not confirmed in time, and says so.
  const client = await delayq.connect(plain.url, { durability: { replicas: 1, timeoutMs: 200 } });
  try {
    const q = client.delayedQueue(queueName(), { scheduler: false });
    await assert.rejects(q.offer('v', 60_000), (err) => {
      assert.equal(err.code, 'ERR_DELAYQ_TIMEOUT');
      assert.match(err.message, /replica/);
      return true;
    });
  } finally {
    client.close();
  }
  const none = await delayq.connect(plain.url, { durability: { replicas: 0n } });
  try {
    assert.ok((await none.delayedQueue(queueName(), { scheduler: false }).offer('v', 60_000)) > 0);
  } finally {
    none.close();
  }
  for (const replicas of [-1, 1.5, 2 ** 40]) {
    await assert.rejects(delayq.connect(plain.url, { durability: { replicas } }), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' });
  }
  await assert.rejects(delayq.connect(plain.url, { durability: { replicas: 1, timeoutMs: -1 } }), { code: 'ERR_DELAYQ_INVALID_ARGUMENT' });
});
