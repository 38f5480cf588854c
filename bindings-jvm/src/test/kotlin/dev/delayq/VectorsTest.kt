package dev.delayq

import com.fasterxml.jackson.databind.ObjectMapper
import org.junit.jupiter.api.Assertions.assertArrayEquals
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import org.junit.jupiter.api.extension.ExtendWith
import java.io.File
import java.security.MessageDigest
import java.time.Duration
import java.util.HexFormat

@ExtendWith(RedisExtension::class)
class VectorsTest {
    private class Vector(val name: String, val id: ByteArray, val value: ByteArray, val packed: ByteArray)

    private val vectors: List<Vector> =
        ObjectMapper().readTree(Workspace.vectors)["vectors"].map {
            val hex = HexFormat.of()
            Vector(it["name"].asText(), hex.parseHex(it["id"].asText()), hex.parseHex(it["value"].asText()), hex.parseHex(it["packed"].asText()))
        }

    @Test
    fun `packEntry and unpackEntry agree with every shared vector`() {
        assertTrue(vectors.size >= 5)
        for (v in vectors) {
            assertArrayEquals(v.packed, packEntry(v.id, v.value), v.name)
            val entry = unpackEntry(v.packed)
            assertArrayEquals(v.id, entry.id, v.name)
            assertArrayEquals(v.value, entry.value, v.name)
        }
    }

    @Test
    fun `unpackEntry refuses bytes that are not an entry`() {
        val packed = vectors[1].packed
        assertThrows<InvalidArgumentException> { unpackEntry(packed.copyOf(packed.size - 1)) }
        assertThrows<InvalidArgumentException> { unpackEntry(packed + byteArrayOf(0)) }
        assertThrows<InvalidArgumentException> { unpackEntry(ByteArray(0)) }
        assertThrows<InvalidArgumentException> { packEntry(ByteArray(256), ByteArray(1)) }
    }

    @Test
    fun `the entries this binding stores are what the live Redis struct pack makes`(redis: RedisServer) {
        val script = File(Workspace.root, "tests/vectors/stored_entries.lua").readText()
        val name = RedisServer.uniqueName("stored")
        val stored = Client.connect(redis.url).use { client ->
            client.delayedQueue(name).use { queue ->
                for (v in vectors) queue.offer(v.value, Duration.ofHours(1))
                redis.cli("EVAL", script, "1", "redisson_delay_queue:{$name}").also { queue.clear() }
            }
        }
        val sha1 = { b: ByteArray -> HexFormat.of().formatHex(MessageDigest.getInstance("SHA-1").digest(b)) }
        assertEquals(vectors.map { "1 " + sha1(it.value) }, stored.lines())
    }

    @Test
    fun `every vector value round trips through a real queue`(redis: RedisServer) {
        Client.connect(redis.url).use { client ->
            client.delayedQueue(RedisServer.uniqueName("vectors")).use { queue ->
                for (v in vectors) {
                    queue.offer(v.value, Duration.ZERO)
                    assertArrayEquals(v.value, queue.take(Duration.ofSeconds(10)), v.name)
                }
                for (v in vectors) queue.offer(v.value, Duration.ofHours(1))
                val waiting = queue.readAll()
                assertEquals(vectors.size, waiting.size)
                vectors.zip(waiting).forEach { (v, got) -> assertArrayEquals(v.value, got, v.name) }
                queue.clear()
            }
        }
    }
}
