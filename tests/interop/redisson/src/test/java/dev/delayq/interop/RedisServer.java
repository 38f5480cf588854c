package dev.delayq.interop;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A {@code redis-server} of our own on a free loopback port (never 6379), without
 * persistence, stopped by {@link #close()}. {@code REDIS_SERVER} overrides the binary.
 */
final class RedisServer implements AutoCloseable {
    private final Process process;
    private final int port;
    private final Path log;

    private RedisServer(Process process, int port, Path log) {
        this.process = process;
        this.port = port;
        this.log = log;
    }

    static RedisServer start() throws Exception {
        String binary = System.getenv().getOrDefault("REDIS_SERVER", "redis-server");
        Exception last = null;
        for (int attempt = 0; attempt < 5; attempt++) {
            int port = freePort();
            Path log = Files.createTempFile("delayq-redisson-redis-" + port + "-", ".log");
            Process p = new ProcessBuilder(List.of(
                    binary, "--port", String.valueOf(port), "--bind", "127.0.0.1",
                    "--save", "", "--appendonly", "no", "--daemonize", "no"))
                    .redirectErrorStream(true)
                    .redirectOutput(log.toFile())
                    .start();
            RedisServer server = new RedisServer(p, port, log);
            try {
                Await.until(Duration.ofSeconds(20), server::answersPing,
                        () -> "redis-server on port " + port + " did not answer PING; log: " + server.logText());
                return server;
            } catch (AssertionError | Exception e) {
                last = e instanceof Exception ex ? ex : new IllegalStateException(e);
                server.close(); // the port may have been taken meanwhile: try another one
            }
        }
        throw last;
    }

    private static int freePort() throws IOException {
        while (true) {
            try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
                int port = s.getLocalPort();
                if (port != 6379) {
                    return port;
                }
            }
        }
    }

    int port() {
        return port;
    }

    /** The address as Redisson wants it. */
    String redissonAddress() {
        return "redis://127.0.0.1:" + port;
    }

    /** The URL for the delayq CLI. */
    String url() {
        return "redis://127.0.0.1:" + port;
    }

    private boolean answersPing() {
        if (!process.isAlive()) {
            throw new IllegalStateException("redis-server exited: " + logText());
        }
        try (Socket s = new Socket(InetAddress.getLoopbackAddress(), port)) {
            s.setSoTimeout(2000);
            OutputStream out = s.getOutputStream();
            out.write("PING\r\n".getBytes(StandardCharsets.US_ASCII));
            out.flush();
            InputStream in = s.getInputStream();
            byte[] buf = new byte[7];
            int n = in.readNBytes(buf, 0, buf.length);
            return new String(buf, 0, n, StandardCharsets.US_ASCII).startsWith("+PONG");
        } catch (IOException e) {
            return false;
        }
    }

    private String logText() {
        try {
            return Files.readString(log);
        } catch (IOException e) {
            return "(no log: " + e + ")";
        }
    }

    @Override
    public void close() {
        process.destroy();
        try {
            if (!process.waitFor(10, TimeUnit.SECONDS)) {
                process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        File f = log.toFile();
        f.delete();
    }
}
