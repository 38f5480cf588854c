package dev.delayq

import kotlinx.coroutines.async
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertArrayEquals
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import org.junit.jupiter.api.extension.ExtendWith
import java.time.Duration
import java.util.concurrent.CancellationException
import java.util.concurrent.TimeUnit

@ExtendWith(RedisExtension::class)
class DelayedQueueTest {
    private fun <T> withQueue(redis: RedisServer, block: (Client, DelayedQueue) -> T): T =
        Client.connect(redis.url).use { client -> client.delayedQueue(RedisServer.uniqueName()).use { block(client, it) } }

    private fun String.b() = toByteArray(Charsets.UTF_8)

    @Test
    fun `offer returns the due time from the server clock`(redis: RedisServer) =
        withQueue(redis) { client, queue ->
            val before = client.serverTimeMs()
            val due = queue.offer("a", Duration.ofSeconds(30))
            val after = client.serverTimeMs()
            assertTrue(due in before + 30_000..after + 30_000, "due $due not in [$before, $after] + 30 s")
            assertEquals(1L, queue.size())
        }

    @Test
    fun `offerAll takes Kotlin pairs of values and delays, and poll finds a value as soon as it is due`(redis: RedisServer) =
        Client.connect(redis.url).use { client ->
            // No transfer task here: poll itself moves what came due.
            client.delayedQueue(RedisServer.uniqueName(), DelayedQueueOptions(scheduler = false)).use { queue ->
                val dues = queue.offerAll(listOf("now" to Duration.ZERO, "later" to Duration.ofHours(1)))
                assertEquals(2, dues.size)
                queue.offerAll(listOf("bytes".b() to Duration.ofHours(1)))
                assertEquals(3L, queue.size())
                assertArrayEquals("now".b(), queue.poll())
                assertNull(queue.poll())
            }
            val reliable = client.reliableQueue(RedisServer.uniqueName())
            val ids = reliable.offerAll(listOf("a" to Duration.ofHours(1), "b" to Duration.ofHours(1)))
            reliable.offerAll(listOf("c".b() to Duration.ofHours(1)))
            assertEquals(2, ids.toSet().size)
            assertEquals(3L, reliable.stats().delayed)
        }

    @Test
    fun `sub-millisecond delays round up`(redis: RedisServer) =
        withQueue(redis) { client, queue ->
            val before = client.serverTimeMs()
            val due = queue.offer("a", Duration.ofNanos(1))
            assertTrue(due >= before + 1)
        }

    @Test
    fun `a delayed value is taken at its due time, not before`(redis: RedisServer) =
        withQueue(redis) { client, queue ->
            val due = queue.offer("later".b(), Duration.ofMillis(300))
            assertNull(queue.poll())
            val got = queue.take(Duration.ofSeconds(10))
            val now = client.serverTimeMs()
            assertArrayEquals("later".b(), got)
            assertTrue(now >= due, "taken at $now, due $due")
            assertEquals(DelayedStats(0, 0, 0), queue.stats())
        }

    @Test
    fun `offerAll, size, contains, remove, readAll, clear, stats`(redis: RedisServer) =
        withQueue(redis) { _, queue ->
            val dues = queue.offerAll(listOf(Offer("x", Duration.ofHours(1)), Offer("y".b(), Duration.ofHours(2)), Offer("z", Duration.ofHours(3))))
            assertEquals(3, dues.size)
            assertTrue(dues[0] < dues[1] && dues[1] < dues[2])
            assertEquals(3L, queue.size())
            assertTrue(queue.contains("y"))
            assertTrue(queue.contains("x".b()))
            assertFalse(queue.contains("w"))
            assertTrue(queue.remove("y"))
            assertFalse(queue.remove("y".b()))
            assertEquals(listOf("x", "z"), queue.readAll().map { String(it) })
            assertEquals(DelayedStats(2, 0, 0), queue.stats())
            queue.clear()
            assertEquals(0L, queue.size())
            assertEquals(emptyList<ByteArray>(), queue.readAll())
            assertEquals(emptyList<Long>(), queue.offerAll(emptyList<Offer>()))
        }

    @Test
    fun `take times out with null and poll returns null on an empty queue`(redis: RedisServer) =
        withQueue(redis) { _, queue ->
            assertNull(queue.poll())
            assertNull(queue.take(Duration.ofMillis(100)))
            assertNull(queue.take(Duration.ZERO))
        }

    @Test
    fun `values come out in due order`(redis: RedisServer) =
        withQueue(redis) { _, queue ->
            queue.offer("second", Duration.ofMillis(200))
            queue.offer("first", Duration.ZERO)
            assertEquals("first", String(queue.take(Duration.ofSeconds(10))!!))
            assertEquals("second", String(queue.take()))
        }

    @Test
    fun `CompletableFuture variants`(redis: RedisServer) {
        val client = Client.connectAsync(redis.url).get(10, TimeUnit.SECONDS)
        client.use {
            assertTrue(client.serverTimeMsAsync().get() > 0)
            client.delayedQueue(RedisServer.uniqueName()).use { queue ->
                val due = queue.offerAsync("a", Duration.ofHours(1)).get()
                assertTrue(due > 0)
                assertEquals(2, queue.offerAllAsync(listOf(Offer("b", Duration.ofHours(1)), Offer("c", Duration.ofHours(1)))).get().size)
                assertEquals(3L, queue.sizeAsync().get())
                assertTrue(queue.containsAsync("b").get())
                assertTrue(queue.containsAsync("b".b()).get())
                assertTrue(queue.removeAsync("b").get())
                assertFalse(queue.removeAsync("b".b()).get())
                assertEquals(listOf("a", "c"), queue.readAllAsync().get().map { String(it) })
                assertEquals(DelayedStats(2, 0, 0), queue.statsAsync().get())
                assertNull(queue.clearAsync().get(), "a CompletableFuture<Void> completes with null")
                assertNull(queue.pollAsync().get())
                val taking = queue.takeAsync(Duration.ofSeconds(10))
                queue.offerAsync("now".b(), Duration.ZERO).get()
                assertEquals("now", String(taking.get(10, TimeUnit.SECONDS)!!))
                assertNull(queue.takeAsync(Duration.ofMillis(50)).get())
                val failed = assertThrows<java.util.concurrent.ExecutionException> { queue.offerAsync("x", Duration.ofMillis(-1)).get() }
                assertTrue(failed.cause is InvalidArgumentException)
            }
        }
    }

    @Test
    fun `suspending variants`(redis: RedisServer) =
        runBlocking {
            Client.connectSuspend(redis.url).use { client ->
                assertTrue(client.coroutines.serverTimeMs() > 0)
                client.delayedQueue(RedisServer.uniqueName()).use { queue ->
                    val q = queue.coroutines
                    q.offer("a", Duration.ofHours(1))
                    q.offer("b".b(), Duration.ofHours(1))
                    assertEquals(2, q.offerAll(listOf(Offer("c", Duration.ofHours(1)), Offer("d", Duration.ofHours(1)))).size)
                    assertEquals(4L, q.size())
                    assertTrue(q.contains("a"))
                    assertTrue(q.contains("b".b()))
                    assertTrue(q.remove("c"))
                    assertFalse(q.remove("c".b()))
                    assertEquals(listOf("a", "b", "d"), q.readAll().map { String(it) })
                    assertEquals(DelayedStats(3, 0, 0), q.stats())
                    q.clear()
                    assertNull(q.poll())
                    val taking = async { q.take(Duration.ofSeconds(10)) }
                    q.offer("go", Duration.ZERO)
                    assertEquals("go", String(taking.await()!!))
                    q.offer("forever", Duration.ZERO)
                    assertEquals("forever", String(withTimeout(10_000) { q.take() }))
                    assertThrows<InvalidArgumentException> { runBlocking { q.offer("x", Duration.ofSeconds(-1)) } }
                }
            }
            Unit // (JUnit runs only test methods that return nothing)
        }

    @Test
    fun `a cancelled take gives up and the value goes to the next taker`(redis: RedisServer) =
        withQueue(redis) { _, queue ->
            val pending = queue.takeAsync()
            pending.cancel(true)
            assertThrows<CancellationException> { pending.get() }
            queue.offer("kept", Duration.ZERO)
            assertEquals("kept", String(queue.take(Duration.ofSeconds(10))!!))
        }

    @Test
    fun `takes cancelled at any instant lose nothing`(redis: RedisServer) =
        withQueue(redis) { _, queue ->
            val n = 200
            queue.offerAll((1..n).map { Offer("v$it", Duration.ZERO) })
            awaitTrue { redis.cli("LLEN", queue.name).toInt() == n }
            var taken = 0
            for (i in 0 until 1000) {
                val pending = queue.takeAsync(Duration.ofSeconds(1))
                // cancel after 0 to 1.5 ms: before, during and after the value's hand-over
                val until = System.nanoTime() + (i * 7919L % 1500) * 1000
                while (System.nanoTime() < until) Thread.onSpinWait()
                if (!pending.cancel(true) && pending.get() != null) taken++
            }
            // values of cancelled takes go back in the background
            awaitTrue { taken + redis.cli("LLEN", queue.name).toInt() == n }
            assertEquals(n, taken + redis.cli("LLEN", queue.name).toInt())
        }

    @Test
    fun `closing a queue fails later calls and a waiting take`(redis: RedisServer) =
        Client.connect(redis.url).use { client ->
            val queue = client.delayedQueue(RedisServer.uniqueName())
            val waiting = queue.takeAsync()
            queue.close()
            queue.close()
            val e = assertThrows<java.util.concurrent.ExecutionException> { waiting.get(10, TimeUnit.SECONDS) }
            assertTrue(e.cause is ClosedException, "${e.cause}")
            assertThrows<ClosedException> { queue.offer("x", Duration.ZERO) }
            assertThrows<ClosedException> { queue.size() }
            assertThrows<ClosedException> { queue.take(Duration.ofSeconds(1)) }
            // another handle on the same queue still works
            client.delayedQueue(queue.name).use { assertEquals(0L, it.size()) }
        }

    @Test
    fun `closing the client fails its queues and itself`(redis: RedisServer) {
        val client = Client.connect(redis.url)
        val queue = client.delayedQueue(RedisServer.uniqueName())
        assertFalse(client.isClosed)
        client.close()
        client.close()
        assertTrue(client.isClosed)
        assertThrows<ClosedException> { queue.offer("x", Duration.ZERO) }
        assertThrows<ClosedException> { queue.poll() }
        assertThrows<ClosedException> { client.serverTimeMs() }
        assertThrows<ClosedException> { client.delayedQueue("other") }
    }

    @Test
    fun `a handle without a scheduler moves nothing, one with a scheduler does`(redis: RedisServer) {
        run {
            Client.connect(redis.url).use { client ->
                val name = RedisServer.uniqueName("no-scheduler")
                client.delayedQueue(name, DelayedQueueOptions(scheduler = false)).use { q ->
                    q.offer("v", Duration.ZERO)
                    assertEquals(null, q.take(Duration.ofMillis(300)), "nobody moved the due entry")
                    assertEquals(1L, q.size())
                    client.delayedQueue(name, DelayedQueueOptions().withReconcileInterval(Duration.ofMillis(100))).use { mover ->
                        assertEquals("v", q.take(Duration.ofSeconds(10))?.let { String(it) })
                        assertEquals(0L, mover.size())
                    }
                }
                assertThrows<InvalidArgumentException> { client.delayedQueue(name, DelayedQueueOptions(reconcileInterval = Duration.ZERO)) }
            }
        }
    }

    /** Waits up to 20 s for [condition], which reads state that settles in the background. */
    private fun awaitTrue(condition: () -> Boolean) {
        val deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20)
        while (!condition() && System.nanoTime() < deadline) Thread.onSpinWait()
    }

    @Test
    fun `offerAsync calls from one thread, batched per native call, all land in call order`(redis: RedisServer) =
        Client.connect(redis.url).use { client ->
            val queue = client.delayedQueue(RedisServer.uniqueName("async-batches"))
            val n = 5000
            val futures = (0 until n).map { queue.offerAsync("v$it", Duration.ofHours(1)) }
            val dues = futures.map { it.get(30, TimeUnit.SECONDS) }
            assertEquals(n.toLong(), queue.size())
            // One handle's offers reach Redis in call order: due times never go back.
            assertTrue(dues.zipWithNext().all { (a, b) -> a <= b }, "due times out of call order")
            assertEquals((0 until n).map { "v$it" }, queue.readAll().map { String(it) }, "queue order is call order")
            val bad = queue.offerAsync("x", Duration.ofSeconds(-1))
            val good = queue.offerAsync("y", Duration.ZERO)
            val e = assertThrows<java.util.concurrent.ExecutionException> { bad.get(10, TimeUnit.SECONDS) }
            assertTrue(e.cause is InvalidArgumentException, e.cause.toString())
            assertTrue(good.get(10, TimeUnit.SECONDS) > 0, "a bad offer fails alone")
            queue.close()
            val closed = assertThrows<java.util.concurrent.ExecutionException> { queue.offerAsync("z", Duration.ZERO).get(10, TimeUnit.SECONDS) }
            assertTrue(closed.cause is ClosedException, closed.cause.toString())
        }
}
