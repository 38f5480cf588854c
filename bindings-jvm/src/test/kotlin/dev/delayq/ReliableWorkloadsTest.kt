package dev.delayq

import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.CoroutineStart
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.async
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import org.junit.jupiter.api.extension.ExtendWith
import org.junit.jupiter.params.ParameterizedTest
import org.junit.jupiter.params.provider.ValueSource
import java.time.Duration
import java.util.Collections
import java.util.concurrent.CountDownLatch
import java.util.concurrent.TimeUnit

/**
 * The reliable queue under real workloads (SPEC section 11): settings stored with the queue,
 * leases that extend, batch receive and ack, offers that tell created from de-duplicated, a
 * consume that keeps long handlers leased, and the graceful close.
 */
@ExtendWith(RedisExtension::class)
class ReliableWorkloadsTest {
    private val wait = Duration.ofSeconds(5)

    private fun until(what: String, check: () -> Boolean) {
        val deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10)
        while (!check()) {
            assertTrue(System.nanoTime() < deadline, what)
            Thread.sleep(10)
        }
    }

    @Test
    fun `settings belong to the queue, not to a handle`(redis: RedisServer) {
        val name = RedisServer.uniqueName("settings")
        Client.connect(redis.url).use { a ->
            Client.connect(redis.url).use { b ->
                val fresh = b.reliableQueue(RedisServer.uniqueName("fresh")).settings()
                assertEquals(ReliableSettings(Duration.ofSeconds(30), 5, Backoff.exponential(), 1, null, null), fresh)

                val qa = a.reliableQueue(name, ReliableQueueOptions(visibilityTimeout = Duration.ofSeconds(40), maxAttempts = 2, backoff = Backoff.schedule(Duration.ofMillis(20))))
                qa.offer("x", Duration.ZERO, "job-1")
                // Another process names nothing: it uses what the first stored.
                val qb = b.reliableQueue(name)
                val s = qb.settings()
                assertEquals(Duration.ofSeconds(40), s.visibilityTimeout)
                assertEquals(2, s.maxAttempts)
                assertEquals(Backoff.schedule(Duration.ofMillis(20)), s.backoff)
                for (attempt in 1..2) {
                    val d = qb.receive(wait)!!
                    assertEquals(attempt, d.attempt)
                    val left = d.deadline - b.serverTimeMs()
                    assertTrue(left in 39_000..40_100, "a lease of the stored 40 s, $left ms left")
                    assertTrue(d.nack())
                }
                assertEquals(1L, qb.stats().dead)

                // A handle naming other settings fails on its first call...
                val qc = b.reliableQueue(name, ReliableQueueOptions(visibilityTimeout = Duration.ofSeconds(30)))
                val e = assertThrows<InvalidArgumentException> { qc.stats() }
                assertTrue(e.message!!.contains("visibility timeout is 40000 ms"), e.message)
                // ...unless it updates them, which every handle then sees.
                val qd = b.reliableQueue(
                    name,
                    ReliableQueueOptions().withMaxAttempts(3).withDeadLetterRetention(Duration.ofHours(1))
                        .withIdempotencyRetention(Duration.ofMinutes(1)).withShards(1).withUpdateSettings(true),
                )
                assertEquals(3, qd.settings().maxAttempts)
                val now = qa.settings()
                assertEquals(3, now.maxAttempts)
                assertEquals(Duration.ofHours(1), now.deadLetterRetention)
                assertEquals(Duration.ofMinutes(1), now.idempotencyRetention)
                assertEquals(Duration.ofSeconds(40), now.visibilityTimeout)
                assertEquals(now, runBlocking { qb.coroutines.settings() })
                assertEquals(now, qb.settingsAsync().get(10, TimeUnit.SECONDS))
            }
        }
    }

    @Test
    fun `bad settings are refused before reaching Redis`(redis: RedisServer) =
        Client.connect(redis.url).use { client ->
            val name = RedisServer.uniqueName("bad-settings")
            for (bad in listOf(
                ReliableQueueOptions(maxAttempts = 0), ReliableQueueOptions(maxAttempts = -1),
                ReliableQueueOptions(shards = 3), ReliableQueueOptions(shards = -2),
                ReliableQueueOptions(visibilityTimeout = Duration.ZERO),
                ReliableQueueOptions(deadLetterRetention = Duration.ofSeconds(-1)),
                ReliableQueueOptions(idempotencyRetention = Duration.ofSeconds(-1)),
            )) {
                assertThrows<InvalidArgumentException>("$bad") { client.reliableQueue(name, bad) }
            }
            assertEquals("", redis.cli("KEYS", "*$name*"))
        }

    @Test
    fun `a lease extends, and a lost one says so`(redis: RedisServer) =
        Client.connect(redis.url).use { client ->
            val q = client.reliableQueue(RedisServer.uniqueName("lease"), ReliableQueueOptions(visibilityTimeout = Duration.ofMillis(800)))
            q.offer("x", Duration.ZERO)
            var d = q.receive(wait)!!
            val before = d.deadline
            assertTrue(d.extend(Duration.ofSeconds(3)))
            assertTrue(d.deadline >= before + 2000, "the deadline moved")
            // Past the visibility timeout, inside the extended lease: nobody else gets it.
            assertNull(q.receive(Duration.ofMillis(1200)))
            assertTrue(d.ack(), "the lease was held")
            assertEquals(0L, q.lostLeases())

            q.offer("y", Duration.ZERO)
            d = q.receive(wait)!!
            assertTrue(d.extendAsync(Duration.ZERO).get(10, TimeUnit.SECONDS))
            val again = q.receive(wait)!!
            assertEquals(d.id, again.id)
            assertEquals(2, again.attempt)
            assertFalse(runBlocking { d.coroutines.extend(Duration.ofSeconds(5)) })
            assertFalse(d.ack())
            assertEquals(1L, q.lostLeases())
            assertTrue(again.ack())
            val negative = assertThrows<InvalidArgumentException> { again.extend(Duration.ofMillis(-1)) }
            assertTrue(negative.message!!.contains("duration must not be negative"), negative.message)
            Unit // (JUnit runs only test methods that return nothing)
        }

    @Test
    fun `receiveMany and ackMany, blocking, async and suspending`(redis: RedisServer) =
        Client.connect(redis.url).use { client ->
            val q = client.reliableQueue(RedisServer.uniqueName("many"))
            val ids = q.offerAll((0 until 10).map { ReliableOffer("m$it", Duration.ZERO) })
            val got = q.receiveMany(4, wait).toMutableList()
            assertTrue(got.size in 1..4)
            while (got.size < 6) got += q.receiveManyAsync(2, wait).get(10, TimeUnit.SECONDS)
            while (got.size < 10) got += runBlocking { q.coroutines.receiveMany(100, wait) }
            assertEquals(ids.toSet(), got.map { it.id }.toSet())
            assertEquals(10, got.size)
            assertTrue(got.all { it.attempt == 1 && it.deadline > 0 })
            assertEquals(emptyList<Delivery>(), q.receiveMany(5, Duration.ofMillis(100)))
            assertEquals(List(4) { true }, q.ackMany(got.subList(0, 4)))
            assertEquals(List(3) { true }, q.ackManyAsync(got.subList(4, 7)).get(10, TimeUnit.SECONDS))
            assertEquals(List(3) { true }, runBlocking { q.coroutines.ackMany(got.subList(7, 10)) })
            assertEquals(listOf(false, false), q.ackMany(got.subList(0, 2)))
            assertEquals(0L, q.lostLeases(), "acked here already: no lease was lost")
            assertEquals(emptyList<Boolean>(), q.ackMany(emptyList()))
            assertEquals(ReliableStats(0, 0, 0, 0), q.stats())
            for (n in listOf(0, 1001, -1)) assertThrows<InvalidArgumentException>("n $n") { q.receiveMany(n, Duration.ofMillis(10)) }
        }

    @Test
    fun `receiveMany cancelled at any instant loses nothing`(redis: RedisServer) =
        Client.connect(redis.url).use { client ->
            val q = client.reliableQueue(RedisServer.uniqueName("many-cancel"), ReliableQueueOptions(visibilityTimeout = Duration.ofMinutes(5)))
            val n = 150L
            q.offerAll((1..n).map { ReliableOffer("m$it", Duration.ZERO) })
            var received = 0L
            for (i in 0 until 400) {
                val pending = q.receiveManyAsync(3, Duration.ofSeconds(1))
                val until = System.nanoTime() + (i * 7919L % 1500) * 1000
                while (System.nanoTime() < until) Thread.onSpinWait()
                if (!pending.cancel(true)) {
                    val batch = pending.get()
                    assertTrue(batch.all { it.attempt == 1 })
                    assertTrue(q.ackMany(batch).all { it })
                    received += batch.size
                }
            }
            until("deliveries of cancelled receives go back untouched") { q.stats() == ReliableStats(0, n - received, 0, 0) }
        }

    @Test
    fun `offerWithOutcome tells created from de-duplicated, and the idempotency retention`(redis: RedisServer) =
        Client.connect(redis.url).use { client ->
            val q = client.reliableQueue(RedisServer.uniqueName("outcome"))
            val created = q.offerWithOutcome("a", Duration.ZERO, "order-1")
            assertEquals(OfferOutcome("order-1", true, created.dueAt), created)
            assertNotNull(created.dueAt, "a created message has its due time")
            assertEquals(OfferOutcome("order-1", false), q.offerWithOutcome("b".toByteArray(), Duration.ZERO, "order-1"))
            assertEquals(OfferOutcome("order-1", false), q.offerWithOutcomeAsync("c", Duration.ZERO, "order-1").get(10, TimeUnit.SECONDS))
            assertEquals(OfferOutcome("order-1", false), runBlocking { q.coroutines.offerWithOutcome("d", Duration.ZERO, "order-1") })
            assertTrue(q.offerWithOutcome("gen", Duration.ZERO).created)
            val outs = q.offerAllWithOutcome(listOf(ReliableOffer("e", Duration.ZERO, "order-1"), ReliableOffer("f", Duration.ZERO, "order-2")))
            assertEquals(listOf(OfferOutcome("order-1", false), OfferOutcome("order-2", true, outs[1].dueAt)), outs)
            assertNotNull(outs[1].dueAt)
            assertEquals(listOf(false), q.offerAllWithOutcomeAsync(listOf(ReliableOffer("g", Duration.ZERO, "order-2"))).get(10, TimeUnit.SECONDS).map { it.created })

            val kept = client.reliableQueue(RedisServer.uniqueName("kept"), ReliableQueueOptions(idempotencyRetention = Duration.ofMinutes(1)))
            assertTrue(kept.offerWithOutcome("x", Duration.ZERO, "pay-1").created)
            assertTrue(kept.receive(wait)!!.ack())
            assertFalse(kept.offerWithOutcome("x", Duration.ZERO, "pay-1").created, "acked within the retention")
            assertNull(kept.receive(Duration.ofMillis(200)))
        }

    @Test
    fun `consume keeps a long handler leased, so it runs once`(redis: RedisServer) {
        val name = RedisServer.uniqueName("long")
        Client.connect(redis.url).use { a ->
            Client.connect(redis.url).use { b ->
                // Two consumers in two clients; the handler runs 3.5 times the visibility timeout.
                val qa = a.reliableQueue(name, ReliableQueueOptions(visibilityTimeout = Duration.ofSeconds(1)))
                val qb = b.reliableQueue(name)
                qa.offer("slow", Duration.ZERO)
                val runs = Collections.synchronizedList(mutableListOf<Int>())
                val done = CountDownLatch(1)
                val handler = DeliveryHandler { d ->
                    runs += d.attempt
                    Thread.sleep(3500) // the work itself
                    done.countDown()
                }
                val consumers = listOf(qa.consumeAsync(handler, 2), qb.consumeAsync(handler, 2))
                assertTrue(done.await(15, TimeUnit.SECONDS))
                until("acked") { qa.stats().inFlight == 0L }
                qa.close()
                qb.close()
                consumers.forEach { it.get(10, TimeUnit.SECONDS) }
                assertEquals(listOf(1), runs.toList(), "the handler ran once")
                assertEquals(0L, qa.lostLeases() + qb.lostLeases())
                assertEquals(ReliableStats(0, 0, 0, 0), b.reliableQueue(name).stats())
            }
        }
    }

    /**
     * consume with one handler that blocks until released; closeGracefully while it runs. With
     * [finish], the handler is released during the close and acked; else the deadline passes and
     * its message goes back. Prefetched messages go back untouched.
     */
    @ParameterizedTest
    @ValueSource(booleans = [true, false])
    fun `closeGracefully settles running handlers and gives back the rest`(finish: Boolean, redis: RedisServer) =
        Client.connect(redis.url).use { client ->
            val name = RedisServer.uniqueName("graceful")
            val q = client.reliableQueue(name, ReliableQueueOptions(visibilityTimeout = Duration.ofMinutes(1)))
            q.offerAll((0 until 5).map { ReliableOffer("$it", Duration.ZERO) })
            val started = CountDownLatch(1)
            val release = CountDownLatch(1)
            val handled = Collections.synchronizedList(mutableListOf<String>())
            val consumer = q.consumeAsync(1) { d ->
                started.countDown()
                release.await(30, TimeUnit.SECONDS)
                handled += d.id
            }
            assertTrue(started.await(5, TimeUnit.SECONDS))
            val closing = q.closeGracefullyAsync(if (finish) Duration.ofSeconds(20) else Duration.ofMillis(500))
            assertThrows<java.util.concurrent.TimeoutException>("close waits for the running handler") { closing.get(300, TimeUnit.MILLISECONDS) }
            if (finish) release.countDown()
            closing.get(30, TimeUnit.SECONDS)
            consumer.get(10, TimeUnit.SECONDS)
            release.countDown()
            assertThrows<ClosedException> { q.offer("late", Duration.ZERO) }

            val other = client.reliableQueue(name)
            assertEquals(0L, other.stats().inFlight)
            val expected = if (finish) 5 - handled.size else 5
            val left = mutableListOf<String>()
            while (left.size < expected) {
                val d = other.receive(wait)
                assertNotNull(d, "the rest came back")
                d!!
                assertEquals(1, d.attempt, "a message given back at close is not counted as an attempt")
                left += d.id
                assertTrue(d.ack())
            }
            assertNull(other.receive(Duration.ofMillis(200)))
            if (finish) {
                assertTrue(handled.isNotEmpty(), "the running handler finished")
                assertTrue(handled.intersect(left.toSet()).isEmpty(), "nothing finished comes back")
            }
        }

    @Test
    fun `suspending closeGracefully, and a cancelled one closes at once`(redis: RedisServer) =
        Client.connect(redis.url).use { client ->
            val q = client.reliableQueue(RedisServer.uniqueName("graceful-co"))
            q.offer("x", Duration.ZERO)
            runBlocking {
                val started = CompletableDeferred<Unit>()
                val release = CompletableDeferred<Unit>()
                val consumer = launch(Dispatchers.IO) {
                    q.coroutines.consume(1) {
                        started.complete(Unit)
                        release.await()
                    }
                }
                withTimeout(5_000) { started.await() }
                // Undispatched: the native call starts before the cancel.
                val closing = async(Dispatchers.IO, start = CoroutineStart.UNDISPATCHED) { q.coroutines.closeGracefully(Duration.ofMinutes(1)) }
                closing.cancel()
                closing.join()
                withTimeout(10_000) {
                    while (true) {
                        try {
                            q.coroutines.stats()
                        } catch (_: ClosedException) {
                            break
                        }
                        kotlinx.coroutines.delay(10)
                    }
                }
                release.complete(Unit)
                withTimeout(70_000) { consumer.join() }
            }
            q.close()
            q.closeGracefully(Duration.ofSeconds(1)) // idempotent
        }
}
