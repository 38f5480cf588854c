// LD_PRELOAD shim for tests: the realtime clock of the process it is loaded into runs
// DELAYQ_CLOCK_FILE's number of milliseconds (may be negative) off the machine's. The file
// is read again at most every 50 ms, so a test steps the clock of a running redis-server
// as an NTP step or a failover to a host with another clock would. Monotonic clocks are
// left alone.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static long long offset_ms = 0, read_at_ns = -1000000000LL;

static long long raw_ns(clockid_t c) {
    struct timespec ts;
    syscall(SYS_clock_gettime, c, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long now_ns(void) {
    long long mono = raw_ns(CLOCK_MONOTONIC);
    const char *file = getenv("DELAYQ_CLOCK_FILE");
    if (file && mono - read_at_ns >= 50000000LL) {
        read_at_ns = mono;
        int fd = open(file, O_RDONLY);
        if (fd >= 0) {
            char buf[32];
            ssize_t n = read(fd, buf, sizeof buf - 1);
            close(fd);
            if (n > 0) {
                buf[n] = 0;
                offset_ms = atoll(buf);
            }
        }
    }
    return raw_ns(CLOCK_REALTIME) + offset_ms * 1000000LL;
}

int clock_gettime(clockid_t c, struct timespec *ts) {
    if (c != CLOCK_REALTIME && c != CLOCK_REALTIME_COARSE) return syscall(SYS_clock_gettime, c, ts);
    long long n = now_ns();
    ts->tv_sec = n / 1000000000LL;
    ts->tv_nsec = n % 1000000000LL;
    return 0;
}

int gettimeofday(struct timeval *tv, void *tz) {
    (void)tz;
    long long n = now_ns();
    if (tv) {
        tv->tv_sec = n / 1000000000LL;
        tv->tv_usec = (n % 1000000000LL) / 1000;
    }
    return 0;
}

time_t time(time_t *t) {
    time_t s = now_ns() / 1000000000LL;
    if (t) *t = s;
    return s;
}
