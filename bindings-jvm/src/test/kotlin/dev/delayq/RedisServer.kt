package dev.delayq

import org.junit.jupiter.api.extension.ExtensionContext
import org.junit.jupiter.api.extension.ParameterContext
import org.junit.jupiter.api.extension.ParameterResolver
import java.io.File
import java.net.InetSocketAddress
import java.net.ServerSocket
import java.net.Socket
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicInteger

/** A real `redis-server` on a free loopback port, without persistence, with [extraArgs]; [close] stops it. */
class RedisServer(vararg extraArgs: String) : AutoCloseable {
    val port: Int = ServerSocket(0, 0, java.net.InetAddress.getLoopbackAddress()).use { it.localPort }
    val url: String get() = "redis://127.0.0.1:$port"
    private val dir = kotlin.io.path.createTempDirectory("delayq-jvm-redis").toFile()
    private val process: Process =
        ProcessBuilder(
            "redis-server", "--port", "$port", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", dir.path, *extraArgs,
        ).redirectErrorStream(true).redirectOutput(File(dir, "redis.log")).start()

    init {
        awaitPing()
    }

    private fun awaitPing() {
        val deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20)
        while (true) {
            check(process.isAlive) { "redis-server exited: " + File(dir, "redis.log").readText() }
            try {
                Socket().use { s ->
                    s.connect(InetSocketAddress("127.0.0.1", port), 500)
                    s.getOutputStream().write("PING\r\n".toByteArray())
                    val reply = ByteArray(7)
                    val n = s.getInputStream().read(reply)
                    if (n > 0 && String(reply, 0, n).startsWith("+PONG")) return
                }
            } catch (_: java.io.IOException) {
                // not listening yet
            }
            check(System.nanoTime() < deadline) { "redis-server did not answer PING on port $port" }
            Thread.onSpinWait()
            process.waitFor(20, TimeUnit.MILLISECONDS)
        }
    }

    /** Runs `redis-cli -p PORT args...` and returns its output, trimmed. */
    fun cli(vararg args: String): String {
        val p = ProcessBuilder(listOf("redis-cli", "-p", "$port") + args).redirectErrorStream(true).start()
        val out = p.inputStream.readBytes().toString(Charsets.UTF_8).trim()
        check(p.waitFor() == 0) { "redis-cli ${args.toList()} failed: $out" }
        return out
    }

    override fun close() {
        process.destroy()
        if (!process.waitFor(10, TimeUnit.SECONDS)) process.destroyForcibly().waitFor()
        dir.deleteRecursively()
    }

    companion object {
        private val counter = AtomicInteger()

        /** A queue name no other test uses. */
        fun uniqueName(prefix: String = "jvm"): String = "$prefix-${ProcessHandle.current().pid()}-${counter.incrementAndGet()}"
    }
}

/**
 * Injects a [RedisServer] shared by every test of the run (started once, stopped at the
 * end); tests keep apart by queue name.
 */
class RedisExtension : ParameterResolver {
    override fun supportsParameter(p: ParameterContext, e: ExtensionContext) = p.parameter.type == RedisServer::class.java

    override fun resolveParameter(p: ParameterContext, e: ExtensionContext): Any =
        e.root.getStore(ExtensionContext.Namespace.GLOBAL)
            .getOrComputeIfAbsent("redis-server", { Holder(RedisServer()) }, Holder::class.java).server

    private class Holder(val server: RedisServer) : ExtensionContext.Store.CloseableResource {
        override fun close() = server.close()
    }
}
