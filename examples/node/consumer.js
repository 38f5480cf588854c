// Takes orders as they come due and prints how late each was.
//   REDIS_URL=redis://127.0.0.1:6379 node examples/node/consumer.js orders 10 5
//   (queue, orders to take, idle seconds before giving up)
'use strict';
const { Client } = require('../../bindings-node');

async function main() {
  const url = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
  const [queueName = 'orders', count = '10', idle = '10'] = process.argv.slice(2);
  const client = await Client.connect(url);
  const queue = client.delayedQueue(queueName);
  let taken = 0;
  for await (const value of queue.values({ timeoutMs: Number(idle) * 1000 })) {
    const now = await client.serverTimeMs();
    const order = JSON.parse(value.toString());
    console.log(`[node consumer] order ${order.id} from ${order.lang}, ${now - order.due} ms late`);
    if (++taken >= Number(count)) break;
  }
  client.close();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
