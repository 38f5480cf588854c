package dev.delayq

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.extension.ExtendWith
import java.time.Duration
import java.util.Collections
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicInteger

/**
 * The JVM threads that native threads call into the JVM on (README, "Threads" and "Logs"):
 * attached once, as daemons, under delayq's names, not as a new `Thread-N` per call.
 */
@ExtendWith(RedisExtension::class)
class ThreadsTest {
    private fun until(what: String, check: () -> Boolean) {
        val deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20)
        while (!check()) {
            assertTrue(System.nanoTime() < deadline, "timed out waiting: $what")
            Thread.sleep(10)
        }
    }

    @Test
    fun `log records reach SLF4J on the delayq-logs thread`(redis: RedisServer) =
        Client.connect(redis.url).use { client ->
            val name = RedisServer.uniqueName("log-thread")
            // The queue's sorted set holds a string: every transfer pass fails and logs a WARN.
            redis.cli("SET", "redisson_delay_queue_timeout:{$name}", "x")
            client.delayedQueue(name).use {
                val failures = { RecordingLogs.events.filter { "transfer failed" in it.message && name in it.message } }
                until("two WARNs of the failing transfer task") { failures().size >= 2 }
                assertEquals(setOf("delayq-logs"), failures().map { it.thread }.toSet(), "${failures()}")
            }
            val core = RecordingLogs.events.filter { it.logger.startsWith("delayq.") }
            assertEquals(setOf("delayq-logs"), core.map { it.thread }.toSet(), "every record of core: $core")
        }

    @Test
    fun `consume handlers run on daemon delayq-consume threads that keep their ThreadLocals`(redis: RedisServer) =
        Client.connect(redis.url).use { client ->
            val q = client.reliableQueue(RedisServer.uniqueName("consume-thread"))
            val n = 20
            q.offerAll((0 until n).map { ReliableOffer("$it", Duration.ZERO) })
            val threads = Collections.synchronizedList(mutableListOf<Thread>())
            val mark = ThreadLocal<Boolean>() // as an MDC keeps its context
            val marked = AtomicInteger()
            val consumer =
                q.consumeAsync(1) { _ ->
                    if (mark.get() == true) marked.incrementAndGet()
                    mark.set(true)
                    threads += Thread.currentThread()
                }
            until("every message handled and acked") { threads.size == n && q.stats() == ReliableStats(0, 0, 0, 0) }
            q.close()
            consumer.get(10, TimeUnit.SECONDS)
            assertEquals(setOf("delayq-consume"), threads.map { it.name }.toSet())
            assertTrue(threads.all { it.isDaemon }, "daemon threads")
            val distinct = threads.toSet().size
            assertTrue(marked.get() > 0 && distinct < n, "a thread attached once runs many handlers: $distinct threads for $n")
        }

    @Test
    fun `a dependent stage that joins another delayq future does not hang the async calls`(redis: RedisServer) =
        Client.connect(redis.url).use { client ->
            val name = RedisServer.uniqueName("join-in-stage")
            val q = client.delayedQueue(name)
            // The stage, added before the take completes, runs where it completes, and blocks
            // on an offer.
            val joined =
                q.takeAsync(Duration.ofSeconds(10)).thenApply { value ->
                    Triple(Thread.currentThread().name, value, q.offerAsync("b", Duration.ofSeconds(100)).join())
                }
            q.offer("a", Duration.ZERO)
            val (thread, value, due) = joined.get(10, TimeUnit.SECONDS)
            assertEquals("a", value?.decodeToString())
            assertTrue(due > 0, "the joined offer completed")
            assertTrue(thread.startsWith("delayq-completions-"), thread)
            // Async calls of this client and of another one go on.
            Client.connect(redis.url).use { other ->
                val q2 = other.delayedQueue(RedisServer.uniqueName("join-other"), DelayedQueueOptions(scheduler = false))
                q2.offerAsync("x", Duration.ofSeconds(100)).get(10, TimeUnit.SECONDS)
                assertEquals(null, q2.takeAsync(Duration.ofMillis(50)).get(10, TimeUnit.SECONDS))
            }
            // Many stages blocked at once on futures completed later still all complete.
            val chained = (0 until 32).map { i -> q.offerAsync("c$i", Duration.ofSeconds(100)).thenApply { q.offerAsync("d$i", Duration.ofSeconds(100)).join() } }
            chained.forEach { it.get(20, TimeUnit.SECONDS) }
            assertEquals(65, q.size())
        }
}
