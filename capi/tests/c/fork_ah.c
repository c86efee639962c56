/*
 * udah-fork-ah: fork while four threads create and destroy AHs; every child
 * must still be able to use udah and verbs.
 *
 *   udah-fork-ah udah|preload|selftest fake [FORKS]
 *   udah-fork-ah udah|preload DEV PORT LOCAL_IPV4 [FORKS]
 *
 * udah     libudah's API: four threads udah_create_ah_from_wc +
 *          udah_destroy_ah on one responder (with "fake", half of them on
 *          peers that keep missing its cache, so creates of kernel AHs run
 *          all the time, half on 8 peers the threads share; on a device,
 *          the loopback peer, every other request through udah_create_ah
 *          with a flow label of its own so that kernel AHs are created all
 *          the time too, and thread 0 sending IBV_EVENT_GID_CHANGE every 64
 *          iterations).
 * preload  plain libibverbs under LD_PRELOAD=libudah-preload.so: four
 *          threads ibv_create_ah_from_wc + ibv_destroy_ah.
 * selftest the harness's own check: one thread holds a plain mutex across
 *          the forks and each child takes it, so the first child must be
 *          reported as blocked (exit status 1).
 * fake     no device: run with LD_PRELOAD=libudah-fakeverbs.so (after the
 *          preload for "preload"), whose fake PD and verbs are used
 *          (capi/tests/c/fake_verbs.c).
 * DEV ...  a real device (the Soft-RoCE guest), RoCE v2 requests from
 *          LOCAL_IPV4 to itself.
 *
 * The main thread forks FORKS times (default 100), each time after the
 * threads made progress since the last fork. Each child, single-threaded
 * copy of a process whose other threads may have been anywhere in udah,
 * libibverbs or the preload: one AH the same way as the threads (a new peer
 * with "fake"), given back; the attribute with udah_init_ah_from_wc (udah)
 * or ibv_init_ah_from_wc (preload) and a plain ibv_create_ah +
 * ibv_destroy_ah of it; then _exit(0). A child that blocks is a failure,
 * not a hang: it arms alarm(20) first (SIGALRM kills it), and the parent
 * waits for it at most 40 s longer (then SIGKILL). UDAH_FORK_ALARM=S sets
 * the child's alarm to S seconds. The parent checks that every
 * child exited 0, that no thread saw a failure, and at the end that the
 * responder (udah) or the fake verbs (every AH destroyed exactly once)
 * balance. Exit status 0 when all of that holds, 1 otherwise, 2 on
 * usage/setup errors.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <udah.h>

#define THREADS 4

static int use_udah, fake, selftest;
static unsigned child_alarm_s = 20;
static pthread_mutex_t selftest_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct udah_responder *resp;
static uint8_t port;
static struct in_addr local;
static atomic_int stop;
static atomic_ulong progress;
static atomic_int thread_failed;

static void request(struct ibv_grh *grh, struct ibv_wc *wc, struct in_addr src)
{
	unsigned char *ip = (unsigned char *)grh + 20;

	memset(grh, 0, sizeof(*grh));
	ip[0] = 0x45; /* IPv4, IHL 5: a RoCE v2 / IPv4 request */
	ip[3] = 60;
	ip[8] = 64;
	ip[9] = 17;
	memcpy(ip + 12, &src, 4);
	memcpy(ip + 16, &local, 4);
	memset(wc, 0, sizeof(*wc));
	wc->status = IBV_WC_SUCCESS;
	wc->opcode = IBV_WC_RECV;
	wc->wc_flags = IBV_WC_GRH;
}

/* The source of request `i` of thread `t`: with fake verbs, odd requests
 * from one of 8 peers all threads share (AHs shared between threads, with
 * UDAH_PRELOAD_SHARE=1 too), even ones from 10.t.x.y over 2048 peers per
 * thread (above the responder's 1024 slots, so it keeps creating); on a
 * device, the local address (loopback). */
static struct in_addr source(unsigned t, unsigned long i)
{
	struct in_addr a = local;

	if (fake && (i & 1))
		a.s_addr = htonl((10u << 24) | (99u << 16) | (unsigned)(i / 2 % 8));
	else if (fake)
		a.s_addr = htonl((10u << 24) | (t << 16) | (unsigned)(i / 2 % 2048));
	return a;
}

/* One AH for (wc, grh), given back. 0, or the errno of the failure. */
static int one_ah(struct ibv_wc *wc, struct ibv_grh *grh)
{
	struct ibv_ah *ah;
	int rc;

	errno = 0;
	ah = use_udah ? udah_create_ah_from_wc(resp, wc, grh) : ibv_create_ah_from_wc(pd, wc, grh, port);
	if (!ah)
		return errno ? errno : EIO;
	rc = use_udah ? udah_destroy_ah(resp, ah) : ibv_destroy_ah(ah);
	if (rc)
		return errno ? errno : rc;
	return 0;
}

/* udah_create_ah for the attribute of (wc, grh) with flow label `label`
 * (a key of its own: a device's loopback peer then still makes udah create
 * kernel AHs), given back. 0, or the errno of the failure. */
static int one_labelled_ah(struct ibv_wc *wc, struct ibv_grh *grh, uint32_t label)
{
	struct ibv_ah_attr attr;
	struct ibv_ah *ah;

	errno = 0;
	if (udah_init_ah_from_wc(resp, wc, grh, UDAH_PROFILE_LIBIBVERBS, UDAH_EVIDENCE_NONE, &attr))
		return errno ? errno : EIO;
	attr.grh.flow_label = label & 0xfffff;
	ah = udah_create_ah(resp, &attr);
	if (!ah)
		return errno ? errno : EIO;
	if (udah_destroy_ah(resp, ah))
		return errno ? errno : EIO;
	return 0;
}

static void *worker(void *arg)
{
	unsigned t = (unsigned)(uintptr_t)arg;
	unsigned long i;
	struct ibv_wc wc;
	struct ibv_grh grh;

	if (selftest) {
		/* Holds a lock across every fork, with no atfork handler. */
		pthread_mutex_lock(&selftest_lock);
		while (!atomic_load(&stop)) {
			atomic_fetch_add(&progress, 1);
			sched_yield();
		}
		pthread_mutex_unlock(&selftest_lock);
		return NULL;
	}
	for (i = 0; !atomic_load(&stop); i++) {
		int rc;

		request(&grh, &wc, source(t, i));
		/* On a device, every other request of libudah's threads is
		 * udah_create_ah with a flow label of its own (2048 per thread,
		 * above the table's 1024 slots): misses, kernel creates. */
		if (use_udah && !fake && (i & 1))
			rc = one_labelled_ah(&wc, &grh, (t << 11) | (unsigned)(i / 2 % 2048));
		else
			rc = one_ah(&wc, &grh);
		if (rc) {
			fprintf(stderr, "thread %u, iteration %lu: %s\n", t, i, strerror(rc));
			atomic_store(&thread_failed, 1);
			break;
		}
		if (use_udah && !fake && t == 0 && i % 64 == 63) {
			struct ibv_async_event ev;

			memset(&ev, 0, sizeof(ev));
			ev.event_type = IBV_EVENT_GID_CHANGE;
			ev.element.port_num = port;
			if (udah_handle_async_event(resp, &ev) != 1) {
				fprintf(stderr, "thread 0: udah_handle_async_event: %s\n", strerror(errno));
				atomic_store(&thread_failed, 1);
				break;
			}
		}
		atomic_fetch_add(&progress, 1);
	}
	return NULL;
}

/* The child's work; its exit status. */
static int child(unsigned k)
{
	struct ibv_wc wc;
	struct ibv_grh grh;
	struct ibv_ah_attr attr;
	struct ibv_ah *ah;
	struct in_addr src = local;
	int rc;

	alarm(child_alarm_s);
	if (selftest) {
		/* Held by a thread of the parent: never free here. */
		pthread_mutex_lock(&selftest_lock);
		return 0;
	}
	if (fake)
		src.s_addr = htonl((10u << 24) | (200u << 16) | (k % 65536));
	request(&grh, &wc, src);
	rc = one_ah(&wc, &grh);
	if (rc) {
		fprintf(stderr, "child %u: AH: %s\n", k, strerror(rc));
		return 3;
	}
	rc = use_udah ? udah_init_ah_from_wc(resp, &wc, &grh, UDAH_PROFILE_LIBIBVERBS, UDAH_EVIDENCE_NONE, &attr)
		      : ibv_init_ah_from_wc(fake ? pd->context : ctx, port, &wc, &grh, &attr);
	if (rc) {
		fprintf(stderr, "child %u: init_ah_from_wc: %s\n", k, strerror(errno));
		return 4;
	}
	ah = ibv_create_ah(pd, &attr);
	if (!ah || ibv_destroy_ah(ah)) {
		fprintf(stderr, "child %u: ibv_create_ah/ibv_destroy_ah: %s\n", k, strerror(errno));
		return 5;
	}
	if (use_udah) {
		struct udah_stats st;

		if (udah_responder_stats(resp, &st)) {
			fprintf(stderr, "child %u: udah_responder_stats: %s\n", k, strerror(errno));
			return 6;
		}
	} else {
		/* The preload's own lock (its stats line). */
		const char *(*stats)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "udah_preload_stats");

		if (stats && !stats()) {
			fprintf(stderr, "child %u: udah_preload_stats returned NULL\n", k);
			return 7;
		}
	}
	return 0;
}

/* Waits for `pid` at most 40 s beyond the child's alarm; its status, or -1
 * when it had to be killed. */
static int wait_child(pid_t pid)
{
	struct timespec tick = { 0, 1000000 };
	long ms;
	int status;

	for (ms = 0; ms < (child_alarm_s + 40) * 1000L; ms++) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			return status;
		if (r < 0 && errno != EINTR) {
			perror("waitpid");
			return -1;
		}
		nanosleep(&tick, NULL);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -1;
}

static int setup(int argc, char **argv, int *forks)
{
	int n, i, extra;
	struct ibv_device **list;

	const char *env = getenv("UDAH_FORK_ALARM");

	if (env && atoi(env) > 0)
		child_alarm_s = (unsigned)atoi(env);
	if (argc < 3 || (strcmp(argv[1], "udah") && strcmp(argv[1], "preload") && strcmp(argv[1], "selftest")))
		return -1;
	use_udah = !strcmp(argv[1], "udah");
	selftest = !strcmp(argv[1], "selftest");
	fake = !strcmp(argv[2], "fake");
	if (selftest && !fake)
		return -1;
	extra = fake ? 3 : 5;
	if (argc != extra && argc != extra + 1)
		return -1;
	*forks = argc == extra + 1 ? atoi(argv[extra]) : 100;
	if (*forks <= 0)
		return -1;
	if (fake) {
		struct ibv_pd *(*fake_pd)(void) = (struct ibv_pd * (*)(void)) dlsym(RTLD_DEFAULT, "udah_fake_verbs_pd");

		if (!fake_pd) {
			fprintf(stderr, "fake: run with LD_PRELOAD=libudah-fakeverbs.so\n");
			return -2;
		}
		pd = fake_pd();
		port = 1;
		inet_pton(AF_INET, "192.0.2.1", &local);
		if (use_udah) {
			struct ibv_gid_entry g[3];

			memset(g, 0, sizeof(g));
			for (i = 0; i < 3; i++) {
				g[i].gid_index = (uint32_t)i;
				g[i].port_num = 1;
				g[i].gid_type = i == 0 ? IBV_GID_TYPE_ROCE_V1 : IBV_GID_TYPE_ROCE_V2;
			}
			g[0].gid.raw[0] = g[1].gid.raw[0] = 0xfe;
			g[0].gid.raw[1] = g[1].gid.raw[1] = 0x80;
			g[0].gid.raw[15] = g[1].gid.raw[15] = 1;
			g[2].gid.raw[10] = g[2].gid.raw[11] = 0xff;
			memcpy(&g[2].gid.raw[12], &local, 4);
			resp = udah_responder_from_gids(1, IBV_LINK_LAYER_ETHERNET, 4, g, 3, pd);
		}
	} else {
		port = (uint8_t)atoi(argv[3]);
		if (!inet_pton(AF_INET, argv[4], &local))
			return -1;
		list = ibv_get_device_list(&n);
		for (i = 0; list && i < n; i++)
			if (!strcmp(ibv_get_device_name(list[i]), argv[2]))
				ctx = ibv_open_device(list[i]);
		if (!ctx) {
			fprintf(stderr, "cannot open %s\n", argv[2]);
			return -2;
		}
		pd = ibv_alloc_pd(ctx);
		if (!pd) {
			perror("ibv_alloc_pd");
			return -2;
		}
		if (use_udah)
			resp = udah_responder_open(ctx, port, pd);
	}
	if (use_udah && !resp) {
		fprintf(stderr, "responder: %s (%s)\n", strerror(errno), udah_last_error());
		return -2;
	}
	return 0;
}

int main(int argc, char **argv)
{
	pthread_t th[THREADS];
	int forks, k, rc, failed = 0;
	unsigned t;

	rc = setup(argc, argv, &forks);
	if (rc) {
		if (rc == -1)
			fprintf(stderr, "usage: %s udah|preload|selftest fake [FORKS] | udah|preload DEV PORT LOCAL_IPV4 [FORKS]\n",
				argv[0]);
		return 2;
	}
	for (t = 0; t < THREADS; t++)
		if (pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t)) {
			fprintf(stderr, "pthread_create failed\n");
			return 2;
		}
	for (k = 0; k < forks && !atomic_load(&thread_failed); k++) {
		unsigned long seen = atomic_load(&progress);
		pid_t pid;
		int status;

		/* Fork while the threads are busy: after they made progress. */
		while (atomic_load(&progress) < seen + THREADS && !atomic_load(&thread_failed))
			sched_yield();
		fflush(NULL);
		pid = fork();
		if (pid < 0) {
			perror("fork");
			failed++;
			break;
		}
		if (pid == 0)
			_exit(child((unsigned)k));
		status = wait_child(pid);
		if (status == -1) {
			fprintf(stderr, "fork %d: the child did not finish within %u s (deadlock), killed\n", k,
				child_alarm_s + 40);
			failed++;
		} else if (WIFSIGNALED(status)) {
			fprintf(stderr, "fork %d: the child died of signal %d%s\n", k, WTERMSIG(status),
				WTERMSIG(status) == SIGALRM ? " (its alarm: blocked, deadlock)" : "");
			failed++;
		} else if (WEXITSTATUS(status) != 0) {
			fprintf(stderr, "fork %d: the child exited %d\n", k, WEXITSTATUS(status));
			failed++;
		}
		if (failed) {
			k++;
			break;
		}
	}
	atomic_store(&stop, 1);
	for (t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	if (atomic_load(&thread_failed))
		failed++;
	if (k < forks)
		fprintf(stderr, "stopped after %d of %d forks\n", k, forks);
	if (use_udah) {
		struct udah_stats st;

		memset(&st, 0, sizeof(st));
		if (udah_responder_stats(resp, &st) || st.ahs_outstanding != 0) {
			fprintf(stderr, "responder: %llu AHs outstanding after the threads (%s)\n",
				(unsigned long long)st.ahs_outstanding, strerror(errno));
			failed++;
		}
		printf("responder: %llu AH requests, %llu kernel AHs created, %llu destroyed\n",
		       (unsigned long long)st.create_calls, (unsigned long long)st.kernel_ahs_created,
		       (unsigned long long)st.kernel_ahs_destroyed);
		if (udah_responder_destroy(resp)) {
			fprintf(stderr, "udah_responder_destroy: %s\n", strerror(errno));
			failed++;
		}
	}
	if (fake) {
		void (*counts)(unsigned long *, unsigned long *, unsigned long *) =
			(void (*)(unsigned long *, unsigned long *, unsigned long *))dlsym(RTLD_DEFAULT,
											  "udah_fake_verbs_counts");
		unsigned long c = 0, d = 0, b = 0;

		if (counts)
			counts(&c, &d, &b);
		printf("fake verbs: %lu AHs created, %lu destroyed, %lu bad destroys\n", c, d, b);
		if (!counts || (c == 0 && !selftest) || c != d || b != 0) {
			fprintf(stderr, "fake verbs: AHs do not balance\n");
			failed++;
		}
	} else {
		ibv_dealloc_pd(pd);
		ibv_close_device(ctx);
	}
	printf("fork-ah %s %s: %d forks, %lu thread iterations, %d failures\n", argv[1], fake ? "fake" : argv[2], k,
	       atomic_load(&progress), failed);
	return failed ? 1 : 0;
}
