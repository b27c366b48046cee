/*
 * preflight-netfs: the test harness's emulated network file system.
 *
 *   preflight-netfs [options] SOURCE MOUNTPOINT
 *
 * Serves the folder SOURCE at MOUNTPOINT through FUSE and adds a fixed
 * latency to every operation, so a training job on the mount sees storage
 * the way it sees NFS or Lustre: every stat, open, read and write is a round
 * trip. Test-only; never installed.
 *
 * API: libfuse3's high-level (path) API. Every operation arrives with its
 * path, and resolving a path beneath an fd of SOURCE component by component
 * (openat with O_NOFOLLOW) is exactly the safety rule we want; the library
 * keeps the inode table, lookup counts and forgets that the low-level API
 * would have us write. A kernel LOOKUP becomes our getattr, so it pays the
 * latency once, like an NFS LOOKUP RPC.
 *
 * Caching: none. attr, entry and negative timeouts are 0, and every open
 * file is direct_io (no kernel page cache, no readahead, no writeback
 * cache), so every read() and write() is a request here. The price:
 * MAP_SHARED mmap of a file on the mount fails (ENODEV) with libfuse 3.14;
 * MAP_PRIVATE read-only mappings, which data loaders use, still work.
 *
 * Concurrency: fuse_loop_mt with up to max-inflight + 4 worker threads; a
 * counting semaphore of max-inflight slots is held while sleeping the
 * latency and doing the syscall, so latencies overlap across requests like
 * an NFS client's RPC slots. The 4 spare threads keep requests that take no
 * slot (forget, interrupt) flowing when every slot is busy.
 *
 * Permissions: mounted with default_permissions, so the kernel checks the
 * caller against the source's modes and owners. On top of that, when the
 * daemon runs as root every path operation runs with the caller's fsuid,
 * fsgid and supplementary groups (per-thread setfsuid/setfsgid and the raw
 * setgroups syscall, restored after each operation): files a user creates
 * are that user's, and the source's own permission checks apply again, so
 * a user can never write as root through the mount. Operations on an open
 * file (read, write, fsync, release) use the fd opened with those checks.
 *
 * Paths: every operation resolves beneath SOURCE's fd; intermediate
 * components are opened with O_PATH|O_DIRECTORY|O_NOFOLLOW, the last one is
 * used with *at() calls and AT_SYMLINK_NOFOLLOW / O_NOFOLLOW, and "." or
 * ".." components are refused. Symlinks are served as symlinks (readlink);
 * the daemon itself never follows one, the client's kernel does, as on NFS.
 *
 */
#define _GNU_SOURCE
#include "netfs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SPARE_THREADS 4

struct netfs g;

/* ---- per-operation gate: slot, latency, caller's credentials ---------- */

static void sleep_ns(long long ns)
{
	struct timespec ts = { .tv_sec = ns / 1000000000LL, .tv_nsec = ns % 1000000000LL };
	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
}

/* Takes on the calling process's fsuid/fsgid/groups on this thread only.
 * Returns 0, or -EPERM when the switch could not be verified. */
static int creds_enter(void)
{
	const struct fuse_context *cx = fuse_get_context();
	gid_t gl[NETFS_MAX_GROUPS];
	int n = fuse_getgroups(NETFS_MAX_GROUPS, gl);
	if (n < 0)
		n = 0; /* the caller's groups unknown (it exited): none */
	if (n > NETFS_MAX_GROUPS)
		n = NETFS_MAX_GROUPS;
	if (syscall(SYS_setgroups, n, gl) != 0)
		return -EPERM;
	setfsgid(cx->gid);
	setfsuid(cx->uid);
	if ((uid_t)setfsuid(-1) != cx->uid || (gid_t)setfsgid(-1) != cx->gid)
		return -EPERM;
	return 0;
}

/* Back to the daemon's own credentials; a worker that cannot is unsafe to reuse. */
static void creds_leave(void)
{
	setfsuid(geteuid());
	setfsgid(getegid());
	if (syscall(SYS_setgroups, g.ngroups, g.groups) != 0 || (uid_t)setfsuid(-1) != geteuid()) {
		fprintf(stderr, "netfs: cannot restore the daemon's credentials: %s\n", strerror(errno));
		abort();
	}
}

/* The contract: netfs.h. */
int op_begin(int as_caller, int *switched)
{
	*switched = 0;
	while (sem_wait(&g.slots) != 0)
		;
	if (g.latency_us > 0)
		sleep_ns(g.latency_us * 1000LL);
	if (!as_caller || !g.as_root || fuse_get_context()->uid == 0)
		return 0;
	*switched = 1;
	return creds_enter();
}

int op_end(int switched, int rc)
{
	if (switched)
		creds_leave();
	sem_post(&g.slots);
	return rc;
}

/* ---- command line -------------------------------------------------------- */

static void usage(FILE *to)
{
	fputs("usage: preflight-netfs [options] SOURCE MOUNTPOINT\n"
	      "  -f                 stay in the foreground\n"
	      "  --latency-us N     added to every operation, 0..1000000 (default 1000)\n"
	      "  --max-inflight N   requests served at once, 1..1024 (default 64)\n"
	      "  --allow-other      other users may use the mount (checked against the source's modes)\n",
	      to);
}

/* One line on stderr, exit 2: the daemon never starts half-configured. */
static _Noreturn __attribute__((format(printf, 1, 2))) void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("preflight-netfs: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(2);
}

/* A decimal in [lo, hi], nothing else (no sign, no blanks, no suffix). */
static unsigned long long parse_num(const char *opt, const char *s, unsigned long long lo,
				    unsigned long long hi)
{
	char *end;
	errno = 0;
	unsigned long long v = (s && *s >= '0' && *s <= '9') ? strtoull(s, &end, 10) : 0;
	if (!s || *s < '0' || *s > '9' || *end || errno || v < lo || v > hi) {
		die("%s: expected an integer in %llu..%llu, got '%s'", opt, lo, hi, s ? s : "nothing");
	}
	return v;
}

struct cmdline {
	const char *source, *mountpoint;
	int foreground, allow_other;
};

static void parse_args(int argc, char **argv, struct cmdline *c)
{
	int npos = 0;
	g.latency_us = 1000;
	g.inflight = 64;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			exit(0);
		} else if (!strcmp(a, "-f")) {
			c->foreground = 1;
		} else if (!strcmp(a, "--allow-other")) {
			c->allow_other = 1;
		} else if (!strcmp(a, "--latency-us")) {
			g.latency_us = (long)parse_num(a, v, 0, 1000000), i++;
		} else if (!strcmp(a, "--max-inflight")) {
			g.inflight = (unsigned)parse_num(a, v, 1, 1024), i++;
		} else if (a[0] == '-' && a[1]) {
			die("unknown option '%s' (see --help)", a);
		} else if (npos++ == 0) {
			c->source = a;
		} else if (npos == 2) {
			c->mountpoint = a;
		} else {
			die("one SOURCE and one MOUNTPOINT expected, got also '%s'", a);
		}
	}
	if (npos != 2)
		die("SOURCE and MOUNTPOINT expected (see --help)");
}

/* MOUNTPOINT inside SOURCE would have the daemon resolve paths through its
 * own mount and wait on itself. Both must exist. */
static void check_paths(const struct cmdline *c)
{
	char src[PATH_MAX], mnt[PATH_MAX];
	if (!realpath(c->source, src))
		die("SOURCE %s: %s", c->source, strerror(errno));
	if (!realpath(c->mountpoint, mnt))
		die("MOUNTPOINT %s: %s", c->mountpoint, strerror(errno));
	size_t n = strlen(src);
	if (!strncmp(mnt, src, n) && (mnt[n] == '/' || mnt[n] == '\0' || n == 1))
		die("MOUNTPOINT %s lies inside SOURCE %s", mnt, src);
}

int main(int argc, char **argv)
{
	struct cmdline c = { 0 };
	parse_args(argc, argv, &c);
	check_paths(&c);
	g.src = open(c.source, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (g.src < 0)
		die("SOURCE %s: %s", c.source, strerror(errno));
	g.as_root = geteuid() == 0;
	g.ngroups = getgroups(NETFS_MAX_GROUPS, g.groups);
	if (g.ngroups < 0)
		die("getgroups: %s", strerror(errno));
	if (sem_init(&g.slots, 0, g.inflight) != 0)
		die("sem_init: %s", strerror(errno));

	/* fsname/subtype: `mount` shows "netfs on MOUNTPOINT type fuse.netfs". */
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	if (fuse_opt_add_arg(&args, "preflight-netfs") || fuse_opt_add_arg(&args, "-o") ||
	    fuse_opt_add_arg(&args, c.allow_other ? "fsname=netfs,subtype=netfs,default_permissions,allow_other"
						  : "fsname=netfs,subtype=netfs,default_permissions"))
		die("out of memory");
	struct fuse *f = fuse_new(&args, &nf_ops, sizeof nf_ops, NULL);
	if (!f)
		die("cannot set up FUSE");
	if (fuse_mount(f, c.mountpoint) != 0)
		die("cannot mount on %s (see the line above)", c.mountpoint);
	struct fuse_session *se = fuse_get_session(f);
	if (fuse_set_signal_handlers(se) != 0 || fuse_daemonize(c.foreground) != 0) {
		fuse_unmount(f);
		die("cannot install signal handlers or daemonize");
	}
	struct fuse_loop_config *lc = fuse_loop_cfg_create();
	fuse_loop_cfg_set_max_threads(lc, g.inflight + SPARE_THREADS);
	fuse_loop_cfg_set_idle_threads(lc, g.inflight + SPARE_THREADS);
	int rc = fuse_loop_mt(f, lc);
	fuse_loop_cfg_destroy(lc);
	fuse_remove_signal_handlers(se);
	fuse_unmount(f);
	fuse_destroy(f);
	fuse_opt_free_args(&args);
	return rc < 0 ? 1 : 0;
}
