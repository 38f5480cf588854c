package dev.delayq

import org.slf4j.ILoggerFactory
import org.slf4j.IMarkerFactory
import org.slf4j.Logger
import org.slf4j.Marker
import org.slf4j.event.Level
import org.slf4j.helpers.BasicMarkerFactory
import org.slf4j.helpers.LegacyAbstractLogger
import org.slf4j.helpers.MessageFormatter
import org.slf4j.helpers.NOPMDCAdapter
import org.slf4j.spi.MDCAdapter
import org.slf4j.spi.SLF4JServiceProvider
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.ConcurrentLinkedQueue

/**
 * The tests' SLF4J binding: keeps every event at INFO or more severe (what the tests
 * check) in [events], and prints WARN and ERROR to stderr. Found by SLF4J through
 * META-INF/services.
 */
class RecordingLogs : SLF4JServiceProvider {
    /** One logged event, and the thread that logged it. */
    data class Event(val logger: String, val level: Level, val message: String, val thread: String = Thread.currentThread().name)

    companion object {
        val events = ConcurrentLinkedQueue<Event>()
    }

    private class RecordingLogger(name: String) : LegacyAbstractLogger() {
        init {
            this.name = name
        }

        override fun isTraceEnabled() = false

        override fun isDebugEnabled() = false

        override fun isInfoEnabled() = true

        override fun isWarnEnabled() = true

        override fun isErrorEnabled() = true

        override fun getFullyQualifiedCallerName(): String? = null

        override fun handleNormalizedLoggingCall(level: Level, marker: Marker?, pattern: String?, args: Array<out Any?>?, t: Throwable?) {
            val message = MessageFormatter.basicArrayFormat(pattern, args) ?: ""
            events.add(Event(name, level, message))
            if (level.toInt() >= Level.WARN.toInt() && !name.startsWith("org.redisson") && !name.startsWith("io.netty")) {
                System.err.println("[$level] $name: $message")
            }
        }
    }

    private val loggers = ConcurrentHashMap<String, Logger>()
    private val factory = ILoggerFactory { name -> loggers.computeIfAbsent(name) { RecordingLogger(it) } }
    private val markers = BasicMarkerFactory()
    private val mdc = NOPMDCAdapter()

    override fun getLoggerFactory(): ILoggerFactory = factory

    override fun getMarkerFactory(): IMarkerFactory = markers

    override fun getMDCAdapter(): MDCAdapter = mdc

    override fun getRequestedApiVersion() = "2.0.99"

    override fun initialize() = Unit
}
