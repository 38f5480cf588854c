package dev.delayq

import dev.delayq.ffi.DurationParts
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.future.future
import java.time.Duration
import java.util.concurrent.CompletableFuture

/** Type conversions and the async bridge shared by the facade classes. */
internal object Bridge {
    /** Runs the `CompletableFuture` variants; cancelling a future cancels the call. */
    private val scope = CoroutineScope(SupervisorJob() + Dispatchers.Default)

    fun <T> future(block: suspend () -> T): CompletableFuture<T> = scope.future { block() }

    /** A `java.time.Duration` as seconds and nanos; core checks sign and range. */
    fun parts(d: Duration): DurationParts = DurationParts(d.seconds, d.nano.toUInt())

    fun utf8(s: String): ByteArray = s.toByteArray(Charsets.UTF_8)
}
