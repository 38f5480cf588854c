package dev.delayq

import kotlinx.coroutines.delay
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.extension.ExtendWith
import java.io.File
import java.time.Duration
import java.util.concurrent.ExecutionException
import java.util.concurrent.Executors
import java.util.concurrent.TimeUnit
import kotlin.concurrent.thread

/**
 * Small programs that each run in a JVM of their own, 50 times (4 at once), and must exit
 * with 0 and print what they print every time: a JVM never waits for delayq's threads.
 */
@ExtendWith(RedisExtension::class)
class ExitTest {
    private val runs = Integer.getInteger("exit.runs", 50)

    @Test
    fun `a JVM that never closes its client exits at the end of main`(redis: RedisServer) =
        runChildren(NeverClosed::class.java, redis.url, "taken now", "reliable ok", "done")

    @Test
    fun `closing with takes in flight ends them and leaves no non-daemon thread`(redis: RedisServer) =
        runChildren(ClosedWithTakesInFlight::class.java, redis.url, "blocking take: closed", "takeAsync: closed", "suspend take: closed", "receiveAsync: closed", "non-daemon threads: none")

    private fun runChildren(main: Class<*>, url: String, vararg expected: String) {
        val java = File(System.getProperty("java.home"), "bin/java").path
        val classpath = System.getProperty("surefire.test.class.path") ?: System.getProperty("java.class.path")
        val pool = Executors.newFixedThreadPool(4)
        val results = (1..runs).map {
            pool.submit<String?> {
                val p = ProcessBuilder(java, "-XX:TieredStopAtLevel=1", "-cp", classpath, main.name, url)
                    .redirectError(ProcessBuilder.Redirect.PIPE).start()
                val err = StringBuilder()
                val errReader = thread { err.append(p.errorStream.readBytes().toString(Charsets.UTF_8)) }
                val out = p.inputStream.readBytes().toString(Charsets.UTF_8)
                if (!p.waitFor(60, TimeUnit.SECONDS)) {
                    p.destroyForcibly().waitFor()
                    return@submit "did not exit within 60 s; stdout:\n$out"
                }
                errReader.join()
                val lines = out.lines().filter { it.isNotBlank() }
                if (p.exitValue() != 0 || lines != expected.toList()) {
                    "exit code ${p.exitValue()}; stdout:\n$out\nstderr:\n$err"
                } else {
                    null
                }
            }
        }
        val failures = results.mapNotNull { it.get() }
        pool.shutdown()
        assertEquals(0, failures.size, "${failures.size} of $runs runs failed; the first: ${failures.firstOrNull()}")
    }
}

/** Uses a client and both queues, and returns from main without closing anything. */
object NeverClosed {
    @JvmStatic
    fun main(args: Array<String>) {
        val client = Client.connect(args[0])
        val queue = client.delayedQueue(RedisServer.uniqueName("exit"))
        queue.offerAsync("now", Duration.ZERO).get()
        println("taken " + String(queue.takeAsync(Duration.ofSeconds(10)).get()!!))
        queue.offerAsync("later", Duration.ofHours(1))
        val jobs = client.reliableQueue(RedisServer.uniqueName("exit"))
        jobs.offer("job", Duration.ZERO)
        jobs.receive(Duration.ofSeconds(10))!!.ack()
        println("reliable ok")
        println("done")
    }
}

/** Closes its client while takes and a receive wait in every form, then lists non-daemon threads. */
object ClosedWithTakesInFlight {
    @JvmStatic
    fun main(args: Array<String>) {
        val client = Client.connect(args[0])
        val queue = client.delayedQueue(RedisServer.uniqueName("exit"))
        val jobs = client.reliableQueue(RedisServer.uniqueName("exit"))
        var blocking = "blocking take: returned"
        val taker = thread { blocking = runCatching { queue.take() }.fold({ "blocking take: returned" }, { "blocking take: " + (it as DelayqException).kind }) }
        val async = queue.takeAsync()
        val receive = jobs.receiveAsync()
        var suspended = "suspend take: returned"
        runBlocking {
            val job = launch { suspended = runCatching { queue.coroutines.take() }.fold({ "suspend take: returned" }, { "suspend take: " + (it as DelayqException).kind }) }
            delay(200) // let the takes reach Redis
            client.close()
            job.join()
        }
        taker.join()
        println(blocking)
        println("takeAsync: " + kindOf { async.get() })
        println(suspended)
        println("receiveAsync: " + kindOf { receive.get() })
        val left = Thread.getAllStackTraces().keys.filter { it.isAlive && !it.isDaemon && it != Thread.currentThread() }
        println("non-daemon threads: " + (left.joinToString { it.name }.ifEmpty { "none" }))
    }

    private fun kindOf(get: () -> Any?): String =
        try {
            get()
            "returned"
        } catch (e: ExecutionException) {
            (e.cause as? DelayqException)?.kind ?: e.cause.toString()
        }
}
