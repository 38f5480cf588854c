package dev.delayq

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.extension.ExtendWith
import java.time.Duration
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.Executors
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicInteger

@ExtendWith(RedisExtension::class)
class ConcurrencyTest {
    @Test
    fun `sixteen threads offering and taking at once deliver every value exactly once`(redis: RedisServer) =
        Client.connect(redis.url).use { client ->
            val queue = client.delayedQueue(RedisServer.uniqueName("threads"))
            val threads = 16
            val perThread = 200
            val total = threads * perThread
            val seen = ConcurrentHashMap<String, Int>()
            val taken = AtomicInteger()
            val pool = Executors.newFixedThreadPool(threads * 2)
            try {
                val producers = (0 until threads).map { t ->
                    pool.submit {
                        for (i in 0 until perThread) queue.offer("v-$t-$i", Duration.ofMillis((i % 5 * 10).toLong()))
                    }
                }
                val consumers = (0 until threads).map {
                    pool.submit {
                        while (taken.get() < total) {
                            val v = queue.take(Duration.ofMillis(200)) ?: continue
                            seen.merge(String(v), 1, Int::plus)
                            taken.incrementAndGet()
                        }
                    }
                }
                (producers + consumers).forEach { it.get(120, TimeUnit.SECONDS) }
            } finally {
                pool.shutdownNow()
                queue.close()
            }
            assertEquals(total, seen.size)
            assertEquals(setOf(1), seen.values.toSet())
            assertEquals(DelayedStats(0, 0, 0), client.delayedQueue(queue.name).use { it.stats() })
        }

    @Test
    fun `concurrent offers each get their own due time and a bad one fails alone`(redis: RedisServer) =
        Client.connect(redis.url).use { client ->
            client.delayedQueue(RedisServer.uniqueName("batch")).use { queue ->
                val before = client.serverTimeMs()
                val good = (0 until 200).map { i -> i to queue.offerAsync("v$i", Duration.ofSeconds(100L + i)) }
                val bad = queue.offerAsync("bad", Duration.ofSeconds(-1))
                val dues = good.map { (i, f) -> i to f.get(30, TimeUnit.SECONDS) }
                val after = client.serverTimeMs()
                for ((i, due) in dues) {
                    assertTrue(due in before + (100L + i) * 1000..after + (100L + i) * 1000, "v$i due $due")
                }
                val e = org.junit.jupiter.api.assertThrows<java.util.concurrent.ExecutionException> { bad.get(30, TimeUnit.SECONDS) }
                assertTrue(e.cause is InvalidArgumentException)
                assertEquals((0 until 200).map { "v$it" }.toSet(), queue.readAll().map { String(it) }.toSet())
                assertEquals(200L, queue.size())
                queue.clear()
            }
        }
}
