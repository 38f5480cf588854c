package dev.delayq

import dev.delayq.ffi.DurationParts
import dev.delayq.ffi.PendingCall
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.future.future
import kotlinx.coroutines.launch
import kotlinx.coroutines.suspendCancellableCoroutine
import java.time.Duration
import java.util.concurrent.CompletableFuture
import kotlin.coroutines.resumeWithException

/** Type conversions and the async bridge shared by the facade classes. */
internal object Bridge {
    /** Runs the `CompletableFuture` variants; cancelling a future cancels the call. */
    private val scope = CoroutineScope(SupervisorJob() + Dispatchers.Default)

    fun <T> future(block: suspend () -> T): CompletableFuture<T> = scope.future { block() }

    /**
     * Awaits a native call that hands over something taken from Redis (a `take_then` or
     * `receive_then`, which [start] begins with the two callbacks of its handler). Cancel-safe:
     * cancelled before the result, the call is cancelled (the native side gives back what it
     * had taken); cancelled while the result is being handed over, [giveBack] returns it.
     */
    suspend fun <T> handedOver(
        giveBack: (T & Any) -> Unit,
        start: (resume: (T) -> Unit, fail: (kind: String, message: String) -> Unit) -> PendingCall,
    ): T =
        suspendCancellableCoroutine { cont ->
            val call = start(
                { value -> cont.resume(value) { _, taken, _ -> taken?.let(giveBack) } },
                { kind, message -> cont.resumeWithException(exceptionOf(kind, message)) },
            )
            cont.invokeOnCancellation { call.cancel() }
        }

    /**
     * [future] for a call that hands over something taken from Redis: if the future was
     * cancelled after the call returned it (the two race), [giveBack] returns it to the queue.
     */
    fun <T> futureGivingBack(giveBack: (T & Any) -> Unit, block: suspend () -> T): CompletableFuture<T> {
        val result = CompletableFuture<T>()
        val job = scope.launch {
            try {
                val value = block()
                if (!result.complete(value) && value != null) giveBack(value)
            } catch (e: Throwable) {
                result.completeExceptionally(e)
            }
        }
        result.whenComplete { _, _ -> if (result.isCancelled) job.cancel() }
        return result
    }

    /** A `java.time.Duration` as seconds and nanos; core checks sign and range. */
    fun parts(d: Duration): DurationParts = DurationParts(d.seconds, d.nano.toUInt())

    /** A duration that came from core (a stored setting). */
    fun duration(p: DurationParts): Duration = Duration.ofSeconds(p.seconds, p.nanos.toLong())

    fun utf8(s: String): ByteArray = s.toByteArray(Charsets.UTF_8)
}
