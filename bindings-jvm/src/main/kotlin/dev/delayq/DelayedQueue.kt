package dev.delayq

import dev.delayq.ffi.OfferEntry
import kotlinx.coroutines.future.await
import java.time.Duration
import java.util.concurrent.CompletableFuture
import dev.delayq.ffi.DelayedQueue as FfiDelayedQueue

/** Counts of a delayed queue: entries still [delayed], values [ready] to take, [corrupt] entries set aside. */
data class DelayedStats(val delayed: Long, val ready: Long, val corrupt: Long)

/**
 * Options of a delayed queue handle: whether this process runs the queue's transfer task
 * ([scheduler], default true: a handle that opts out relies on another process or
 * `delayq transfer`) and the longest pause between two of its passes ([reconcileInterval]; null,
 * the default: core's, 1 s).
 */
data class DelayedQueueOptions @JvmOverloads constructor(
    /**
     * Whether this process runs the queue's transfer task (default true; a handle that opts
     * out relies on another process or `delayq transfer`).
     */
    val scheduler: Boolean = true,
    /** Longest pause between two passes of this process's transfer task (null, the default: core's, 1 s). */
    val reconcileInterval: Duration? = null,
) {
    /** A copy with [scheduler] set to [value]. */
    fun withScheduler(value: Boolean) = copy(scheduler = value)

    /** A copy with [reconcileInterval] set to [value]. */
    fun withReconcileInterval(value: Duration?) = copy(reconcileInterval = value)
}

/** One value for [DelayedQueue.offerAll] and its delay. */
class Offer(val value: ByteArray, val delay: Duration) {
    /** A UTF-8 string value. */
    constructor(value: String, delay: Duration) : this(Bridge.utf8(value), delay)
}

/**
 * A handle on one delayed queue, wire-compatible with Redisson's `RDelayedQueue`. Values
 * are bytes (`String`s go in as UTF-8); due times are Unix ms from the Redis server's clock.
 *
 * Every call comes three ways: blocking (`offer`), `CompletableFuture` (`offerAsync`), and
 * suspending ([coroutines]`.offer`). Thread-safe. Closing it stops its share of the transfer
 * task and fails later calls (and a waiting `take`) with [ClosedException].
 */
class DelayedQueue internal constructor(private val ffi: FfiDelayedQueue) : AutoCloseable {
    /** The suspending API of this queue, for coroutines. */
    val coroutines: Coroutines = Coroutines()

    /** `offerAsync` calls on their way to core, many per native call. */
    private val offers =
        Batches<Pair<OfferEntry, Long>>(
            { batch -> ffi.offerAllThen(batch.map { it.first }, batch.map { it.second }) },
            { batch, e -> batch.forEach { Bridge.fail(it.second, e) } },
        )

    /** The queue's name (its destination list). */
    val name: String get() = native { ffi.name() }

    /**
     * Offers [value] to be delivered after [delay]; returns its due time (Unix ms, server
     * clock). After a [ConnectionException] the value may or may not be stored (at most once); values carry no id, so offering it
     * again may store it twice.
     */
    fun offer(value: ByteArray, delay: Duration): Long =
        native { Bridge.delay(delay).let { ffi.offerBlocking(value, it.seconds.toULong(), it.nano.toUInt()) } }

    /** [offer] of a UTF-8 string value. */
    fun offer(value: String, delay: Duration): Long = offer(Bridge.utf8(value), delay)

    /** Offers many values, one round trip per thousand; returns their due times in order. All are checked first. */
    fun offerAll(entries: List<Offer>): List<Long> = native { ffi.offerAllBlocking(entries.map(::entry)) }

    /** [offerAll] of `value to delay` pairs, as Kotlin writes them: `offerAll(listOf(bytes to Duration.ofSeconds(5)))`. */
    @JvmName("offerAllBytePairs")
    fun offerAll(entries: List<Pair<ByteArray, Duration>>): List<Long> = offerAll(entries.map { Offer(it.first, it.second) })

    /** [offerAll] of `value to delay` pairs with UTF-8 string values: `offerAll(listOf("a" to Duration.ofSeconds(5)))`. */
    @JvmName("offerAllStringPairs")
    fun offerAll(entries: List<Pair<String, Duration>>): List<Long> = offerAll(entries.map { Offer(it.first, it.second) })

    /** The number of entries still waiting for their due time. */
    fun size(): Long = native { ffi.sizeBlocking().toLong() }

    /** Whether a waiting entry holds [value]. */
    fun contains(value: ByteArray): Boolean = native { ffi.containsBlocking(value) }

    /** [contains] of a UTF-8 string value. */
    fun contains(value: String): Boolean = contains(Bridge.utf8(value))

    /** Removes the first waiting entry holding [value]; returns whether there was one. */
    fun remove(value: ByteArray): Boolean = native { ffi.removeBlocking(value) }

    /** [remove] of a UTF-8 string value. */
    fun remove(value: String): Boolean = remove(Bridge.utf8(value))

    /** The values still waiting, in offer order. */
    fun readAll(): List<ByteArray> = native { ffi.readAllBlocking() }

    /** Deletes every waiting entry (values already due stay). */
    fun clear() = native { ffi.clearBlocking() }

    /** Takes the oldest due value, or null if there is none, without waiting. */
    fun poll(): ByteArray? = native { ffi.pollBlocking() }

    /** Takes the oldest due value, waiting up to [timeout]; null when it passes. */
    fun take(timeout: Duration): ByteArray? = native { ffi.takeBlocking(Bridge.timeout(timeout)) }

    /** Takes the oldest due value, waiting as long as it takes (until the handle is closed). */
    fun take(): ByteArray = native { ffi.takeBlocking(null)!! }

    /** Counts of waiting, ready and corrupt entries. */
    fun stats(): DelayedStats = native { stats(ffi.statsBlocking()) }

    /**
     * [offer] without blocking. The future completes on a worker of delayq's small fork-join
     * pool (`delayq-completions-N`): dependent stages without an executor (`thenApply`, ...)
     * run there; one that blocks (even by joining another delayq future) holds up only that
     * worker. Cancelling it does not take the offer back.
     */
    fun offerAsync(value: ByteArray, delay: Duration): CompletableFuture<Long> =
        try {
            val entry = OfferEntry(value, Bridge.delay(delay))
            Bridge.futureOf { token -> offers.add(entry to token) }
        } catch (e: DelayqException) {
            CompletableFuture.failedFuture(e)
        }

    /** [offerAsync] of a UTF-8 string value (one that UTF-8 cannot hold fails the future, as any bad argument). */
    fun offerAsync(value: String, delay: Duration): CompletableFuture<Long> =
        try {
            offerAsync(Bridge.utf8(value), delay)
        } catch (e: DelayqException) {
            CompletableFuture.failedFuture(e)
        }

    /** [offerAll] without blocking. */
    fun offerAllAsync(entries: List<Offer>): CompletableFuture<List<Long>> = Bridge.future { coroutines.offerAll(entries) }

    /** [size] without blocking. */
    fun sizeAsync(): CompletableFuture<Long> = Bridge.future { coroutines.size() }

    /** [contains] without blocking. */
    fun containsAsync(value: ByteArray): CompletableFuture<Boolean> = Bridge.future { coroutines.contains(value) }

    /** [containsAsync] of a UTF-8 string value. */
    fun containsAsync(value: String): CompletableFuture<Boolean> = Bridge.future { coroutines.contains(value) }

    /** [remove] without blocking. */
    fun removeAsync(value: ByteArray): CompletableFuture<Boolean> = Bridge.future { coroutines.remove(value) }

    /** [removeAsync] of a UTF-8 string value. */
    fun removeAsync(value: String): CompletableFuture<Boolean> = Bridge.future { coroutines.remove(value) }

    /** [readAll] without blocking. */
    fun readAllAsync(): CompletableFuture<List<ByteArray>> = Bridge.future { coroutines.readAll() }

    /** [clear] without blocking; the future completes with null (`CompletableFuture<Void>` to Java). */
    fun clearAsync(): CompletableFuture<Void?> = Bridge.done { coroutines.clear() }

    /** [poll] without blocking. */
    fun pollAsync(): CompletableFuture<ByteArray?> = Bridge.future { coroutines.poll() }

    /** [take] without blocking; cancelling the future cancels the wait and loses nothing (a value taken meanwhile goes back to the head). */
    fun takeAsync(timeout: Duration): CompletableFuture<ByteArray?> = Bridge.handedOver { handOver(Bridge.timeout(timeout)) }

    /** [take] with no timeout, without blocking; cancelling the future loses nothing (a value taken meanwhile goes back to the head). */
    fun takeAsync(): CompletableFuture<ByteArray> = Bridge.handedOver { handOver(null).map { it!! } }

    /** Core's hand-over of a take: holds a value until claimed, gives it back to the head if nobody does. */
    private fun handOver(timeout: Duration?): Handover<ByteArray?> {
        val h = native { ffi.takeHandover(timeout) }
        return Handover(h::onReady, { native { h.claim() } }, h::giveUp)
    }

    /** [stats] without blocking. */
    fun statsAsync(): CompletableFuture<DelayedStats> = Bridge.future { coroutines.stats() }

    /** Closes this handle (other handles on the queue are unaffected). Idempotent. */
    override fun close() = native { ffi.closeHandle() }

    /** The suspending calls of a [DelayedQueue]; cancelling a coroutine cancels its call. */
    inner class Coroutines internal constructor() {
        /** [DelayedQueue.offer]; cancelling the coroutine does not take the offer back. */
        suspend fun offer(value: ByteArray, delay: Duration): Long = offerAsync(value, delay).await()

        /** [offer] of a UTF-8 string value. */
        suspend fun offer(value: String, delay: Duration): Long = offer(Bridge.utf8(value), delay)

        /** [DelayedQueue.offerAll] as a suspending call. */
        suspend fun offerAll(entries: List<Offer>): List<Long> = native { ffi.offerAll(entries.map(::entry)) }

        /** [DelayedQueue.size] as a suspending call. */
        suspend fun size(): Long = native { ffi.size().toLong() }

        /** [DelayedQueue.contains] as a suspending call. */
        suspend fun contains(value: ByteArray): Boolean = native { ffi.contains(value) }

        /** [contains] of a UTF-8 string value. */
        suspend fun contains(value: String): Boolean = contains(Bridge.utf8(value))

        /** [DelayedQueue.remove] as a suspending call. */
        suspend fun remove(value: ByteArray): Boolean = native { ffi.remove(value) }

        /** [remove] of a UTF-8 string value. */
        suspend fun remove(value: String): Boolean = remove(Bridge.utf8(value))

        /** [DelayedQueue.readAll] as a suspending call. */
        suspend fun readAll(): List<ByteArray> = native { ffi.readAll() }

        /** [DelayedQueue.clear] as a suspending call. */
        suspend fun clear() = native { ffi.clear() }

        /** [DelayedQueue.poll] as a suspending call. */
        suspend fun poll(): ByteArray? = native { ffi.poll() }

        /** Cancel-safe: a value taken for a coroutine cancelled meanwhile goes back to the head. */
        suspend fun take(timeout: Duration): ByteArray? = Bridge.await(handOver(Bridge.timeout(timeout)))

        /** [DelayedQueue.take] with no timeout; cancel-safe, as the one with a timeout. */
        suspend fun take(): ByteArray = Bridge.await(handOver(null))!!

        /** [DelayedQueue.stats] as a suspending call. */
        suspend fun stats(): DelayedStats = native { stats(ffi.stats()) }
    }
}

private fun entry(o: Offer) = OfferEntry(o.value, Bridge.delay(o.delay))

private fun stats(s: dev.delayq.ffi.DelayedStats) = DelayedStats(s.delayed.toLong(), s.ready.toLong(), s.corrupt.toLong())
