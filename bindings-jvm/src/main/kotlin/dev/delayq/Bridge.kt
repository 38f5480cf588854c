package dev.delayq

import com.sun.jna.CallbackThreadInitializer
import com.sun.jna.Native
import dev.delayq.ffi.Completions
import dev.delayq.ffi.refuseNegative
import dev.delayq.ffi.setCompletions
import dev.delayq.ffi.uniffiCallbackInterfaceCompletions
import dev.delayq.ffi.uniffiCallbackInterfaceDeliveryHandler
import dev.delayq.ffi.uniffiCallbackInterfaceLogSink
import dev.delayq.ffi.uniffiRustFutureContinuationCallbackImpl
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.future.future
import kotlinx.coroutines.suspendCancellableCoroutine
import java.time.Duration
import java.util.concurrent.CompletableFuture
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.ForkJoinPool
import java.util.concurrent.atomic.AtomicLong
import kotlin.coroutines.resume

/** Core's hand-over of a take or receive (`TakeHandover`, ...), seen through its three calls. */
internal class Handover<T>(val onReady: (Long) -> Unit, val claim: () -> T, val giveUp: () -> Unit) {
    fun <R> map(f: (T) -> R) = Handover(onReady, { f(claim()) }, giveUp)
}

/**
 * Type conversions and the async bridge shared by the facade classes.
 *
 * Calls that report through tokens (`offerAllThen`, the ready signal of a hand-over) complete
 * here: the native `delayq-callbacks` thread hands over every completion queued meanwhile
 * in one upcall ([completed]), and a worker of [completing] completes each future or resumes
 * each coroutine.
 */
internal object Bridge : Completions {
    /** Runs the `CompletableFuture` variants of the other calls; cancelling a future cancels the call. */
    private val scope = CoroutineScope(SupervisorJob() + Dispatchers.Default)

    /**
     * Runs each upcall's completions, and with them the dependent stages a caller added
     * without an executor. Not the `delayq-callbacks` thread: a stage that joins another
     * delayq future would block the one thread that could complete it, and every async call
     * of the JVM would hang. A worker of a fork-join pool that joins a future is compensated
     * with a spare (`ForkJoinPool.managedBlock`), so the other completions go on.
     */
    private val completing =
        ForkJoinPool(
            maxOf(2, Runtime.getRuntime().availableProcessors()),
            { pool ->
                ForkJoinPool.defaultForkJoinWorkerThreadFactory.newThread(pool).apply {
                    name = "delayq-completions-$poolIndex"
                    isDaemon = true
                }
            },
            null,
            true,
        )

    private val tokens = AtomicLong()
    private val waiting = ConcurrentHashMap<Long, (Long, DelayqException?) -> Unit>()

    init {
        // Native threads that call into the JVM attach once, as daemons (a JVM whose main
        // returned exits without waiting for them), instead of attaching and detaching for
        // each call (as a new non-daemon `Thread-N`, without the ThreadLocals of the last).
        // JNA applies an initializer only to a callback whose native pointer is made after
        // it was set: the callback interfaces' pointers are made at the first native call
        // (the generated UniffiLib registers their tables), so every initializer is set
        // here, before any, and each entry point that may make the first call runs [start].
        val callbacks = CallbackThreadInitializer(true, false, "delayq-callbacks")
        Native.setCallbackThreadInitializer(uniffiCallbackInterfaceCompletions.completed, callbacks)
        Native.setCallbackThreadInitializer(uniffiCallbackInterfaceCompletions.failed, callbacks)
        Native.setCallbackThreadInitializer(uniffiCallbackInterfaceLogSink.log, CallbackThreadInitializer(true, false, "delayq-logs"))
        // consume's handlers run on the threads of the runtime's blocking pool, which it keeps a while.
        val handlers = CallbackThreadInitializer(true, false, "delayq-consume")
        Native.setCallbackThreadInitializer(uniffiCallbackInterfaceDeliveryHandler.handle, handlers)
        Native.setCallbackThreadInitializer(uniffiRustFutureContinuationCallbackImpl, CallbackThreadInitializer(true, false, "delayq-jvm"))
        setCompletions(this)
        Logs.install()
    }

    /** Sets up the native callbacks' threads, the completions and the log forwarding (once; before the first native call). */
    fun start() = Unit

    fun <T> future(block: suspend () -> T): CompletableFuture<T> = scope.future { block() }

    /** A future of a call that returns nothing, completed with null: Java sees `CompletableFuture<Void>`. */
    fun done(block: suspend () -> Unit): CompletableFuture<Void?> =
        scope.future {
            block()
            null
        }

    /** A token whose outcome goes to [done], on the `delayq-callbacks` thread. */
    fun token(done: (value: Long, error: DelayqException?) -> Unit): Long {
        val token = tokens.incrementAndGet()
        waiting[token] = done
        return token
    }

    fun forget(token: Long) {
        waiting.remove(token)
    }

    override fun completed(pairs: List<Long>) {
        val batch = (pairs.indices step 2).mapNotNull { i -> waiting.remove(pairs[i])?.let { it to pairs[i + 1] } }
        if (batch.isNotEmpty()) completing.execute { batch.forEach { (done, value) -> runCatching { done(value, null) } } }
    }

    override fun failed(token: Long, kind: String, message: String) {
        val done = waiting.remove(token) ?: return
        val error = exceptionOf(kind, message)
        completing.execute { runCatching { done(0, error) } }
    }

    /** Fails [token]'s call with [e] (a native call that never reached core). */
    fun fail(token: Long, e: Throwable) {
        val error = e.toPublicOrNull() ?: ConnectionException(e.toString(), e)
        waiting.remove(token)?.let { done -> runCatching { done(0, error) } }
    }

    /** A future completed by the native call that [start] begins with its token. */
    fun futureOf(start: (token: Long) -> Unit): CompletableFuture<Long> {
        val f = CompletableFuture<Long>()
        start(token { value, error -> if (error == null) f.complete(value) else f.completeExceptionally(error) })
        return f
    }

    /**
     * Awaits core's hand-over [h]: resumes when the outcome is ready, then claims it. Cancelled
     * before the claim, it gives up (core stops the call, or gives back what it took).
     */
    suspend fun <T> await(h: Handover<T>): T {
        var ticket = 0L
        try {
            suspendCancellableCoroutine<Unit> { cont ->
                ticket = token { _, _ -> cont.resume(Unit) }
                cont.invokeOnCancellation { h.giveUp() }
                h.onReady(ticket)
            }
        } catch (e: CancellationException) {
            forget(ticket)
            h.giveUp()
            throw e
        }
        return h.claim()
    }

    /** A `CompletableFuture` of the hand-over that [start] begins: cancelled before the claim, it gives up. */
    fun <T> handedOver(start: () -> Handover<T>): CompletableFuture<T> =
        try {
            HandedOver(native(start))
        } catch (e: DelayqException) {
            CompletableFuture.failedFuture(e)
        }

    private class HandedOver<T>(private val h: Handover<T>) : CompletableFuture<T>() {
        private val ticket = token { _, _ -> ready() }

        init {
            h.onReady(ticket)
        }

        @Synchronized
        private fun ready() {
            if (isDone) return h.giveUp() // cancelled or completed by the caller
            try {
                complete(h.claim())
            } catch (e: Throwable) {
                completeExceptionally(e)
            }
        }

        @Synchronized
        override fun cancel(mayInterruptIfRunning: Boolean): Boolean {
            val cancelled = super.cancel(mayInterruptIfRunning)
            if (cancelled) {
                forget(ticket)
                h.giveUp()
            }
            return cancelled
        }
    }

    /**
     * [d] as a delay for core, which checks its range; a negative one (a Rust `Duration` cannot
     * be) fails with core's error, which names the setting [option] (`"visibility timeout"`) if given.
     */
    fun delay(d: Duration, option: String? = null): Duration = d.also { if (it.isNegative) refuse(it, false, option) }

    /** [d] as a timeout for core; a negative one fails with core's error, naming [option] if given. */
    fun timeout(d: Duration, option: String? = null): Duration = d.also { if (it.isNegative) refuse(it, true, option) }

    private fun refuse(d: Duration, timeout: Boolean, option: String?) =
        try {
            native { refuseNegative(floorMillis(d), timeout) }
        } catch (e: InvalidArgumentException) {
            if (option == null) throw e
            // "... delay must not be negative, got -5 ms" -> "... visibility timeout must not be negative, ..."
            throw InvalidArgumentException(e.message.orEmpty().replaceFirst(if (timeout) "timeout" else "delay", option), e.cause)
        }

    /** Whole milliseconds, floored, at most -1; as core's signed-millisecond checks take them. */
    private fun floorMillis(d: Duration): Long {
        val ms = runCatching { Math.multiplyExact(d.seconds, 1000L) + d.nano / 1_000_000 }.getOrDefault(Long.MIN_VALUE)
        return minOf(-1L, ms)
    }

    /** [s] in UTF-8; a lone surrogate (which UTF-8 cannot hold) is an invalid argument, not a `?`. */
    fun utf8(s: String): ByteArray =
        try {
            val bytes = Charsets.UTF_8.newEncoder().encode(java.nio.CharBuffer.wrap(s))
            ByteArray(bytes.remaining()).also { bytes.get(it) }
        } catch (e: java.nio.charset.CharacterCodingException) {
            throw notUtf8(e)
        }

    /** A string argument that UTF-8 cannot hold (a lone surrogate). */
    fun notUtf8(e: java.nio.charset.CharacterCodingException) =
        InvalidArgumentException("invalid argument: a string must be valid UTF-16 to be sent as UTF-8 (it holds a lone surrogate)", e)
}
