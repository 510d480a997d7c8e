/*
 * watch: stamps each change of a file as inotify tells it, for bench/wake.sh.
 *
 *     watch FILE OUT [PROGRAM ARG...]
 *
 * Watches FILE (IN_MODIFY) and, each time a read of the inotify descriptor returns, reads
 * CLOCK_MONOTONIC and appends it, in nanoseconds, as one line to OUT. Prints "ready" on
 * stdout once the watch is in place, then runs until killed. With PROGRAM, it also starts
 * PROGRAM ARG... with posix_spawn after each stamp and waits for it: the floor of a wake,
 * measured the same way (no aw, no bookkeeping, nothing between the event and the spawn);
 * it prints "done" once the program has exited and it watches again.
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv)
{
	char buf[4096], line[32];
	struct timespec t;
	int in, out, n;
	ssize_t got;
	pid_t pid;

	if (argc < 3) {
		fputs("usage: watch FILE OUT [PROGRAM ARG...]\n", stderr);
		return 64;
	}
	in = inotify_init1(IN_CLOEXEC);
	if (in < 0 || inotify_add_watch(in, argv[1], IN_MODIFY) < 0) {
		perror(argv[1]);
		return 66;
	}
	out = open(argv[2], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (out < 0) {
		perror(argv[2]);
		return 73;
	}
	puts("ready");
	fflush(stdout);
	for (;;) {
		got = read(in, buf, sizeof buf);
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			perror("inotify");
			return 74;
		}
		n = snprintf(line, sizeof line, "%lld\n",
			     (long long)t.tv_sec * 1000000000LL + t.tv_nsec);
		if (write(out, line, n) != n) {
			perror(argv[2]);
			return 74;
		}
		if (argc > 3) {
			if (posix_spawn(&pid, argv[3], NULL, NULL, argv + 3, environ) != 0) {
				perror(argv[3]);
				return 69;
			}
			waitpid(pid, NULL, 0);
			/* Back to the watch: the next change may come. */
			puts("done");
			fflush(stdout);
		}
	}
}
