package dev.delayq

import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertArrayEquals
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotEquals
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import org.junit.jupiter.api.extension.ExtendWith
import java.time.Duration
import java.util.Collections
import java.util.concurrent.CountDownLatch
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicInteger

@ExtendWith(RedisExtension::class)
class ReliableQueueTest {
    private val fast = ReliableQueueOptions(visibilityTimeout = Duration.ofMillis(400), maxAttempts = 3, backoff = Backoff.schedule(Duration.ofMillis(20)))

    private fun <T> withQueue(redis: RedisServer, options: ReliableQueueOptions = fast, block: (Client, ReliableQueue) -> T): T =
        Client.connect(redis.url).use { client -> client.reliableQueue(RedisServer.uniqueName("rq"), options).use { block(client, it) } }

    private fun String.b() = toByteArray(Charsets.UTF_8)

    /** Waits (up to 30 s) until the queue's counts are [want]. */
    private fun awaitStats(queue: ReliableQueue, want: ReliableStats) {
        val deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30)
        while (true) {
            val got = queue.stats()
            if (got == want) return
            assertTrue(System.nanoTime() < deadline, "stats stayed $got, waiting for $want")
            Thread.onSpinWait()
        }
    }

    @Test
    fun `offer, receive, ack with id, attempt and due time`(redis: RedisServer) =
        withQueue(redis) { client, queue ->
            val before = client.serverTimeMs()
            val id = queue.offer("hello", Duration.ofMillis(200))
            assertTrue(id.isNotEmpty())
            assertEquals(ReliableStats(1, 0, 0, 0), queue.stats())
            val d = queue.receive(Duration.ofSeconds(10))!!
            val now = client.serverTimeMs()
            assertEquals(id, d.id)
            assertEquals("hello", d.payloadString())
            assertArrayEquals("hello".b(), d.payload)
            assertEquals(1, d.attempt)
            assertTrue(d.dueAt >= before + 200, "due ${d.dueAt}, offered at $before")
            assertTrue(now >= d.dueAt, "received at $now before due ${d.dueAt}")
            assertEquals(ReliableStats(0, 0, 1, 0), queue.stats())
            assertTrue(d.ack())
            assertFalse(d.ack(), "a second ack finds the delivery ended")
            assertEquals(ReliableStats(0, 0, 0, 0), queue.stats())
            assertNull(queue.receive(Duration.ofMillis(50)))
        }

    @Test
    fun `an id still waiting or in flight is not offered twice`(redis: RedisServer) =
        withQueue(redis) { _, queue ->
            assertEquals("job-1", queue.offer("first", Duration.ZERO, "job-1"))
            assertEquals("job-1", queue.offer("second", Duration.ZERO, "job-1"))
            val d = queue.receive(Duration.ofSeconds(10))!!
            assertEquals("first", d.payloadString())
            assertEquals("job-1", queue.offer("third", Duration.ZERO, "job-1"), "in flight")
            assertEquals(ReliableStats(0, 0, 1, 0), queue.stats())
            assertTrue(d.ack())
            // done: the id may be used again
            assertEquals("job-1", queue.offer("fourth", Duration.ZERO, "job-1"))
            assertEquals("fourth", queue.receive(Duration.ofSeconds(10))!!.also { it.ack() }.payloadString())
            val generated = (1..100).map { queue.offer("x", Duration.ofHours(1)) }
            assertEquals(100, generated.toSet().size, "generated ids are unique")
            val ids = queue.offerAll(listOf(ReliableOffer("a", Duration.ofHours(1), "a-1"), ReliableOffer("b".b(), Duration.ofHours(1))))
            assertEquals("a-1", ids[0])
            assertEquals(102L, queue.stats().delayed)
        }

    @Test
    fun `a cancelled message is never delivered, a rescheduled one comes at its new time`(redis: RedisServer) =
        withQueue(redis) { client, queue ->
            val gone = queue.offer("cancelled", Duration.ofMillis(300))
            val moved = queue.offer("moved", Duration.ofHours(1))
            assertTrue(queue.cancel(gone))
            assertFalse(queue.cancel(gone))
            assertFalse(queue.cancel("no-such-id"))
            val before = client.serverTimeMs()
            assertTrue(queue.reschedule(moved, Duration.ofMillis(200)))
            assertFalse(queue.reschedule("no-such-id", Duration.ZERO))
            val d = queue.receive(Duration.ofSeconds(10))!!
            assertEquals("moved", d.payloadString())
            assertTrue(d.dueAt >= before + 200)
            d.ack()
            // well past the cancelled message's due time: nothing else arrives
            assertNull(queue.receive(Duration.ofMillis(600)))
            assertEquals(ReliableStats(0, 0, 0, 0), queue.stats())
        }

    @Test
    fun `nack retries, max attempts bury, requeueDead brings back, purgeDead deletes`(redis: RedisServer) =
        withQueue(redis) { _, queue ->
            val id = queue.offer("flaky", Duration.ZERO)
            for (attempt in 1..3) {
                val d = queue.receive(Duration.ofSeconds(10))!!
                assertEquals(id, d.id)
                assertEquals(attempt, d.attempt)
                assertTrue(if (attempt == 2) d.nack(Duration.ofMillis(10)) else d.nack())
            }
            assertNull(queue.receive(Duration.ofMillis(100)))
            assertEquals(ReliableStats(0, 0, 0, 1), queue.stats())
            val dead = queue.deadLetters()
            assertEquals(1, dead.size)
            assertEquals(id, dead[0].id)
            assertEquals("flaky", dead[0].payloadString())
            assertEquals(3, dead[0].attempts)
            assertTrue(dead[0].diedAt > 0)
            assertEquals(0L, queue.requeueDead(listOf("no-such-id")))
            assertEquals(1L, queue.requeueDead(listOf(id)))
            val again = queue.receive(Duration.ofSeconds(10))!!
            assertEquals(id, again.id)
            assertEquals(1, again.attempt, "attempts reset")
            // bury it again, then requeue all, then purge
            again.nack(); queue.receive(Duration.ofSeconds(10))!!.nack(); queue.receive(Duration.ofSeconds(10))!!.nack()
            assertEquals(1L, queue.stats().dead)
            assertEquals(1L, queue.requeueDead())
            queue.receive(Duration.ofSeconds(10))!!.nack(); queue.receive(Duration.ofSeconds(10))!!.nack(); queue.receive(Duration.ofSeconds(10))!!.nack()
            assertEquals(1L, queue.purgeDead())
            assertEquals(emptyList<DeadLetter>(), queue.deadLetters(10))
            assertEquals(ReliableStats(0, 0, 0, 0), queue.stats())
        }

    @Test
    fun `an unacked delivery comes back after the visibility timeout with its attempt raised`(redis: RedisServer) =
        withQueue(redis) { client, queue ->
            queue.offer("slow", Duration.ZERO)
            val first = queue.receive(Duration.ofSeconds(10))!!
            val took = client.serverTimeMs()
            assertNull(queue.receive(Duration.ofMillis(100)), "invisible while in flight")
            val second = queue.receive(Duration.ofSeconds(10))!!
            assertTrue(client.serverTimeMs() >= took + 400, "came back before the visibility timeout")
            assertEquals(first.id, second.id)
            assertEquals(2, second.attempt)
            assertFalse(first.ack(), "the expired delivery cannot be acked")
            assertTrue(second.ack())
        }

    @Test
    fun `consume acks on return, nacks on throw, and ends when the handle closes`(redis: RedisServer) =
        Client.connect(redis.url).use { client ->
            val queue = client.reliableQueue(RedisServer.uniqueName("consume"), fast)
            val ids = queue.offerAll((1..20).map { ReliableOffer("m$it", Duration.ZERO) })
            val seen = Collections.synchronizedList(mutableListOf<String>())
            val failures = AtomicInteger()
            val done = CountDownLatch(20)
            val consumer = Thread {
                queue.consume(4) { d ->
                    if (d.attempt == 1 && d.payloadString().endsWith("7")) {
                        failures.incrementAndGet()
                        throw IllegalStateException("first attempt of ${d.id} fails")
                    }
                    seen.add(d.id)
                    done.countDown()
                }
            }
            consumer.start()
            assertTrue(done.await(30, TimeUnit.SECONDS), "handled ${seen.size} of 20")
            // the last acks follow the handlers' return: await them
            awaitStats(queue, ReliableStats(0, 0, 0, 0))
            assertEquals(ids.toSet(), seen.toSet())
            assertEquals(20, seen.size, "each handled once after success")
            assertEquals(2, failures.get()) // m7 and m17
            queue.close()
            consumer.join(10_000)
            assertFalse(consumer.isAlive, "consume returned after close")
        }

    @Test
    fun `suspending consume runs suspend handlers and stops when cancelled`(redis: RedisServer) =
        withQueue(redis) { _, queue ->
            runBlocking {
                queue.coroutines.offerAll((1..5).map { ReliableOffer("c$it", Duration.ZERO) })
                val handled = Collections.synchronizedSet(mutableSetOf<String>())
                val job = launch(Dispatchers.Default) {
                    queue.coroutines.consume(2) { d -> kotlinx.coroutines.delay(1); handled.add(d.payloadString()) }
                }
                withTimeout(30_000) { while (queue.coroutines.stats() != ReliableStats(0, 0, 0, 0) || handled.size < 5) kotlinx.coroutines.delay(20) }
                job.cancel()
                job.join()
                assertEquals((1..5).map { "c$it" }.toSet(), handled)
                val id = queue.coroutines.offer("after", Duration.ZERO)
                val d = withTimeout(10_000) { queue.coroutines.receive(Duration.ofSeconds(10)) }!!
                assertEquals(id, d.id, "nobody consumes after cancel")
                assertTrue(d.coroutines.ack())
            }
        }

    @Test
    fun `receives cancelled at any instant lose nothing`(redis: RedisServer) =
        withQueue(redis, fast.copy(visibilityTimeout = Duration.ofMinutes(5))) { _, queue ->
            val n = 150L
            queue.offerAll((1..n).map { ReliableOffer("m$it", Duration.ZERO) })
            var received = 0L
            for (i in 0 until 600) {
                val pending = queue.receiveAsync(Duration.ofSeconds(1))
                val until = System.nanoTime() + (i * 7919L % 1500) * 1000
                while (System.nanoTime() < until) Thread.onSpinWait()
                if (!pending.cancel(true)) pending.get()?.let { assertTrue(it.ack()); received++ }
            }
            // deliveries of cancelled receives go back untouched, not after the visibility timeout
            awaitStats(queue, ReliableStats(0, n - received, 0, 0))
        }

    @Test
    fun `CompletableFuture calls`(redis: RedisServer) =
        withQueue(redis) { _, queue ->
            val receiving = queue.receiveAsync(Duration.ofSeconds(10))
            val id = queue.offerAsync("async".b(), Duration.ZERO, "async-1").get(10, TimeUnit.SECONDS)
            val d = receiving.get(10, TimeUnit.SECONDS)!!
            assertEquals(id, d.id)
            assertTrue(d.nackAsync(Duration.ZERO).get(10, TimeUnit.SECONDS))
            val again = queue.receiveAsync().get(10, TimeUnit.SECONDS)
            assertEquals(2, again.attempt)
            assertTrue(again.ackAsync().get(10, TimeUnit.SECONDS))
            assertEquals(ReliableStats(0, 0, 0, 0), queue.statsAsync().get(10, TimeUnit.SECONDS))
            assertEquals(0L, queue.purgeDeadAsync().get(10, TimeUnit.SECONDS))
        }

    @Test
    fun `bad arguments are refused before reaching Redis`(redis: RedisServer) =
        Client.connect(redis.url).use { client ->
            val name = RedisServer.uniqueName("rq-bad")
            for (bad in listOf(
                fast.copy(maxAttempts = 0), fast.copy(maxAttempts = 256), fast.copy(maxAttempts = -1),
                fast.copy(visibilityTimeout = Duration.ZERO), fast.copy(visibilityTimeout = Duration.ofMillis(-5)),
                fast.copy(backoff = Backoff.schedule()), fast.copy(backoff = Backoff.schedule(Duration.ofSeconds(-1))),
                fast.copy(backoff = Backoff.exponential(Duration.ofSeconds(-1))), fast.copy(reconcileInterval = Duration.ZERO),
            )) {
                assertThrows<InvalidArgumentException>("$bad") { client.reliableQueue(name, bad) }
            }
            assertThrows<InvalidArgumentException> { client.reliableQueue("", fast) }
            client.reliableQueue(name, fast).use { queue ->
                assertThrows<InvalidArgumentException> { queue.offer("x", Duration.ofMillis(-1)) }
                assertThrows<InvalidArgumentException> { queue.offer("x", Duration.ZERO, "") }
                assertThrows<InvalidArgumentException> { queue.offer("x", Duration.ZERO, "i".repeat(257)) }
                assertThrows<InvalidArgumentException> {
                    queue.offerAll(listOf(ReliableOffer("ok", Duration.ZERO), ReliableOffer("bad", Duration.ofSeconds(-1))))
                }
                assertThrows<InvalidArgumentException> { queue.cancel("") }
                assertThrows<InvalidArgumentException> { queue.reschedule("id", Duration.ofMillis(-1)) }
                assertThrows<InvalidArgumentException> { queue.receive(Duration.ofMillis(-1)) }
                assertThrows<InvalidArgumentException> { queue.deadLetters(-1) }
                assertThrows<InvalidArgumentException> { queue.requeueDead(listOf("")) }
                assertThrows<InvalidArgumentException> { queue.consume(0) { } }
                assertThrows<InvalidArgumentException> { queue.consume(-1) { } }
                assertEquals("", redis.cli("KEYS", "{dq:$name}*"), "nothing stored")
                assertEquals(ReliableStats(0, 0, 0, 0), queue.stats())
                // a caller id of 256 bytes (multi-byte UTF-8) is fine
                val long = "é".repeat(128)
                assertEquals(long, queue.offer("x", Duration.ZERO, long))
            }
        }

    @Test
    fun `a closed handle refuses calls and wakes a waiting receive`(redis: RedisServer) =
        Client.connect(redis.url).use { client ->
            val queue = client.reliableQueue(RedisServer.uniqueName("rq-closed"), fast)
            val waiting = queue.receiveAsync(Duration.ofSeconds(30))
            queue.close()
            val e = assertThrows<java.util.concurrent.ExecutionException> { waiting.get(10, TimeUnit.SECONDS) }
            assertTrue(e.cause is ClosedException, "${e.cause}")
            assertThrows<ClosedException> { queue.offer("x", Duration.ZERO) }
            assertThrows<ClosedException> { queue.stats() }
            queue.close()
        }

    @Test
    fun `the key of another type is a WrongTypeException`(redis: RedisServer) =
        Client.connect(redis.url).use { client ->
            val name = RedisServer.uniqueName("rq-wrongtype")
            redis.cli("SET", "{dq:$name}:ready", "not a stream")
            client.reliableQueue(name, fast.copy(scheduler = false)).use { queue ->
                assertThrows<WrongTypeException> { queue.receive(Duration.ofMillis(10)) }
            }
            assertNotEquals("", redis.cli("GET", "{dq:$name}:ready"))
        }

    @Test
    fun `close with a deadline is the graceful close`(redis: RedisServer) =
        withQueue(redis) { _, queue ->
            queue.offer("left", Duration.ZERO)
            queue.close(Duration.ofSeconds(5))
            assertThrows<ClosedException> { queue.stats() }
            Unit // (JUnit runs only test methods that return nothing)
        }
}
