package dev.delayq

import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import org.junit.jupiter.api.extension.ExtendWith
import java.time.Duration
import java.util.zip.CRC32

/** Shard keys, Delivery.shard, exact due times and Metrics.snapshot() from the JVM. */
@ExtendWith(RedisExtension::class)
class ShardsAndMetricsTest {
    private val wait = Duration.ofSeconds(5)

    private fun crc32(s: String) = CRC32().apply { update(s.toByteArray()) }.value

    private fun receiveAll(q: ReliableQueue, n: Int): List<Delivery> {
        val got = mutableListOf<Delivery>()
        while (got.size < n) {
            val batch = q.receiveMany(n - got.size, wait)
            assertTrue(batch.isNotEmpty(), "only ${got.size} of $n delivered")
            got += batch
        }
        return got
    }

    @Test
    fun `a shard key keeps its messages in one shard`(redis: RedisServer) =
        Client.connect(redis.url).use { client ->
            val q = client.reliableQueue(RedisServer.uniqueName("shards"), ReliableQueueOptions(shards = 4))
            val keyed = (0 until 20).map { q.offer("k$it", Duration.ZERO, shardKey = "customer-7") }
            val loose = q.offerAll((0 until 40).map { ReliableOffer("l$it", Duration.ZERO) })
            val both =
                q.offerAll(listOf(ReliableOffer("x", Duration.ZERO, "with-id", "customer-7"), ReliableOffer("y", Duration.ZERO, shardKey = "customer-7")))
            val more = runBlocking { q.coroutines.offer("z", Duration.ZERO, shardKey = "customer-7") }
            val got = receiveAll(q, 63)
            val shard = got.associate { it.id to it.shard }
            assertEquals(63, shard.size, "each message once")
            // Seed 002's rule: CRC-32 of the key mod the shard count.
            val expected = (crc32("customer-7") % 4).toInt()
            assertEquals(setOf(expected), (keyed + both + more).map { shard[it] }.toSet())
            assertTrue(loose.map { shard[it] }.toSet().size > 1, "ids spread over the shards")
            assertEquals(List(63) { true }, q.ackMany(got))
        }

    @Test
    fun `a bad shard key is refused before Redis`(redis: RedisServer) =
        Client.connect(redis.url).use { client ->
            val q = client.reliableQueue(RedisServer.uniqueName("badkey"), ReliableQueueOptions(shards = 2))
            val e = assertThrows<InvalidArgumentException> { q.offer("x", Duration.ZERO, shardKey = "") }
            assertTrue(e.message!!.contains("shard key"), e.message)
            assertThrows<InvalidArgumentException> {
                q.offerAll(listOf(ReliableOffer("ok", Duration.ZERO, shardKey = "k"), ReliableOffer("bad", Duration.ZERO, shardKey = "x".repeat(300))))
            }
            val s = q.stats()
            assertEquals(0L to 0L, s.delayed to s.ready, "nothing written")
        }

    @Test
    fun `an offer outcome has the due time the server computed`(redis: RedisServer) =
        Client.connect(redis.url).use { client ->
            val q = client.reliableQueue(RedisServer.uniqueName("due"))
            val before = client.serverTimeMs()
            val first = q.offerWithOutcome("a", Duration.ofMinutes(1), "a")
            val after = client.serverTimeMs()
            assertNotNull(first.dueAt)
            val due = first.dueAt!!
            assertTrue(due in (before + 60_000)..(after + 60_000), "$before $due $after")
            val again = q.offerWithOutcome("b", Duration.ZERO, "a")
            assertEquals(false, again.created)
            assertNull(again.dueAt)
        }

    @Test
    fun `metrics count what this process did`(redis: RedisServer) =
        Client.connect(redis.url).use { client ->
            val name = RedisServer.uniqueName("metrics")
            val q = client.reliableQueue(name, ReliableQueueOptions(maxAttempts = 1, backoff = Backoff.schedule(Duration.ZERO)))
            q.offerAll(List(3) { ReliableOffer("m", Duration.ZERO) })
            val got = receiveAll(q, 3)
            assertTrue(got[0].ack())
            assertTrue(got[1].nack())
            val m = Metrics.snapshot().queues.single { it.name == name }
            assertEquals("reliable", m.kind)
            assertEquals(listOf(3L, 3L, 1L, 1L), listOf(m.offered, m.delivered, m.acked, m.dead))
            assertEquals(3L, m.lateness.count)
            assertEquals(0.001, m.lateness.buckets.first().le)
            assertTrue(Metrics.snapshot().connectionErrors >= 0)
        }
}
