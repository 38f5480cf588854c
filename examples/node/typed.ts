// Type-checked by `npm run typecheck` in bindings-node: the TypeScript view of the API.
import { Client, type DelayqError, type Delivery, type OfferOutcome, type ReliableSettings } from 'delayq'

async function main(): Promise<void> {
  const client = await Client.connect(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379')
  const orders = client.delayedQueue('orders')
  const due: number = await orders.offer('hello', 2000)
  const value: Buffer | null = await orders.take({ timeoutMs: 5000 })
  console.log(due, value?.toString())
  const jobs = client.reliableQueue('jobs', { visibilityTimeoutMs: 30_000n, maxAttempts: 5, backoffMs: [15_000, 180_000n, 600_000] })
  const id: string = await jobs.offer(Buffer.from('job'), 0n, 'job-1')
  const d = await jobs.receive(1000n)
  if (d !== null) await d.ack()
  const outcome: OfferOutcome = await jobs.offerWithOutcome('job', 0, 'job-1')
  const batch: Delivery[] = await jobs.receiveMany(10, { timeoutMs: 1000 })
  for (const b of batch) {
    const leaseEnds: number = b.deadline
    const kept: boolean = await b.extend(60_000n)
    console.log(leaseEnds, kept)
  }
  const acked: boolean[] = await jobs.ackMany(batch)
  const settings: ReliableSettings = await jobs.settings()
  console.log(outcome.created, acked, settings.visibilityTimeoutMs, jobs.lostLeases())
  const closing: Promise<void> = jobs.close({ deadlineMs: 5000 })
  await closing
  try {
    await orders.offer('x', -1)
  } catch (e) {
    console.log((e as DelayqError).code, id)
  }
  client.close()
}

void main()
