package dev.delayq.bench

import dev.delayq.Client
import dev.delayq.RedisServer
import org.redisson.Redisson
import org.redisson.client.codec.StringCodec
import org.redisson.config.Config
import java.time.Duration
import java.util.concurrent.CompletionStage
import java.util.concurrent.CountDownLatch
import java.util.concurrent.Semaphore
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicBoolean
import java.util.concurrent.atomic.LongAdder
import kotlin.concurrent.thread

/**
 * Offers per second through the jar beside Redisson's own `RDelayedQueue`, on the same
 * Redis, in the same run. Not a test: it prints figures. Two ways, each beside Redisson's:
 * `blocking` (`offer` from [threads] threads, beside Redisson's `offer`) and `async`
 * (`offerAsync` from one thread with [inflight] `CompletableFuture`s in flight, a permit
 * released as each completes, beside Redisson's `offerAsync`).
 *
 *   mvn -f bindings-jvm/pom.xml test-compile exec:java \
 *       [-Dbench.mode=both|blocking|async] [-Dbench.threads=16] [-Dbench.inflight=64] \
 *       [-Dbench.seconds=5] [-Dbench.rounds=2] [-Dbench.url=redis://127.0.0.1:PORT]
 *
 * Without bench.url it starts its own redis-server on a free port.
 */
object OfferBenchmark {
    private val threads = Integer.getInteger("bench.threads", 16)
    private val seconds = Integer.getInteger("bench.seconds", 5)
    private val rounds = Integer.getInteger("bench.rounds", 2)
    private val inflight = Integer.getInteger("bench.inflight", 64)
    private val mode = System.getProperty("bench.mode", "both")

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

    /** Offers from one thread for [secs] seconds, [inflight] at a time; returns offers per second. */
    private fun measureAsync(secs: Int, offer: (String) -> CompletionStage<*>): Double {
        val permits = Semaphore(inflight)
        val count = LongAdder()
        val failed = LongAdder()
        val t0 = System.nanoTime()
        val end = t0 + secs * 1_000_000_000L
        var i = 0L
        while (System.nanoTime() < end) {
            permits.acquire()
            offer("value-async-${i++}").whenComplete { _, e ->
                if (e == null) count.increment() else failed.increment()
                permits.release()
            }
        }
        permits.acquire(inflight)
        check(failed.sum() == 0L) { "${failed.sum()} offers failed" }
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
        println("offer benchmark: ${seconds}s per run, $rounds rounds, delay 1 h, on $url, ${Runtime.getRuntime().availableProcessors()} cores")
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

        fun compare(what: String, ours: (Int) -> Double, theirs: (Int) -> Double) {
            // warm-up: JIT, connections, script caches
            ours(1)
            theirs(1)
            clear()
            var best = doubleArrayOf(0.0, 0.0)
            repeat(rounds) { r ->
                val d = ours(seconds)
                clear()
                val j = theirs(seconds)
                clear()
                println("$what round ${r + 1}: delayq ${"%.0f".format(d)} offers/s, Redisson ${"%.0f".format(j)} offers/s, ratio ${"%.2f".format(d / j)}")
                best = doubleArrayOf(maxOf(best[0], d), maxOf(best[1], j))
            }
            println("$what best: delayq ${"%.0f".format(best[0])} offers/s, Redisson ${"%.0f".format(best[1])} offers/s, ratio delayq / Redisson ${"%.2f".format(best[0] / best[1])}x")
        }
        if (mode == "both" || mode == "blocking") {
            println("blocking: offer from $threads threads, beside RDelayedQueue.offer")
            compare("blocking", { s -> measure(s) { delayq.offer(it, hour) } }, { s -> measure(s) { rdq.offer(it, 1, TimeUnit.HOURS) } })
        }
        if (mode == "both" || mode == "async") {
            println("async: offerAsync from one thread, $inflight CompletableFutures in flight, beside RDelayedQueue.offerAsync")
            compare("async", { s -> measureAsync(s) { delayq.offerAsync(it, hour) } }, { s -> measureAsync(s) { rdq.offerAsync(it, 1, TimeUnit.HOURS) } })
        }
        own?.let { println("redis-server: port ${it.port}") }
        delayq.close()
        rdq.destroy()
        redisson.shutdown()
        client.close()
    }
}
