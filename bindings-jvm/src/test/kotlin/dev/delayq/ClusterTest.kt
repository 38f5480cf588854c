package dev.delayq

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import java.time.Duration
import java.util.concurrent.TimeUnit

/** Both queues on a three-node Redis Cluster started by the test, reached through its seed URLs. */
class ClusterTest {
    private fun startCluster(): List<RedisServer> {
        val nodes = (0 until 3).map { RedisServer("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf") }
        val create = ProcessBuilder(
            listOf("redis-cli", "--cluster", "create") + nodes.map { "127.0.0.1:${it.port}" } + listOf("--cluster-replicas", "0", "--cluster-yes"),
        ).redirectErrorStream(true).start()
        val out = create.inputStream.readBytes().toString(Charsets.UTF_8)
        check(create.waitFor() == 0) { "redis-cli --cluster create failed: $out" }
        val deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20)
        while (!nodes.all { it.cli("CLUSTER", "INFO").contains("cluster_state:ok") }) {
            check(System.nanoTime() < deadline) { "the cluster did not form" }
            Thread.sleep(20) // polling the nodes' own state; there is nothing to await instead
        }
        return nodes
    }

    @Test
    fun `delayed and reliable queues on a cluster`() {
        val nodes = startCluster()
        try {
            Client.connectCluster(nodes.map { it.url }).use { client ->
                // names whose hash tags land on different nodes
                for (name in listOf("orders", "invoices", "emails", "a{b}c")) {
                    client.delayedQueue(name).use { q ->
                        val due = q.offer("x-$name", Duration.ofMillis(100))
                        assertEquals("x-$name", q.take(Duration.ofSeconds(10))?.let { String(it) })
                        assertTrue(client.serverTimeMs() >= due)
                    }
                    client.reliableQueue(name).use { q ->
                        val id = q.offer("r-$name", Duration.ofMillis(100), "id-$name")
                        val d = q.receive(Duration.ofSeconds(10))!!
                        assertEquals(id, d.id)
                        assertEquals("r-$name", d.payloadString())
                        assertTrue(d.ack())
                        assertEquals(ReliableStats(0, 0, 0, 0), q.stats())
                    }
                }
            }
            // the other ways to say "cluster"
            Client.connect(nodes[1].url, cluster = true).use { c -> c.delayedQueue("emails").use { assertEquals(0L, it.size()) } }
            Client.connect(nodes.map { it.url }).use { c -> c.reliableQueue("emails").use { assertEquals(ReliableStats(0, 0, 0, 0), it.stats()) } }
            // a list is a cluster's seeds, one URL too, whatever options.cluster says (as in Python and Node)
            Client.connect(listOf(nodes[2].url), ClientOptions()).use { c ->
                for (name in listOf("orders", "invoices", "emails")) c.delayedQueue(name).use { assertEquals(0L, it.size()) }
            }
        } finally {
            nodes.forEach(RedisServer::close)
        }
    }
}
