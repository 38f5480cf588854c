package dev.delayq

import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertArrayEquals
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance
import org.junit.jupiter.api.assertThrows
import org.junit.jupiter.api.extension.ExtendWith
import java.io.File
import java.nio.file.Path
import java.time.Duration
import java.util.concurrent.TimeUnit

/**
 * `ca.crt`, `server.crt`/`.key` for 127.0.0.1 and `client.crt`/`.key` signed by it, and
 * `other-ca.crt` (a CA that signed neither), made with the `openssl` command in [dir].
 */
internal fun makeTestCerts(dir: File) {
    fun openssl(vararg args: String) {
        val p = ProcessBuilder(listOf("openssl") + args).directory(dir).redirectErrorStream(true).start()
        val out = p.inputStream.readBytes().toString(Charsets.UTF_8)
        check(p.waitFor() == 0) { "openssl ${args.toList()} failed: $out" }
    }
    val ec = arrayOf("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    for (ca in listOf("ca", "other-ca")) {
        openssl("req", "-x509", *ec, "-days", "2", "-subj", "/CN=delayq test $ca", "-keyout", "$ca.key", "-out", "$ca.crt")
    }
    val leaves = mapOf(
        "server" to "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
        "client" to "extendedKeyUsage=clientAuth\n",
    )
    for ((leaf, ext) in leaves) {
        File(dir, "$leaf.ext").writeText("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n$ext")
        openssl("req", *ec, "-subj", "/CN=delayq test $leaf", "-keyout", "$leaf.key", "-out", "$leaf.csr")
        openssl(
            "x509", "-req", "-in", "$leaf.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "2", "-extfile", "$leaf.ext", "-out", "$leaf.crt",
        )
    }
}

/** A `redis-server` that speaks only TLS and requires a client certificate signed by its CA. */
class TlsRedisServer : AutoCloseable {
    val dir: File = kotlin.io.path.createTempDirectory("delayq-jvm-tls").toFile()
    val port: Int
    val url: String get() = "rediss://127.0.0.1:$port"
    private val process: Process

    init {
        makeTestCerts(dir)
        val started = startRedisServer(
            dir,
            { port ->
                listOf(
                    "--port", "0", "--tls-port", "$port", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                    "--dir", dir.path, "--tls-cert-file", file("server.crt").toString(),
                    "--tls-key-file", file("server.key").toString(), "--tls-ca-cert-file", file("ca.crt").toString(),
                    "--tls-auth-clients", "yes",
                )
            },
            { port -> cliOutput(cliCommand(port, "INFO", "server"), 2) },
        )
        port = started.first
        process = started.second
    }

    fun file(name: String): Path = File(dir, name).toPath()

    /** `redis-cli` over TLS with the client certificate. */
    fun cli(vararg args: String): String {
        val p = ProcessBuilder(cliCommand(port, *args)).redirectErrorStream(true).start()
        val out = p.inputStream.readBytes().toString(Charsets.UTF_8).trim()
        check(p.waitFor() == 0) { "redis-cli ${args.toList()} failed: $out" }
        return out
    }

    private fun cliCommand(port: Int, vararg args: String): List<String> = listOf(
        "redis-cli", "-p", "$port", "--tls", "--cacert", file("ca.crt").toString(),
        "--cert", file("client.crt").toString(), "--key", file("client.key").toString(),
    ) + args

    /** The CA, the client certificate and its key: mutual TLS. */
    fun mutualTls(): TlsOptions = TlsOptions(file("ca.crt")).withClientCertificate(file("client.crt"), file("client.key"))

    override fun close() {
        process.destroy()
        if (!process.waitFor(10, TimeUnit.SECONDS)) process.destroyForcibly().waitFor()
        dir.deleteRecursively()
    }
}

@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(RedisExtension::class)
class TlsTest {
    private lateinit var tls: TlsRedisServer

    @BeforeAll
    fun start() {
        tls = TlsRedisServer()
    }

    @AfterAll
    fun stop() = tls.close()

    @Test
    fun `mutual TLS carries a delayed queue and a reliable queue`() =
        Client.connect(tls.url, ClientOptions(tls = tls.mutualTls())).use { client ->
            val name = RedisServer.uniqueName("tls")
            client.delayedQueue(name).use { q ->
                q.offer("secure", Duration.ofMillis(100))
                assertArrayEquals("secure".toByteArray(), q.take(Duration.ofSeconds(5)))
            }
            assertEquals("0", tls.cli("LLEN", name))
            client.reliableQueue(RedisServer.uniqueName("tls")).use { r ->
                val id = r.offer("job", Duration.ZERO)
                val d = checkNotNull(r.receive(Duration.ofSeconds(5)))
                assertEquals(id, d.id)
                assertTrue(d.ack())
            }
        }

    @Test
    fun `the async and coroutine connects take the options too`() {
        val options = ClientOptions().withTls(tls.mutualTls())
        Client.connectAsync(tls.url, options).get(10, TimeUnit.SECONDS).use { it.serverTimeMs() }
        runBlocking { Client.connectSuspend(tls.url, options).use { it.coroutines.serverTimeMs() } }
    }

    @Test
    fun `a server certificate from another CA is refused`() {
        val options = ClientOptions(tls = tls.mutualTls().withCaFile(tls.file("other-ca.crt")))
        val e = assertThrows<ConnectionException> { Client.connect(tls.url, options) }
        assertTrue(e.message!!.contains("UnknownIssuer"), e.message)
    }

    @Test
    fun `a client without a certificate is refused when the server requires one`() {
        val e = assertThrows<ConnectionException> { Client.connect(tls.url, ClientOptions(tls = TlsOptions(tls.file("ca.crt")))) }
        assertTrue(e.message!!.contains("CertificateRequired"), e.message)
    }

    @Test
    fun `bad certificate options are invalid arguments`() {
        val e = assertThrows<InvalidArgumentException> {
            Client.connect(tls.url, ClientOptions(tls = TlsOptions(tls.file("no-such.crt"))))
        }
        assertTrue(e.message!!.contains("no-such.crt"), e.message)
        assertThrows<InvalidArgumentException> {
            Client.connect(tls.url, ClientOptions(tls = TlsOptions(tls.file("ca.crt"), certFile = tls.file("client.crt"))))
        }
    }

    @Test
    fun `the durability option reaches core`(redis: RedisServer) {
        // No replica: a write waits for one, is not confirmed in time, and says so.
        val options = ClientOptions(durability = Durability(1, timeout = Duration.ofMillis(200)))
        Client.connect(redis.url, options).use { client ->
            client.delayedQueue(RedisServer.uniqueName("durable"), DelayedQueueOptions(scheduler = false)).use { q ->
                val e = assertThrows<TimeoutException> { q.offer("v", Duration.ofMinutes(1)) }
                assertTrue(e.message!!.contains("replica"), e.message)
            }
        }
        Client.connect(redis.url, ClientOptions().withDurability(Durability().withReplicas(0))).use { client ->
            client.delayedQueue(RedisServer.uniqueName("durable"), DelayedQueueOptions(scheduler = false)).use { q ->
                assertTrue(q.offer("v", Duration.ofMinutes(1)) > 0)
            }
        }
        assertThrows<InvalidArgumentException> { Client.connect(redis.url, ClientOptions(durability = Durability(-1))) }
        assertThrows<InvalidArgumentException> {
            Client.connect(redis.url, ClientOptions(durability = Durability(1, timeout = Duration.ofSeconds(-1))))
        }
    }
}
