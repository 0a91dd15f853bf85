// clockrate is an LD_PRELOAD library that makes a process's wall clock run
// at a fixed rate: from the moment REDISTEST_CLOCK_ANCHOR (Unix time in
// nanoseconds) the clock reads anchor + (real - anchor) * REDISTEST_CLOCK_RATE.
// Before the anchor, or without both variables, it reads real time.
//
// It exists because libfaketime cannot start a redis-server linked with
// jemalloc (jemalloc reads the clock while libfaketime sets itself up).
// Nothing here allocates: the variables are parsed by hand on the first
// call, and the real clock is read with the raw system call. The monotonic
// clock is left alone.
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile int ready;
static int64_t anchor;
static double rate = 1;

// parse_int reads a decimal integer; 0 on anything else.
static int64_t parse_int(const char *s) {
	int64_t v = 0;
	for (; s != NULL && *s >= '0' && *s <= '9'; s++) {
		v = v * 10 + (*s - '0');
	}
	return v;
}

// parse_rate reads a decimal number such as 1.5; 1 on anything else.
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

static void setup(void) {
	if (__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) {
		return;
	}
	// Two threads may both get here; they compute the same values.
	anchor = parse_int(getenv("REDISTEST_CLOCK_ANCHOR"));
	rate = parse_rate(getenv("REDISTEST_CLOCK_RATE"));
	__atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
}

static int64_t wall_ns(void) {
	struct timespec ts;
	syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts);
	int64_t now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	setup();
	if (anchor == 0 || now < anchor) {
		return now;
	}
	return anchor + (int64_t)((double)(now - anchor) * rate);
}

int clock_gettime(clockid_t id, struct timespec *ts) {
	if (id != CLOCK_REALTIME && id != CLOCK_REALTIME_COARSE) {
		return (int)syscall(SYS_clock_gettime, id, ts);
	}
	int64_t ns = wall_ns();
	ts->tv_sec = ns / 1000000000;
	ts->tv_nsec = ns % 1000000000;
	return 0;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
	(void)tz;
	int64_t ns = wall_ns();
	tv->tv_sec = ns / 1000000000;
	tv->tv_usec = (ns % 1000000000) / 1000;
	return 0;
}

time_t time(time_t *t) {
	time_t s = (time_t)(wall_ns() / 1000000000);
	if (t != NULL) {
		*t = s;
	}
	return s;
}
