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
 * slot (forget, interrupt) flowing when every slot is busy. Measured limit
 * (kernel 6.x, libfuse 3.14, high-level API, PARALLEL_DIROPS asked for):
 * lookups of different names in one folder still arrive one after another,
 * while requests on one name, and reads and writes of open files, overlap.
 * A test that wants parallel first lookups spreads its files over folders.
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
 * Bandwidth (--bandwidth): a token bucket on read+write bytes across the
 * mount (bw_take); a transfer's reply waits, in its slot, for its share.
 *
 * Faults (--control FILE): rules such as "eio write *.bin", netfs_fault.c.
 *
 * Files: netfs.c (this: the gate every operation passes, the command line),
 * netfs_ops.c (path resolution, the operations), netfs_fault.c.
 */
#define _GNU_SOURCE
#include "netfs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
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
int op_begin(enum fault_op op, const char *path, int as_caller, int *switched)
{
	*switched = 0;
	while (sem_wait(&g.slots) != 0)
		;
	if (g.latency_us > 0)
		sleep_ns(g.latency_us * 1000LL);
	int fault = fault_check(op, path);
	if (fault)
		return fault;
	if (!as_caller || !g.as_root || fuse_get_context()->uid == 0)
		return 0;
	*switched = 1;
	return creds_enter();
}

/* The bucket: each transfer books n / rate seconds on one shared timeline
 * and its reply waits for the end of its booking. The timeline may lag the
 * clock by at most BW_BURST_NS of unused time (the bucket's depth), so a
 * mount idle for a while lets a short burst through at once, never more. */
#define BW_BURST_NS 50000000LL
static pthread_mutex_t bw_mu = PTHREAD_MUTEX_INITIALIZER;
static long long bw_next_ns;

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void bw_take(size_t n)
{
	if (!g.bandwidth || !n)
		return;
	long long now = now_ns();
	long long cost = (long long)((double)n * 1e9 / (double)g.bandwidth);
	pthread_mutex_lock(&bw_mu);
	if (bw_next_ns < now - BW_BURST_NS)
		bw_next_ns = now - BW_BURST_NS;
	bw_next_ns += cost;
	long long wait = bw_next_ns - now;
	pthread_mutex_unlock(&bw_mu);
	if (wait > 0)
		sleep_ns(wait);
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
	      "  --bandwidth B      cap on read+write bytes/s across the mount, suffix K/M/G (1024-based);\n"
	      "                     0 (default): none, else 1K..1024G\n"
	      "  --control FILE     fault rules, re-read when the file changes (outside the mount)\n"
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

/* Bytes per second: a decimal with an optional K, M or G (1024-based),
 * 0 or within 1K..1024G. */
static uint64_t parse_bandwidth(const char *opt, const char *s)
{
	char *end = NULL;
	errno = 0;
	int ok = s && *s >= '0' && *s <= '9';
	unsigned long long v = ok ? strtoull(s, &end, 10) : 0;
	int shift = !ok || errno ? -1
		: !*end ? 0
		: end[1] ? -1
		: (*end == 'K' || *end == 'k') ? 10
		: (*end == 'M' || *end == 'm') ? 20
		: (*end == 'G' || *end == 'g') ? 30 : -1;
	if (shift < 0 || v > (1ULL << 40) >> shift || (v != 0 && v << shift < 1024))
		die("%s: expected 0 or 1K..1024G bytes/s (suffix K/M/G, 1024-based), got '%s'", opt,
		    s ? s : "nothing");
	return v << shift;
}

struct cmdline {
	const char *source, *mountpoint, *control;
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
		} else if (!strcmp(a, "--bandwidth")) {
			g.bandwidth = parse_bandwidth(a, v), i++;
		} else if (!strcmp(a, "--control")) {
			if (!v || !*v)
				die("--control: expected a file name");
			c->control = v, i++;
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

static int inside(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	return !strncmp(path, dir, n) && (path[n] == '/' || path[n] == '\0' || n == 1);
}

/* MOUNTPOINT inside SOURCE, or the control file inside MOUNTPOINT, would
 * have the daemon wait on its own mount. SOURCE, MOUNTPOINT and the control
 * file's folder must exist; MOUNTPOINT and the control file's name are
 * made absolute (fuse_daemonize changes to /). */
static void check_paths(struct cmdline *c)
{
	static char src[PATH_MAX], mnt[PATH_MAX], ctl_dir[PATH_MAX], ctl[PATH_MAX];
	if (!realpath(c->source, src))
		die("SOURCE %s: %s", c->source, strerror(errno));
	if (!realpath(c->mountpoint, mnt))
		die("MOUNTPOINT %s: %s", c->mountpoint, strerror(errno));
	if (inside(mnt, src))
		die("MOUNTPOINT %s lies inside SOURCE %s", mnt, src);
	c->mountpoint = mnt; /* fuse_unmount wants it absolute: fuse_daemonize changes to / */
	if (!c->control)
		return;
	const char *slash = strrchr(c->control, '/'), *base = slash ? slash + 1 : c->control;
	int dirlen = !slash ? 1 : slash == c->control ? 1 : (int)(slash - c->control);
	snprintf(ctl, sizeof ctl, "%.*s", dirlen, slash ? c->control : ".");
	if (!*base || !realpath(ctl, ctl_dir))
		die("--control %s: not a file in an existing folder", c->control);
	if (inside(ctl_dir, mnt))
		die("--control %s lies inside MOUNTPOINT %s", c->control, mnt);
	if (snprintf(ctl, sizeof ctl, "%s/%s", ctl_dir, base) >= (int)sizeof ctl)
		die("--control %s: name too long", c->control);
	c->control = ctl;
}

int main(int argc, char **argv)
{
	struct cmdline c = { 0 };
	parse_args(argc, argv, &c);
	check_paths(&c);
	fault_init(c.control);
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
