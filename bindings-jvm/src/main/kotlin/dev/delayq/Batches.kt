package dev.delayq

import java.util.concurrent.ConcurrentLinkedQueue
import java.util.concurrent.ExecutorService
import java.util.concurrent.Executors
import java.util.concurrent.atomic.AtomicBoolean

/**
 * Hands items to [send] in batches, in the order they were added, from one daemon thread:
 * the calling thread only queues. A JNA call costs about the same for one item as for a
 * thousand (tens of µs on the 2-core test machine), so `offerAsync` from a busy thread goes
 * to core many offers per call instead of one. Not queue behaviour: core still sees each
 * offer on its own, in order, and coalesces the script calls itself.
 */
internal class Batches<T>(private val send: (List<T>) -> Unit, private val failed: (List<T>, Throwable) -> Unit) {
    private val queued = ConcurrentLinkedQueue<T>()
    private val draining = AtomicBoolean()

    fun add(item: T) {
        queued.add(item)
        if (draining.compareAndSet(false, true)) sender.execute(::drain)
    }

    private fun drain() {
        while (true) {
            val batch = ArrayList<T>()
            while (batch.size < MAX) batch.add(queued.poll() ?: break)
            if (batch.isNotEmpty()) {
                // `send` reports each item's outcome itself (offer_all_then: through its
                // token); should the call itself fail, every item of the batch fails with it.
                try {
                    send(batch)
                } catch (e: Throwable) {
                    runCatching { failed(batch, e) }
                }
                continue
            }
            draining.set(false)
            // An item added after the last poll but before the flag was cleared: go on.
            if (queued.isEmpty() || !draining.compareAndSet(false, true)) return
        }
    }

    private companion object {
        const val MAX = 1000
        val sender: ExecutorService =
            Executors.newSingleThreadExecutor { r -> Thread(r, "delayq-offers").apply { isDaemon = true } }
    }
}
