// A reliable consumer: offers one job, then consumes with four handlers at a time, acking
// what was handled and retrying what failed (the first attempt fails here on purpose). The
// queue's settings are those of the Python and Java workers, so that they can take turns on
// one queue (settings are stored with the queue: a handle naming others is refused).
//   REDIS_URL=redis://127.0.0.1:6379 node examples/node/reliable_worker.js worker-jobs
'use strict';
const { Client } = require('../../bindings-node');

async function main() {
  const client = await Client.connect(process.env.REDIS_URL || 'redis://127.0.0.1:6379');
  const name = process.argv[2] || 'worker-jobs';
  // The first retry comes 200 ms after a failure, the next ones 3 and 10 minutes.
  const jobs = client.reliableQueue(name, {
    visibilityTimeoutMs: 30_000,
    maxAttempts: 5,
    backoffMs: [200, 180_000, 600_000],
  });
  await jobs.offer('charge card 42', 500, 'invoice-42');
  let oneDone;
  const handled = new Promise((resolve) => {
    oneDone = resolve;
  });
  const consuming = jobs.consume(async (d) => {
    console.log(`[node worker] ${d.id} attempt ${d.attempt}: ${d.payload}`);
    if (d.attempt === 1) throw new Error('card network down; retry'); // nacked: back in 200 ms
    oneDone(); // one job is enough for the example
  }, 4);
  await handled;
  // The graceful close: running handlers finish and are acked, then consume resolves.
  await jobs.close({ deadlineMs: 10_000 });
  await consuming;
  console.log('[node worker] done:', await client.reliableQueue(name).stats());
  client.close();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
