package dev.delayq

import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.extension.ExtendWith
import org.slf4j.event.Level
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
}
