/* preflight-netfs's parts (netfs.c has the design): the per-operation gate
 * and command line (netfs.c), the operations (netfs_ops.c). */
#ifndef PREFLIGHT_NETFS_H
#define PREFLIGHT_NETFS_H

#define FUSE_USE_VERSION 312
#include <fuse.h>

#include <semaphore.h>
#include <stdint.h>
#include <sys/types.h>

#define NETFS_MAX_GROUPS 256 /* a caller's supplementary groups beyond these are dropped: less access, never more */

struct netfs {
	int src;           /* SOURCE, O_RDONLY|O_DIRECTORY: every path resolves beneath it */
	long latency_us;   /* 0..1000000 */
	unsigned inflight; /* 1..1024 */
	uint64_t bandwidth; /* bytes/s of read+write data across the mount, 0: no cap */
	int as_root;       /* daemon euid 0: path operations run as the caller */
	int ngroups;       /* the daemon's own supplementary groups, restored after each operation */
	gid_t groups[NETFS_MAX_GROUPS];
	sem_t slots;
};
extern struct netfs g;

/* The operations a --control rule can fail (netfs_fault.c). */
enum fault_op { FOP_NONE, FOP_READ, FOP_WRITE, FOP_FSYNC, FOP_OPEN, FOP_CREATE, FOP_MKDIR,
		FOP_UNLINK, FOP_RENAME, FOP_COUNT };

/* Every operation starts with op_begin and ends with op_end, whatever
 * op_begin returned: waits for a slot, sleeps the latency while holding it,
 * returns the injected fault for (op, path) if a rule names one, and with
 * as_caller (daemon root, caller not root) takes on the caller's
 * fsuid/fsgid/groups on this thread. Returns 0 or -errno; *switched tells
 * op_end to restore the daemon's credentials. */
int op_begin(enum fault_op op, const char *path, int as_caller, int *switched);
int op_end(int switched, int rc);

/* Holds the caller (still in its slot) until N more bytes of data fit the
 * --bandwidth cap; returns at once without a cap. */
void bw_take(size_t n);

/* CONTROL_PATH: absolute, or NULL for no fault injection. */
void fault_init(const char *control_path);
/* 0, or the -errno the first rule matching OP and PATH (NULL: "") names;
 * a "hold" rule first waits until it is gone (netfs_fault.c). */
int fault_check(enum fault_op op, const char *path);

extern const struct fuse_operations nf_ops;

#endif
