// Offers orders with delays to a delayed queue.
//   REDIS_URL=redis://127.0.0.1:6379 node examples/node/producer.js orders 10
'use strict';
const { Client } = require('../../bindings-node');

async function main() {
  const url = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
  const [queueName = 'orders', count = '10'] = process.argv.slice(2);
  const client = await Client.connect(url);
  const queue = client.delayedQueue(queueName);
  for (let i = 0; i < Number(count); i++) {
    const delayMs = 200 * (i % 10);
    // The due estimate lets consumers print how late an order arrived.
    const due = (await client.serverTimeMs()) + delayMs;
    await queue.offer(JSON.stringify({ id: `node-${i}`, lang: 'node', due }), delayMs);
    console.log(`offered node-${i}, due in ${delayMs} ms`);
  }
  client.close();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
