package dev.delayq

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.extension.ExtendWith
import java.time.Duration

/** The JVM and the Rust CLI share one queue, both ways. */
@ExtendWith(RedisExtension::class)
class CliInteropTest {
    @Test
    fun `the Rust CLI offers and the JVM takes`(redis: RedisServer) =
        Client.connect(redis.url).use { client ->
            val name = RedisServer.uniqueName("cli-to-jvm")
            val dues = (1..3).map { Workspace.runCli("--url", redis.url, "offer", name, "${it * 100}", "from-rust-$it").single().toLong() }
            client.delayedQueue(name).use { queue ->
                for (i in 1..3) {
                    val v = queue.take(Duration.ofSeconds(10))
                    val now = client.serverTimeMs()
                    assertEquals("from-rust-$i", v?.let { String(it) })
                    assertTrue(now >= dues[i - 1])
                }
            }
        }

    @Test
    fun `the JVM offers and the Rust CLI takes`(redis: RedisServer) =
        Client.connect(redis.url).use { client ->
            val name = RedisServer.uniqueName("jvm-to-cli")
            client.delayedQueue(name).use { queue ->
                queue.offerAll((1..3).map { Offer("from-jvm-$it", Duration.ofMillis(it * 100L)) })
            }
            val got = Workspace.runCli("--url", redis.url, "take", name, "--timeout-ms", "20000", "--count", "3")
            assertEquals((1..3).map { "from-jvm-$it" }, got)
        }
}
