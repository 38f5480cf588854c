package dev.delayq

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.extension.ExtendWith
import org.slf4j.event.Level
import java.time.Duration
import java.util.concurrent.TimeUnit

@ExtendWith(RedisExtension::class)
class LogsTest {
    @Test
    fun `a transfer task failing on a wrong-typed key is logged through SLF4J`(redis: RedisServer) =
        Client.connect(redis.url).use { client ->
            val name = RedisServer.uniqueName("logs")
            // The queue's sorted set holds a string: every transfer pass fails with WRONGTYPE.
            redis.cli("SET", "redisson_delay_queue_timeout:{$name}", "x")
            client.delayedQueue(name).use {
                val deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10)
                while (true) {
                    val seen = RecordingLogs.events.any { e ->
                        e.logger.startsWith("delayq.") && e.level in setOf(Level.WARN, Level.ERROR) &&
                            "transfer failed" in e.message && name in e.message
                    }
                    if (seen) break
                    assertTrue(System.nanoTime() < deadline, "no WARN/ERROR of the failing transfer task in SLF4J: ${RecordingLogs.events.toList().takeLast(5)}")
                    Thread.sleep(10)
                }
            }
        }

    private fun failingJob(d: Delivery): Unit = throw IllegalStateException("cannot process ${d.id}")

    @Test
    fun `a failed consume handler is logged with its stack trace`(redis: RedisServer) =
        Client.connect(redis.url).use { client ->
            val name = RedisServer.uniqueName("logs")
            client.reliableQueue(name, ReliableQueueOptions(maxAttempts = 1)).use { queue ->
                queue.offer("job", Duration.ZERO, "job-1")
                val consuming = queue.consumeAsync({ d -> failingJob(d) })
                val deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10)
                var failure: RecordingLogs.Event? = null
                while (failure == null) {
                    failure = RecordingLogs.events.firstOrNull { "handler failed" in it.message && name in it.message }
                    assertTrue(System.nanoTime() < deadline, "no log of the failed handler: ${RecordingLogs.events.toList().takeLast(5)}")
                    Thread.sleep(10)
                }
                consuming.cancel(true)
                assertEquals(Level.WARN, failure.level)
                val message = failure.message
                assertTrue("error=java.lang.IllegalStateException: cannot process job-1" in message, message)
                assertTrue("at dev.delayq.LogsTest.failingJob(LogsTest.kt:" in message, message)
            }
        }
}
