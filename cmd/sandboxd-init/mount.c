/*
 * Building the sandbox's root with the file-descriptor based mount API:
 * every source and target is opened with openat2 first, so that a symlink
 * swapped in by someone else cannot redirect a mount outside the new root.
 */
#define _GNU_SOURCE
#include "init.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/mount.h>
#include <linux/openat2.h>

#define BASE_DIR "/tmp"
#define OLD_ROOT "/oldroot"
#define NEW_ROOT "/newroot"
#define MASK_FILE "/mask"
#define MASK_DIR "/mask-dir"

#define IN_ROOT (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)
#define NO_SYMLINKS (RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS)
#define ATTR_READ_ONLY (MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)

struct builder {
	const struct plan *plan;
	int old_root, new_root;
	/* mapped[i] is what the daemon sent for step i, an ID-mapped clone or
	 * a shared file's mount, -1 for the others. */
	int *mapped;
	/* uncreatable are placeholders the init could not create for lack of
	 * permission. The command has strictly fewer rights than the init,
	 * so it cannot create them either: there is nothing to protect. */
	const char **uncreatable;
	size_t n_uncreatable;
	/* files and dirs count the file steps and the writable directory
	 * steps applied, to name their files and directories. */
	int files, dirs;
	/* skipped counts the optional steps passed over for a missing
	 * target. */
	int skipped;
	/* mount_point is a file this builder made as a mount point in the
	 * init's tmpfs, whose device is own_dev; -1 before the first. */
	int mount_point;
	dev_t own_dev;
	/* root_bound says a bind covers the read-only clone of the host's
	 * root, which stays mounted beneath it. */
	int root_bound;
	/* parent is a directory of the init's tmpfs that a step made or
	 * bound something in, parent_path its name in the new root as
	 * resolved with parent_resolve; -1 for none. The steps of /dev
	 * each make a name in it, and keep it instead of resolving it
	 * anew. Only the init writes there, and a mount on a name in it
	 * leaves it as it was: any other mount in the new root (on it, or
	 * above it) lets it go, and the next step resolves afresh.
	 * target_kept says the last target open_target returned is a name
	 * in parent. */
	int parent;
	uint64_t parent_resolve;
	char parent_path[PATH_MAX];
	int target_kept;
};

static int open_in(int root, const char *name, uint64_t resolve)
{
	while (*name == '/')
		name++;
	if (!*name)
		name = ".";
	struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = resolve};
	int fd = (int)syscall(SYS_openat2, root, name, &how, sizeof how);
	if (fd < 0)
		return fail_errno(errno);
	return fd;
}

/* attach_clone clones the mount tree at src (recursively), applies attr to
 * every mount of the clone and attaches it on top of dst. */
static int attach_clone(int src, int dst, uint64_t attr)
{
	int tree = (int)syscall(SYS_open_tree, src, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH);
	if (tree < 0)
		return fail(errno, "open_tree");
	int r = 0;
	if (attr) {
		struct mount_attr a = {.attr_set = attr};
		if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof a))
			r = fail(errno, "mount_setattr");
	}
	if (!r && syscall(SYS_move_mount, tree, "", dst, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH))
		r = fail(errno, "move_mount");
	close(tree);
	return r;
}

struct fs_opt {
	const char *key, *value; /* value NULL: a flag */
};

static int attach_new(const char *fstype, const struct fs_opt *opts, size_t n, unsigned int attr, int dst)
{
	int fs = (int)syscall(SYS_fsopen, fstype, FSOPEN_CLOEXEC);
	if (fs < 0)
		return fail(errno, "fsopen %s", fstype);
	int r = 0;
	for (size_t i = 0; i < n && !r; i++) {
		long e = opts[i].value ? syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, opts[i].key, opts[i].value, 0)
				       : syscall(SYS_fsconfig, fs, FSCONFIG_SET_FLAG, opts[i].key, NULL, 0);
		if (e)
			r = fail(errno, "fsconfig %s %s=%s", fstype, opts[i].key, opts[i].value ? opts[i].value : "");
	}
	if (!r && syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0))
		r = fail(errno, "fsconfig create %s", fstype);
	if (!r) {
		int m = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, attr);
		if (m < 0) {
			r = fail(errno, "fsmount %s", fstype);
		} else {
			if (syscall(SYS_move_mount, m, "", dst, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH))
				r = fail(errno, "move_mount %s", fstype);
			close(m);
		}
	}
	close(fs);
	return r;
}

static int open_beneath(int dir, const char *name)
{
	struct open_how how = {.flags = O_DIRECTORY | O_RDONLY | O_CLOEXEC, .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS};
	return (int)syscall(SYS_openat2, dir, name, &how, sizeof how);
}

/* mkdir_all_nosymlinks creates path beneath root, refusing to walk
 * through any symlink or "..", so that a racing rename cannot make it
 * create directories elsewhere. */
static int mkdir_all_nosymlinks(int root, const char *path)
{
	int dir = openat(root, ".", O_DIRECTORY | O_RDONLY | O_CLOEXEC);
	if (dir < 0)
		return fail_errno(errno);
	char comp[NAME_MAX + 1];
	const char *s = path;
	for (;;) {
		while (*s == '/')
			s++;
		if (!*s)
			break;
		size_t l = strcspn(s, "/");
		if (l > NAME_MAX) {
			close(dir);
			return fail(ENAMETOOLONG, "open %.*s", (int)l, s);
		}
		memcpy(comp, s, l);
		comp[l] = '\0';
		s += l;
		int next = open_beneath(dir, comp);
		if (next < 0 && errno == ENOENT) {
			if (mkdirat(dir, comp, 0755) && errno != EEXIST) {
				int e = errno;
				close(dir);
				return fail(e, "mkdir %s", comp);
			}
			next = open_beneath(dir, comp);
		}
		int e = errno;
		close(dir);
		if (next < 0)
			return fail(e, "open %s", comp);
		dir = next;
	}
	close(dir);
	return 0;
}

static void let_parent_go(struct builder *b)
{
	if (b->parent >= 0)
		close(b->parent);
	b->parent = -1;
}

/* serves says the kept parent is the directory path resolves to with
 * resolve: resolved without following a symlink, it is what following
 * them finds too. */
static int serves(const struct builder *b, const char *path, uint64_t resolve)
{
	return b->parent >= 0 && (b->parent_resolve == resolve || b->parent_resolve == NO_SYMLINKS) && strcmp(b->parent_path, path) == 0;
}

/* plain_path says path has no empty, "." or ".." component: only such a
 * spelling names one directory whatever is mounted since on a name
 * beneath it, which keeping a directory by its spelling relies on. */
static int plain_path(const char *path)
{
	for (const char *p = path; *p;) {
		while (*p == '/')
			p++;
		const char *end = strchrnul(p, '/');
		size_t n = (size_t)(end - p);
		if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return 0;
		if (*end == '/' && end[1] == '/')
			return 0;
		p = end;
	}
	return 1;
}

/* parent_dir opens the directory path of the new root, or returns the
 * one kept, which stays the builder's (*kept says so); own says it is of
 * the init's tmpfs. */
static int parent_dir(struct builder *b, const char *path, uint64_t resolve, int *kept, int *own)
{
	*kept = 0;
	if (serves(b, path, resolve)) {
		*kept = *own = 1;
		return b->parent;
	}
	int fd = open_in(b->new_root, path, resolve);
	if (fd < 0)
		return -1;
	struct stat st;
	*own = fstat(fd, &st) == 0 && st.st_dev == b->own_dev;
	if (*own && strlen(path) < sizeof b->parent_path && plain_path(path)) {
		let_parent_go(b);
		b->parent = fd;
		b->parent_resolve = resolve;
		strcpy(b->parent_path, path);
		*kept = 1;
	}
	return fd;
}

/* open_named opens target, whose parent is pdir_path and last component
 * base: in the kept parent when it is that directory and base a plain
 * name, else resolved from the new root. In the parent, base is opened
 * without following a symlink; one that is a symlink is resolved from
 * the root as ever, so that a name missing there is missing both ways. */
static int open_named(struct builder *b, const char *target, const char *pdir_path, const char *base, uint64_t resolve)
{
	b->target_kept = 0;
	if (serves(b, pdir_path, resolve) && *base &&
	    strcmp(base, ".") != 0 && strcmp(base, "..") != 0) {
		struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS};
		int fd = (int)syscall(SYS_openat2, b->parent, base, &how, sizeof how);
		if (fd >= 0) {
			b->target_kept = 1;
			return fd;
		}
		if (errno == ENOENT)
			return fail_errno(errno);
	}
	return open_in(b->new_root, target, resolve);
}

static int reopen_new_root(struct builder *b)
{
	let_parent_go(b);
	int fd = open(NEW_ROOT, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return fail(errno, "open %s", NEW_ROOT);
	if (b->new_root >= 0)
		close(b->new_root);
	b->new_root = fd;
	return 0;
}

/* policy_path: steps whose target a policy named (or an ancestor of one);
 * system paths such as /dev/ptmx may be symlinks, these may not. */
static int policy_path(const struct mount_step *s)
{
	return strncmp(s->field, "filesystem.", 11) == 0;
}

/* protects: steps that only take access away; when their target is out of
 * the sandbox's reach, skipping them changes nothing. */
static int protects(const struct mount_step *s)
{
	return strcmp(s->field, "filesystem.deny") == 0 || strcmp(s->field, "filesystem.read_only") == 0 || s->kind == MK_MASK_FILE;
}

/* overflow_uid is the uid the kernel shows for owners a user namespace
 * does not map. */
static uid_t overflow_uid(void)
{
	char buf[32];
	ssize_t n = -1;
	int fd = open(OLD_ROOT "/proc/sys/kernel/overflowuid", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof buf - 1);
		close(fd);
	}
	if (n <= 0)
		return 65534;
	buf[n] = '\0';
	char *end;
	unsigned long u = strtoul(buf, &end, 10);
	return end == buf ? 65534 : (uid_t)u;
}

/*
 * unreachable: the command can never reach name. Walking down, the first
 * directory that refuses to be searched (or, for a path not there yet, the
 * directory it would be made in) does not belong to the sandbox uid, whose
 * owner could chmod it open. The init failing alone says nothing: its
 * capabilities do not cover a directory of the sandbox uid with a group
 * outside the user namespace.
 */
static int unreachable(struct builder *b, const char *name)
{
	uid_t uid = getuid();
	if (uid == overflow_uid())
		/* Every unmapped owner shows as our own uid. */
		return 0;
	struct stat parent, st;
	if (fstat(b->old_root, &parent))
		return 0;
	char p[PATH_MAX];
	size_t pl = 0;
	const char *s = name;
	for (;;) {
		while (*s == '/')
			s++;
		if (!*s)
			return 0;
		size_t l = strcspn(s, "/");
		if (pl + l + 2 > sizeof p)
			return 0;
		if (pl)
			p[pl++] = '/';
		memcpy(p + pl, s, l);
		pl += l;
		p[pl] = '\0';
		s += l;
		if (fstatat(b->old_root, p, &st, AT_SYMLINK_NOFOLLOW)) {
			if (errno == EACCES || errno == ENOENT)
				return parent.st_uid != uid;
			return 0;
		}
		parent = st;
	}
}

static int is_uncreatable(struct builder *b, const char *path)
{
	for (size_t i = 0; i < b->n_uncreatable; i++)
		if (strcmp(b->uncreatable[i], path) == 0)
			return 1;
	return 0;
}

/* mapped_fd is the ID-mapped clone of source; a shared step's mount,
 * also in mapped, is the daemon's file, never a clone to bind or to make
 * placeholders through. */
static int mapped_fd(struct builder *b, const char *source)
{
	for (size_t i = 0; i < b->plan->n_mounts; i++)
		if (b->mapped[i] >= 0 && b->plan->mounts[i].idmapped && strcmp(b->plan->mounts[i].source, source) == 0)
			return b->mapped[i];
	return -1;
}

static void dir_and_base(const char *path, char *dir, size_t dl, const char **base)
{
	const char *slash = strrchr(path, '/');
	if (!slash || slash == path)
		snprintf(dir, dl, "/");
	else
		snprintf(dir, dl, "%.*s", (int)(slash - path), path);
	*base = slash ? slash + 1 : path;
}

/* own_tmpfs is the device of the init's tmpfs, its root since
 * prepare_root; 0, which no filesystem has, if it cannot tell. */
static dev_t own_tmpfs(void)
{
	struct stat st;
	return stat("/", &st) == 0 ? st.st_dev : 0;
}

/*
 * make_file_mount_point makes the file base in pdir for a mount to cover.
 * In the init's tmpfs a mount point is no more than a name, whose inode the
 * mount hides for the session's life: there, every one after the first is
 * a link to the first (the device nodes of /dev are six), which spares the
 * session an inode apiece. Anywhere else, a write root on the host's disk
 * say, each is a file of its own, as files left behind must be; so too
 * where a link cannot be made (another mount of the tmpfs, or a kernel
 * that links from an fd only for CAP_DAC_READ_SEARCH in the host's user
 * namespace, as those before 6.10 do).
 */
static int make_file_mount_point(struct builder *b, int pdir, int own, const char *base)
{
	if (own && b->mount_point >= 0 && linkat(b->mount_point, "", pdir, base, AT_EMPTY_PATH) == 0)
		return 0;
	int fd = openat(pdir, base, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	if (!own)
		return close(fd);
	if (b->mount_point >= 0)
		close(b->mount_point);
	b->mount_point = fd;
	return 0;
}

/* open_target opens the mount point inside the new root, creating it when
 * it is missing and its parent is a tmpfs of ours (a write root under the
 * private /tmp, say). A bind whose mount point it made leaves the open
 * source in *src, for the bind to use; -1 there otherwise. */
static int open_target(struct builder *b, const struct mount_step *s, int *src)
{
	*src = -1;
	uint64_t resolve = policy_path(s) ? NO_SYMLINKS : IN_ROOT;
	char pdir_path[PATH_MAX];
	const char *base;
	dir_and_base(s->target, pdir_path, sizeof pdir_path, &base);
	int fd = open_named(b, s->target, pdir_path, base, resolve);
	if (fd >= 0 || err.no != ENOENT || s->optional)
		return fd;
	int dir = 1;
	if (s->kind == MK_BIND || s->kind == MK_DEVICE) {
		struct stat st;
		if (s->idmapped) {
			char path[PATH_MAX];
			snprintf(path, sizeof path, OLD_ROOT "%s", s->source);
			if (stat(path, &st))
				return fail_errno(errno);
		} else {
			*src = open_in(b->old_root, s->source, NO_SYMLINKS);
			if (*src < 0)
				return -1;
			if (fstat(*src, &st)) {
				int e = errno;
				close(*src);
				*src = -1;
				return fail_errno(e);
			}
		}
		dir = S_ISDIR(st.st_mode);
	}
	int kept, own;
	int parent = parent_dir(b, pdir_path, resolve, &kept, &own);
	if (parent < 0 && err.no == ENOENT) {
		/* Missing parents can only be made in a tmpfs of ours; in the
		 * read-only clone of the host this fails with EROFS, as it
		 * should. They are made without following a symlink: a path
		 * the plan names may run through a tree its caller controls. */
		if (mkdir_all_nosymlinks(b->new_root, pdir_path))
			return wrap("create mount point parents in %s", NEW_ROOT);
		parent = parent_dir(b, pdir_path, resolve, &kept, &own);
	}
	if (parent < 0)
		return -1;
	int r = dir ? mkdirat(parent, base, 0755) : make_file_mount_point(b, parent, own, base);
	int e = errno;
	if (!kept)
		close(parent);
	if (r)
		return fail(e, "create mount point");
	return open_named(b, s->target, pdir_path, base, resolve);
}

static int write_file(const char *name, const char *content, size_t len, mode_t mode)
{
	int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		return fail(errno, "open %s", name);
	while (len > 0) {
		ssize_t w = write(fd, content, len);
		if (w < 0) {
			int e = errno;
			close(fd);
			return fail(e, "write %s", name);
		}
		content += w;
		len -= (size_t)w;
	}
	return close(fd);
}

static int root_read_only(struct builder *b, const struct mount_step *s)
{
	int src = open_in(b->old_root, s->source, NO_SYMLINKS);
	if (src < 0)
		return wrap("open source");
	int dst = open(NEW_ROOT, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dst < 0) {
		close(src);
		return fail(errno, "open %s", NEW_ROOT);
	}
	int r = attach_clone(src, dst, ATTR_READ_ONLY);
	close(src);
	close(dst);
	return r ? r : reopen_new_root(b);
}

/* own_dir opens the directory name of the init's tmpfs, with mode
 * exactly (mkdir's is cut by the umask); shared says one made before will
 * do. */
static int own_dir(const char *name, uint32_t mode, int shared)
{
	if (mkdir(name, 0) == 0) {
		if (chmod(name, mode))
			return fail(errno, "chmod %s", name);
	} else if (!shared || errno != EEXIST) {
		return fail(errno, "mkdir %s", name);
	}
	int fd = open(name, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? fail(errno, "open %s", name) : fd;
}

static int apply(struct builder *b, const struct mount_step *s)
{
	if (s->kind == MK_ROOT_RO)
		return root_read_only(b, s);
	if (b->new_root < 0)
		return fail_msg("plan does not start with the root mount");
	if (is_uncreatable(b, s->target))
		return 0;
	if (s->kind == MK_PLACEHOLDER) {
		if (*s->via) {
			/* The init has no more right through the mapping than the
			 * command will: what it cannot make, neither can the
			 * command. */
			size_t vl = strlen(s->via);
			const char *rest = strncmp(s->source, s->via, vl) == 0 ? s->source + vl : s->source;
			int r = mkdir_all_nosymlinks(mapped_fd(b, s->via), rest);
			if (r && (err.no == EACCES || err.no == EPERM)) {
				b->uncreatable[b->n_uncreatable++] = s->source;
				return 0;
			}
			return r;
		}
		int r = mkdir_all_nosymlinks(b->old_root, s->source);
		if (r && (err.no == EACCES || err.no == EPERM) && unreachable(b, s->source)) {
			b->uncreatable[b->n_uncreatable++] = s->source;
			return 0;
		}
		return r;
	}
	if (s->kind == MK_SYMLINK) {
		/* Made in its parent as resolved within the new root, as the
		 * mount points are. */
		char pdir_path[PATH_MAX];
		const char *base;
		dir_and_base(s->target, pdir_path, sizeof pdir_path, &base);
		int kept, own;
		int parent = parent_dir(b, pdir_path, policy_path(s) ? NO_SYMLINKS : IN_ROOT, &kept, &own);
		if (parent < 0)
			return wrap("open %s", pdir_path);
		int r = symlinkat(s->source, parent, base);
		int e = errno;
		if (!kept)
			close(parent);
		return r ? fail(e, "symlink %s %s", s->source, s->target) : 0;
	}
	int src = -1;
	int target = open_target(b, s, &src);
	if (target < 0) {
		if (src >= 0)
			close(src);
		if (s->optional && err.no == ENOENT) {
			b->skipped++;
			return 0;
		}
		if (err.no == EACCES && protects(s) && unreachable(b, s->target))
			return 0;
		return wrap("open target");
	}
	int r = 0;
	switch (s->kind) {
	case MK_BIND:
	case MK_DEVICE:
		if (s->idmapped) {
			/* NOSUID and NODEV were set with the mapping. */
			if (syscall(SYS_move_mount, mapped_fd(b, s->source), "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH))
				r = fail(errno, "move_mount of the ID-mapped clone");
			break;
		}
		if (src < 0)
			src = open_in(b->old_root, s->source, NO_SYMLINKS);
		if (src < 0) {
			r = wrap("open source");
			break;
		}
		/* Writable is not a way to run setuid programs or reach devices. */
		r = attach_clone(src, target, s->kind == MK_DEVICE ? MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC : MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
		if (!r && names_root(s->target)) {
			b->root_bound = 1;
			/* Lookups from a directory fd do not cross a mount stacked
			 * on that directory itself: later steps start from the
			 * new top. */
			r = reopen_new_root(b);
		}
		break;
	case MK_REBIND_RO:
		r = attach_clone(target, target, ATTR_READ_ONLY);
		break;
	case MK_PIN:
		r = attach_clone(target, target, 0);
		break;
	case MK_FILE: {
		/* The daemon's file, shared by its sessions, came as a mount
		 * made read-only, noexec, nosuid and nodev: attached as it is,
		 * with no name looked up on the way. */
		if (s->shared) {
			if (syscall(SYS_move_mount, b->mapped[s - b->plan->mounts], "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH))
				r = fail(errno, "move_mount of the daemon's file");
			break;
		}
		/* In the init's tmpfs, which the sandbox never sees but through
		 * this read-only bind. */
		char name[32];
		snprintf(name, sizeof name, "/file-%d", b->files++);
		if ((r = write_file(name, s->content, s->content_len, 0644)))
			break;
		src = open(name, O_PATH | O_CLOEXEC);
		r = src < 0 ? fail_errno(errno) : attach_clone(src, target, ATTR_READ_ONLY | MOUNT_ATTR_NOEXEC);
		break;
	}
	case MK_MASK_FILE:
		src = open(MASK_FILE, O_PATH | O_CLOEXEC);
		r = src < 0 ? fail_errno(errno) : attach_clone(src, target, ATTR_READ_ONLY | MOUNT_ATTR_NOEXEC);
		break;
	case MK_TMPFS: {
		/*
		 * A directory of the init's tmpfs, rather than a tmpfs apiece,
		 * each with a superblock, a root inode, a shrinker and per-CPU
		 * counters to keep for as long as the session lasts. Bound
		 * read-only, one empty directory of the mode hides what is
		 * beneath as an empty read-only tmpfs would; bound writable, a
		 * fresh one is the sandbox's own /dev, /dev/shm or /tmp, whose
		 * ".." leads to its mount point, never into the init's tmpfs.
		 */
		char name[32];
		if (s->read_only)
			snprintf(name, sizeof name, MASK_DIR "-%o", s->mode);
		else
			snprintf(name, sizeof name, "/dir-%d", b->dirs++);
		src = own_dir(name, s->mode, s->read_only);
		r = src < 0 ? -1 : attach_clone(src, target, s->read_only ? ATTR_READ_ONLY | MOUNT_ATTR_NOEXEC : MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
		break;
	}
	case MK_PROC:
		r = attach_new("proc", NULL, 0, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, target);
		break;
	case MK_DEVPTS: {
		struct fs_opt opts[] = {{"newinstance", NULL}, {"ptmxmode", "0666"}, {"mode", "0620"}};
		r = attach_new("devpts", opts, 3, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, target);
		break;
	}
	default:
		r = fail_msg("unknown mount step %d", s->kind);
	}
	if (src >= 0)
		close(src);
	close(target);
	if (!b->target_kept)
		let_parent_go(b);
	return r;
}

/*
 * The steps of /proc and of /dev, as the planner (launcher_linux/plan.go)
 * puts them in every plan with namespaces. An init started ahead of its
 * launch applies them before its plan comes, beside the sandbox's root to
 * be (stage_system), and a plan whose steps there are exactly these takes
 * the finished tree with one move (take_staged) instead of some thirty
 * mount calls on the launch's path. Any other plan is applied step by
 * step as ever: the planner alone decides what a sandbox gets.
 */
#define STEP(k, src, tgt, m, ro, opt, fld)                                                                            \
	{                                                                                                             \
		.kind = (k), .read_only = (ro), .optional = (opt), .mode = (m), .source = (src), .target = (tgt),    \
		.content = "", .field = (fld), .via = ""                                                               \
	}
static const struct mount_step proc_steps[] = {
	STEP(MK_PROC, "", "/proc", 0, 0, 0, "process"),
	STEP(MK_REBIND_RO, "", "/proc/bus", 0, 0, 1, "process"),
	STEP(MK_REBIND_RO, "", "/proc/fs", 0, 0, 1, "process"),
	STEP(MK_REBIND_RO, "", "/proc/irq", 0, 0, 1, "process"),
	STEP(MK_REBIND_RO, "", "/proc/sys", 0, 0, 1, "process"),
	STEP(MK_REBIND_RO, "", "/proc/sysrq-trigger", 0, 0, 1, "process"),
	STEP(MK_MASK_FILE, "", "/proc/kcore", 0, 0, 1, "process"),
	STEP(MK_MASK_FILE, "", "/proc/keys", 0, 0, 1, "process"),
	STEP(MK_MASK_FILE, "", "/proc/latency_stats", 0, 0, 1, "process"),
	STEP(MK_MASK_FILE, "", "/proc/timer_list", 0, 0, 1, "process"),
	STEP(MK_MASK_FILE, "", "/proc/timer_stats", 0, 0, 1, "process"),
	STEP(MK_MASK_FILE, "", "/proc/sched_debug", 0, 0, 1, "process"),
	STEP(MK_MASK_FILE, "", "/proc/kmsg", 0, 0, 1, "process"),
	STEP(MK_TMPFS, "", "/proc/acpi", 0, 1, 1, "process"),
	STEP(MK_TMPFS, "", "/proc/scsi", 0, 1, 1, "process"),
};
static const struct mount_step dev_steps[] = {
	STEP(MK_TMPFS, "", "/dev", 0755, 0, 0, "process"),
	STEP(MK_DEVICE, "/dev/null", "/dev/null", 0, 0, 0, "process"),
	STEP(MK_DEVICE, "/dev/zero", "/dev/zero", 0, 0, 0, "process"),
	STEP(MK_DEVICE, "/dev/full", "/dev/full", 0, 0, 0, "process"),
	STEP(MK_DEVICE, "/dev/random", "/dev/random", 0, 0, 0, "process"),
	STEP(MK_DEVICE, "/dev/urandom", "/dev/urandom", 0, 0, 0, "process"),
	STEP(MK_DEVICE, "/dev/tty", "/dev/tty", 0, 0, 0, "process"),
	STEP(MK_DEVPTS, "", "/dev/pts", 0, 0, 0, "process"),
	STEP(MK_TMPFS, "", "/dev/shm", 01777, 0, 0, "filesystem.write"),
	STEP(MK_SYMLINK, "pts/ptmx", "/dev/ptmx", 0, 0, 0, "process"),
	STEP(MK_SYMLINK, "/proc/self/fd", "/dev/fd", 0, 0, 0, "process"),
	STEP(MK_SYMLINK, "/proc/self/fd/0", "/dev/stdin", 0, 0, 0, "process"),
	STEP(MK_SYMLINK, "/proc/self/fd/1", "/dev/stdout", 0, 0, 0, "process"),
	STEP(MK_SYMLINK, "/proc/self/fd/2", "/dev/stderr", 0, 0, 0, "process"),
};
#undef STEP

#define MAX_STAGED_STEPS 16
struct stage {
	const struct mount_step *steps;
	size_t n;
	/* fd is the staged tree's top mount, -1 when there is none (not
	 * staged, or taken). */
	int fd;
	/* skipped[j] says step j was optional and its target missing when
	 * staged: a /proc entry may appear since (a module loaded, say), and
	 * then the staged tree lacks a mask the plan's steps would apply. */
	unsigned char skipped[MAX_STAGED_STEPS];
};
_Static_assert(sizeof proc_steps / sizeof proc_steps[0] <= MAX_STAGED_STEPS, "a stage's skipped steps must fit");
_Static_assert(sizeof dev_steps / sizeof dev_steps[0] <= MAX_STAGED_STEPS, "a stage's skipped steps must fit");

/*
 * What staging leaves for the launch, in a page of its own (the
 * alignment makes the block a whole page): written before the plan
 * comes, it would otherwise keep dirty the C library's page it shared,
 * for as long as the idle init lasts; release_staging gives it back.
 * dirs and files are the names of the init's tmpfs the staging used,
 * which the plan's own steps do not use again.
 */
static struct __attribute__((aligned(4096))) {
	struct stage stages[2];
	int dirs, files;
} staging = {
	.stages = {
		{.steps = proc_steps, .n = sizeof proc_steps / sizeof proc_steps[0], .fd = -1},
		{.steps = dev_steps, .n = sizeof dev_steps / sizeof dev_steps[0], .fd = -1},
	},
};
_Static_assert(sizeof staging == 4096, "staging fills one page");
#define stages (staging.stages)

void release_staging(void)
{
	madvise(&staging, sizeof staging, MADV_DONTNEED);
}

void stage_system(int old_root)
{
	int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return;
	/* Their targets are the same paths beneath the init's tmpfs. */
	struct builder b = {.old_root = old_root, .new_root = root, .mount_point = -1, .own_dev = own_tmpfs(), .parent = -1};
	for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++) {
		struct stage *st = &stages[i];
		size_t j = 0;
		for (; j < st->n; j++) {
			int before = b.skipped;
			if (apply(&b, &st->steps[j]))
				break;
			st->skipped[j] = b.skipped != before;
		}
		if (j == st->n)
			st->fd = open_in(root, st->steps[0].target, IN_ROOT);
		else if (j > 0)
			/* Half of it: the plan builds its own, under names of its
			 * own. */
			umount2(st->steps[0].target, MNT_DETACH);
		let_parent_go(&b);
	}
	staging.dirs = b.dirs;
	staging.files = b.files;
	if (b.mount_point >= 0)
		close(b.mount_point);
	close(root);
}

static int same_string(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

static int same_step(const struct mount_step *a, const struct mount_step *b)
{
	return a->kind == b->kind && a->read_only == b->read_only && a->optional == b->optional && a->idmapped == b->idmapped &&
	       a->mode == b->mode && same_string(a->source, b->source) && same_string(a->target, b->target) &&
	       same_string(a->content, b->content) && same_string(a->field, b->field) && same_string(a->via, b->via);
}

/* appeared_since says whether the target of a step staging skipped exists
 * now, in which case the plan's steps are applied one by one instead: they
 * cover it. Taking the tree and applying the one step would be quicker,
 * but an entry that comes and goes is too rare to be worth a second way
 * of building /proc. */
static int appeared_since(const struct stage *st)
{
	struct stat sb;
	for (size_t j = 0; j < st->n; j++)
		if (st->skipped[j] && (fstatat(AT_FDCWD, st->steps[j].target, &sb, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT))
			return 1;
	return 0;
}

/* take_staged moves a staged tree into the new root when the plan's steps
 * from i on are those it was staged from, and returns how many steps it
 * took: 0 for none, -1 on failure with err set. */
static long take_staged(struct builder *b, const struct plan *p, size_t i)
{
	for (size_t k = 0; k < sizeof stages / sizeof stages[0]; k++) {
		struct stage *st = &stages[k];
		if (st->fd < 0 || p->n_mounts - i < st->n)
			continue;
		size_t j = 0;
		while (j < st->n && same_step(&p->mounts[i + j], &st->steps[j]))
			j++;
		if (j < st->n || appeared_since(st))
			continue;
		int src;
		int target = open_target(b, &p->mounts[i], &src);
		if (target < 0) {
			if (src >= 0)
				close(src);
			return wrap("open target");
		}
		long r = (long)st->n;
		if (syscall(SYS_move_mount, st->fd, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH))
			r = fail(errno, "move_mount of the staged %s", st->steps[0].target);
		close(target);
		if (src >= 0)
			close(src);
		if (!b->target_kept)
			let_parent_go(b);
		close(st->fd);
		st->fd = -1;
		/* Its mount point, empty now, is no part of the sandbox. */
		rmdir(st->steps[0].target);
		return r;
	}
	return 0;
}

/*
 * drop_staged detaches what the plan did not take. A detach that fails
 * leaves no launch to refuse: a staged tree is the sandbox's own /proc or
 * /dev, nothing of the host's beyond the device nodes its /dev gets too,
 * and it stays on the init's tmpfs, beneath the new root (setup_root),
 * where no path of the sandbox's leads (the old root, the host's tree,
 * is another matter, and its detach is checked). It costs its mounts'
 * memory for the session's life.
 */
static void drop_staged(void)
{
	for (size_t k = 0; k < sizeof stages / sizeof stages[0]; k++) {
		struct stage *st = &stages[k];
		if (st->fd < 0)
			continue;
		close(st->fd);
		st->fd = -1;
		if (umount2(st->steps[0].target, MNT_DETACH) == 0)
			rmdir(st->steps[0].target);
	}
}

int prepare_root(const char **op, const char **path)
{
#define FAIL(o, pth)                                                                                                  \
	do {                                                                                                          \
		*op = (o);                                                                                            \
		*path = (pth);                                                                                        \
		return -1;                                                                                            \
	} while (0)
	/* Nothing mounted here may propagate back to the host. */
	if (mount("", "/", NULL, MS_REC | MS_SLAVE, NULL)) {
		fail_errno(errno);
		FAIL("make-rslave", "/");
	}
	/* The sandbox's /dev, /dev/shm and /tmp are directories of this
	 * tmpfs, and its options show in their lines of mountinfo: it keeps
	 * tmpfs's defaults, those of a /tmp. Its root, the init's, is never
	 * within the sandbox's reach, whatever its mode. */
	if (mount("tmpfs", BASE_DIR, "tmpfs", MS_NOSUID | MS_NODEV, NULL)) {
		fail_errno(errno);
		FAIL("mount tmpfs", BASE_DIR);
	}
	if (mkdir(BASE_DIR OLD_ROOT, 0700)) {
		fail(errno, "mkdir %s", BASE_DIR OLD_ROOT);
		FAIL("mkdir", OLD_ROOT);
	}
	if (mkdir(BASE_DIR NEW_ROOT, 0700)) {
		fail(errno, "mkdir %s", BASE_DIR NEW_ROOT);
		FAIL("mkdir", NEW_ROOT);
	}
	if (syscall(SYS_pivot_root, BASE_DIR, BASE_DIR OLD_ROOT)) {
		fail_errno(errno);
		FAIL("pivot_root", BASE_DIR);
	}
	if (chdir("/")) {
		fail_errno(errno);
		FAIL("chdir", "/");
	}
	if (write_file(MASK_FILE, "", 0, 0))
		FAIL("create", MASK_FILE);
	int old_root = open(OLD_ROOT, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (old_root < 0) {
		fail(errno, "open %s", OLD_ROOT);
		FAIL("open", OLD_ROOT);
	}
	return old_root;
#undef FAIL
}

int setup_root(const struct plan *p, int old_root, const char **field, const char **op, const char **path)
{
	*field = "process";
	*path = NULL;
#define FAIL(o, pth)                                                                                                  \
	do {                                                                                                          \
		*op = (o);                                                                                            \
		*path = (pth);                                                                                        \
		return -1;                                                                                            \
	} while (0)
	struct builder b = {.plan = p, .old_root = old_root, .new_root = -1, .files = staging.files, .dirs = staging.dirs, .mount_point = -1, .own_dev = own_tmpfs(), .parent = -1};
	b.mapped = setup_alloc((p->n_mounts + 1) * sizeof *b.mapped);
	b.uncreatable = setup_alloc((p->n_mounts + 1) * sizeof *b.uncreatable);
	if (!b.mapped || !b.uncreatable) {
		fail_errno(ENOMEM);
		FAIL("setup root", NULL);
	}
	/* All of them first: placeholders, which come before the binds, may
	 * need them. */
	for (size_t i = 0; i < p->n_mounts; i++) {
		b.mapped[i] = -1;
		if (p->mounts[i].idmapped && pass_recv(PASS_MOUNT, &b.mapped[i], 1)) {
			*field = p->mounts[i].field;
			FAIL("receive ID-mapped mount", p->mounts[i].source);
		}
		if (p->mounts[i].shared && pass_recv(PASS_MOUNT, &b.mapped[i], 1)) {
			*field = p->mounts[i].field;
			FAIL("receive the daemon's file", p->mounts[i].target);
		}
	}
	for (size_t i = 0; i < p->n_mounts; i++) {
		const struct mount_step *s = &p->mounts[i];
		long taken = b.new_root < 0 ? 0 : take_staged(&b, p, i);
		if (taken > 0) {
			i += (size_t)taken - 1;
			continue;
		}
		if (taken < 0 || apply(&b, s)) {
			*field = s->field;
			FAIL(mount_kind_names[s->kind], *s->target ? s->target : s->source);
		}
	}
	drop_staged();
	let_parent_go(&b);
	if (b.mount_point >= 0)
		close(b.mount_point);
	for (size_t i = 0; i < p->n_mounts; i++)
		if (b.mapped[i] >= 0)
			close(b.mapped[i]);
	/*
	 * The new root goes on top of the init's tmpfs, the namespace's root,
	 * and becomes this process's root: a root stacked on the namespace's
	 * is no chroot to the kernel, which follows such mounts to find the
	 * namespace's root, and paths read from it as from a pivoted root.
	 * pivot_root would do the same, but it visits every task on the host
	 * to move those whose root it changes, and it ran on every launch's
	 * path.
	 */
	int nr = open(NEW_ROOT, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
	if (nr < 0) {
		fail_errno(errno);
		FAIL("open", NEW_ROOT);
	}
	int base = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (base < 0) {
		fail_errno(errno);
		FAIL("open", "/");
	}
	if (syscall(SYS_move_mount, nr, "", AT_FDCWD, "/", MOVE_MOUNT_F_EMPTY_PATH)) {
		fail_errno(errno);
		close(base);
		FAIL("move_mount", NEW_ROOT);
	}
	/* The move takes the top mount only: beneath a bind at "/", the
	 * read-only clone of the host's tree would stay in the namespace,
	 * unseen but held, with its every mount, for the session's life.
	 * Found from the init's tmpfs, which the new root now covers. */
	if (b.root_bound && (fchdir(base) || umount2(NEW_ROOT + 1, MNT_DETACH))) {
		fail_errno(errno);
		close(base);
		FAIL("umount", NEW_ROOT);
	}
	/* Empty now, the directory would keep an inode of the init's tmpfs
	 * for the session's life; unseen, its going changes nothing the
	 * sandbox sees. */
	unlinkat(base, NEW_ROOT + 1, AT_REMOVEDIR);
	/*
	 * The host's tree goes before the command runs. Detaching it waits
	 * for an expedited RCU grace period (a median 72 us on the test
	 * host), and beneath the new root it is out of the reach of a
	 * process without capabilities; but a sandbox does not run untrusted
	 * code beside a mounted copy of the host's whole tree on the
	 * strength of that alone. Found from the init's tmpfs: lookups from
	 * a directory do not cross a mount stacked on it.
	 */
	if (fchdir(base) || umount2(OLD_ROOT + 1, MNT_DETACH | UMOUNT_NOFOLLOW)) {
		fail_errno(errno);
		close(base);
		FAIL("umount", OLD_ROOT);
	}
	/* Empty now, it would keep an inode of the init's tmpfs. */
	unlinkat(base, OLD_ROOT + 1, AT_REMOVEDIR);
	close(base);
	if (fchdir(nr)) {
		fail_errno(errno);
		FAIL("fchdir", NEW_ROOT);
	}
	if (chroot(".")) {
		fail_errno(errno);
		FAIL("chroot", NEW_ROOT);
	}
	if (chdir("/")) {
		fail_errno(errno);
		FAIL("chdir", "/");
	}
	/* The clones are still slaves of the host's mounts: a device the host
	 * mounts later would appear inside, writable. Cut them off. */
	if (mount("", "/", NULL, MS_REC | MS_PRIVATE, NULL)) {
		fail_errno(errno);
		FAIL("make-rprivate", "/");
	}
	close(nr);
	close(b.old_root);
	if (b.new_root >= 0)
		close(b.new_root);
	return 0;
#undef FAIL
}
