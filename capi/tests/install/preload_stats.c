/* The installed udah-preload.h and libudah-preload.so from C
 * (capi/check-install.sh).
 *
 *   preload-stats EXPECT      EXPECT: absent, enabled=1 or enabled=0
 *
 * Built twice: plain, it looks udah_preload_stats up with dlvsym at the
 * header's version (run it with and without LD_PRELOAD); with -DLINKED it
 * calls the function directly, linked with -ludah-preload (the installed
 * soname must then resolve at run time). Checks the line's start and that
 * it is one line. Exit status 0 when EXPECT holds. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <udah-preload.h>

int main(int argc, char **argv)
{
	udah_preload_stats_fn f;
	const char *line;
	char want[64];

	if (argc != 2) {
		fprintf(stderr, "usage: %s absent|enabled=1|enabled=0\n", argv[0]);
		return 2;
	}
#ifdef LINKED
	f = udah_preload_stats;
#else
	f = (udah_preload_stats_fn)dlvsym(RTLD_DEFAULT, "udah_preload_stats", UDAH_PRELOAD_STATS_VERSION);
#endif
	if (!f) {
		printf("udah_preload_stats: absent\n");
		return strcmp(argv[1], "absent") != 0;
	}
	line = f();
	snprintf(want, sizeof(want), "udah-preload: %s ", argv[1]);
	if (!line || strncmp(line, want, strlen(want)) != 0 || strchr(line, '\n')) {
		fprintf(stderr, "expected a line starting with '%s', got '%s'\n", want, line ? line : "(null)");
		return 1;
	}
	printf("%s\n", line);
	return 0;
}
