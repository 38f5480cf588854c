'use strict';
// Offers per second through delayq beside ioredis running the same offer script with
// EVALSHA, at the same concurrency, in the same run. delayq's core coalesces concurrent
// offers into multi-entry script calls (one call in flight per queue handle, the offers
// made meanwhile in the next); a third figure coalesces by hand over ioredis, the offers of
// one tick in one EVALSHA (the script takes many entries), the fair limit:
//   node bench/offer.js redis://127.0.0.1:PORT [offers] [concurrency]
const crypto = require('node:crypto');
const Redis = require('ioredis');
const { Client, offerScriptSource } = require('..');

async function run(n, concurrency, offer) {
  let next = 0;
  const start = process.hrtime.bigint();
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < n) {
      next += 1;
      await offer();
    }
  }));
  return n / (Number(process.hrtime.bigint() - start) / 1e9);
}

async function main() {
  const url = process.argv[2] || process.env.REDIS_URL || 'redis://127.0.0.1:6379';
  const n = Number(process.argv[3] || 100000);
  const concurrency = Number(process.argv[4] || 50);
  const payload = Buffer.alloc(44, 'x');
  const client = await Client.connect(url);
  const q = client.delayedQueue(`bench-node-${process.pid}`, { scheduler: false });
  const ours = await run(n, concurrency, () => q.offer(payload, 3_600_000));
  await q.clear();
  client.close();

  const redis = new Redis(url);
  const name = `bench-ioredis-${process.pid}`;
  const keys = [`redisson_delay_queue_timeout:{${name}}`, `redisson_delay_queue:{${name}}`, `redisson_delay_queue_channel:{${name}}`, name];
  redis.defineCommand('delayqOffer', { numberOfKeys: 4, lua: offerScriptSource() });
  const theirs = await run(n, concurrency, () => redis.delayqOffer(...keys, 3_600_000, crypto.randomBytes(8), payload));
  await redis.del(...keys);
  // Coalescing by hand over ioredis (the offers of one tick in one EVALSHA, the script
  // takes any number of entries): the limit of the script.
  let batch = null;
  const coalesced = () => new Promise((resolve, reject) => {
    if (!batch) {
      const b = (batch = []);
      queueMicrotask(() => {
        batch = null;
        const args = b.flatMap(() => [3_600_000, crypto.randomBytes(8), payload]);
        redis.delayqOffer(...keys, ...args).then((dues) => b.forEach((e, i) => e.resolve(dues[i])), (err) => b.forEach((e) => e.reject(err)));
      });
    }
    batch.push({ resolve, reject });
  });
  const batched = await run(n, concurrency, coalesced);
  await redis.del(...keys);
  redis.disconnect();
  console.log(
    `${concurrency} in flight: delayq ${ours.toFixed(0)} offers/s, ioredis ${theirs.toFixed(0)} offers/s, ratio ${(ours / theirs).toFixed(2)}; ` +
      `ioredis coalescing by hand (a tick per EVALSHA) ${batched.toFixed(0)} offers/s, ratio ${(ours / batched).toFixed(2)}`,
  );
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
