#!/usr/bin/env node
// The Node.js interop agent: see README.md beside this file.
'use strict';

const fs = require('node:fs');
const { Client } = require('../../../bindings-node');

async function main() {
  const [mode, url, kind, queue, a, b] = process.argv.slice(2);
  const client = await Client.connect(url);
  const q = kind === 'delayed' ? client.delayedQueue(queue) : client.reliableQueue(queue);
  if (mode === 'produce') {
    const lines = fs.readFileSync(a, 'utf8').split('\n').filter((l) => l.length > 0);
    const out = [];
    for (const line of lines) {
      const [hex, delay] = line.split('\t');
      const payload = Buffer.from(hex, 'hex');
      let due = -1;
      if (kind === 'delayed') due = await q.offer(payload, Number(delay));
      else await q.offer(payload, Number(delay));
      out.push(`${hex}\t${due}\n`);
    }
    fs.writeFileSync(b, out.join(''));
  } else {
    const idle = Number(a);
    const fd = fs.openSync(b, 'w');
    let last = Date.now();
    while (Date.now() - last < idle) {
      let got = null;
      if (kind === 'delayed') {
        const v = await q.take(200);
        if (v !== null) got = [v, -1];
      } else {
        const d = await q.receive(200);
        if (d !== null) {
          await d.ack();
          got = [d.payload, d.dueAt];
        }
      }
      if (got !== null) {
        const now = await client.serverTimeMs();
        fs.writeSync(fd, `${Buffer.from(got[0]).toString('hex')}\t${now}\t${got[1]}\n`);
        last = Date.now();
      }
    }
    fs.closeSync(fd);
  }
  await client.close();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
