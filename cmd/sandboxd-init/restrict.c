/* The restrictions of the command's process, and the loopback. */
#define _GNU_SOURCE
#include "init.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/keyctl.h>
#include <linux/seccomp.h>

/* struct landlock_ruleset_attr up to scoped (ABI 6); the kernel takes the
 * shorter size of older ABIs. */
struct ll_ruleset_attr {
	uint64_t handled_fs, handled_net, scoped;
};

struct ll_path_beneath {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

#define LL_RULE_PATH_BENEATH 1

/* add_rule_fd grants access beneath fd, an O_PATH descriptor of what is
 * not a symlink; path only names it in errors. */
static int add_rule_fd(int ruleset, int fd, const char *path, uint64_t access)
{
	struct stat st;
	if (fstat(fd, &st))
		return fail(errno, "landlock rule %s", path);
	if (!S_ISDIR(st.st_mode))
		access &= LL_FILE_RIGHTS;
	struct ll_path_beneath pb = {.allowed_access = access, .parent_fd = fd};
	if (syscall(SYS_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &pb, 0))
		return fail(errno, "landlock_add_rule %s", path);
	return 0;
}

/*
 * open_no_symlinks opens path (absolute) with O_PATH, one component at a
 * time from the root, each from the one above without following a
 * symlink: ELOOP if any is one. Not openat2's RESOLVE_NO_SYMLINKS, which
 * an outer seccomp profile (a container runtime's, where the landlock set
 * is the one that works) may refuse.
 */
static int open_no_symlinks(const char *path)
{
	if (path[0] != '/') {
		errno = EINVAL;
		return -1;
	}
	int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	for (const char *c = path; fd >= 0;) {
		while (*c == '/')
			c++;
		if (!*c)
			return fd;
		const char *end = strchrnul(c, '/');
		char name[NAME_MAX + 1];
		size_t len = (size_t)(end - c);
		int e = 0;
		if (len > NAME_MAX)
			e = ENAMETOOLONG;
		else if (len == 2 && c[0] == '.' && c[1] == '.')
			/* The plan's paths are clean: one with a dot-dot is not
			 * what the daemon checked. */
			e = EINVAL;
		if (e) {
			close(fd);
			errno = e;
			return -1;
		}
		memcpy(name, c, len);
		name[len] = '\0';
		/* An intermediate component is opened as a directory, which
		 * triggers an automount there as a path walk would; a symlink
		 * then fails with ENOTDIR, reported as the ELOOP it is. */
		int last = !end[strspn(end, "/")];
		int next = openat(fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC | (last ? 0 : O_DIRECTORY));
		e = errno;
		struct stat st;
		if (next < 0 && e == ENOTDIR && !fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) && S_ISLNK(st.st_mode))
			e = ELOOP;
		close(fd);
		if (next >= 0 && fstat(next, &st))
			e = errno;
		else if (next >= 0 && !S_ISLNK(st.st_mode))
			e = 0;
		else if (next >= 0)
			e = ELOOP;
		if (next >= 0 && e) {
			close(next);
			next = -1;
		}
		fd = next;
		errno = e;
		c = end;
	}
	return -1;
}

/*
 * add_rule opens path refusing every symlink on the way: the daemon checked
 * the policy's paths when it planned, and a symlink swapped in since (a
 * rename exchange by anyone who can write the parent) would move the
 * grant to wherever it points.
 */
static int add_rule(int ruleset, const char *path, uint64_t access)
{
	int fd = open_no_symlinks(path);
	if (fd < 0 && errno == ENOENT)
		/* A granted path that does not exist grants nothing. */
		return 0;
	if (fd < 0 && errno == ELOOP)
		return fail(ELOOP, "landlock rule %s crosses a symlink", path);
	if (fd < 0)
		return fail(errno, "landlock rule %s", path);
	int r = add_rule_fd(ruleset, fd, path, access);
	close(fd);
	return r;
}

enum { EXCEPT_NONE, EXCEPT_EXACT, EXCEPT_BENEATH };

static int leads_to(const char *p, const struct plan *plan)
{
	int found = EXCEPT_NONE;
	size_t pl = strlen(p);
	for (size_t i = 0; i < plan->n_ll_except; i++) {
		const char *e = plan->ll_except[i];
		if (strcmp(e, p) == 0)
			return EXCEPT_EXACT;
		if (strncmp(e, p, pl) == 0 && e[pl] == '/')
			found = EXCEPT_BENEATH;
	}
	return found;
}

/*
 * hidden_by_except says whether fd, open on a file, lies at or beneath an
 * excepted path: Landlock does not govern stat or access, so a lookup the
 * init makes for the command must not tell it what exists there. Judged by
 * the path the kernel resolved, so no symlink or dot-dot leads around it.
 */
int hidden_by_except(int fd, const struct plan *p)
{
	char link[32], real[PATH_MAX];
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, real, sizeof real - 1);
	if (n < 0)
		/* Unknown is kept out. */
		return 1;
	real[n] = '\0';
	for (size_t i = 0; i < p->n_ll_except; i++) {
		size_t el = strlen(p->ll_except[i]);
		if (strncmp(real, p->ll_except[i], el) == 0 && (real[el] == '\0' || real[el] == '/'))
			return 1;
	}
	return 0;
}

/*
 * grant_except grants access beneath each entry of dir (name, opened from
 * parent), descending into the entries that lead to an excepted path and
 * skipping the excepted ones: Landlock cannot take a right away beneath a
 * rule. Every level is opened from the one above without following a
 * symlink, so an entry swapped for one after it was listed grants nothing
 * beyond its own inode.
 */
static int grant_except(int ruleset, int parent, const char *name, const char *dir, const struct plan *p)
{
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == EACCES) {
		int pfd = openat(parent, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (pfd < 0 && errno == EACCES)
			/* In a directory that can be listed but not searched:
			 * nothing beneath is reachable. */
			return 0;
		if (pfd < 0)
			return fail(errno, "landlock: list %s: open %s", dir, dir);
		int r = 0;
		if (faccessat(pfd, ".", X_OK, 0))
			/* Not searchable: nothing beneath is reachable anyway. */
			;
		else if (p->flags & FLAG_STRICT)
			/* Searchable but not listable: the directory would be
			 * granted whole, and the excepted path beneath rests on
			 * the mount layer alone, if there is one. */
			r = fail(EACCES, "landlock: cannot list %s to keep a deny path beneath it unreadable: open %s", dir, dir);
		else
			r = add_rule_fd(ruleset, pfd, dir, p->ll_read_access);
		close(pfd);
		return r;
	}
	if (fd < 0)
		return fail(errno, "landlock: list %s: open %s", dir, dir);
	/* Read with getdents64 rather than readdir, whose buffer would come
	 * from the heap: this process shares the init's memory. */
	char dents[4096] __attribute__((aligned(8)));
	int r = 0;
	ssize_t n = 0, off = 0;
	while (!r) {
		if (off >= n) {
			if ((n = getdents64(fd, dents, sizeof dents)) <= 0)
				break;
			off = 0;
		}
		const struct dirent64 *e = (const struct dirent64 *)(dents + off);
		off += e->d_reclen;
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		char path[PATH_MAX];
		if (snprintf(path, sizeof path, "%s/%s", strcmp(dir, "/") == 0 ? "" : dir, e->d_name) >= (int)sizeof path) {
			r = fail(ENAMETOOLONG, "landlock: list %s", dir);
			break;
		}
		switch (leads_to(path, p)) {
		case EXCEPT_EXACT:
			break;
		case EXCEPT_BENEATH:
			r = grant_except(ruleset, fd, e->d_name, path, p);
			break;
		default: {
			/* A symlink's inode grants nothing; following it here could
			 * grant the tree an excepted path lives in. */
			int efd = openat(fd, e->d_name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
			if (efd < 0 && (errno == ENOENT || errno == EACCES))
				/* Gone since the listing, or in a directory that
				 * cannot be searched: nothing to reach. */
				break;
			if (efd < 0) {
				r = fail(errno, "landlock rule %s", path);
				break;
			}
			/* One that cannot be stat'ed (another user's FUSE
			 * mount, a dead network mount) is granted nothing, as
			 * a symlink is: failing here would fail every launch
			 * beside a deny path in the same directory. */
			struct stat st;
			if (fstat(efd, &st) == 0 && !S_ISLNK(st.st_mode))
				r = add_rule_fd(ruleset, efd, path, p->ll_read_access);
			close(efd);
		}
		}
	}
	close(fd);
	return r;
}

int apply_landlock(const struct plan *p)
{
	if (p->ll_abi == 0 || p->ll_abi > INT32_MAX)
		return 0;
	struct ll_ruleset_attr attr = {.handled_fs = p->ll_handled, .scoped = p->ll_scoped};
	size_t size = p->ll_abi < 6 ? 16 : sizeof attr;
	int fd = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
	if (fd < 0)
		return fail(errno, "landlock_create_ruleset");
	int r = 0;
	for (size_t i = 0; i < p->n_ll_rules && !r; i++)
		r = add_rule(fd, p->ll_rules[i].path, p->ll_rules[i].access);
	if (!r && p->n_ll_except > 0)
		r = grant_except(fd, AT_FDCWD, "/", "/", p);
	if (!r && syscall(SYS_landlock_restrict_self, fd, 0))
		r = fail(errno, "landlock_restrict_self");
	close(fd);
	return r;
}

int apply_seccomp(const struct plan *p, int *listener)
{
	*listener = -1;
	if (p->n_seccomp == 0)
		/* Only the namespaces set plans no filter, on a host without
		 * seccomp, for policies no field of which rests on it. */
		return 0;
	struct sock_filter *f = setup_alloc(p->n_seccomp * sizeof *f);
	if (!f)
		return fail(ENOMEM, "seccomp");
	for (size_t i = 0; i < p->n_seccomp; i++) {
		f[i].code = p->seccomp[i].code;
		f[i].jt = p->seccomp[i].jt;
		f[i].jf = p->seccomp[i].jf;
		f[i].k = p->seccomp[i].k;
	}
	struct sock_fprog prog = {.len = (unsigned short)p->n_seccomp, .filter = f};
	unsigned long flags = (p->flags & FLAG_LISTENER) ? SECCOMP_FILTER_FLAG_NEW_LISTENER : 0;
	long r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
	int e = errno;
	if (r < 0)
		return fail(e, "seccomp(SET_MODE_FILTER)");
	if (p->flags & FLAG_LISTENER)
		*listener = (int)r;
	return 0;
}

/*
 * own_keyring gives the command a new anonymous session keyring when no
 * seccomp filter denies it the key calls: the daemon's session keyring,
 * inherited down to the init, would otherwise be the command's, with
 * every key it holds. Not under a filter: each session keyring counts
 * against its user's key quota (200 for a user other than root), which
 * would cap the daemon's sessions. A keyring it cannot make (EDQUOT)
 * fails the launch.
 */
int own_keyring(const struct plan *p)
{
	if (p->n_seccomp > 0)
		return 0;
	if (syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, NULL, 0, 0, 0) >= 0)
		return 0;
	if (errno != ENOSYS)
		return fail(errno, "keyctl(KEYCTL_JOIN_SESSION_KEYRING)");
	/* A kernel without keys (CONFIG_KEYS=n) has no keyring to leak. One
	 * with keys answers add_key's NULL type with EFAULT, so an outer
	 * filter faking ENOSYS for keyctl alone does not pass for it. */
	if (syscall(SYS_add_key, NULL, NULL, NULL, 0, KEY_SPEC_SESSION_KEYRING) < 0 && errno == ENOSYS)
		return 0;
	return fail(ENOSYS, "keyctl(KEYCTL_JOIN_SESSION_KEYRING), where add_key is there");
}

/*
 * drop_bounding_set empties the bounding set, which needs CAP_SETPCAP. A
 * capability is dropped with a call of its own, each replacing the
 * process's credentials; the first unknown one ends the list.
 */
int drop_bounding_set(int optional)
{
	for (int c = 0; c <= 63; c++) {
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) == 0)
			continue;
		if (errno == EINVAL || (optional && errno == EPERM))
			break;
		return fail(errno, "PR_CAPBSET_DROP %d", c);
	}
	return 0;
}

/*
 * drop_capabilities empties the bounding set (unless bounding_done says it
 * is empty already), then the ambient, inheritable, permitted and
 * effective sets: the bounding set needs CAP_SETPCAP, which the last step
 * gives up. A namespace-less init never had CAP_SETPCAP: its bounding set
 * stays, which no_new_privs makes moot.
 */
int drop_capabilities(int bounding_optional, int bounding_done)
{
	if (!bounding_done && drop_bounding_set(bounding_optional))
		return -1;
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0))
		return fail(errno, "PR_CAP_AMBIENT_CLEAR_ALL");
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[2];
	memset(data, 0, sizeof data);
	if (syscall(SYS_capset, &hdr, data))
		return fail(errno, "capset");
	return 0;
}

/* loopback_up brings lo up in the sandbox's network namespace; the kernel
 * assigns 127.0.0.1 and ::1 itself. */
int loopback_up(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return fail(errno, "socket");
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	strcpy(ifr.ifr_name, "lo");
	int r = 0;
	if (ioctl(fd, SIOCGIFFLAGS, &ifr))
		r = fail(errno, "SIOCGIFFLAGS lo");
	else {
		ifr.ifr_flags = (short)(ifr.ifr_flags | IFF_UP);
		if (ioctl(fd, SIOCSIFFLAGS, &ifr))
			r = fail(errno, "SIOCSIFFLAGS lo");
	}
	close(fd);
	return r;
}
