/* preflight-netfs's operations: path resolution beneath SOURCE and the
 * passthrough itself (the design and its reasons: netfs.c). Each operation
 * is op_begin, the syscall, op_end. */
#define _GNU_SOURCE
#include "netfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h> /* renameat2 */
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* ---- path resolution beneath SOURCE ---------------------------------- */

struct at {
	int dir;           /* parent folder of the leaf (g.src or an O_PATH fd) */
	const char *name;  /* the leaf, in buf; "." for the root */
	char buf[PATH_MAX];
};

static int bad_component(const char *c)
{
	return !*c || !strcmp(c, ".") || !strcmp(c, "..");
}

static void at_close(struct at *a)
{
	if (a->dir >= 0 && a->dir != g.src)
		close(a->dir);
	a->dir = -1;
}

/* Opens PATH's parent beneath SOURCE without following a symlink on the
 * way. Returns 0 (then at_close) or -errno; a NULL path (an unlinked open
 * file) is -ENOENT. */
static int at_open(struct at *a, const char *path)
{
	a->dir = g.src;
	if (!path)
		return -ENOENT;
	if (strlen(path) >= sizeof a->buf)
		return -ENAMETOOLONG;
	strcpy(a->buf, path);
	char *p = a->buf;
	while (*p == '/')
		p++;
	if (!*p) {
		a->name = ".";
		return 0;
	}
	for (char *slash; (slash = strchr(p, '/')) != NULL; p = slash + 1) {
		*slash = '\0';
		if (bad_component(p)) {
			at_close(a);
			return -EACCES;
		}
		int next = openat(a->dir, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int err = errno;
		at_close(a);
		if (next < 0)
			return -err;
		a->dir = next;
	}
	if (bad_component(p)) {
		at_close(a);
		return -EACCES;
	}
	a->name = p;
	return 0;
}

static int sysrc(long r)
{
	return r < 0 ? -errno : 0;
}

/* ---- operations -------------------------------------------------------- */

static int nf_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	struct at a;
	int sw, rc = op_begin(FOP_NONE, NULL, 1, &sw);
	if (!rc && fi)
		rc = sysrc(fstat((int)fi->fh, st));
	else if (!rc && !(rc = at_open(&a, path))) {
		rc = sysrc(fstatat(a.dir, a.name, st, AT_SYMLINK_NOFOLLOW));
		at_close(&a);
	}
	return op_end(sw, rc);
}

static int nf_readlink(const char *path, char *buf, size_t size)
{
	struct at a;
	int sw, rc = op_begin(FOP_NONE, NULL, 1, &sw);
	if (!rc && !(rc = at_open(&a, path))) {
		ssize_t n = readlinkat(a.dir, a.name, buf, size - 1);
		rc = sysrc(n);
		if (n >= 0)
			buf[n] = '\0';
		at_close(&a);
	}
	return op_end(sw, rc);
}

static int nf_mknod(const char *path, mode_t mode, dev_t dev)
{
	struct at a;
	int sw, rc = op_begin(FOP_NONE, NULL, 1, &sw);
	if (!rc && (S_ISCHR(mode) || S_ISBLK(mode)) && fuse_get_context()->uid != 0)
		rc = -EPERM; /* the kernel refuses this already; devices only for root */
	if (!rc && !(rc = at_open(&a, path))) {
		rc = sysrc(mknodat(a.dir, a.name, mode, dev));
		at_close(&a);
	}
	return op_end(sw, rc);
}

static int nf_mkdir(const char *path, mode_t mode)
{
	struct at a;
	int sw, rc = op_begin(FOP_MKDIR, path, 1, &sw);
	if (!rc && !(rc = at_open(&a, path))) {
		rc = sysrc(mkdirat(a.dir, a.name, mode));
		at_close(&a);
	}
	return op_end(sw, rc);
}

static int remove_op(const char *path, int flags)
{
	struct at a;
	int sw, rc = op_begin(flags ? FOP_NONE : FOP_UNLINK, path, 1, &sw);
	if (!rc && !(rc = at_open(&a, path))) {
		rc = sysrc(unlinkat(a.dir, a.name, flags));
		at_close(&a);
	}
	return op_end(sw, rc);
}

static int nf_unlink(const char *path) { return remove_op(path, 0); }
static int nf_rmdir(const char *path) { return remove_op(path, AT_REMOVEDIR); }

static int nf_symlink(const char *target, const char *path)
{
	struct at a;
	int sw, rc = op_begin(FOP_NONE, NULL, 1, &sw);
	if (!rc && !(rc = at_open(&a, path))) {
		rc = sysrc(symlinkat(target, a.dir, a.name));
		at_close(&a);
	}
	return op_end(sw, rc);
}

/* rename (flags: RENAME_NOREPLACE/EXCHANGE as given) and link (flags -1). */
static int two_path_op(const char *from, const char *to, int flags)
{
	struct at a, b;
	int sw, rc = op_begin(flags < 0 ? FOP_NONE : FOP_RENAME, from, 1, &sw);
	if (!rc && flags >= 0)
		rc = fault_check(FOP_RENAME, to); /* a rename matches on either name */
	if (!rc && !(rc = at_open(&a, from))) {
		if (!(rc = at_open(&b, to))) {
			rc = flags < 0 ? sysrc(linkat(a.dir, a.name, b.dir, b.name, 0))
				       : sysrc(renameat2(a.dir, a.name, b.dir, b.name, (unsigned)flags));
			at_close(&b);
		}
		at_close(&a);
	}
	return op_end(sw, rc);
}

static int nf_rename(const char *from, const char *to, unsigned flags)
{
	return two_path_op(from, to, (int)flags);
}

static int nf_link(const char *from, const char *to) { return two_path_op(from, to, -1); }

enum setattr_kind { SET_MODE, SET_OWNER, SET_SIZE, SET_TIMES };

struct setattr_req {
	enum setattr_kind kind;
	mode_t mode;
	uid_t uid;
	gid_t gid;
	off_t size;
	const struct timespec *tv;
};

/* chmod, chown, truncate, utimens: on the open file when the kernel names
 * one, else on the leaf without following it. */
static int setattr_op(const char *path, struct fuse_file_info *fi, const struct setattr_req *r)
{
	struct at a;
	int sw, rc = op_begin(FOP_NONE, NULL, 1, &sw);
	if (rc)
		return op_end(sw, rc);
	int fd = fi ? (int)fi->fh : -1, own = -1;
	if (fd < 0 && !(rc = at_open(&a, path)) && r->kind == SET_SIZE) {
		own = fd = openat(a.dir, a.name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		rc = sysrc(fd);
	}
	if (!rc) {
		switch (r->kind) {
		case SET_MODE:
			rc = sysrc(fd >= 0 ? fchmod(fd, r->mode)
					   : fchmodat(a.dir, a.name, r->mode, AT_SYMLINK_NOFOLLOW));
			break;
		case SET_OWNER:
			rc = sysrc(fd >= 0 ? fchown(fd, r->uid, r->gid)
					   : fchownat(a.dir, a.name, r->uid, r->gid, AT_SYMLINK_NOFOLLOW));
			break;
		case SET_SIZE:
			rc = sysrc(ftruncate(fd, r->size));
			break;
		case SET_TIMES:
			rc = sysrc(fd >= 0 ? futimens(fd, r->tv)
					   : utimensat(a.dir, a.name, r->tv, AT_SYMLINK_NOFOLLOW));
			break;
		}
	}
	if (own >= 0)
		close(own);
	if (!fi)
		at_close(&a);
	return op_end(sw, rc);
}

static int nf_chmod(const char *p, mode_t m, struct fuse_file_info *fi)
{
	return setattr_op(p, fi, &(struct setattr_req){ .kind = SET_MODE, .mode = m });
}

static int nf_chown(const char *p, uid_t u, gid_t gr, struct fuse_file_info *fi)
{
	return setattr_op(p, fi, &(struct setattr_req){ .kind = SET_OWNER, .uid = u, .gid = gr });
}

static int nf_truncate(const char *p, off_t size, struct fuse_file_info *fi)
{
	return setattr_op(p, fi, &(struct setattr_req){ .kind = SET_SIZE, .size = size });
}

static int nf_utimens(const char *p, const struct timespec tv[2], struct fuse_file_info *fi)
{
	return setattr_op(p, fi, &(struct setattr_req){ .kind = SET_TIMES, .tv = tv });
}

/* open (create 0) and create: the caller's flags, never following a final
 * symlink, never O_DIRECT (tmpfs refuses it; direct_io already bypasses the
 * page cache on the mount). */
static int open_op(const char *path, struct fuse_file_info *fi, int create, mode_t mode)
{
	struct at a;
	int sw, rc = op_begin(create ? FOP_CREATE : FOP_OPEN, path, 1, &sw);
	if (!rc && !(rc = at_open(&a, path))) {
		int flags = (fi->flags & ~O_DIRECT) | O_NOFOLLOW | O_CLOEXEC | (create ? O_CREAT : 0);
		int fd = openat(a.dir, a.name, flags, mode);
		rc = sysrc(fd);
		at_close(&a);
		if (fd >= 0) {
			fi->fh = (uint64_t)fd;
			fi->direct_io = 1;
			fi->keep_cache = 0;
		}
	}
	return op_end(sw, rc);
}

static int nf_open(const char *path, struct fuse_file_info *fi) { return open_op(path, fi, 0, 0); }

static int nf_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	return open_op(path, fi, 1, mode);
}

static int nf_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	int sw, rc = op_begin(FOP_READ, path, 0, &sw);
	if (!rc) {
		ssize_t n = pread((int)fi->fh, buf, size, off);
		rc = n < 0 ? -errno : (int)n;
		bw_take(n > 0 ? (size_t)n : 0);
	}
	return op_end(sw, rc);
}

static int nf_write(const char *path, const char *buf, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	int sw, rc = op_begin(FOP_WRITE, path, 0, &sw);
	if (!rc) {
		ssize_t n = pwrite((int)fi->fh, buf, size, off);
		rc = n < 0 ? -errno : (int)n;
		bw_take(n > 0 ? (size_t)n : 0);
	}
	return op_end(sw, rc);
}

static int nf_statfs(const char *path, struct statvfs *sv)
{
	(void)path;
	int sw, rc = op_begin(FOP_NONE, NULL, 0, &sw);
	if (!rc)
		rc = sysrc(fstatvfs(g.src, sv));
	return op_end(sw, rc);
}

/* Every close() of the mount's file: a close of a dup, so errors the source
 * reports at close reach the caller. */
static int nf_flush(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	int sw, rc = op_begin(FOP_NONE, NULL, 0, &sw);
	if (!rc) {
		int d = dup((int)fi->fh);
		rc = d < 0 ? -errno : sysrc(close(d));
	}
	return op_end(sw, rc);
}

static int nf_release(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	int sw, rc = op_begin(FOP_NONE, NULL, 0, &sw);
	close((int)fi->fh);
	return op_end(sw, rc);
}

static int nf_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	int sw, rc = op_begin(FOP_FSYNC, path, 0, &sw);
	if (!rc)
		rc = sysrc(datasync ? fdatasync((int)fi->fh) : fsync((int)fi->fh));
	return op_end(sw, rc);
}

static int nf_opendir(const char *path, struct fuse_file_info *fi)
{
	struct at a;
	int sw, rc = op_begin(FOP_NONE, NULL, 1, &sw);
	if (!rc && !(rc = at_open(&a, path))) {
		int fd = openat(a.dir, a.name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		rc = sysrc(fd);
		at_close(&a);
		DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
		if (fd >= 0 && !d) {
			rc = -errno;
			close(fd);
		}
		fi->fh = (uint64_t)(uintptr_t)d;
	}
	return op_end(sw, rc);
}

/* Entries from offset OFF (a d_off this function handed out, or 0). */
static int nf_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
		      struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	(void)path, (void)flags;
	DIR *d = (DIR *)(uintptr_t)fi->fh;
	int sw, rc = op_begin(FOP_NONE, NULL, 0, &sw);
	if (rc)
		return op_end(sw, rc);
	if (off == 0)
		rewinddir(d);
	else
		seekdir(d, off);
	for (;;) {
		errno = 0;
		struct dirent *e = readdir(d);
		if (!e) {
			rc = -errno;
			break;
		}
		struct stat st = { .st_ino = e->d_ino, .st_mode = (mode_t)DTTOIF(e->d_type) };
		if (fill(buf, e->d_name, &st, e->d_off, 0))
			break;
	}
	return op_end(sw, rc);
}

static int nf_releasedir(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	int sw, rc = op_begin(FOP_NONE, NULL, 0, &sw);
	closedir((DIR *)(uintptr_t)fi->fh);
	return op_end(sw, rc);
}

static int nf_fsyncdir(const char *path, int datasync, struct fuse_file_info *fi)
{
	(void)path;
	int fd = dirfd((DIR *)(uintptr_t)fi->fh);
	int sw, rc = op_begin(FOP_NONE, NULL, 0, &sw);
	if (!rc)
		rc = sysrc(datasync ? fdatasync(fd) : fsync(fd));
	return op_end(sw, rc);
}

/* No caching anywhere (see the header comment); the source's inode numbers;
 * an unlinked open file is removed on the source at once (hard_remove, no
 * .fuse_hidden files there) and reached through its fd with a NULL path. */
static void *nf_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	cfg->entry_timeout = cfg->attr_timeout = cfg->negative_timeout = 0;
	cfg->direct_io = 1;
	cfg->kernel_cache = cfg->auto_cache = 0;
	cfg->use_ino = 1;
	cfg->hard_remove = 1;
	conn->want &= ~(unsigned)FUSE_CAP_WRITEBACK_CACHE;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	conn->max_background = g.inflight;
	conn->congestion_threshold = g.inflight * 3 / 4 ? g.inflight * 3 / 4 : 1;
	return NULL;
}

const struct fuse_operations nf_ops = {
	.init = nf_init, .getattr = nf_getattr, .readlink = nf_readlink, .mknod = nf_mknod,
	.mkdir = nf_mkdir, .unlink = nf_unlink, .rmdir = nf_rmdir, .symlink = nf_symlink,
	.rename = nf_rename, .link = nf_link, .chmod = nf_chmod, .chown = nf_chown,
	.truncate = nf_truncate, .utimens = nf_utimens, .open = nf_open, .create = nf_create,
	.read = nf_read, .write = nf_write, .statfs = nf_statfs, .flush = nf_flush,
	.release = nf_release, .fsync = nf_fsync, .opendir = nf_opendir, .readdir = nf_readdir,
	.releasedir = nf_releasedir, .fsyncdir = nf_fsyncdir,
};
