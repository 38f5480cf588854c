package dev.delayq

import dev.delayq.ffi.InternalException
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import org.junit.jupiter.api.extension.ExtendWith
import java.time.Duration
import java.util.concurrent.ExecutionException
import java.util.concurrent.TimeUnit
import kotlinx.coroutines.runBlocking

@ExtendWith(RedisExtension::class)
class ErrorsTest {
    private fun keys(name: String) = listOf(name, "redisson_delay_queue_timeout:{$name}", "redisson_delay_queue:{$name}")

    private fun assertNothingStored(redis: RedisServer, name: String) =
        assertEquals("0", redis.cli("EXISTS", *keys(name).toTypedArray()), "keys of $name exist")

    @Test
    fun `bad delays and timeouts are refused before reaching Redis`(redis: RedisServer) =
        Client.connect(redis.url).use { client ->
            val name = RedisServer.uniqueName()
            client.delayedQueue(name).use { queue ->
                val e = assertThrows<InvalidArgumentException> { queue.offer("x", Duration.ofMillis(-1)) }
                assertEquals("invalid_argument", e.kind)
                assertTrue(e is DelayqException)
                assertThrows<InvalidArgumentException> { queue.offer("x", Duration.ofNanos(-1)) }
                assertThrows<InvalidArgumentException> { queue.offer("x", Duration.ofSeconds(Long.MAX_VALUE)) }
                assertThrows<InvalidArgumentException> { queue.offer("x", Duration.ofDays(365L * 100_000)) }
                // one bad entry refuses the whole batch
                assertThrows<InvalidArgumentException> {
                    queue.offerAll(listOf(Offer("ok", Duration.ZERO), Offer("bad", Duration.ofSeconds(-5))))
                }
                assertThrows<InvalidArgumentException> { queue.take(Duration.ofMillis(-1)) }
                assertNothingStored(redis, name)
            }
            assertThrows<InvalidArgumentException> { client.delayedQueue("") }
            Unit // (JUnit runs only test methods that return nothing)
        }

    @Test
    fun `a string that UTF-8 cannot hold is an invalid argument`(redis: RedisServer) =
        Client.connect(redis.url).use { client ->
            val name = RedisServer.uniqueName()
            val lone = "a\uD800b"
            client.reliableQueue(name).use { q ->
                for (call in listOf<() -> Any?>(
                    { q.offer("p", Duration.ZERO, lone) },
                    { q.offer(lone, Duration.ZERO) },
                    { q.cancel(lone) },
                    { q.reschedule(lone, Duration.ZERO) },
                    { q.requeueDead(listOf(lone)) },
                    { q.offerAsync("p", Duration.ZERO, lone).join() },
                )) {
                    val e = assertThrows<Throwable> { call() }
                    val cause = if (e is java.util.concurrent.CompletionException) e.cause else e
                    assertTrue(cause is InvalidArgumentException, "$cause")
                }
            }
            client.delayedQueue(name).use { queue ->
                assertThrows<InvalidArgumentException> { queue.offer(lone, Duration.ZERO) }
                assertThrows<InvalidArgumentException> { queue.contains(lone) }
                // An async call fails its future, whichever argument is bad.
                for (bad in listOf(queue.offerAsync(lone, Duration.ZERO), queue.offerAsync("x", Duration.ofSeconds(-1)))) {
                    val e = assertThrows<java.util.concurrent.ExecutionException> { bad.get() }
                    assertTrue(e.cause is InvalidArgumentException, "${e.cause}")
                }
            }
            assertThrows<InvalidArgumentException> { client.delayedQueue("q$lone") }
            assertNothingStored(redis, name)
        }

    @Test
    fun `a value over 512 MiB is refused`(redis: RedisServer) =
        Client.connect(redis.url).use { client ->
            val name = RedisServer.uniqueName()
            client.delayedQueue(name).use { queue ->
                val huge = ByteArray(512 * 1024 * 1024 + 1)
                assertThrows<InvalidArgumentException> { queue.offer(huge, Duration.ZERO) }
                assertThrows<InvalidArgumentException> { queue.contains(huge) }
                assertNothingStored(redis, name)
            }
        }

    @Test
    fun `wrong type of key writes nothing`(redis: RedisServer) =
        Client.connect(redis.url).use { client ->
            val name = RedisServer.uniqueName()
            redis.cli("SET", name, "x")
            client.delayedQueue(name).use { queue ->
                val e = assertThrows<WrongTypeException> { queue.offer("v", Duration.ZERO) }
                assertEquals("wrong_type", e.kind)
                assertThrows<WrongTypeException> { queue.offerAll(listOf(Offer("v", Duration.ofHours(1)))) }
                assertThrows<WrongTypeException> { queue.poll() }
                assertThrows<WrongTypeException> { queue.take(Duration.ofMillis(100)) }
                assertThrows<WrongTypeException> { queue.stats() }
                assertEquals("x", redis.cli("GET", name))
                assertEquals("0", redis.cli("EXISTS", "redisson_delay_queue_timeout:{$name}", "redisson_delay_queue:{$name}"))
            }
            val other = RedisServer.uniqueName()
            redis.cli("SET", "redisson_delay_queue:{$other}", "x")
            client.delayedQueue(other).use { queue ->
                assertThrows<WrongTypeException> { queue.offer("v", Duration.ZERO) }
                assertThrows<WrongTypeException> { queue.size() }
                assertThrows<WrongTypeException> { queue.readAll() }
                assertEquals("0", redis.cli("EXISTS", other, "redisson_delay_queue_timeout:{$other}"))
            }
        }

    @Test
    fun `an unreachable server is a connection error`() {
        val port = java.net.ServerSocket(0).use { it.localPort }
        val e = assertThrows<ConnectionException> { Client.connect("redis://127.0.0.1:$port") }
        assertEquals("connection", e.kind)
        assertThrows<InvalidArgumentException> { Client.connect("not a url") }
    }

    @Test
    fun `credentials never appear in errors`() {
        val port = java.net.ServerSocket(0).use { it.localPort }
        val e = assertThrows<DelayqException> { Client.connect("redis://user:s3cret-pw@127.0.0.1:$port") }
        assertTrue("s3cret-pw" !in e.toString() && "s3cret-pw" !in e.stackTraceToString())
    }

    @Test
    fun `a server error is a ServerException`() =
        RedisServer().use { redis ->
            Client.connect(redis.url).use { client ->
                client.delayedQueue(RedisServer.uniqueName()).use { queue ->
                    redis.cli("CONFIG", "SET", "maxmemory", "1")
                    redis.cli("CONFIG", "SET", "maxmemory-policy", "noeviction")
                    val e = assertThrows<ServerException> { queue.offer("v", Duration.ZERO) }
                    assertEquals("server", e.kind)
                    assertTrue("OOM" in e.message!!, e.message)
                }
            }
        }

    /**
     * A panic cannot be provoked without a bug in core, so the mapping itself: UniFFI raises a
     * panic of a call (or of an async call's poll) as its own checked InternalException.
     */
    @Test
    fun `a panic in native code is a ServerException naming a bug in delayq`() {
        val e = assertThrows<ServerException> { native { throw InternalException("attempt to add with overflow") } }
        assertEquals("server", e.kind)
        assertEquals("server error: internal error (a bug in delayq): attempt to add with overflow", e.message)
        assertTrue(e.cause is InternalException)
        // a batch of offerAsync calls whose native call failed
        val failed = Bridge.futureOf { token -> Bridge.fail(token, InternalException("boom")) }
        val cause = assertThrows<ExecutionException> { failed.get(10, TimeUnit.SECONDS) }.cause
        assertTrue(cause is ServerException && "a bug in delayq" in cause.message!!, "$cause")
        assertNull(IllegalStateException().toPublicOrNull())
    }

    @Test
    fun `a negative setting is refused by its name`(redis: RedisServer) =
        Client.connect(redis.url).use { client ->
            val name = RedisServer.uniqueName()
            val second = Duration.ofSeconds(-1)
            for ((options, option) in listOf(
                ReliableQueueOptions().withVisibilityTimeout(Duration.ofMillis(-5)) to "visibility timeout",
                ReliableQueueOptions().withDeadLetterRetention(second) to "dead-letter retention",
                ReliableQueueOptions().withIdempotencyRetention(second) to "idempotency retention",
                ReliableQueueOptions().withReconcileInterval(second) to "reconcile interval",
                ReliableQueueOptions().withBackoff(Backoff.exponential(second)) to "back-off base",
                ReliableQueueOptions().withBackoff(Backoff.exponential(max = second)) to "back-off max",
                ReliableQueueOptions().withBackoff(Backoff.schedule(Duration.ZERO, second)) to "back-off delay",
            )) {
                val e = assertThrows<InvalidArgumentException>("$options") { client.reliableQueue(name, options) }
                assertTrue("$option must not be negative, got " in e.message!!, e.message)
            }
            val e = assertThrows<InvalidArgumentException> { client.delayedQueue(name, DelayedQueueOptions(reconcileInterval = second)) }
            assertTrue("reconcile interval must not be negative" in e.message!!, e.message)
            val d = assertThrows<InvalidArgumentException> { Client.connect(redis.url, ClientOptions(durability = Durability(1, timeout = second))) }
            assertTrue("durability timeout must not be negative" in d.message!!, d.message)
            // a call's own argument keeps core's word
            client.delayedQueue(name).use { q ->
                val bad = assertThrows<InvalidArgumentException> { q.offer("x", second) }
                assertTrue("delay must not be negative" in bad.message!!, bad.message)
            }
            // a graceful close's deadline is named as in Python and Node
            client.reliableQueue(name).use { q ->
                for (close in listOf<() -> Unit>({ q.close(second) }, { runBlocking { q.coroutines.close(second) } })) {
                    val bad = assertThrows<InvalidArgumentException> { close() }
                    assertTrue("deadline must not be negative" in bad.message!!, bad.message)
                }
            }
        }
}
