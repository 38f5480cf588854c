package dev.delayq

import dev.delayq.ffi.LogLevel
import dev.delayq.ffi.LogSink
import dev.delayq.ffi.forwardLogs
import dev.delayq.ffi.setLogLevel
import org.slf4j.Logger
import org.slf4j.LoggerFactory
import java.util.concurrent.ConcurrentHashMap

/**
 * Core's logs (a transfer task that keeps failing, a value given back, a lease lost) in
 * SLF4J: an event of core's target `delayq::scheduler` goes to the logger `delayq.scheduler`,
 * one of another crate (`redis::...`) to `delayq.redis...`, at the same level. Core forwards
 * what the logger `delayq` enables, read when a client connects. Records arrive on the
 * native `delayq-logs` thread, attached once ([Bridge] sets its initializer).
 */
internal object Logs : LogSink {
    private val root: Logger = LoggerFactory.getLogger("delayq")
    private val loggers = ConcurrentHashMap<String, Logger>()

    fun install() {
        forwardLogs(this)
        refreshLevel()
    }

    /** Tells core the most detailed level the logger `delayq` enables. */
    fun refreshLevel() =
        setLogLevel(
            when {
                root.isTraceEnabled -> LogLevel.TRACE
                root.isDebugEnabled -> LogLevel.DEBUG
                root.isInfoEnabled -> LogLevel.INFO
                root.isWarnEnabled -> LogLevel.WARN
                root.isErrorEnabled -> LogLevel.ERROR
                else -> null
            },
        )

    override fun log(level: LogLevel, target: String, message: String) {
        val name = target.replace("::", ".").let { if (it == "delayq" || it.startsWith("delayq.")) it else "delayq.$it" }
        val logger = loggers.computeIfAbsent(name, LoggerFactory::getLogger)
        when (level) {
            LogLevel.ERROR -> logger.error(message)
            LogLevel.WARN -> logger.warn(message)
            LogLevel.INFO -> logger.info(message)
            LogLevel.DEBUG -> logger.debug(message)
            LogLevel.TRACE -> logger.trace(message)
        }
    }
}
