/*
 * stamp: a backend program that records when it started, for bench/wake.sh.
 *
 *     stamp FILE
 *
 * A constructor reads CLOCK_MONOTONIC before main runs (built with -static, nothing is
 * loaded or relocated before it but the C library's own start); main then appends the
 * reading, in nanoseconds, as one line to FILE, and exits 0 printing nothing (so an agent
 * running it posts no reply). The prompt on stdin is not read.
 */
#include <fcntl.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static struct timespec started;

__attribute__((constructor(101))) static void stamp(void)
{
	clock_gettime(CLOCK_MONOTONIC, &started);
}

int main(int argc, char **argv)
{
	char line[32];
	int n, fd;

	if (argc != 2) {
		fputs("usage: stamp FILE\n", stderr);
		return 64;
	}
	n = snprintf(line, sizeof line, "%lld\n",
		     (long long)started.tv_sec * 1000000000LL + started.tv_nsec);
	fd = open(argv[1], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, line, n) != n) {
		perror(argv[1]);
		return 1;
	}
	close(fd);
	return 0;
}
