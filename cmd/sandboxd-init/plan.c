/*
 * Decoder of the plan's binary encoding. It only checks the form: what the
 * plan asks for is the Go planner's decision, and the init applies it.
 */
#include "plan.h"

#include <limits.h>
#include <string.h>

const char *const mount_kind_names[MK_LAST + 1] = {
	[MK_ROOT_RO] = "root-ro",
	[MK_BIND] = "bind",
	[MK_DEVICE] = "device",
	[MK_REBIND_RO] = "rebind-ro",
	[MK_PIN] = "pin",
	[MK_TMPFS] = "tmpfs",
	[MK_PROC] = "proc",
	[MK_DEVPTS] = "devpts",
	[MK_MASK_FILE] = "mask-file",
	[MK_SYMLINK] = "symlink",
	[MK_FILE] = "file",
	[MK_PLACEHOLDER] = "placeholder",
};

static const char magic[4] = {'S', 'B', 'P', 1};

/* The kernel takes at most this many instructions (BPF_MAXINSNS). */
#define MAX_INSNS 4096

/* The init receives the cgroup files in one message of at most this many
 * (pass_recv); the encoder's maxCgroupTasks. */
#define MAX_CGROUP_TASKS 16

static uint16_t u16(const char *b)
{
	const unsigned char *u = (const unsigned char *)b;
	return (uint16_t)(u[0] | u[1] << 8);
}

static uint32_t u32(const char *b)
{
	const unsigned char *u = (const unsigned char *)b;
	return (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
}

static uint64_t u64(const char *b)
{
	return (uint64_t)u32(b) | (uint64_t)u32(b + 4) << 32;
}

/* is_cstring: s[0..n) is a string and its NUL, with no NUL before. */
static int is_cstring(const char *s, size_t n)
{
	return n > 0 && s[n - 1] == '\0' && memchr(s, '\0', n - 1) == NULL;
}

struct counts {
	size_t forwards, mounts, argv, env, rules, except, write_roots;
};

/*
 * mount_string takes the next length-prefixed string of a mount record at
 * *off; -1 when it does not fit or is not a string.
 */
static int mount_string(char *rec, size_t n, size_t *off, const char **out, size_t *out_len)
{
	if (n - *off < 4)
		return -1;
	uint32_t l = u32(rec + *off);
	*off += 4;
	if (l > n - *off || !is_cstring(rec + *off, l))
		return -1;
	*out = rec + *off;
	if (out_len)
		*out_len = l - 1;
	*off += l;
	return 0;
}

int names_root(const char *path)
{
	size_t depth = 0;
	while (*path) {
		while (*path == '/')
			path++;
		size_t l = strcspn(path, "/");
		if (l == 2 && path[0] == '.' && path[1] == '.')
			depth -= depth > 0;
		else if (l > 0 && !(l == 1 && path[0] == '.'))
			depth++;
		path += l;
	}
	return depth == 0;
}

static int decode_mount(char *rec, size_t n, struct mount_step *m, const char **err)
{
	*err = "bad mount record";
	if (n < 6)
		return -1;
	m->kind = (enum mount_kind)(unsigned char)rec[0];
	if (m->kind < MK_ROOT_RO || m->kind > MK_LAST)
		return -1;
	unsigned char f = (unsigned char)rec[1];
	if (f & ~(MOUNT_READ_ONLY | MOUNT_OPTIONAL | MOUNT_IDMAPPED | MOUNT_SHARED))
		return -1;
	m->read_only = !!(f & MOUNT_READ_ONLY);
	m->optional = !!(f & MOUNT_OPTIONAL);
	m->idmapped = !!(f & MOUNT_IDMAPPED);
	m->shared = !!(f & MOUNT_SHARED);
	m->mode = u32(rec + 2);
	size_t off = 6;
	if (mount_string(rec, n, &off, &m->source, NULL) || mount_string(rec, n, &off, &m->target, NULL) ||
	    mount_string(rec, n, &off, &m->content, &m->content_len) || mount_string(rec, n, &off, &m->field, NULL) ||
	    mount_string(rec, n, &off, &m->via, NULL))
		return -1;
	if (off != n)
		return -1;
	/* The builder splits a target into a parent of at most PATH_MAX bytes
	 * and its last name, and keeps the parent's fd by that spelling: one
	 * longer would be cut, and could name the kept directory of a shorter
	 * path. The kernel takes no longer path anyway. */
	if (strlen(m->target) >= PATH_MAX) {
		*err = "a mount step's target is longer than PATH_MAX";
		return -1;
	}
	/* Stacked on the new root's top directory, an ID-mapped clone would
	 * leave the steps after it applied beneath it, out of the sandbox's
	 * sight, masks and all. */
	if (m->idmapped && names_root(m->target)) {
		*err = "an ID-mapped mount step targets the sandbox's root";
		return -1;
	}
	/* A filesystem field's target is opened without following symlinks
	 * (open_target): another field's may follow one to the root, which
	 * the check above reads only the spelling of. */
	if (m->idmapped && strncmp(m->field, "filesystem.", 11) != 0) {
		*err = "an ID-mapped mount step serves no filesystem field";
		return -1;
	}
	/* What the daemon sends for a shared step is attached as a file
	 * step's file, and only there. */
	if (m->shared && (m->kind != MK_FILE || m->content_len || m->idmapped)) {
		*err = "a shared mount step is not an unmapped file step without content";
		return -1;
	}
	/* The init finds an ID-mapped clone by its step's source (mapped_fd):
	 * the daemon's file has none to be taken for one. */
	if (m->shared && *m->source) {
		*err = "a shared mount step has a source";
		return -1;
	}
	return 0;
}

/*
 * walk checks every record of buf and counts them into c; with fill it
 * also stores them into p, whose arrays are sized from a first walk's c.
 */
static int walk(char *buf, size_t len, struct plan *p, struct counts *c, int fill, const char **err)
{
	int seen_end = 0, seen_flags = 0, seen_cwd = 0, seen_ids = 0, seen_ll = 0, seen_host = 0, seen_seccomp = 0;
	if (len < sizeof magic || memcmp(buf, magic, sizeof magic) != 0) {
		*err = "not a plan of this version (bad magic)";
		return -1;
	}
	memset(c, 0, sizeof *c);
	size_t off = sizeof magic;
	while (off < len) {
		if (seen_end) {
			*err = "bytes after the end record";
			return -1;
		}
		if (len - off < 5) {
			*err = "truncated record header";
			return -1;
		}
		unsigned char tag = (unsigned char)buf[off];
		uint32_t n = u32(buf + off + 1);
		off += 5;
		if (n > len - off) {
			*err = "record longer than the plan";
			return -1;
		}
		char *rec = buf + off;
		off += n;
		switch (tag) {
		case TAG_FLAGS:
			if (n != 4 || seen_flags++) {
				*err = "bad flags record";
				return -1;
			}
			if (u32(rec) & ~(uint32_t)(FLAG_NAMESPACES | FLAG_NETNS | FLAG_TERMINAL | FLAG_TERMINAL_RULE | FLAG_LISTENER | FLAG_STRICT)) {
				*err = "unknown flags";
				return -1;
			}
			if (fill)
				p->flags = u32(rec);
			break;
		case TAG_HOSTNAME:
		case TAG_CWD:
			if (!is_cstring(rec, n) || (tag == TAG_HOSTNAME ? seen_host++ : seen_cwd++)) {
				*err = "bad hostname or working directory record";
				return -1;
			}
			if (fill && tag == TAG_HOSTNAME)
				p->hostname = rec;
			else if (fill)
				p->cwd = rec;
			break;
		case TAG_PROXY:
			if (n != 6 || p->has_proxy) {
				*err = "bad proxy record";
				return -1;
			}
			p->has_proxy = 1;
			memcpy(p->proxy_addr, rec, 4);
			p->proxy_port = u16(rec + 4);
			break;
		case TAG_FORWARD:
			if (n != 2) {
				*err = "bad forward record";
				return -1;
			}
			if (fill)
				p->forwards[c->forwards] = u16(rec);
			c->forwards++;
			break;
		case TAG_MOUNT: {
			struct mount_step m;
			if (decode_mount(rec, n, &m, err))
				return -1;
			if (fill)
				p->mounts[c->mounts] = m;
			c->mounts++;
			break;
		}
		case TAG_ARG:
		case TAG_ENV:
		case TAG_LL_EXCEPT:
		case TAG_WRITE_ROOT:
			if (!is_cstring(rec, n)) {
				*err = "bad string record";
				return -1;
			}
			if (tag == TAG_ARG) {
				if (fill)
					p->argv[c->argv] = rec;
				c->argv++;
			} else if (tag == TAG_ENV) {
				if (fill)
					p->env[c->env] = rec;
				c->env++;
			} else if (tag == TAG_LL_EXCEPT) {
				if (fill)
					p->ll_except[c->except] = rec;
				c->except++;
			} else {
				if (fill)
					p->write_roots[c->write_roots] = rec;
				c->write_roots++;
			}
			break;
		case TAG_IDS:
			if (n != 16 || seen_ids++) {
				*err = "bad ids record";
				return -1;
			}
			/* More would not be joined, and the command would run
			 * outside its limits. */
			if (u32(rec + 12) > MAX_CGROUP_TASKS) {
				*err = "more cgroup files than the init takes";
				return -1;
			}
			if (fill) {
				p->uid = u32(rec);
				p->gid = u32(rec + 4);
				p->rows = u16(rec + 8);
				p->cols = u16(rec + 10);
				p->cgroup_tasks = u32(rec + 12);
			}
			break;
		case TAG_LANDLOCK:
			if (n != 28 || seen_ll++) {
				*err = "bad landlock record";
				return -1;
			}
			/* No kernel has such an ABI; the applier would take it
			 * for no Landlock at all. */
			if (u32(rec) > INT32_MAX) {
				*err = "a landlock ABI beyond any kernel's";
				return -1;
			}
			if (fill) {
				p->ll_abi = u32(rec);
				p->ll_handled = u64(rec + 4);
				p->ll_scoped = u64(rec + 12);
				p->ll_read_access = u64(rec + 20);
			}
			break;
		case TAG_LL_RULE:
			if (n < 9 || !is_cstring(rec + 8, n - 8)) {
				*err = "bad landlock rule record";
				return -1;
			}
			if (fill) {
				p->ll_rules[c->rules].access = u64(rec);
				p->ll_rules[c->rules].path = rec + 8;
			}
			c->rules++;
			break;
		case TAG_SECCOMP:
			if (n == 0 || n % 8 != 0 || n / 8 > MAX_INSNS || seen_seccomp++) {
				*err = "bad seccomp record";
				return -1;
			}
			if (fill) {
				p->n_seccomp = n / 8;
				for (size_t i = 0; i < p->n_seccomp; i++) {
					const char *r = rec + 8 * i;
					p->seccomp[i].code = u16(r);
					p->seccomp[i].jt = (uint8_t)r[2];
					p->seccomp[i].jf = (uint8_t)r[3];
					p->seccomp[i].k = u32(r + 4);
				}
			}
			break;
		case TAG_END:
			if (n != 0) {
				*err = "bad end record";
				return -1;
			}
			seen_end = 1;
			break;
		default:
			*err = "unknown record";
			return -1;
		}
	}
	if (!seen_end) {
		*err = "plan cut short (no end record)";
		return -1;
	}
	if (!seen_flags || !seen_host || !seen_cwd || !seen_ids || !seen_ll || c->argv == 0) {
		*err = "plan lacks a required record";
		return -1;
	}
	return 0;
}

int plan_decode(char *buf, size_t len, struct plan *p, const char **err)
{
	struct counts c;
	memset(p, 0, sizeof *p);
	if (walk(buf, len, p, &c, 0, err))
		return -1;
	memset(p, 0, sizeof *p);
	/* Every array gets at least one slot so that no allocation is of 0. */
	p->forwards = plan_calloc(c.forwards + 1, sizeof *p->forwards);
	p->mounts = plan_calloc(c.mounts + 1, sizeof *p->mounts);
	p->argv = plan_calloc(c.argv + 1, sizeof *p->argv);
	p->env = plan_calloc(c.env + 1, sizeof *p->env);
	p->ll_rules = plan_calloc(c.rules + 1, sizeof *p->ll_rules);
	p->ll_except = plan_calloc(c.except + 1, sizeof *p->ll_except);
	p->seccomp = plan_calloc(MAX_INSNS, sizeof *p->seccomp);
	p->write_roots = plan_calloc(c.write_roots + 1, sizeof *p->write_roots);
	if (!p->forwards || !p->mounts || !p->argv || !p->env || !p->ll_rules || !p->ll_except || !p->seccomp || !p->write_roots) {
		plan_free(p);
		*err = "out of memory";
		return -1;
	}
	walk(buf, len, p, &c, 1, err);
	p->n_forwards = c.forwards;
	p->n_mounts = c.mounts;
	p->n_argv = c.argv;
	p->n_env = c.env;
	p->n_ll_rules = c.rules;
	p->n_ll_except = c.except;
	p->n_write_roots = c.write_roots;
	return 0;
}

void plan_free(struct plan *p)
{
	plan_release(p->forwards);
	plan_release(p->mounts);
	plan_release(p->argv);
	plan_release(p->env);
	plan_release(p->ll_rules);
	plan_release(p->ll_except);
	plan_release(p->seccomp);
	plan_release(p->write_roots);
	memset(p, 0, sizeof *p);
}
