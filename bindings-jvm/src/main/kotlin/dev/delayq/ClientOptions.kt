package dev.delayq

import dev.delayq.ffi.ConnectOptions
import java.nio.file.Path
import java.nio.file.Paths
import java.time.Duration
import dev.delayq.ffi.Durability as FfiDurability

/**
 * Certificate files (PEM) for `rediss://` URLs: a private CA to trust instead of the
 * system's roots ([caFile]), and a client certificate with its key ([certFile], [keyFile])
 * for servers that require one (mutual TLS, `tls-auth-clients yes`).
 *
 * ```java
 * TlsOptions tls = new TlsOptions()
 *     .withCaFile(Path.of("/etc/redis/ca.crt"))
 *     .withClientCertificate(Path.of("/etc/app/client.crt"), Path.of("/etc/app/client.key"));
 * ```
 *
 * The files are read when connecting; a missing file throws [InvalidArgumentException].
 */
data class TlsOptions @JvmOverloads constructor(
    /** A CA certificate to trust instead of the system's roots. */
    val caFile: Path? = null,
    /** A client certificate, for mutual TLS. Needs [keyFile]. */
    val certFile: Path? = null,
    /** The private key of [certFile]. */
    val keyFile: Path? = null,
) {
    /** A copy with [caFile] set to [value]. */
    fun withCaFile(value: Path?) = copy(caFile = value)

    /** A copy with [caFile] set to the path [value]. */
    fun withCaFile(value: String) = copy(caFile = Paths.get(value))

    /** A copy with [certFile] set to [value] (needs [keyFile] too; see [withClientCertificate]). */
    fun withCertFile(value: Path?) = copy(certFile = value)

    /** A copy with [keyFile] set to [value]. */
    fun withKeyFile(value: Path?) = copy(keyFile = value)

    /** A client certificate and its key. */
    fun withClientCertificate(cert: Path, key: Path) = copy(certFile = cert, keyFile = key)

    /** A client certificate and its key. */
    fun withClientCertificate(cert: String, key: String) = copy(certFile = Paths.get(cert), keyFile = Paths.get(key))
}

/**
 * The durability option: offers and acks return once [replicas] replicas (`WAIT`) and, with
 * [aof], the append-only files (`WAITAOF`, Redis 7.2+) have them. A write not confirmed
 * within [timeout] throws [TimeoutException]: it was applied on the master, but may not
 * survive a failover.
 */
data class Durability @JvmOverloads constructor(
    /** Replicas that must have each write. */
    val replicas: Int = 0,
    /** Also wait for the append-only file of the master and of [replicas] replicas. */
    val aof: Boolean = false,
    /** How long to wait (default 1 s). */
    val timeout: Duration = Duration.ofSeconds(1),
) {
    /** A copy with [replicas] set to [value]. */
    fun withReplicas(value: Int) = copy(replicas = value)

    /** A copy with [aof] set to [value]. */
    fun withAof(value: Boolean) = copy(aof = value)

    /** A copy with [timeout] set to [value]. */
    fun withTimeout(value: Duration) = copy(timeout = value)

    internal fun toFfi(): FfiDurability {
        // A negative count must not wrap to a huge unsigned one.
        if (replicas < 0) throw InvalidArgumentException("invalid argument: durability replicas must not be negative, got $replicas")
        return FfiDurability(replicas.toUInt(), aof, Bridge.timeout(timeout, "durability timeout"))
    }
}

/**
 * How to connect, beyond the URL: [cluster] mode, [tls] certificate files and the
 * [durability] option (off by default). Immutable; Java chains the `with` methods:
 *
 * ```java
 * Client client = Client.connect("rediss://redis.internal:6380", new ClientOptions()
 *     .withTls(new TlsOptions().withCaFile(Path.of("ca.crt")))
 *     .withDurability(new Durability(1)));
 * ```
 */
data class ClientOptions @JvmOverloads constructor(
    /** Treat the URL as a seed of a Redis Cluster (implied by a list of URLs). */
    val cluster: Boolean = false,
    /** Certificate files for `rediss://`. */
    val tls: TlsOptions = TlsOptions(),
    /** Wait for replicas (and the append-only file) after offers and acks; null: no waiting. */
    val durability: Durability? = null,
) {
    /** A copy with [cluster] set to [value]. */
    fun withCluster(value: Boolean) = copy(cluster = value)

    /** A copy with [tls] set to [value]. */
    fun withTls(value: TlsOptions) = copy(tls = value)

    /** A copy with [durability] set to [value] (null: no waiting). */
    fun withDurability(value: Durability?) = copy(durability = value)

    internal fun toFfi(urls: List<String>): ConnectOptions =
        ConnectOptions(
            urls,
            cluster,
            durability?.toFfi(),
            tls.caFile?.toString(),
            tls.certFile?.toString(),
            tls.keyFile?.toString(),
        )
}
