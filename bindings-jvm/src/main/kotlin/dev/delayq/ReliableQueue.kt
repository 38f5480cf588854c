package dev.delayq

import dev.delayq.ffi.ReliableOfferEntry
import dev.delayq.ffi.Scheduler
import dev.delayq.ffi.defaultBackoff
import kotlinx.coroutines.runBlocking
import java.time.Duration
import java.util.concurrent.CompletableFuture
import dev.delayq.ffi.Backoff as FfiBackoff
import dev.delayq.ffi.Delivery as FfiDelivery
import dev.delayq.ffi.DeliveryHandler as FfiDeliveryHandler
import dev.delayq.ffi.ReliableQueue as FfiReliableQueue
import dev.delayq.ffi.ReliableQueueOptions as FfiReliableQueueOptions

/**
 * How long a failed message waits before its next attempt, when [Delivery.nack] is called
 * without a delay (and when a [ReliableQueue.consume] handler fails).
 */
sealed class Backoff {
    /** `base * 2^(attempt-1)`, capped at [max], with jitter (a random delay between half of that and all of it). */
    class Exponential internal constructor(val base: Duration, val max: Duration) : Backoff() {
        override fun toString() = "Backoff.exponential($base, $max)"

        override fun equals(other: Any?) = other is Exponential && other.base == base && other.max == max

        override fun hashCode() = 31 * base.hashCode() + max.hashCode()
    }

    /** Explicit delays after the 1st, 2nd, ... failed attempt; the last one repeats. */
    class Schedule internal constructor(val delays: List<Duration>) : Backoff() {
        override fun toString() = "Backoff.schedule($delays)"

        override fun equals(other: Any?) = other is Schedule && other.delays == delays

        override fun hashCode() = delays.hashCode()
    }

    internal fun toFfi(): FfiBackoff =
        when (this) {
            is Exponential -> FfiBackoff.Exponential(Bridge.delay(base, "back-off base"), Bridge.delay(max, "back-off max"))
            is Schedule -> FfiBackoff.Schedule(delays.map { Bridge.delay(it, "back-off delay") })
        }

    companion object {
        /** Exponential with jitter from [base] up to [max] (null: core's defaults, 1 s up to 10 min). */
        @JvmStatic
        @JvmOverloads
        fun exponential(base: Duration? = null, max: Duration? = null): Backoff {
            Bridge.start() // may be the first native call
            val default = of(defaultBackoff()) as Exponential
            return Exponential(base ?: default.base, max ?: default.max)
        }

        /** Explicit delays, such as 15 s, 3 min, 10 min, 30 min, 1 h; the last one repeats. */
        @JvmStatic
        fun schedule(vararg delays: Duration): Backoff = Schedule(delays.toList())

        /** Explicit delays from a list; the last one repeats. */
        @JvmStatic
        fun schedule(delays: List<Duration>): Backoff = Schedule(delays.toList())

        internal fun of(stored: FfiBackoff): Backoff =
            when (stored) {
                is FfiBackoff.Exponential -> Exponential(stored.base, stored.max)
                is FfiBackoff.Schedule -> Schedule(stored.v1)
            }
    }
}

/**
 * Options of a reliable queue handle. The queue's settings ([visibilityTimeout],
 * [maxAttempts], [backoff], [shards], [deadLetterRetention], [idempotencyRetention]) are
 * stored in Redis with the queue and shared by every handle in every process: one left
 * null uses the stored value; a named one must match it, or the handle's first call throws
 * [InvalidArgumentException] naming the difference, unless [updateSettings] is set (which
 * overwrites the stored ones). The first handle that names settings and makes a call stores
 * them with the defaults for the rest; a handle that names none stores nothing. Immutable: Kotlin uses named arguments or `copy`, Java
 * chains the `with` methods:
 *
 * ```java
 * ReliableQueueOptions opts = new ReliableQueueOptions()
 *     .withVisibilityTimeout(Duration.ofSeconds(30))
 *     .withMaxAttempts(5)
 *     .withBackoff(Backoff.schedule(Duration.ofSeconds(15), Duration.ofMinutes(3)));
 * ```
 *
 * Checked by core when the queue handle is made: a bad value throws [InvalidArgumentException].
 */
data class ReliableQueueOptions @JvmOverloads constructor(
    /** How long a received message stays invisible (its lease) before it is delivered again (default 30 s). */
    val visibilityTimeout: Duration? = null,
    /** Deliveries before a message goes to the dead letters (1 to 255, default 5). */
    val maxAttempts: Int? = null,
    /** The delay before a retry when none is given (default: exponential from 1 s to 10 min). */
    val backoff: Backoff? = null,
    /** Sub-queues, a power of two (default 1). */
    val shards: Int? = null,
    /** How long dead letters are kept (zero, the default: until requeued or purged). */
    val deadLetterRetention: Duration? = null,
    /** How long acked ids are remembered for de-duplication (zero, the default: not at all). */
    val idempotencyRetention: Duration? = null,
    /** Overwrite the stored settings with the named ones instead of failing on a difference (default false). */
    val updateSettings: Boolean = false,
    /** Whether this process moves the queue's due messages (default true). */
    val scheduler: Boolean = true,
    /** Longest pause between two passes of this process's transfer task (null, the default: core's, 1 s). */
    val reconcileInterval: Duration? = null,
) {
    /** A copy with [visibilityTimeout] set to [value]. */
    fun withVisibilityTimeout(value: Duration?) = copy(visibilityTimeout = value)

    /** A copy with [maxAttempts] set to [value]. */
    fun withMaxAttempts(value: Int?) = copy(maxAttempts = value)

    /** A copy with [backoff] set to [value]. */
    fun withBackoff(value: Backoff?) = copy(backoff = value)

    /** A copy with [shards] set to [value]. */
    fun withShards(value: Int?) = copy(shards = value)

    /** A copy with [deadLetterRetention] set to [value]. */
    fun withDeadLetterRetention(value: Duration?) = copy(deadLetterRetention = value)

    /** A copy with [idempotencyRetention] set to [value]. */
    fun withIdempotencyRetention(value: Duration?) = copy(idempotencyRetention = value)

    /** A copy with [updateSettings] set to [value]. */
    fun withUpdateSettings(value: Boolean) = copy(updateSettings = value)

    /** A copy with [scheduler] set to [value]. */
    fun withScheduler(value: Boolean) = copy(scheduler = value)

    /** A copy with [reconcileInterval] set to [value]. */
    fun withReconcileInterval(value: Duration?) = copy(reconcileInterval = value)

    internal fun toFfi(): FfiReliableQueueOptions {
        // Core checks the ranges; a negative count must not wrap to a huge unsigned one first.
        if (maxAttempts != null && maxAttempts < 0) throw InvalidArgumentException("invalid argument: max_attempts must be between 1 and 255, got $maxAttempts")
        if (shards != null && shards < 0) throw InvalidArgumentException("invalid argument: shards must be a power of two from 1 to 1024, got $shards")
        return FfiReliableQueueOptions(
            visibilityTimeout?.let { Bridge.delay(it, "visibility timeout") },
            maxAttempts?.toUInt(),
            backoff?.toFfi(),
            shards?.toUInt(),
            deadLetterRetention?.let { Bridge.delay(it, "dead-letter retention") },
            idempotencyRetention?.let { Bridge.delay(it, "idempotency retention") },
            updateSettings,
            Scheduler(scheduler, reconcileInterval?.let { Bridge.timeout(it, "reconcile interval") }),
        )
    }
}

/**
 * The settings of a reliable queue as stored in Redis with it (see [ReliableQueueOptions]):
 * the lease of a delivery ([visibilityTimeout]), [maxAttempts], the [backoff] of a nack
 * without a delay, [shards], and how long dead letters ([deadLetterRetention]; null: until
 * requeued or purged) and acked ids ([idempotencyRetention]; null: not at all) are kept.
 */
data class ReliableSettings(
    /** How long a received message stays invisible (its lease) before it is delivered again, unless acked, nacked or extended. */
    val visibilityTimeout: Duration,
    /** Deliveries before a message goes to the dead letters. */
    val maxAttempts: Int,
    /** The delay before a retry when [Delivery.nack] is called without one (and when a [ReliableQueue.consume] handler fails). */
    val backoff: Backoff,
    /** Sub-queues the queue is split into, a power of two. */
    val shards: Int,
    /** How long dead letters are kept (null: until requeued or purged). */
    val deadLetterRetention: Duration?,
    /** How long the id of an acked message is remembered, so that an offer of the same id is de-duplicated (null: forgotten at the ack). */
    val idempotencyRetention: Duration?,
)

/**
 * What [ReliableQueue.offerWithOutcome] did: the message [id], whether this call [created] it
 * (false: de-duplicated), and when it is due ([dueAt], server Unix ms as the server computed
 * it; null when de-duplicated: the existing message keeps its own).
 */
data class OfferOutcome
    @JvmOverloads
    constructor(val id: String, val created: Boolean, val dueAt: Long? = null)

/** Counts of a reliable queue: messages [delayed], [ready] to receive, [inFlight] (received, not settled), [dead]. */
data class ReliableStats(val delayed: Long, val ready: Long, val inFlight: Long, val dead: Long)

/** A message in the dead letters: its [id], [payload], the [attempts] it had and when it [diedAt] (server Unix ms). */
class DeadLetter(val id: String, val payload: ByteArray, val attempts: Int, val diedAt: Long) {
    /** The payload as UTF-8 text. */
    fun payloadString(): String = String(payload, Charsets.UTF_8)

    override fun toString() = "DeadLetter(id=$id, attempts=$attempts, diedAt=$diedAt, payload=${payload.size} bytes)"
}

/** One message for [ReliableQueue.offerAll]: its payload, delay, optional id and optional [shardKey] (see [ReliableQueue.offer]). */
class ReliableOffer
    @JvmOverloads
    constructor(val payload: ByteArray, val delay: Duration, val id: String? = null, val shardKey: String? = null) {
        /** A UTF-8 string payload. */
        @JvmOverloads
        constructor(payload: String, delay: Duration, id: String? = null, shardKey: String? = null) :
            this(Bridge.utf8(payload), delay, id, shardKey)
    }

/** What [ReliableQueue.consume] runs for each delivery: returning acks it, throwing nacks it. */
fun interface DeliveryHandler {
    /** Handles [delivery]: returning acks it; throwing nacks it with the queue's back-off (core logs the exception with its stack trace). */
    @Throws(Exception::class)
    fun handle(delivery: Delivery)
}

/**
 * A received message. [ack] it when done, [nack] it to retry; if neither happens before its
 * lease ends ([deadline], moved by [extend]), it is delivered again with [attempt] one higher.
 * Acks, nacks and extends work after the queue handle was closed (not after its client was).
 */
class Delivery internal constructor(internal val ffi: FfiDelivery) {
    /** The suspending calls of this delivery. */
    val coroutines: Coroutines = Coroutines()

    /** What the delivery carries, read in one native call when first needed. */
    private val message by lazy { native { ffi.message() } }

    /** The message id (generated, or the one given to `offer`). */
    val id: String get() = message.id

    /** The payload. */
    val payload: ByteArray get() = message.payload

    /** Which delivery of the message this is: 1 for the first. */
    val attempt: Int get() = message.attempt.toInt()

    /** When the message came due (server Unix ms). */
    val dueAt: Long get() = message.dueAt

    /** The shard the message lives in (0 for a queue of one shard). */
    val shard: Int get() = message.shard.toInt()

    /** When this delivery's lease ends (server Unix ms): past it, the message may go to another consumer. Moved by [extend]. */
    val deadline: Long get() = native { ffi.deadline() }

    /** The payload as UTF-8 text. */
    fun payloadString(): String = String(payload, Charsets.UTF_8)

    /**
     * Moves the end of this delivery's lease to [duration] from now (shorter than what is left
     * shortens it). False when the lease was already lost (the message went back to the queue,
     * or this delivery was acked or nacked).
     */
    fun extend(duration: Duration): Boolean = native { ffi.extendBlocking(Bridge.delay(duration, "duration")) }

    /** [extend] without blocking. */
    fun extendAsync(duration: Duration): CompletableFuture<Boolean> = Bridge.future { coroutines.extend(duration) }

    /**
     * Acknowledges the message: it is done. False when this delivery had already ended
     * (settled, or timed out). After a [ConnectionException] the ack may or may not have happened: if it did not, the message
     * comes back after its lease (at-least-once).
     */
    fun ack(): Boolean = native { ffi.ackBlocking() }

    /** Gives the message back for a retry after the queue's back-off, or to the dead letters after its last attempt. */
    fun nack(): Boolean = native { ffi.nackBlocking(null) }

    /** Gives the message back for a retry after [delay], or to the dead letters after its last attempt. */
    fun nack(delay: Duration): Boolean = native { ffi.nackBlocking(Bridge.delay(delay)) }

    /** [ack] without blocking. */
    fun ackAsync(): CompletableFuture<Boolean> = Bridge.future { coroutines.ack() }

    /** [nack] without blocking. */
    fun nackAsync(): CompletableFuture<Boolean> = Bridge.future { coroutines.nack() }

    /** [nack] with [delay] without blocking. */
    fun nackAsync(delay: Duration): CompletableFuture<Boolean> = Bridge.future { coroutines.nack(delay) }

    override fun toString() = "Delivery(id=$id, attempt=$attempt, dueAt=$dueAt, deadline=$deadline, payload=${payload.size} bytes)"

    /** The suspending calls of a [Delivery]. */
    inner class Coroutines internal constructor() {
        /** [Delivery.extend] as a suspending call. */
        suspend fun extend(duration: Duration): Boolean = native { ffi.extend(Bridge.delay(duration, "duration")) }

        /** [Delivery.ack] as a suspending call. */
        suspend fun ack(): Boolean = native { ffi.ack() }

        /** [Delivery.nack] as a suspending call. */
        suspend fun nack(): Boolean = native { ffi.nack(null) }

        /** [Delivery.nack] with [delay] as a suspending call. */
        suspend fun nack(delay: Duration): Boolean = native { ffi.nack(Bridge.delay(delay)) }
    }
}

/**
 * A handle on one reliable queue: at-least-once delivery with acknowledgement, a visibility
 * timeout, retries with back-off, dead letters, cancel and reschedule by id, de-duplication
 * by id. All of its keys share the hash tag `{dq:NAME}`; see `docs/reliable-queue.md`.
 *
 * Every call comes three ways: blocking, `CompletableFuture` (`...Async`) and suspending
 * ([coroutines]). Thread-safe. [close] fails later calls with [ClosedException] and ends a
 * running [consume] at once; [closeGracefully] lets running handlers finish first.
 */
class ReliableQueue internal constructor(private val ffi: FfiReliableQueue) : AutoCloseable {
    /** The suspending API of this queue, for coroutines. */
    val coroutines: Coroutines = Coroutines()

    /** The queue's name. */
    val name: String get() = native { ffi.name() }

    /**
     * Offers [payload], due after [delay]; returns its id: [id] when given, else a generated
     * (unique) one. With [id], a message with that id still waiting, ready or in flight (or
     * acked within the idempotency retention) is not offered twice: the call returns the id
     * and leaves the existing message as it is (payload and due time unchanged). With
     * [shardKey] (1 to 256 bytes), the message goes to the shard of the key instead of the
     * shard of its id, so that messages with one key stay in one shard (a queue of several
     * shards; `docs/cluster.md`); de-duplication by id holds within a shard, so offer an id
     * always with the same shard key (or always without).
     *
     * After a [ConnectionException] the
     * message may or may not be stored: offered with an id, it is safe to offer it again
     * with that id.
     */
    @JvmOverloads
    fun offer(payload: ByteArray, delay: Duration, id: String? = null, shardKey: String? = null): String =
        offerWithOutcome(payload, delay, id, shardKey).id

    /** [offer] of a UTF-8 string payload. */
    @JvmOverloads
    fun offer(payload: String, delay: Duration, id: String? = null, shardKey: String? = null): String =
        offer(Bridge.utf8(payload), delay, id, shardKey)

    /** Like [offer]; tells whether this call created the message or found one with that [id] (de-duplicated). */
    @JvmOverloads
    fun offerWithOutcome(payload: ByteArray, delay: Duration, id: String? = null, shardKey: String? = null): OfferOutcome =
        native { outcome(ffi.offerAllBlocking(listOf(ReliableOfferEntry(payload, Bridge.delay(delay), id, shardKey))).single()) }

    /** [offerWithOutcome] of a UTF-8 string payload. */
    @JvmOverloads
    fun offerWithOutcome(payload: String, delay: Duration, id: String? = null, shardKey: String? = null): OfferOutcome =
        offerWithOutcome(Bridge.utf8(payload), delay, id, shardKey)

    /** Offers many messages, one round trip per thousand; returns their ids in order. All are checked first. */
    fun offerAll(messages: List<ReliableOffer>): List<String> = offerAllWithOutcome(messages).map { it.id }

    /** [offerAll] of `payload to delay` pairs, as Kotlin writes them: `offerAll(listOf(bytes to Duration.ofSeconds(5)))`. */
    @JvmName("offerAllBytePairs")
    fun offerAll(messages: List<Pair<ByteArray, Duration>>): List<String> = offerAll(messages.map { ReliableOffer(it.first, it.second) })

    /** [offerAll] of `payload to delay` pairs with UTF-8 string payloads: `offerAll(listOf("a" to Duration.ofSeconds(5)))`. */
    @JvmName("offerAllStringPairs")
    fun offerAll(messages: List<Pair<String, Duration>>): List<String> = offerAll(messages.map { ReliableOffer(it.first, it.second) })

    /** Like [offerAll]; an [OfferOutcome] per message, in order. */
    fun offerAllWithOutcome(messages: List<ReliableOffer>): List<OfferOutcome> =
        native { ffi.offerAllBlocking(messages.map(::entry)).map(::outcome) }

    /**
     * Removes a message no consumer has received yet: waiting (for its due time, or for a
     * retry) or ready; not one in flight (received, not settled) or dead. Returns whether
     * there was one.
     */
    fun cancel(id: String): Boolean = native { ffi.cancelBlocking(id) }

    /**
     * Moves a message no consumer has received yet (waiting, for its due time or for a
     * retry, or ready; not one in flight or dead) to [delay] from now, its attempts
     * unchanged. Returns whether there was one.
     */
    fun reschedule(id: String, delay: Duration): Boolean = native { ffi.rescheduleBlocking(id, Bridge.delay(delay)) }

    /** The next ready message, waiting up to [timeout] on the server; null when it passes. */
    fun receive(timeout: Duration): Delivery? = native { ffi.receiveBlocking(Bridge.timeout(timeout))?.let(::Delivery) }

    /** The next ready message, waiting as long as it takes (until the handle is closed). */
    fun receive(): Delivery = native { Delivery(ffi.receiveBlocking(null)!!) }

    /** Up to [n] (1 to 1000) ready messages in one round trip, waiting up to [timeout] for the first; empty when it passes. */
    fun receiveMany(n: Int, timeout: Duration): List<Delivery> = native { ffi.receiveManyBlocking(count(n), Bridge.timeout(timeout)).map(::Delivery) }

    /** Up to [n] ready messages in one round trip, waiting as long as it takes for the first. */
    fun receiveMany(n: Int): List<Delivery> = native { ffi.receiveManyBlocking(count(n), null).map(::Delivery) }

    /**
     * Acks many deliveries in one round trip; for each, whether its lease was still held (see
     * [Delivery.ack]; after a [ConnectionException] each ack may or may not have happened).
     */
    fun ackMany(deliveries: List<Delivery>): List<Boolean> = native { ffi.ackManyBlocking(deliveries.map { it.ffi }) }

    /** The queue's settings as stored in Redis (stored from this handle's options if the queue had none). */
    fun settings(): ReliableSettings = native { settings(ffi.settingsBlocking()) }

    /** Acks through this handle that found their delivery already ended (its lease lost): each means that work may be done twice. */
    fun lostLeases(): Long = native { ffi.lostLeases().toLong() }

    /** Counts of delayed, ready, in-flight and dead messages. */
    fun stats(): ReliableStats = native { stats(ffi.statsBlocking()) }

    /** Up to [limit] messages from the dead letters, in no particular order. */
    fun deadLetters(limit: Int): List<DeadLetter> = native { ffi.deadLettersBlocking(limit(limit)).map(::deadLetter) }

    /** Up to core's default number (100) of messages from the dead letters. */
    fun deadLetters(): List<DeadLetter> = native { ffi.deadLettersBlocking(null).map(::deadLetter) }

    /** Makes the dead letters with these [ids] ready again, attempts reset; returns how many. */
    fun requeueDead(ids: List<String>): Long = native { ffi.requeueDeadBlocking(ids).toLong() }

    /** Makes every dead letter ready again, attempts reset; returns how many. */
    fun requeueDead(): Long = native { ffi.requeueDeadBlocking(null).toLong() }

    /** Deletes every dead letter; returns how many there were. */
    fun purgeDead(): Long = native { ffi.purgeDeadBlocking().toLong() }

    /**
     * Runs [handler] on deliveries, [concurrency] at a time, each on a thread of its own:
     * acks a delivery when the handler returns, nacks it (with the queue's back-off) when the
     * handler throws. Receives ahead (up to [concurrency] messages), extends the lease of a
     * running handler by itself (a handler may run longer than the visibility timeout),
     * batches acks. Blocks until this handle or its client is closed; after [closeGracefully],
     * until the running handlers finished and were settled.
     */
    @JvmOverloads
    fun consume(handler: DeliveryHandler, concurrency: Int = 1) = native { ffi.consumeBlocking(concurrency(concurrency), bridge(handler)) }

    /** [consume] with the handler last, for Kotlin's trailing lambda: `queue.consume(8) { d -> ... }`. */
    fun consume(concurrency: Int, handler: DeliveryHandler) = consume(handler, concurrency)

    /**
     * Like [consume], returning at once; the future completes (with null: a
     * `CompletableFuture<Void>` to Java) when the handle is closed. Cancelling it stops the consumers.
     */
    @JvmOverloads
    fun consumeAsync(handler: DeliveryHandler, concurrency: Int = 1): CompletableFuture<Void?> =
        Bridge.done { native { ffi.consume(concurrency(concurrency), bridge(handler)) } }

    /** [consumeAsync] with the handler last. */
    fun consumeAsync(concurrency: Int, handler: DeliveryHandler): CompletableFuture<Void?> = consumeAsync(handler, concurrency)

    /** [offer] without blocking. Cancelling the future may leave the message stored or not, as a [ConnectionException] does. */
    @JvmOverloads
    fun offerAsync(payload: ByteArray, delay: Duration, id: String? = null, shardKey: String? = null): CompletableFuture<String> =
        Bridge.future { coroutines.offer(payload, delay, id, shardKey) }

    /** [offerAsync] of a UTF-8 string payload. */
    @JvmOverloads
    fun offerAsync(payload: String, delay: Duration, id: String? = null, shardKey: String? = null): CompletableFuture<String> =
        Bridge.future { coroutines.offer(payload, delay, id, shardKey) }

    /** [offerWithOutcome] without blocking. */
    @JvmOverloads
    fun offerWithOutcomeAsync(payload: ByteArray, delay: Duration, id: String? = null, shardKey: String? = null): CompletableFuture<OfferOutcome> =
        Bridge.future { coroutines.offerWithOutcome(payload, delay, id, shardKey) }

    /** [offerWithOutcomeAsync] of a UTF-8 string payload. */
    @JvmOverloads
    fun offerWithOutcomeAsync(payload: String, delay: Duration, id: String? = null, shardKey: String? = null): CompletableFuture<OfferOutcome> =
        Bridge.future { coroutines.offerWithOutcome(payload, delay, id, shardKey) }

    /** [offerAll] without blocking. */
    fun offerAllAsync(messages: List<ReliableOffer>): CompletableFuture<List<String>> = Bridge.future { coroutines.offerAll(messages) }

    /** [offerAllWithOutcome] without blocking. */
    fun offerAllWithOutcomeAsync(messages: List<ReliableOffer>): CompletableFuture<List<OfferOutcome>> = Bridge.future { coroutines.offerAllWithOutcome(messages) }

    /** [cancel] without blocking. */
    fun cancelAsync(id: String): CompletableFuture<Boolean> = Bridge.future { coroutines.cancel(id) }

    /** [reschedule] without blocking. */
    fun rescheduleAsync(id: String, delay: Duration): CompletableFuture<Boolean> = Bridge.future { coroutines.reschedule(id, delay) }

    /** [receive] without blocking; cancelling the future cancels the wait and loses nothing (a message received meanwhile goes back untouched). */
    fun receiveAsync(timeout: Duration): CompletableFuture<Delivery?> = Bridge.handedOver { receiving(Bridge.timeout(timeout)) }

    /** [receive] with no timeout, without blocking; cancelling the future loses nothing (a message received meanwhile goes back untouched). */
    fun receiveAsync(): CompletableFuture<Delivery> = Bridge.handedOver { receiving(null).map { it!! } }

    /** [receiveMany] without blocking; cancelling the future loses nothing (what was received meanwhile goes back untouched). */
    fun receiveManyAsync(n: Int, timeout: Duration): CompletableFuture<List<Delivery>> =
        Bridge.handedOver { receivingMany(n, Bridge.timeout(timeout)) }

    /** [receiveMany] with no timeout, without blocking; cancelling the future loses nothing (what was received meanwhile goes back untouched). */
    fun receiveManyAsync(n: Int): CompletableFuture<List<Delivery>> = Bridge.handedOver { receivingMany(n, null) }

    /** Core's hand-over of a receive: holds a delivery until claimed, gives it back untouched if nobody does. */
    private fun receiving(timeout: Duration?): Handover<Delivery?> {
        val h = native { ffi.receiveHandover(timeout) }
        return Handover(h::onReady, { native { h.claim() }?.let(::Delivery) }, h::giveUp)
    }

    private fun receivingMany(n: Int, timeout: Duration?): Handover<List<Delivery>> {
        val h = native { ffi.receiveManyHandover(count(n), timeout) }
        return Handover(h::onReady, { native { h.claim() }.map(::Delivery) }, h::giveUp)
    }

    /** [ackMany] without blocking. */
    fun ackManyAsync(deliveries: List<Delivery>): CompletableFuture<List<Boolean>> = Bridge.future { coroutines.ackMany(deliveries) }

    /** [settings] without blocking. */
    fun settingsAsync(): CompletableFuture<ReliableSettings> = Bridge.future { coroutines.settings() }

    /** [stats] without blocking. */
    fun statsAsync(): CompletableFuture<ReliableStats> = Bridge.future { coroutines.stats() }

    /** [deadLetters] with [limit] without blocking. */
    fun deadLettersAsync(limit: Int): CompletableFuture<List<DeadLetter>> = Bridge.future { coroutines.deadLetters(limit) }

    /** [deadLetters] without blocking. */
    fun deadLettersAsync(): CompletableFuture<List<DeadLetter>> = Bridge.future { coroutines.deadLetters() }

    /** [requeueDead] of these [ids] without blocking. */
    fun requeueDeadAsync(ids: List<String>): CompletableFuture<Long> = Bridge.future { coroutines.requeueDead(ids) }

    /** [requeueDead] of every dead letter without blocking. */
    fun requeueDeadAsync(): CompletableFuture<Long> = Bridge.future { coroutines.requeueDead() }

    /** [purgeDead] without blocking. */
    fun purgeDeadAsync(): CompletableFuture<Long> = Bridge.future { coroutines.purgeDead() }

    /**
     * Closes this handle at once (other handles on the queue are unaffected): later calls throw
     * [ClosedException], a running [consume] returns once its handlers ended or 1 s passed (the
     * messages of those still running then go back); deliveries already received can still be
     * acked, nacked or extended. Idempotent.
     */
    override fun close() = native { ffi.closeHandle() }

    /**
     * Closes this handle gracefully, blocking until done: consumers stop receiving, handlers
     * already running get up to [deadline] to finish and are acked or nacked, messages received
     * but not handed to a handler go back untouched, then the handle closes. Handlers still
     * running at the deadline are abandoned and their messages given back. Idempotent. Not from
     * a handler of this queue's [consume]: it would wait for that handler until the deadline.
     */
    fun closeGracefully(deadline: Duration) = native { ffi.closeGracefullyBlocking(Bridge.timeout(deadline, "deadline")) }

    /** [closeGracefully]: `close(deadline)`, the name the other languages give the graceful close. */
    fun close(deadline: Duration) = closeGracefully(deadline)

    /** [closeGracefully] without blocking, completing with null once closed; cancelling the future closes the handle at once. */
    fun closeGracefullyAsync(deadline: Duration): CompletableFuture<Void?> = Bridge.done { coroutines.closeGracefully(deadline) }

    /** The suspending calls of a [ReliableQueue]; cancelling a coroutine cancels its call. */
    inner class Coroutines internal constructor() {
        /**
         * [ReliableQueue.offer] as a suspending call; cancelling the coroutine may leave the
         * message stored or not, as a [ConnectionException] does.
         */
        suspend fun offer(payload: ByteArray, delay: Duration, id: String? = null, shardKey: String? = null): String =
            offerWithOutcome(payload, delay, id, shardKey).id

        /** [offer] of a UTF-8 string payload. */
        suspend fun offer(payload: String, delay: Duration, id: String? = null, shardKey: String? = null): String =
            offer(Bridge.utf8(payload), delay, id, shardKey)

        /** [ReliableQueue.offerWithOutcome] as a suspending call. */
        suspend fun offerWithOutcome(payload: ByteArray, delay: Duration, id: String? = null, shardKey: String? = null): OfferOutcome =
            native { outcome(ffi.offerAll(listOf(ReliableOfferEntry(payload, Bridge.delay(delay), id, shardKey))).single()) }

        /** [offerWithOutcome] of a UTF-8 string payload. */
        suspend fun offerWithOutcome(payload: String, delay: Duration, id: String? = null, shardKey: String? = null): OfferOutcome =
            offerWithOutcome(Bridge.utf8(payload), delay, id, shardKey)

        /** [ReliableQueue.offerAll] as a suspending call. */
        suspend fun offerAll(messages: List<ReliableOffer>): List<String> = offerAllWithOutcome(messages).map { it.id }

        /** [ReliableQueue.offerAllWithOutcome] as a suspending call. */
        suspend fun offerAllWithOutcome(messages: List<ReliableOffer>): List<OfferOutcome> =
            native { ffi.offerAll(messages.map(::entry)).map(::outcome) }

        /** [ReliableQueue.cancel] as a suspending call. */
        suspend fun cancel(id: String): Boolean = native { ffi.cancel(id) }

        /** [ReliableQueue.reschedule] as a suspending call. */
        suspend fun reschedule(id: String, delay: Duration): Boolean = native { ffi.reschedule(id, Bridge.delay(delay)) }

        /** Cancel-safe: a delivery received for a coroutine cancelled meanwhile goes back untouched. */
        suspend fun receive(timeout: Duration): Delivery? = Bridge.await(receiving(Bridge.timeout(timeout)))

        /** [ReliableQueue.receive] with no timeout; cancel-safe, as the one with a timeout. */
        suspend fun receive(): Delivery = Bridge.await(receiving(null))!!

        /** Cancel-safe: deliveries received for a coroutine cancelled meanwhile go back untouched. */
        suspend fun receiveMany(n: Int, timeout: Duration): List<Delivery> = Bridge.await(receivingMany(n, Bridge.timeout(timeout)))

        /** [ReliableQueue.receiveMany] with no timeout; cancel-safe, as the one with a timeout. */
        suspend fun receiveMany(n: Int): List<Delivery> = Bridge.await(receivingMany(n, null))

        /** [ReliableQueue.ackMany] as a suspending call. */
        suspend fun ackMany(deliveries: List<Delivery>): List<Boolean> = native { ffi.ackMany(deliveries.map { it.ffi }) }

        /** [ReliableQueue.settings] as a suspending call. */
        suspend fun settings(): ReliableSettings = native { settings(ffi.settings()) }

        /** [ReliableQueue.closeGracefully]; cancelling the coroutine closes the handle at once. */
        suspend fun closeGracefully(deadline: Duration): Unit = native { ffi.closeGracefully(Bridge.timeout(deadline, "deadline")) }

        /** [closeGracefully], by the name the other languages give it. */
        suspend fun close(deadline: Duration): Unit = closeGracefully(deadline)

        /** [ReliableQueue.stats] as a suspending call. */
        suspend fun stats(): ReliableStats = native { stats(ffi.stats()) }

        /** [ReliableQueue.deadLetters] with [limit] as a suspending call. */
        suspend fun deadLetters(limit: Int): List<DeadLetter> = native { ffi.deadLetters(limit(limit)).map(::deadLetter) }

        /** [ReliableQueue.deadLetters] as a suspending call. */
        suspend fun deadLetters(): List<DeadLetter> = native { ffi.deadLetters(null).map(::deadLetter) }

        /** [ReliableQueue.requeueDead] of these [ids] as a suspending call. */
        suspend fun requeueDead(ids: List<String>): Long = native { ffi.requeueDead(ids).toLong() }

        /** [ReliableQueue.requeueDead] of every dead letter as a suspending call. */
        suspend fun requeueDead(): Long = native { ffi.requeueDead(null).toLong() }

        /** [ReliableQueue.purgeDead] as a suspending call. */
        suspend fun purgeDead(): Long = native { ffi.purgeDead().toLong() }

        /**
         * [ReliableQueue.consume] with a suspending [handler]: returning acks, throwing nacks.
         * Each handler runs on a thread of its own; cancelling this coroutine stops the
         * consumers (a delivery whose handler was running returns after the visibility timeout).
         */
        suspend fun consume(handler: suspend (Delivery) -> Unit, concurrency: Int = 1) =
            native { ffi.consume(concurrency(concurrency), bridge { d -> runBlocking { handler(d) } }) }

        /** [consume] with the handler last, for Kotlin's trailing lambda: `queue.coroutines.consume(8) { d -> ... }`. */
        suspend fun consume(concurrency: Int, handler: suspend (Delivery) -> Unit) = consume(handler, concurrency)
    }
}

private fun entry(o: ReliableOffer) = ReliableOfferEntry(o.payload, Bridge.delay(o.delay), o.id, o.shardKey)

private fun outcome(o: dev.delayq.ffi.OfferOutcome) = OfferOutcome(o.id, o.created, o.dueAt)

private fun settings(s: dev.delayq.ffi.ReliableSettings) =
    ReliableSettings(s.visibilityTimeout, s.maxAttempts.toInt(), Backoff.of(s.backoff), s.shards.toInt(), s.deadLetterRetention, s.idempotencyRetention)

/** Core checks the range (1 to 1000); a negative count must not wrap to a huge unsigned one first. */
private fun count(n: Int): UInt {
    if (n < 0) throw InvalidArgumentException("invalid argument: receive_many takes 1 to 1000 messages, got $n")
    return n.toUInt()
}

private fun stats(s: dev.delayq.ffi.ReliableStats) =
    ReliableStats(s.delayed.toLong(), s.ready.toLong(), s.inFlight.toLong(), s.dead.toLong())

private fun deadLetter(d: dev.delayq.ffi.DeadLetter) = DeadLetter(d.id, d.payload, d.attempts.toInt(), d.diedAt)

private fun limit(n: Int): UInt {
    if (n < 0) throw InvalidArgumentException("invalid argument: limit must not be negative, got $n")
    return n.toUInt()
}

/** Core rejects 0; a negative count is rejected here, before it could wrap to a huge unsigned one. */
private fun concurrency(n: Int): UInt {
    if (n < 0) throw InvalidArgumentException("invalid argument: concurrency must be between 1 and 1000, got $n")
    return n.toUInt()
}

/** The user's handler as the native side calls it: null on success, otherwise the failure with its stack trace (core logs it). */
private fun bridge(handler: DeliveryHandler): FfiDeliveryHandler =
    object : FfiDeliveryHandler {
        override fun handle(delivery: FfiDelivery): String? =
            try {
                handler.handle(Delivery(delivery))
                null
            } catch (t: Throwable) {
                t.stackTraceToString().trimEnd()
            }
    }
