/* preflight-netfs's parts (netfs.c has the design): the per-operation gate
 * and command line (netfs.c), the operations (netfs_ops.c). */
#ifndef PREFLIGHT_NETFS_H
#define PREFLIGHT_NETFS_H

#define FUSE_USE_VERSION 312
#include <fuse.h>

#include <semaphore.h>
#include <sys/types.h>

#define NETFS_MAX_GROUPS 256 /* a caller's supplementary groups beyond these are dropped: less access, never more */

struct netfs {
	int src;           /* SOURCE, O_RDONLY|O_DIRECTORY: every path resolves beneath it */
	long latency_us;   /* 0..1000000 */
	unsigned inflight; /* 1..1024 */
	int as_root;       /* daemon euid 0: path operations run as the caller */
	int ngroups;       /* the daemon's own supplementary groups, restored after each operation */
	gid_t groups[NETFS_MAX_GROUPS];
	sem_t slots;
};
extern struct netfs g;

/* Every operation starts with op_begin and ends with op_end, whatever
 * op_begin returned: waits for a slot, sleeps the latency while holding it,
 * and with as_caller (daemon root, caller not root) takes on the caller's
 * fsuid/fsgid/groups on this thread. Returns 0 or -errno; *switched tells
 * op_end to restore the daemon's credentials. */
int op_begin(int as_caller, int *switched);
int op_end(int switched, int rc);

extern const struct fuse_operations nf_ops;

#endif
