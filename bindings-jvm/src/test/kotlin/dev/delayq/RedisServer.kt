package dev.delayq

import org.junit.jupiter.api.extension.ExtensionContext
import org.junit.jupiter.api.extension.ParameterContext
import org.junit.jupiter.api.extension.ParameterResolver
import java.io.File
import java.net.InetAddress
import java.net.ServerSocket
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicInteger

/**
 * Starts `redis-server` with the arguments [argv] gives for a port, on a free loopback port, logging to `redis.log`
 * in [dir]; [info] runs that server's `INFO server` through [cliOutput]. The port is drawn free and let go before
 * the server binds it, so another process may take it first: a server that exits before answering, or a port
 * answered by another server, starts again on another port.
 */
internal fun startRedisServer(dir: File, argv: (Int) -> List<String>, info: (Int) -> String?): Pair<Int, Process> {
    val log = File(dir, "redis.log")
    repeat(5) {
        val port = ServerSocket(0, 0, InetAddress.getLoopbackAddress()).use { it.localPort }
        val process = ProcessBuilder(listOf("redis-server") + argv(port) + listOf("--logfile", log.path))
            .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start()
        val deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20)
        while (process.isAlive && System.nanoTime() < deadline) {
            val answer = info(port) ?: break // something else holds the port, mute
            if ("process_id:${process.pid()}" in answer) return port to process
            process.waitFor(20, TimeUnit.MILLISECONDS)
        }
        process.destroyForcibly().waitFor()
    }
    val tail = if (log.exists()) log.readText().takeLast(2000) else "(no log)"
    error("redis-server did not start; its log ends:\n$tail")
}

/** The output of [cmd], trimmed, once it exits (whatever its status); null when it runs past [seconds]. */
internal fun cliOutput(cmd: List<String>, seconds: Long): String? {
    val p = ProcessBuilder(cmd).redirectErrorStream(true).start()
    if (!p.waitFor(seconds, TimeUnit.SECONDS)) {
        p.destroyForcibly().waitFor()
        return null
    }
    return p.inputStream.readBytes().toString(Charsets.UTF_8).trim()
}

/** A real `redis-server` on a free loopback port, without persistence, with [extraArgs]; [close] stops it. */
class RedisServer(vararg extraArgs: String) : AutoCloseable {
    private val dir = kotlin.io.path.createTempDirectory("delayq-jvm-redis").toFile()
    private val started = startRedisServer(
        dir,
        { port ->
            listOf("--port", "$port", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir.path) +
                extraArgs
        },
        { port -> cliOutput(listOf("redis-cli", "-p", "$port", "INFO", "server"), 2) },
    )
    val port: Int = started.first
    val url: String get() = "redis://127.0.0.1:$port"
    private val process: Process = started.second

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
