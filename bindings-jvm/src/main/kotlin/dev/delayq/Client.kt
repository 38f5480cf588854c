package dev.delayq

import dev.delayq.ffi.Scheduler
import java.util.concurrent.CompletableFuture
import dev.delayq.ffi.Client as FfiClient

/**
 * A connection to Redis (`redis://[user:pass@]host:port/db`, `rediss://` for TLS,
 * `redis+unix:///path`, `redis+sentinel://[user:pass@]host:port[,host:port...]/MASTER[/db]`),
 * or to a Redis Cluster ([connectCluster]). [ClientOptions] add TLS certificate files and the
 * durability option. Thread-safe; share one per process. Closing it closes every
 * queue handle it gave out.
 *
 * ```java
 * try (Client client = Client.connect("redis://127.0.0.1:6379")) {
 *     DelayedQueue queue = client.delayedQueue("orders");
 *     queue.offer("hello", Duration.ofSeconds(2));
 * }
 * ```
 */
class Client private constructor(private val ffi: FfiClient) : AutoCloseable {
    companion object {
        private fun blocking(seeds: List<String>, options: ClientOptions): Client {
            Bridge.start()
            return native { Client(dev.delayq.ffi.connectBlocking(options.toFfi(seeds))) }.also { Logs.refreshLevel() }
        }

        private suspend fun suspending(seeds: List<String>, options: ClientOptions): Client {
            Bridge.start()
            return native { Client(dev.delayq.ffi.connect(options.toFfi(seeds))) }.also { Logs.refreshLevel() }
        }

        /** Connects, blocking the calling thread. */
        @JvmStatic
        fun connect(url: String): Client = blocking(listOf(url), ClientOptions())

        /** Connects without blocking. */
        @JvmStatic
        fun connectAsync(url: String): CompletableFuture<Client> = Bridge.future { connectSuspend(url) }

        /** Connects from a coroutine. */
        suspend fun connectSuspend(url: String): Client = suspending(listOf(url), ClientOptions())

        /**
         * Connects with [options] (TLS certificate files, the durability option, cluster mode),
         * blocking the calling thread.
         */
        @JvmStatic
        fun connect(url: String, options: ClientOptions): Client = blocking(listOf(url), options)

        /** [connect] with [options] without blocking. */
        @JvmStatic
        fun connectAsync(url: String, options: ClientOptions): CompletableFuture<Client> =
            Bridge.future { connectSuspend(url, options) }

        /** [connect] with [options] from a coroutine. */
        suspend fun connectSuspend(url: String, options: ClientOptions): Client = suspending(listOf(url), options)

        /**
         * Connects to the Redis Cluster that [seeds] are nodes of with [options], blocking the
         * calling thread. A list of URLs always names a cluster, one URL too (as in Python
         * and Node): `options.cluster` only makes a single URL a cluster's.
         */
        @JvmStatic
        fun connect(seeds: List<String>, options: ClientOptions): Client = blocking(seeds, options.withCluster(true))

        /** [connect] with seeds and [options] without blocking. */
        @JvmStatic
        fun connectAsync(seeds: List<String>, options: ClientOptions): CompletableFuture<Client> =
            Bridge.future { connectSuspend(seeds, options) }

        /** [connect] with seeds and [options] from a coroutine. */
        suspend fun connectSuspend(seeds: List<String>, options: ClientOptions): Client =
            suspending(seeds, options.withCluster(true))

        /** Connects to one server, or with [cluster] to the Redis Cluster that [url] is a node of, blocking. */
        @JvmStatic
        fun connect(url: String, cluster: Boolean): Client = blocking(listOf(url), ClientOptions(cluster = cluster))

        /** Connects to a Redis Cluster through the URLs of one or more of its nodes, blocking (same as [connectCluster]). */
        @JvmStatic
        fun connect(seeds: List<String>): Client = connectCluster(seeds)

        /** Connects to a Redis Cluster through one or more of its nodes' URLs, blocking the calling thread. */
        @JvmStatic
        fun connectCluster(seeds: List<String>): Client = blocking(seeds, ClientOptions(cluster = true))

        /** [connectCluster] without blocking. */
        @JvmStatic
        fun connectClusterAsync(seeds: List<String>): CompletableFuture<Client> = Bridge.future { connectClusterSuspend(seeds) }

        /** [connectCluster] from a coroutine. */
        suspend fun connectClusterSuspend(seeds: List<String>): Client = suspending(seeds, ClientOptions(cluster = true))
    }

    /** The suspending API of this client, for coroutines. */
    val coroutines: Coroutines = Coroutines()

    /** A handle on the Redisson-compatible delayed queue [name], running its transfer task. */
    fun delayedQueue(name: String): DelayedQueue = delayedQueue(name, DelayedQueueOptions())

    /** A handle on the delayed queue [name] with [options] (for example without this process's transfer task). */
    fun delayedQueue(name: String, options: DelayedQueueOptions): DelayedQueue =
        native { DelayedQueue(ffi.delayedQueue(name, Scheduler(options.scheduler, options.reconcileInterval?.let { Bridge.timeout(it, "reconcile interval") }))) }

    /**
     * A handle on the reliable queue [name]: at-least-once delivery with acknowledgement,
     * retries and dead letters. Unless [options] opt out, this process moves its due messages.
     * Throws [InvalidArgumentException] for a bad name or option.
     */
    @JvmOverloads
    fun reliableQueue(name: String, options: ReliableQueueOptions = ReliableQueueOptions()): ReliableQueue =
        native { ReliableQueue(ffi.reliableQueue(name, options.toFfi())) }

    /** The Redis server's clock in Unix ms (the clock due times are computed with). */
    fun serverTimeMs(): Long = native { ffi.serverTimeMsBlocking() }

    /** [serverTimeMs] without blocking. */
    fun serverTimeMsAsync(): CompletableFuture<Long> = Bridge.future { coroutines.serverTimeMs() }

    /** Whether [close] was called. */
    val isClosed: Boolean get() = native { ffi.isClosed() }

    /** Closes the client: stops its background tasks and fails later calls with [ClosedException]. Idempotent. */
    override fun close() = native { ffi.closeHandle() }

    /** The suspending calls of a [Client]. */
    inner class Coroutines internal constructor() {
        /** [Client.serverTimeMs] as a suspending call. */
        suspend fun serverTimeMs(): Long = native { ffi.serverTimeMs() }
    }
}
