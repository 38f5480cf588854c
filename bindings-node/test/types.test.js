'use strict';
// index.d.ts types the names of spec_names.test.js: tsc accepts their uses and refuses
// what the wrapper refuses where a type can tell (a misspelt option, a code of another
// kind). `npm run typecheck` checks the example; this checks these names.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const PKG = path.resolve(__dirname, '..');

const SOURCE = `
import { Client, DelayqError, ErrorCode, type DelayqErrorCode, type DelayqErrorKind, type Delivery } from 'delayq'

export async function uses(client: Client, e: unknown): Promise<void> {
  const q = client.reliableQueue('jobs', {
    visibilityTimeout: 30_000,
    backoff: 5000,
    backoffBase: 1n,
    backoffMax: 10,
    deadLetterRetention: 0,
    idempotencyRetention: 0,
    reconcileInterval: 1000n,
  })
  client.reliableQueue('jobs', { backoffMs: 5000n })
  client.reliableQueue('jobs', { backoff: [1, 2n] })
  client.delayedQueue('orders', { reconcileInterval: 50 })
  await Client.connect('redis://x', { durability: { replicas: 1, timeout: 100 } })
  const d: Delivery | null = await q.receive({ timeout: 10 })
  const ds: Delivery[] = await q.receiveMany(5, { timeout: 10n })
  const v: Buffer | null = await client.delayedQueue('orders').take({ timeout: 10, signal: new AbortController().signal })
  await q.consume(async (delivery: Delivery) => delivery.id, { concurrency: 4, signal: new AbortController().signal })
  await q.consume(() => undefined, 4n)
  await q.close({ deadline: 5000 })
  console.log(d, ds, v)
  if (e instanceof DelayqError) {
    const code: DelayqErrorCode = e.code
    const kind: DelayqErrorKind = e.kind
    if (e.code === ErrorCode.CLOSED) console.log(code, kind)
    // @ts-expect-error: not a delayq code
    if (e.code === 'ABORT_ERR') console.log(e)
  }
  const made: DelayqError = new DelayqError('x', 'timeout')
  // @ts-expect-error: not a kind
  new DelayqError('x', 'nope')
  // @ts-expect-error: ErrorCode is read-only
  ErrorCode.CLOSED = 'x'
  // @ts-expect-error: a misspelt option
  client.reliableQueue('jobs', { visibilityTimout: 1 })
  // @ts-expect-error: a misspelt option
  await q.consume(() => undefined, { concurency: 4 })
  console.log(made)
}
`;

test('tsc accepts the new names and refuses misspelt ones', { timeout: 120_000 }, () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'delayq-types-'));
  try {
    fs.writeFileSync(path.join(dir, 'uses.ts'), SOURCE);
    fs.writeFileSync(
      path.join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'commonjs',
          strict: true,
          noEmit: true,
          types: ['node'],
          typeRoots: [path.join(PKG, 'node_modules', '@types')],
          baseUrl: '.',
          paths: { delayq: [path.join(PKG, 'index.d.ts')] },
        },
        files: ['uses.ts'],
      }),
    );
    const tsc = path.join(PKG, 'node_modules', 'typescript', 'bin', 'tsc');
    const r = spawnSync(process.execPath, [tsc, '-p', path.join(dir, 'tsconfig.json')], { encoding: 'utf8' });
    assert.equal(r.status, 0, `tsc:\n${r.stdout}${r.stderr}`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
