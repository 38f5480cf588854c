package dev.delayq.interop;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import org.redisson.client.codec.ByteArrayCodec;
import org.redisson.client.codec.Codec;
import org.redisson.client.codec.StringCodec;

/**
 * The two ways the tests use Redisson: {@code StringCodec} (values are UTF-8 text; the CLI
 * exchanges them raw) and {@code ByteArrayCodec} (values are any bytes, including zero
 * bytes, invalid UTF-8 and newlines; the CLI exchanges them as base64).
 */
enum Flavor {
    STRING_CODEC {
        @Override
        Codec codec() {
            return StringCodec.INSTANCE;
        }

        @Override
        Object toRedisson(byte[] value) {
            return new String(value, StandardCharsets.UTF_8);
        }

        @Override
        byte[] fromRedisson(Object value) {
            return ((String) value).getBytes(StandardCharsets.UTF_8);
        }

        @Override
        boolean cliBase64() {
            return false;
        }

        @Override
        List<byte[]> sampleValues() {
            List<byte[]> values = new ArrayList<>();
            for (String s : List.of("plain", "", "ünïcødé ✓ 😀", "tab\tand spaces  ", "{\"json\":[1,2,3]}",
                    "x".repeat(10_000), "α", "1795341634220")) {
                values.add(s.getBytes(StandardCharsets.UTF_8));
            }
            return values;
        }
    },
    BYTE_ARRAY_CODEC {
        @Override
        Codec codec() {
            return ByteArrayCodec.INSTANCE;
        }

        @Override
        Object toRedisson(byte[] value) {
            return value.clone();
        }

        @Override
        byte[] fromRedisson(Object value) {
            return (byte[]) value;
        }

        @Override
        boolean cliBase64() {
            return true;
        }

        @Override
        List<byte[]> sampleValues() {
            byte[] binary = new byte[4096];
            new Random(42).nextBytes(binary);
            return List.of(
                    new byte[0],
                    new byte[] {0},
                    new byte[] {0, 0, 0, 0, 0, 0, 0, 0, 0},
                    new byte[] {'a', 0, 'b'},
                    new byte[] {(byte) 0xff, (byte) 0xfe, (byte) 0x80},
                    new byte[] {(byte) 0xc3, (byte) 0x28},
                    new byte[] {'\n', '\r', 'x', '\n'},
                    binary,
                    "text too".getBytes(StandardCharsets.UTF_8));
        }
    };

    abstract Codec codec();

    abstract Object toRedisson(byte[] value);

    abstract byte[] fromRedisson(Object value);

    abstract boolean cliBase64();

    /** Distinct values, including the empty one. */
    abstract List<byte[]> sampleValues();
}
