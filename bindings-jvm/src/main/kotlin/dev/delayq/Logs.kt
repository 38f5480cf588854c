package dev.delayq

import com.sun.jna.CallbackThreadInitializer
import com.sun.jna.Native
import dev.delayq.ffi.LogSink
import dev.delayq.ffi.forwardLogs
import dev.delayq.ffi.setLogLevel
import dev.delayq.ffi.uniffiCallbackInterfaceLogSink
import org.slf4j.Logger
import org.slf4j.LoggerFactory
import java.util.concurrent.ConcurrentHashMap

/**
 * Core's logs (a transfer task that keeps failing, a value given back, a lease lost) in
 * SLF4J: an event of core's target `delayq::scheduler` goes to the logger `delayq.scheduler`,
 * one of another crate (`redis::...`) to `delayq.redis...`, at the same level. Core forwards
 * what the logger `delayq` enables, read when a client connects.
 */
internal object Logs : LogSink {
    private val root: Logger = LoggerFactory.getLogger("delayq")
    private val loggers = ConcurrentHashMap<String, Logger>()

    fun install() {
        Native.setCallbackThreadInitializer(uniffiCallbackInterfaceLogSink.log, CallbackThreadInitializer(true, false, "delayq-logs"))
        forwardLogs(this)
        refreshLevel()
    }

    /** Tells core the most detailed level the logger `delayq` enables. */
    fun refreshLevel() =
        setLogLevel(
            when {
                root.isTraceEnabled -> 5u
                root.isDebugEnabled -> 4u
                root.isInfoEnabled -> 3u
                root.isWarnEnabled -> 2u
                root.isErrorEnabled -> 1u
                else -> 0u
            },
        )

    override fun log(level: UByte, target: String, message: String) {
        val name = target.replace("::", ".").let { if (it == "delayq" || it.startsWith("delayq.")) it else "delayq.$it" }
        val logger = loggers.computeIfAbsent(name, LoggerFactory::getLogger)
        when (level.toInt()) {
            1 -> logger.error(message)
            2 -> logger.warn(message)
            3 -> logger.info(message)
            4 -> logger.debug(message)
            else -> logger.trace(message)
        }
    }
}
