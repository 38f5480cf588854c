package dev.delayq.bench

import dev.delayq.Client
import dev.delayq.RedisServer
import org.redisson.Redisson
import org.redisson.client.codec.StringCodec
import org.redisson.config.Config
import java.time.Duration
import java.util.concurrent.CountDownLatch
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicBoolean
import java.util.concurrent.atomic.LongAdder
import kotlin.concurrent.thread

/**
 * Offers per second through the jar beside Redisson's own `RDelayedQueue.offer`, on the
 * same Redis, with the same threads, in the same run. Not a test: it prints figures.
 *
 *   mvn -f bindings-jvm/pom.xml test-compile exec:java \
 *       [-Dbench.threads=16] [-Dbench.seconds=5] [-Dbench.url=redis://127.0.0.1:PORT]
 *
 * Without bench.url it starts its own redis-server on a free port.
 */
object OfferBenchmark {
    private val threads = Integer.getInteger("bench.threads", 16)
    private val seconds = Integer.getInteger("bench.seconds", 5)
    private val rounds = Integer.getInteger("bench.rounds", 2)

    /** Runs [offer] from [threads] threads for [secs] seconds; returns offers per second. */
    private fun measure(secs: Int, offer: (String) -> Unit): Double {
        val stop = AtomicBoolean(false)
        val count = LongAdder()
        val start = CountDownLatch(1)
        val workers = (0 until threads).map { t ->
            thread(name = "bench-$t") {
                start.await()
                var i = 0L
                while (!stop.get()) {
                    offer("value-$t-${i++}")
                    count.increment()
                }
            }
        }
        val t0 = System.nanoTime()
        start.countDown()
        Thread.sleep(secs * 1000L)
        stop.set(true)
        workers.forEach { it.join() }
        return count.sum() / ((System.nanoTime() - t0) / 1e9)
    }

    @JvmStatic
    fun main(args: Array<String>) {
        val own = if (System.getProperty("bench.url") == null) RedisServer() else null
        val url = System.getProperty("bench.url") ?: own!!.url
        try {
            run(url, own)
        } finally {
            own?.close()
        }
        // Redisson's and delayq's background threads are not daemons everywhere.
        System.exit(0)
    }

    private fun run(url: String, own: RedisServer?) {
        println("offer benchmark: $threads threads, ${seconds}s per run, $rounds rounds, delay 1 h, on $url")
        val client = Client.connect(url)
        val config = Config().apply { useSingleServer().setAddress(url) }
        val redisson = Redisson.create(config)
        val delayq = client.delayedQueue("bench-delayq")
        val destination = redisson.getBlockingQueue<String>("bench-redisson", StringCodec.INSTANCE)
        val rdq = redisson.getDelayedQueue(destination)
        val hour = Duration.ofHours(1)

        fun clear() {
            delayq.clear()
            rdq.clear()
        }
        // warm-up: JIT, connections, script caches
        measure(1) { delayq.offer(it, hour) }
        measure(1) { rdq.offer(it, 1, TimeUnit.HOURS) }
        clear()

        var best = doubleArrayOf(0.0, 0.0)
        repeat(rounds) { r ->
            val d = measure(seconds) { delayq.offer(it, hour) }
            clear()
            val j = measure(seconds) { rdq.offer(it, 1, TimeUnit.HOURS) }
            clear()
            println("round ${r + 1}: delayq jar ${"%.0f".format(d)} offers/s, Redisson ${"%.0f".format(j)} offers/s, ratio ${"%.2f".format(d / j)}")
            best = doubleArrayOf(maxOf(best[0], d), maxOf(best[1], j))
        }
        println()
        println("delayq (jar, blocking offer):       ${"%.0f".format(best[0])} offers/s")
        println("Redisson RDelayedQueue.offer:        ${"%.0f".format(best[1])} offers/s")
        println("ratio delayq / Redisson:             ${"%.2f".format(best[0] / best[1])}x")
        own?.let { println("redis-server: port ${it.port}") }
        delayq.close()
        rdq.destroy()
        redisson.shutdown()
        client.close()
    }
}
