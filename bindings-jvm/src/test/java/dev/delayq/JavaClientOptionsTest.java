package dev.delayq;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** Connection options as a plain Java caller builds them: mutual TLS and durability. */
class JavaClientOptionsTest {
    @Test
    void mutualTlsFromJava() throws Exception {
        try (TlsRedisServer server = new TlsRedisServer()) {
            TlsOptions tls = new TlsOptions()
                    .withCaFile(server.file("ca.crt"))
                    .withClientCertificate(server.file("client.crt").toString(), server.file("client.key").toString());
            ClientOptions options = new ClientOptions().withTls(tls).withDurability(new Durability(0));
            try (Client client = Client.connect(server.getUrl(), options);
                    DelayedQueue queue = client.delayedQueue(RedisServer.Companion.uniqueName("java-tls"))) {
                queue.offer("hello", Duration.ZERO);
                assertArrayEquals("hello".getBytes(StandardCharsets.UTF_8), queue.take(Duration.ofSeconds(5)));
            }
            Client.connectAsync(server.getUrl(), options).get(10, TimeUnit.SECONDS).close();
            ConnectionException e = assertThrows(ConnectionException.class,
                    () -> Client.connect(server.getUrl(), new ClientOptions().withTls(new TlsOptions(server.file("ca.crt")))));
            assertTrue(e.getMessage().contains("CertificateRequired"), e.getMessage());
        }
    }
}
