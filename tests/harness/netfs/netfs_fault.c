/* preflight-netfs's fault injection: the --control file.
 *
 * The file lies outside the mount (the daemon reads it itself, with its own
 * credentials). One rule a line, blank lines and lines starting with '#'
 * ignored:
 *
 *   ERROR OP [GLOB]   ERROR: eio, enospc, edquot, erofs
 *                     OP: read, write, fsync, open, create, mkdir, unlink, rename
 *                     GLOB: fnmatch(3) (no FNM_PATHNAME) on the path below the
 *                     mount root, without its leading '/': "*.bin" matches in
 *                     every folder. No GLOB: every path. A rename matches on
 *                     its source or its destination.
 *   hold OP [GLOB]    the operation waits (in its slot) until the rule is gone
 *                     from the file, at most HOLD_MAX_S, then goes on, saying
 *                     "holding OP PATH of pid PID ..." on stderr when it starts: a test
 *                     stops a writer at one exact step ("hold rename step-*":
 *                     a checkpoint's commit, between its last part and the
 *                     rename) and acts while it waits.
 *   off               clears the rules above it
 *
 * The first matching rule wins. An empty or missing file means no faults.
 * Bounds: 4096 bytes (a larger file is ignored whole: no faults), 32 rules,
 * 255 bytes a glob. A bad line is reported once on stderr (once per change
 * of the file) and ignored.
 *
 * Re-read: each operation that can fault stats the file and re-reads it
 * when its device, inode, size, mtime or ctime changed. Timestamps can be
 * coarse (a tick): a test that writes two versions of the same size within
 * a tick should replace the file (write a new one, mv it over), which
 * changes the inode.
 */
#define _GNU_SOURCE
#include "netfs.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CTL_MAX_BYTES 4096
#define CTL_MAX_RULES 32
#define CTL_MAX_GLOB 255
#define HOLD_MAX_S 600
#define HOLD_POLL_NS 50000000L

struct rule {
	int err;  /* an errno, or HOLD */
	enum fault_op op;
	char glob[CTL_MAX_GLOB + 1]; /* "" for every path */
};

static struct {
	pthread_mutex_t mu;
	const char *path; /* NULL: no --control */
	int have_seen;    /* seen holds the stat of the version the rules came from */
	struct stat seen;
	int n;
	struct rule rules[CTL_MAX_RULES];
} ctl = { .mu = PTHREAD_MUTEX_INITIALIZER };

static const char *const op_names[] = {
	[FOP_READ] = "read", [FOP_WRITE] = "write", [FOP_FSYNC] = "fsync", [FOP_OPEN] = "open",
	[FOP_CREATE] = "create", [FOP_MKDIR] = "mkdir", [FOP_UNLINK] = "unlink", [FOP_RENAME] = "rename",
};

static const struct {
	const char *name;
	int err;
} errors[] = { { "eio", EIO }, { "enospc", ENOSPC }, { "edquot", EDQUOT }, { "erofs", EROFS }, { "hold", -1 } };
#define HOLD (-1)

void fault_init(const char *control_path)
{
	ctl.path = control_path;
}

static void bad_line(int lineno, const char *why, const char *line)
{
	fprintf(stderr, "preflight-netfs: %s:%d: %s, line ignored: '%s'\n", ctl.path, lineno, why, line);
}

/* One line into the rules (ctl.mu held). */
static void parse_line(char *line, int lineno)
{
	char *save, *tok[4] = { 0 }, shown[81];
	int nt = 0;
	snprintf(shown, sizeof shown, "%.80s", line); /* the line as written, for the report */
	for (char *t = strtok_r(line, " \t\r", &save); t; t = strtok_r(NULL, " \t\r", &save))
		if (nt < 4)
			tok[nt++] = t;
	if (nt == 0 || tok[0][0] == '#')
		return;
	if (nt == 1 && !strcmp(tok[0], "off")) {
		ctl.n = 0;
		return;
	}
	struct rule r = { .err = 0, .op = FOP_NONE };
	for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
		if (!strcmp(tok[0], errors[i].name))
			r.err = errors[i].err;
	for (int i = FOP_NONE + 1; nt >= 2 && i < FOP_COUNT; i++)
		if (!strcmp(tok[1], op_names[i]))
			r.op = (enum fault_op)i;
	if (nt < 2 || nt > 3 || !r.err || r.op == FOP_NONE)
		bad_line(lineno, "expected 'ERROR OP [GLOB]' or 'off' (ERROR: eio enospc edquot erofs hold; "
				 "OP: read write fsync open create mkdir unlink rename)", shown);
	else if (nt == 3 && strlen(tok[2]) > CTL_MAX_GLOB)
		bad_line(lineno, "glob longer than 255 bytes", shown);
	else if (ctl.n == CTL_MAX_RULES)
		bad_line(lineno, "more than 32 rules", shown);
	else {
		if (nt == 3)
			strcpy(r.glob, tok[2]);
		ctl.rules[ctl.n++] = r;
	}
}

static int same_version(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Brings the rules up to the file's current version (ctl.mu held). */
static void reload(void)
{
	struct stat st;
	int fd = open(ctl.path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		if (fd >= 0)
			close(fd);
		ctl.n = 0, ctl.have_seen = 0; /* missing (or not a file): no faults */
		return;
	}
	if (ctl.have_seen && same_version(&st, &ctl.seen)) {
		close(fd);
		return;
	}
	char buf[CTL_MAX_BYTES + 2];
	ssize_t len = st.st_size > CTL_MAX_BYTES ? -1 : pread(fd, buf, CTL_MAX_BYTES + 1, 0);
	close(fd);
	ctl.n = 0, ctl.seen = st, ctl.have_seen = 1;
	if (len < 0 || len > CTL_MAX_BYTES) {
		fprintf(stderr, "preflight-netfs: %s: unreadable or larger than %d bytes, ignored: no faults\n",
			ctl.path, CTL_MAX_BYTES);
		return;
	}
	buf[len] = '\0';
	char *save;
	int lineno = 0;
	/* strtok_r would merge empty lines and shift the numbers: walk by hand. */
	for (char *line = buf; line && *line; line = save) {
		save = strchr(line, '\n');
		if (save)
			*save++ = '\0';
		parse_line(line, ++lineno);
	}
}

/* The first rule matching (op, path): its err, or 0 (ctl.mu not held). */
static int first_match(enum fault_op op, const char *rel)
{
	int err = 0;
	pthread_mutex_lock(&ctl.mu);
	reload();
	for (int i = 0; i < ctl.n && !err; i++)
		if (ctl.rules[i].op == op && (!ctl.rules[i].glob[0] || !fnmatch(ctl.rules[i].glob, rel, 0)))
			err = ctl.rules[i].err;
	pthread_mutex_unlock(&ctl.mu);
	return err;
}

int fault_check(enum fault_op op, const char *path)
{
	if (!ctl.path || op == FOP_NONE)
		return 0;
	const char *rel = path ? path : "";
	while (*rel == '/')
		rel++;
	int err = first_match(op, rel);
	if (err == HOLD) {
		/* One line a hold: the test waits for it, and for the caller's pid (a
		 * thread id: kill(2) of it signals its whole process). */
		fprintf(stderr, "preflight-netfs: holding %s %s of pid %d until the rule is gone\n", op_names[op], rel,
			(int)fuse_get_context()->pid);
		fflush(stderr);
	}
	for (long waited = 0; err == HOLD && waited < HOLD_MAX_S * 1000000000L; waited += HOLD_POLL_NS) {
		struct timespec ts = { 0, HOLD_POLL_NS };
		nanosleep(&ts, NULL);
		err = first_match(op, rel);
	}
	return err == HOLD ? 0 : -err;
}
