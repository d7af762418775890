/*
 * The plan the daemon sends the sandbox init, decoded. The encoding and its
 * record tags are described beside the Go encoder (package sandboxinit,
 * encode.go); the numbers here must stay equal to those there.
 */
#ifndef SANDBOXD_PLAN_H
#define SANDBOXD_PLAN_H

#include <stddef.h>
#include <stdint.h>

enum {
	TAG_FLAGS = 1,
	TAG_HOSTNAME = 2,
	TAG_PROXY = 3,
	TAG_FORWARD = 4,
	TAG_MOUNT = 5,
	TAG_ARG = 6,
	TAG_ENV = 7,
	TAG_CWD = 8,
	TAG_IDS = 9,
	TAG_LANDLOCK = 10,
	TAG_LL_RULE = 11,
	TAG_LL_EXCEPT = 12,
	TAG_SECCOMP = 13,
	TAG_WRITE_ROOT = 14,
	TAG_END = 15,
};

enum {
	FLAG_NAMESPACES = 1 << 0,
	FLAG_NETNS = 1 << 1,
	FLAG_TERMINAL = 1 << 2,
	FLAG_TERMINAL_RULE = 1 << 3,
	FLAG_LISTENER = 1 << 4,
	FLAG_STRICT = 1 << 5,
};

enum {
	MOUNT_READ_ONLY = 1 << 0,
	MOUNT_OPTIONAL = 1 << 1,
	MOUNT_IDMAPPED = 1 << 2,
	MOUNT_SHARED = 1 << 3,
};

/* Mount kinds, numbered as sandboxinit's mountKinds. */
enum mount_kind {
	MK_ROOT_RO = 1,
	MK_BIND,
	MK_DEVICE,
	MK_REBIND_RO,
	MK_PIN,
	MK_TMPFS,
	MK_PROC,
	MK_DEVPTS,
	MK_MASK_FILE,
	MK_SYMLINK,
	MK_FILE,
	MK_PLACEHOLDER,
	MK_LAST = MK_PLACEHOLDER,
};

/* The kinds' names as the daemon spells them, indexed by kind. */
extern const char *const mount_kind_names[MK_LAST + 1];

struct mount_step {
	enum mount_kind kind;
	int read_only, optional, idmapped, shared;
	uint32_t mode;
	const char *source, *target, *content, *field, *via;
	/* content's length: it may be any bytes but NUL. */
	size_t content_len;
};

struct ll_rule {
	uint64_t access;
	const char *path;
};

struct sock_insn {
	uint16_t code;
	uint8_t jt, jf;
	uint32_t k;
};

struct plan {
	uint32_t flags;
	const char *hostname;
	int has_proxy;
	uint8_t proxy_addr[4];
	uint16_t proxy_port;
	uint16_t *forwards;
	size_t n_forwards;
	struct mount_step *mounts;
	size_t n_mounts;
	/* argv and env end in NULL, as execve takes them. */
	char **argv, **env;
	size_t n_argv, n_env;
	const char *cwd;
	uint32_t uid, gid;
	uint16_t rows, cols;
	uint32_t cgroup_tasks;
	uint32_t ll_abi;
	uint64_t ll_handled, ll_scoped, ll_read_access;
	/* One slot beyond n_ll_rules is free for the terminal's rule. */
	struct ll_rule *ll_rules;
	size_t n_ll_rules;
	const char **ll_except;
	size_t n_ll_except;
	struct sock_insn *seccomp;
	size_t n_seccomp;
	const char **write_roots;
	size_t n_write_roots;
};

/*
 * plan_decode decodes buf[0..len) into p. Strings point into buf, which must
 * outlive p; the arrays come from plan_calloc (plan_free). On failure it
 * returns -1 with err, a static message, set, and p holds nothing to free.
 */
int plan_decode(char *buf, size_t len, struct plan *p, const char **err);
void plan_free(struct plan *p);

/* names_root says whether path, resolved from the sandbox's root with ".."
 * staying there, is that root itself ("/", "", "/.", "/a/..", ...). */
int names_root(const char *path);

/*
 * The program using the decoder provides its allocator, with calloc's and
 * free's contracts: the init takes the arrays from its setup memory, which
 * it gives back whole, and the test harness from calloc, so that the
 * sanitizers check each array's bounds.
 */
void *plan_calloc(size_t n, size_t size);
void plan_release(void *ptr);

#endif
