// A reliable consumer: acks what it handled, retries what failed.
//   REDIS_URL=redis://127.0.0.1:6379 node examples/node/reliable_worker.js jobs
'use strict';
const { Client } = require('../../bindings-node');

async function main() {
  const client = await Client.connect(process.env.REDIS_URL || 'redis://127.0.0.1:6379');
  const jobs = client.reliableQueue(process.argv[2] || 'jobs', {
    visibilityTimeoutMs: 30_000,
    maxAttempts: 5,
    backoffMs: [15_000, 180_000, 600_000, 1_800_000, 3_600_000],
  });
  await jobs.offer('charge card 42', 1000, 'invoice-42');
  let oneDone;
  const handled = new Promise((resolve) => {
    oneDone = resolve;
  });
  const consuming = jobs.consume(async (d) => {
    console.log(`[node worker] ${d.id} attempt ${d.attempt}: ${d.payload}`);
    oneDone(); // one job is enough for the example
  }, 4);
  await handled;
  // The graceful close: running handlers finish and are acked, then consume resolves.
  await jobs.close({ deadlineMs: 10_000 });
  await consuming;
  client.close();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
