/* Built with nothing but `pkg-config --cflags --libs udah` against an
 * installed prefix: a call that needs no device fails with its errno and a
 * sentence. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <udah.h>

#if !UDAH_CHECK_VERSION(0, 1, 0)
#error "udah.h is older than 0.1.0"
#endif

int main(void)
{
	struct udah_responder *r = udah_responder_from_gids(0, 2, 16, NULL, 0, NULL);
	if (r != NULL || errno != EINVAL || strstr(udah_last_error(), "port 0") == NULL) {
		fprintf(stderr, "unexpected: %p errno %d: %s\n", (void *)r, errno, udah_last_error());
		return 1;
	}
	printf("udah %s: %s\n", udah_version(), udah_last_error());
	return 0;
}
