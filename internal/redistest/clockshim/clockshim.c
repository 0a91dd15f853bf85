// clockshim is a tiny LD_PRELOAD library that makes a process's wall clock
// jump or run fast. Wall-clock time reads as
// anchor + (real - anchor) * rate + offset, with the setting taken from:
//   - a small file that the process maps (CLOCKSHIM_FILE), changed at run
//     time: a sequence number, an anchor and an offset in nanoseconds, and
//     a rate (Clock in clock.go writes it); or else
//   - the environment, fixed for the process's life: REDISTEST_CLOCK_ANCHOR
//     (Unix time in nanoseconds) and REDISTEST_CLOCK_RATE (ClockRateEnv).
// Without either it reads real time.
//
// libfaketime does this too, but it cannot start a redis-server linked with
// jemalloc (jemalloc reads the clock while libfaketime initialises itself, a
// known clash). This shim needs no initialisation that allocates: it reads
// the real clock with the raw system call and maps its control file with
// open and mmap. The monotonic clock is left alone: Redis expires keys by
// the wall clock.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

struct control {
	volatile uint64_t seq; // odd while the writer is changing the rest
	volatile int64_t anchor;
	volatile int64_t offset;
	volatile double rate;
};

static struct control *volatile ctl;
static volatile int mapped;
static struct control fixed;

// parse_int reads a decimal integer; 0 on anything else.
static int64_t parse_int(const char *s) {
	int64_t v = 0;
	for (; s != NULL && *s >= '0' && *s <= '9'; s++) {
		v = v * 10 + (*s - '0');
	}
	return v;
}

// parse_rate reads a decimal number such as 1.5; 1 on anything else. Done
// by hand: nothing here may allocate or depend on the locale.
static double parse_rate(const char *s) {
	if (s == NULL || *s == 0) {
		return 1;
	}
	double v = 0, scale = 1;
	int frac = 0;
	for (; *s != 0; s++) {
		if (*s == '.' && !frac) {
			frac = 1;
		} else if (*s >= '0' && *s <= '9') {
			if (frac) {
				scale /= 10;
				v += (*s - '0') * scale;
			} else {
				v = v * 10 + (*s - '0');
			}
		} else {
			return 1;
		}
	}
	return v > 0 ? v : 1;
}

static struct control *control(void) {
	if (__atomic_load_n(&mapped, __ATOMIC_ACQUIRE)) {
		return ctl;
	}
	const char *path = getenv("CLOCKSHIM_FILE");
	struct control *c = NULL;
	if (path != NULL) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			void *m = mmap(NULL, sizeof(struct control), PROT_READ, MAP_SHARED, fd, 0);
			close(fd);
			if (m != MAP_FAILED) {
				c = m;
			}
		}
	}
	if (c == NULL && getenv("REDISTEST_CLOCK_ANCHOR") != NULL) {
		// Two threads may both get here; they compute the same values.
		fixed.anchor = parse_int(getenv("REDISTEST_CLOCK_ANCHOR"));
		fixed.rate = parse_rate(getenv("REDISTEST_CLOCK_RATE"));
		c = &fixed;
	}
	ctl = c;
	__atomic_store_n(&mapped, 1, __ATOMIC_RELEASE);
	return c;
}

static int64_t real_ns(clockid_t id) {
	struct timespec ts;
	syscall(SYS_clock_gettime, id, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t fake_ns(clockid_t id) {
	int64_t now = real_ns(id);
	struct control *c = control();
	if (c == NULL) {
		return now;
	}
	for (;;) {
		uint64_t s = __atomic_load_n(&c->seq, __ATOMIC_ACQUIRE);
		if (s & 1) {
			continue;
		}
		int64_t anchor = c->anchor, offset = c->offset;
		double rate = c->rate;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&c->seq, __ATOMIC_ACQUIRE) != s) {
			continue;
		}
		if (rate <= 0) {
			rate = 1;
		}
		return anchor + (int64_t)((double)(now - anchor) * rate) + offset;
	}
}

int clock_gettime(clockid_t id, struct timespec *ts) {
	int64_t ns;
	if (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE) {
		ns = fake_ns(id);
	} else {
		return (int)syscall(SYS_clock_gettime, id, ts);
	}
	ts->tv_sec = ns / 1000000000;
	ts->tv_nsec = ns % 1000000000;
	return 0;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
	(void)tz;
	int64_t ns = fake_ns(CLOCK_REALTIME);
	tv->tv_sec = ns / 1000000000;
	tv->tv_usec = (ns % 1000000000) / 1000;
	return 0;
}

time_t time(time_t *t) {
	time_t s = (time_t)(fake_ns(CLOCK_REALTIME) / 1000000000);
	if (t != NULL) {
		*t = s;
	}
	return s;
}
