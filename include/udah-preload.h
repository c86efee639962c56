/*
 * udah-preload.h: the one function of libudah-preload.so that is not a
 * libibverbs function.
 *
 * libudah-preload.so (soname libudah-preload.so) is loaded with
 *   LD_PRELOAD=/path/to/libudah-preload.so ./program
 * and exports exactly:
 *   ibv_init_ah_from_wc@@IBVERBS_1.1, ibv_create_ah_from_wc@@IBVERBS_1.1,
 *   ibv_destroy_ah@@IBVERBS_1.1   (libibverbs' own, interposed)
 *   udah_preload_stats@@UDAH_PRELOAD_0.1   (declared here)
 * It is self-contained (libudah is linked into it): it needs no libudah.so
 * and exports none of libudah's udah_* functions. Environment (read once):
 * UDAH_PRELOAD=0|off|false|no forwards every call to libibverbs;
 * UDAH_PRELOAD_SHARE=1 shares one kernel AH between identical requests
 * (only safe when every ibv_destroy_ah of the program goes through the
 * interposed symbol); UDAH_PRELOAD_STATS=1 prints the line below to stderr
 * at exit. Its locks are taken around fork() (pthread_atfork), so a child
 * forked while other threads were inside the preload can use verbs.
 *
 * A program that runs with or without the preload looks the function up
 * instead of linking it:
 *
 *   udah_preload_stats_fn f = (udah_preload_stats_fn)dlsym(RTLD_DEFAULT, "udah_preload_stats");
 *   if (f) fprintf(stderr, "%s\n", f());
 *
 * or links it (-ludah-preload, which also interposes the three functions
 * for the whole process, as LD_PRELOAD does).
 */
#ifndef UDAH_PRELOAD_H
#define UDAH_PRELOAD_H

#ifdef __cplusplus
extern "C" {
#endif

/* The symbol version of udah_preload_stats, for dlvsym(). */
#define UDAH_PRELOAD_STATS_VERSION "UDAH_PRELOAD_0.1"

/*
 * One line of the preload's counters, space-separated name=value pairs:
 *   udah-preload: enabled=1 init_ah_from_wc=N served=N create_ah_from_wc=N
 *   kernel_ahs=N shared=N destroy_ah=N destroy_shared=N destroy_forwarded=N
 *   share_races=N share_full=N gid_validations=N snapshot_reads=N
 *   fallback_disabled=N fallback_null_argument=N fallback_snapshot=N
 *   fallback_table_too_large=N fallback_not_found=N fallback_validation=N
 *   fallback_zero_gid=N fallback_internal=N
 * (on one line; later versions may append pairs, never remove or reorder
 * them). The string is NUL-terminated and owned by the preload; it stays
 * valid until the next call of udah_preload_stats from any thread, so copy
 * it when other threads may call it too. Never NULL.
 */
const char *udah_preload_stats(void);

/* The type of udah_preload_stats, for dlsym(). */
typedef const char *(*udah_preload_stats_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* UDAH_PRELOAD_H */
