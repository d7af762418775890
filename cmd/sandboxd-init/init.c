/*
 * sandboxd-init is the process sandboxd starts in each new sandbox: it
 * builds the sandbox's root as the plan says, restricts the command's
 * process, starts it and reaps until it exits. The daemon's Go planner
 * decides everything; this program decodes the plan (plan.c) and applies
 * it. It is C, and small, because one runs beside every session: a Go init
 * cost each launch a runtime's start and each idle session its threads and
 * heap.
 */
#define _GNU_SOURCE
#include "init.h"
#include "spawn.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#include <linux/netlink.h>

#define INIT_ARG0 "sandboxd-init"
#define USERNS_ARG0 "sandboxd-userns"
#define SPAWNER_ARG0 "sandboxd-spawner"

/* SigKillAll (sandboxinit): a namespace-less init kills every process of
 * its sandbox on it. */
#define SIG_KILL_ALL 36

struct step_error err __attribute__((aligned(4096)));

/* A step the init took before it had its plan, and its failure, which it
 * reports where the step stands in the plan's order. */
struct early_step {
	int done, failed, err_no;
	const char *op, *path;
	char detail[sizeof err.detail];
};

/*
 * The setup takes its memory from mappings of its own, not from the heap:
 * the idle init unmaps them whole, where freed heap chunks would leave
 * their pages and the allocator's state written, and the heap stays (the
 * C library's thread block is in it). The command's process, which shares
 * the init's memory until its execve, allocates here too.
 */
struct chunk {
	struct chunk *next;
	size_t size, used;
};

enum { CHUNK_SIZE = 256 << 10, ALIGN = 16 };

/*
 * What only the setup needs. Once the command runs the init gives these
 * pages back (release_setup), so they share no page with anything else:
 * the type's alignment pads its size to whole pages, where the variable's
 * alone would let the C library's own variables (memcpy's thresholds
 * among them) share its last page, which the release would zero. The
 * exit report finds the line's pages zeroed, which it does not mind.
 */
static struct __attribute__((aligned(4096))) {
	/* A report line is built here; JSON escaping at most sextuples a
	 * byte. */
	char line[6 * 8192];
	size_t line_len;
	struct early_step root_step, loopback_step;
	char tty[64];
	char errstr[128];
	/* The init emptied its bounding set before its plan came, which the
	 * command's process inherits. */
	int bounding_dropped;
	/* A failure of the command's process before its execve travels to
	 * the init on this close-on-exec pipe as the finished report line;
	 * nothing comes when the execve works. */
	int child_report;
	/* The setup's memory (setup_alloc), newest first. */
	struct chunk *chunks;
} setup;
_Static_assert(sizeof setup % 4096 == 0, "setup must fill whole pages: release_setup zeroes them");
_Static_assert(sizeof err % 4096 == 0, "err must fill whole pages: release_setup zeroes them");

static const char *errstr(int e)
{
	char *buf = setup.errstr;
	/* strerrordesc_np (glibc 2.32), not strerror: the same English text
	 * without the message catalogue's locks, which are in pages the idle
	 * init would otherwise keep written. */
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
	const char *desc = strerrordesc_np(e);
#else
	const char *desc = strerror(e);
#endif
	if (desc)
		snprintf(buf, sizeof setup.errstr, "%s", desc);
	else
		snprintf(buf, sizeof setup.errstr, "errno %d", e);
	/* As Go spells errno: "permission denied". */
	if (buf[0] >= 'A' && buf[0] <= 'Z' && !(buf[1] >= 'A' && buf[1] <= 'Z'))
		buf[0] = (char)(buf[0] - 'A' + 'a');
	return buf;
}

void *setup_alloc(size_t n)
{
	if (n > SIZE_MAX / 2) {
		errno = ENOMEM;
		return NULL;
	}
	n = (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
	size_t head = (sizeof(struct chunk) + ALIGN - 1) & ~(size_t)(ALIGN - 1);
	struct chunk *c = setup.chunks;
	if (!c || c->size - c->used < n) {
		size_t size = n + head < CHUNK_SIZE ? CHUNK_SIZE : (n + head + 4095) & ~(size_t)4095;
		c = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (c == MAP_FAILED)
			return NULL;
		c->next = setup.chunks;
		c->size = size;
		c->used = head;
		setup.chunks = c;
	}
	/* Fresh pages, never handed out twice: zeroed. */
	void *ptr = (char *)c + c->used;
	c->used += n;
	return ptr;
}

void *plan_calloc(size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size) {
		errno = ENOMEM;
		return NULL;
	}
	return setup_alloc(n * size);
}

/* The plan's arrays go with the rest of the setup's memory. */
void plan_release(void *ptr)
{
	(void)ptr;
}

int fail(int e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(err.detail, sizeof err.detail, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < sizeof err.detail)
		snprintf(err.detail + n, sizeof err.detail - (size_t)n, ": %s", errstr(e));
	err.no = e;
	return -1;
}

int fail_errno(int e)
{
	snprintf(err.detail, sizeof err.detail, "%s", errstr(e));
	err.no = e;
	return -1;
}

int wrap(const char *fmt, ...)
{
	char inner[sizeof err.detail];
	memcpy(inner, err.detail, sizeof inner);
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(err.detail, sizeof err.detail, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < sizeof err.detail)
		snprintf(err.detail + n, sizeof err.detail - (size_t)n, ": %s", inner);
	return -1;
}

int fail_msg(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err.detail, sizeof err.detail, fmt, ap);
	va_end(ap);
	err.no = 0;
	return -1;
}

static void put_raw(const char *s)
{
	size_t n = strlen(s);
	if (n > sizeof setup.line - setup.line_len)
		n = sizeof setup.line - setup.line_len;
	memcpy(setup.line + setup.line_len, s, n);
	setup.line_len += n;
}

static void put_json_string(const char *s)
{
	put_raw("\"");
	for (; *s && setup.line_len + 8 < sizeof setup.line; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			setup.line[setup.line_len++] = '\\';
			setup.line[setup.line_len++] = (char)c;
		} else if (c < 0x20) {
			setup.line_len += (size_t)snprintf(setup.line + setup.line_len, 7, "\\u%04x", c);
		} else {
			setup.line[setup.line_len++] = (char)c;
		}
	}
	put_raw("\"");
}

struct message {
	const char *type, *field, *op, *path, *blocker, *detail;
	int errno_, code, signal;
};

/* format_message puts m in line as sandboxinit.Message's JSON, its empty
 * fields left out. */
static void format_message(const struct message *m)
{
	char num[32];
	setup.line_len = 0;
	put_raw("{\"type\":");
	put_json_string(m->type);
	const char *names[] = {"field", "op", "path", "blocker", "detail"};
	const char *vals[] = {m->field, m->op, m->path, m->blocker, m->detail};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		if (!vals[i] || !*vals[i])
			continue;
		snprintf(num, sizeof num, ",\"%s\":", names[i]);
		put_raw(num);
		put_json_string(vals[i]);
	}
	const char *inames[] = {"errno", "code", "signal"};
	int ivals[] = {m->errno_, m->code, m->signal};
	for (size_t i = 0; i < 3; i++) {
		if (!ivals[i])
			continue;
		snprintf(num, sizeof num, ",\"%s\":%d", inames[i], ivals[i]);
		put_raw(num);
	}
	put_raw("}\n");
}

static void write_all(int fd, const char *b, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, b, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		b += w;
		n -= (size_t)w;
	}
}

static void send_message(const struct message *m)
{
	format_message(m);
	write_all(REPORT_FD, setup.line, setup.line_len);
}

/* setup_error reports a failed setup step with the current error and
 * exits. */
static void __attribute__((noreturn)) setup_error(const char *field, const char *op, const char *path)
{
	struct message m = {.type = "setup-error", .field = field, .op = op, .path = path, .errno_ = err.no, .detail = err.detail};
	send_message(&m);
	exit(1);
}

int pass_send(char tag, int fd)
{
	char buf[CMSG_SPACE(sizeof(int))];
	memset(buf, 0, sizeof buf);
	struct iovec iov = {.iov_base = &tag, .iov_len = 1};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = buf, .msg_controllen = sizeof buf};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof fd);
	for (;;) {
		if (sendmsg(PASS_FD, &msg, 0) >= 0)
			return 0;
		if (errno != EINTR)
			return fail_errno(errno);
	}
}

int pass_recv(char tag, int *fds, int n)
{
	char got;
	union {
		char buf[CMSG_SPACE(16 * sizeof(int))];
		struct cmsghdr align;
	} u;
	if (n < 1 || n > 16)
		return fail_msg("cannot receive %d fds at once", n);
	struct iovec iov = {.iov_base = &got, .iov_len = 1};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = CMSG_SPACE((size_t)n * sizeof(int))};
	ssize_t r;
	do
		r = recvmsg(PASS_FD, &msg, MSG_CMSG_CLOEXEC);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return fail_errno(errno);
	int count = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (int i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + (size_t)i * sizeof(int), sizeof fd);
			if (count < n)
				fds[count] = fd;
			else
				close(fd);
			count++;
		}
	}
	if (r != 1 || got != tag || count != n || (msg.msg_flags & MSG_CTRUNC)) {
		for (int i = 0; i < count && i < n; i++)
			close(fds[i]);
		if (r != 1 || got != tag)
			return fail_msg("got %s, want '%c'", r == 1 ? "another tag" : "nothing", tag);
		return fail_msg("want %d fds, got %d", n, count);
	}
	return 0;
}

/* read_plan reads fd 3 to its end. */
static char *read_plan(size_t *len)
{
	size_t cap = 64 << 10, n = 0;
	char *b = setup_alloc(cap);
	if (!b) {
		fail(ENOMEM, "read plan");
		return NULL;
	}
	for (;;) {
		if (n == cap) {
			/* Bounds a broken daemon, not a plan: plans are kilobytes. */
			if (cap >= 64 << 20) {
				fail_msg("plan larger than %zu bytes", cap);
				return NULL;
			}
			char *nb = setup_alloc(2 * cap);
			if (!nb) {
				fail(ENOMEM, "read plan");
				return NULL;
			}
			memcpy(nb, b, n);
			b = nb;
			cap *= 2;
		}
		ssize_t r = read(PLAN_FD, b + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			fail(errno, "read");
			return NULL;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(PLAN_FD);
	*len = n;
	return b;
}

/* pass_listener listens on addr:port and hands the socket to the daemon;
 * the init keeps no copy. */
static int pass_listener(char tag, const uint8_t addr[4], uint16_t port, char *name, size_t name_len)
{
	snprintf(name, name_len, "%u.%u.%u.%u:%u", addr[0], addr[1], addr[2], addr[3], port);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return fail(errno, "socket");
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	memcpy(&sa.sin_addr, addr, 4);
	int r = -1;
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa))
		fail(errno, "bind %s", name);
	else if (listen(fd, 128))
		fail(errno, "listen %s", name);
	else
		r = pass_send(tag, fd);
	close(fd);
	return r;
}

/* open_terminal allocates a terminal in the sandbox's devpts, sends the
 * master to the daemon and returns the replica, its name in name. */
static int open_terminal(const struct plan *p, char *name, size_t name_len)
{
	int master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (master < 0)
		return fail(errno, "open /dev/ptmx");
	int unlock = 0, replica = -1;
	unsigned int n;
	if (ioctl(master, TIOCSPTLCK, &unlock)) {
		fail(errno, "unlock pty");
		goto out;
	}
	if (ioctl(master, TIOCGPTN, &n)) {
		fail(errno, "TIOCGPTN");
		goto out;
	}
	snprintf(name, name_len, "/dev/pts/%u", n);
	replica = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (replica < 0) {
		fail(errno, "open %s", name);
		goto out;
	}
	if (p->rows || p->cols) {
		struct winsize ws = {.ws_row = p->rows, .ws_col = p->cols};
		if (ioctl(master, TIOCSWINSZ, &ws)) {
			fail(errno, "resize pty to %ux%u", p->rows, p->cols);
			goto bad;
		}
	}
	if (pass_send(PASS_TERMINAL, master)) {
		wrap("send terminal to daemon");
		goto bad;
	}
	close(master);
	return replica;
bad:
	close(replica);
	replica = -1;
out:
	close(master);
	return -1;
}

static void __attribute__((noreturn)) child_fail(const char *type, const char *field, const char *op, const char *path, const char *blocker)
{
	struct message m = {.type = type, .field = field, .op = op, .path = path, .blocker = blocker, .errno_ = err.no, .detail = err.detail};
	format_message(&m);
	write_all(setup.child_report, setup.line, setup.line_len);
	_exit(127);
}

/* personality_from_proc reads the personality from /proc/self/personality;
 * -1 when it cannot. */
static int personality_from_proc(void)
{
	int fd = open("/proc/self/personality", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	char buf[16];
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	char *end;
	errno = 0;
	unsigned long v = strtoul(buf, &end, 16);
	if (errno || end == buf || (*end != '\n' && *end) || v > INT_MAX)
		return -1;
	return (int)v;
}

int noted_personality = -1;

void note_personality(void)
{
	if (noted_personality < 0 && personality(0xffffffff) < 0)
		noted_personality = personality_from_proc();
}

/*
 * inaccessible says why this process, by its real ids, cannot use name:
 * search it (a directory) and, with write, create and remove names in it or
 * write it. *blocker is where the walk from the root stopped, name or an
 * ancestor that may not be searched: the kernel's refusal does not say
 * which, so each ancestor is tried by itself. 0 when it can.
 */
static int inaccessible(const char *name, int write, char *blocker, size_t blen)
{
	char prefix[PATH_MAX];
	size_t len = strlen(name);
	/* Every proper ancestor but the root, which is a prefix ending
	 * before a slash. */
	for (size_t i = 1; i < len && i < sizeof prefix; i++) {
		if (name[i] != '/' || name[i - 1] == '/')
			continue;
		memcpy(prefix, name, i);
		prefix[i] = '\0';
		if (faccessat(AT_FDCWD, prefix, X_OK, 0)) {
			snprintf(blocker, blen, "%s", prefix);
			return fail_errno(errno);
		}
	}
	snprintf(blocker, blen, "%s", name);
	struct stat st;
	if (stat(name, &st))
		return fail_errno(errno);
	int mode = S_ISDIR(st.st_mode) ? X_OK : 0;
	if (write)
		mode |= W_OK;
	if (mode && faccessat(AT_FDCWD, name, mode, 0))
		return fail_errno(errno);
	blocker[0] = '\0';
	return 0;
}

/* hidden says whether name, in the landlock set, resolves into an
 * excepted path (a deny path), which a lookup must not reveal. */
static int hidden(const char *name, const struct plan *p)
{
	if (!(p->flags & FLAG_STRICT) || p->n_ll_except == 0)
		return 0;
	int fd = open(name, O_PATH | O_CLOEXEC);
	if (fd < 0)
		/* Not there, or not reachable, which the command can tell
		 * itself. */
		return 0;
	int h = hidden_by_except(fd, p);
	close(fd);
	return h;
}

/* look_path finds argv0 on the sandbox's PATH (never the daemon's). */
static int look_path(const struct plan *p, char *out, size_t outlen)
{
	const char *argv0 = p->argv[0];
	if (strchr(argv0, '/')) {
		/* The execve would tell a file in a deny path (EACCES) from
		 * none there (ENOENT). */
		if (hidden(argv0, p))
			return fail_errno(ENOENT);
		snprintf(out, outlen, "%s", argv0);
		return 0;
	}
	const char *path = "";
	for (size_t i = 0; i < p->n_env; i++)
		if (strncmp(p->env[i], "PATH=", 5) == 0)
			path = p->env[i] + 5;
	int first = ENOENT;
	for (const char *d = path;; d++) {
		const char *end = strchrnul(d, ':');
		int dl = (int)(end - d);
		if (dl == 0)
			snprintf(out, outlen, "./%s", argv0);
		else
			snprintf(out, outlen, "%.*s/%s", dl, d, argv0);
		struct stat st;
		/* One in a deny path is passed over as if it were not there:
		 * its modes would tell whether it is. */
		if (!hidden(out, p) && stat(out, &st) == 0 && !S_ISDIR(st.st_mode)) {
			if (faccessat(AT_FDCWD, out, X_OK, AT_EACCESS) == 0)
				return 0;
			if (first == ENOENT)
				first = errno;
		}
		d = end;
		if (!*d)
			break;
	}
	return fail_errno(first);
}

/* run_command is the command's process from its fork to its execve: it
 * takes its stdio and limits, restricts itself and execs. */
static void __attribute__((noreturn)) run_command(const struct plan *p, const int stdio[3], const int *cgroup, int ncgroup)
{
	int ns = !!(p->flags & FLAG_NAMESPACES);
	int high[3];
	/* A terminal's command leads the terminal's session. Any other stays
	 * in the init's, which is new and has no terminal either, as the
	 * leader of a process group of its own: with the scheduler's
	 * autogroups each session is a task group, with a run queue and an
	 * entity per possible CPU (2.3 KiB on 2 CPUs, 0.75 KiB more a CPU),
	 * which an idle session kept twice. */
	if (p->flags & FLAG_TERMINAL)
		setsid();
	else
		setpgid(0, 0);
	for (int i = 0; i < 3; i++)
		high[i] = fcntl(stdio[i], F_DUPFD_CLOEXEC, 10);
	for (int i = 0; i < 3; i++)
		if (high[i] < 0 || dup2(high[i], i) < 0) {
			fail_errno(errno);
			child_fail("exec-error", "process", "execve", p->argv[0], NULL);
		}
	if ((p->flags & FLAG_TERMINAL) && ioctl(0, TIOCSCTTY, 1)) {
		fail_errno(errno);
		child_fail("exec-error", "process", "execve", p->argv[0], NULL);
	}
	/* This process alone joins the session's limits: the init stays out,
	 * so that it neither counts against pids.max nor is stopped by it. */
	for (int i = 0; i < ncgroup; i++)
		if (write(cgroup[i], "0", 1) != 1) {
			fail_errno(errno);
			child_fail("setup-error", "process", "join the session's cgroup", NULL, NULL);
		}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) {
		fail_errno(errno);
		child_fail("setup-error", "process", "prctl(PR_SET_NO_NEW_PRIVS)", NULL, NULL);
	}
	if (drop_capabilities(!ns, setup.bounding_dropped))
		child_fail("setup-error", "process", "drop capabilities", NULL, NULL);
	/* The spawner runs without address-space randomization (spawner.c);
	 * the command gets it back, with the rest of the personality the
	 * spawner was started with (UNAME26, ADDR_COMPAT_LAYOUT, the
	 * execution domain). Before the seccomp filter, which may deny
	 * personality. */
	int persona = personality(0xffffffff);
	if (persona < 0) {
		/* The query denied (a container's seccomp profile), as the
		 * spawner's own setting was: the flag is likely clear, and the
		 * command runs if /proc showed so. */
		int e = errno;
		persona = noted_personality;
		if (persona < 0 || (persona & ADDR_NO_RANDOMIZE)) {
			fail_errno(e);
			child_fail("setup-error", "process", "personality", NULL, NULL);
		}
	} else if ((persona & ADDR_NO_RANDOMIZE) && personality((unsigned long)persona & ~(unsigned long)ADDR_NO_RANDOMIZE) < 0) {
		fail_errno(errno);
		child_fail("setup-error", "process", "personality", NULL, NULL);
	}
	char blocker[PATH_MAX];
	/* Checked as the command will be: without capabilities. */
	for (size_t i = 0; i < p->n_write_roots; i++)
		if (inaccessible(p->write_roots[i], 1, blocker, sizeof blocker))
			child_fail("setup-error", "filesystem.write", "access", p->write_roots[i], blocker);
	if (inaccessible(p->cwd, 0, blocker, sizeof blocker))
		child_fail("exec-error", "process", "chdir", p->cwd, blocker);
	char path[PATH_MAX];
	if (look_path(p, path, sizeof path))
		child_fail("exec-error", "process", "execve", p->argv[0], NULL);
	if (apply_landlock(p))
		child_fail("setup-error", "process", "landlock", NULL, NULL);
	/* Before the filter: a chdir under it may wait for the daemon, which
	 * does not hold the listener yet. */
	if (chdir(p->cwd)) {
		fail_errno(errno);
		child_fail("exec-error", "process", "chdir", p->cwd, NULL);
	}
	/* The daemon refused a cwd whose path lies in a deny path; one
	 * reaching it through a symlink it judges only here, by where the
	 * chdir landed. Landlock does not govern chdir. */
	if ((p->flags & FLAG_STRICT) && p->n_ll_except > 0) {
		int fd = open(".", O_PATH | O_CLOEXEC);
		if (fd < 0 || hidden_by_except(fd, p)) {
			fail_errno(fd < 0 ? errno : EACCES);
			child_fail("exec-error", "process", "chdir", p->cwd, NULL);
		}
		close(fd);
	}
	/* From here until the daemon holds the listener this process may make
	 * no call the filter notifies: nothing would answer it. sendmsg,
	 * close and execve are not notified; the command's own calls wait
	 * for the daemon, which they may. */
	if (own_keyring(p))
		child_fail("setup-error", "process", "join a session keyring of its own", NULL, NULL);
	int listener = -1;
	if (apply_seccomp(p, &listener))
		child_fail("setup-error", "process", "seccomp", NULL, NULL);
	if (listener >= 0) {
		/* The daemon's copy is the only one: its closing ends every
		 * notification still pending. */
		int r = pass_send(PASS_LISTENER, listener);
		close(listener);
		if (r)
			child_fail("setup-error", "process", "send seccomp listener to daemon", NULL, NULL);
	}
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	execve(path, p->argv, p->env);
	fail_errno(errno);
	child_fail("exec-error", "process", "execve", path, NULL);
}

struct command_args {
	const struct plan *p;
	const int *stdio, *cgroup;
	int ncgroup, report;
	pid_t init;
};

static int command_main(void *arg)
{
	const struct command_args *a = arg;
	setup.child_report = a->report;
	/* Without a pid namespace, an init killed while this process sets up
	 * (a launch given up on during a slow step) would leave it to exec
	 * outside any session. Checked after the prctl: the init may have
	 * died before it. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)) {
		fail_errno(errno);
		child_fail("setup-error", "process", "prctl(PR_SET_PDEATHSIG)", NULL, NULL);
	}
	if (getppid() != a->init)
		_exit(127);
	run_command(a->p, a->stdio, a->cgroup, a->ncgroup);
}

/* The command's process runs on a stack of its own while it shares the
 * init's memory; it needs a few path buffers and the report line. */
enum { COMMAND_STACK = 1 << 20 };

/*
 * start_command starts the command's process; on a failure before its
 * execve it forwards the report and exits. The process shares the init's
 * memory until its execve (CLONE_VM | CLONE_VFORK, the init waiting), as
 * posix_spawn does: a fork would copy the init's page tables and fault in
 * copies of every page either side then writes, only for the execve to
 * throw them away. Its fd table, credentials, seccomp filter, Landlock
 * domain and signal mask are its own; what it writes to memory before the
 * execve (the report line) the init reads only from the pipe.
 */
static pid_t start_command(const struct plan *p, const int stdio[3], const int *cgroup, int ncgroup)
{
	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC)) {
		fail(errno, "pipe");
		setup_error("process", "start command", NULL);
	}
	char *stack = mmap(NULL, COMMAND_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED) {
		fail(errno, "mmap");
		setup_error("process", "start command", NULL);
	}
	struct command_args args = {.p = p, .stdio = stdio, .cgroup = cgroup, .ncgroup = ncgroup, .report = pipefd[1], .init = getpid()};
	pid_t pid = clone(command_main, stack + COMMAND_STACK, CLONE_VM | CLONE_VFORK | SIGCHLD, &args);
	int e = errno;
	munmap(stack, COMMAND_STACK);
	if (pid < 0) {
		fail(e, "clone");
		setup_error("process", "start command", NULL);
	}
	close(pipefd[1]);
	char buf[sizeof setup.line];
	size_t n = 0;
	for (;;) {
		ssize_t r = read(pipefd[0], buf + n, sizeof buf - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || (n += (size_t)r) == sizeof buf)
			break;
	}
	close(pipefd[0]);
	if (n > 0) {
		waitpid(pid, NULL, 0);
		write_all(REPORT_FD, buf, n);
		exit(1);
	}
	return pid;
}

/*
 * The idle init's list of pids, in a mapping of its own: what runs once the
 * command has started calls neither malloc nor stdio, whose first use would
 * set the allocator up then, with the vDSO gone (the C library seeds its
 * heap's key from the clock when getrandom fails).
 */
struct pid_list {
	pid_t *pids;
	size_t n, cap;
};

static void pid_list_add(struct pid_list *l, pid_t pid)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 4096 / sizeof(pid_t);
		void *np = l->pids ? mremap(l->pids, l->cap * sizeof(pid_t), cap * sizeof(pid_t), MREMAP_MAYMOVE)
				   : mmap(NULL, cap * sizeof(pid_t), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (np == MAP_FAILED)
			return;
		l->pids = np;
		l->cap = cap;
	}
	l->pids[l->n++] = pid;
}

/* read_children appends the pids in the file name, a children file of
 * /proc, to l. */
static void read_children(const char *name, struct pid_list *l)
{
	int fd = open(name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	char buf[1024];
	long pid = -1;
	for (;;) {
		ssize_t r = read(fd, buf, sizeof buf);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		for (ssize_t i = 0; i < r; i++) {
			if (buf[i] >= '0' && buf[i] <= '9') {
				pid = (pid < 0 ? 0 : pid * 10) + (buf[i] - '0');
			} else if (pid >= 0) {
				pid_list_add(l, (pid_t)pid);
				pid = -1;
			}
		}
	}
	if (pid >= 0)
		pid_list_add(l, (pid_t)pid);
	close(fd);
}

/* children_of appends the children of every thread of pid to l. */
static void children_of(pid_t pid, struct pid_list *l)
{
	char dir[64];
	snprintf(dir, sizeof dir, "/proc/%d/task", pid);
	int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d < 0)
		return;
	char buf[2048] __attribute__((aligned(8)));
	ssize_t n;
	while ((n = getdents64(d, buf, sizeof buf)) > 0) {
		for (ssize_t off = 0; off < n;) {
			struct dirent64 *e = (struct dirent64 *)(buf + off);
			off += e->d_reclen;
			if (e->d_name[0] == '.')
				continue;
			char file[384];
			snprintf(file, sizeof file, "%s/%s/children", dir, e->d_name);
			read_children(file, l);
		}
	}
	close(d);
}

/* kill_tree sends SIGKILL to every descendant. As the child subreaper the
 * init inherits every orphan of its tree, so one that outlives its parent
 * is found on the next pass. */
static void kill_tree(void)
{
	struct pid_list l = {0};
	children_of(getpid(), &l);
	/* Parents before children, breadth first. */
	for (size_t i = 0; i < l.n; i++)
		children_of(l.pids[i], &l);
	for (size_t i = 0; i < l.n; i++)
		kill(l.pids[i], SIGKILL);
	if (l.pids)
		munmap(l.pids, l.cap * sizeof(pid_t));
}

static void kill_descendants(void)
{
	for (;;) {
		kill_tree();
		if (waitpid(-1, NULL, 0) < 0 && errno != EINTR)
			return;
	}
}

/* started_error is setup_error once the command has started: without a pid
 * namespace the init's exit would leave the command's tree running. */
static void __attribute__((noreturn)) started_error(int ns, const char *field, const char *op, const char *path)
{
	if (!ns)
		kill_descendants();
	setup_error(field, op, path);
}

static const int forwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT, SIGALRM};

/* handled_signals are those the init waits for: the forwarded ones, its
 * own and SIGCHLD. They are blocked from the start, and the init takes
 * them with sigtimedwait, not through a signalfd, which every idle init
 * would keep open (a file and its security blob) for nothing. */
static void handled_signals(sigset_t *set)
{
	sigemptyset(set);
	for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
		sigaddset(set, forwarded[i]);
	sigaddset(set, SIG_KILL_ALL);
	sigaddset(set, SIGCHLD);
}

static void release_setup(void);

/*
 * How long the command runs before the init gives back the memory its
 * setup used (release_setup: reading its own maps, five munmaps and three
 * madvises, 95 to 190 us of CPU). That is worth it for a session that
 * stays, and only cost for one whose command ends at once, as most
 * launches' do: the process's end gives it back.
 */
enum { RELEASE_AFTER_MS = 50 };

static long long monotonic_ms(void)
{
	/* Zero if the clock fails: the release then comes at once. */
	struct timespec t = {0};
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* reap_until forwards signals to the command's process group and reaps
 * every child until the command itself has exited. */
static int reap_until(pid_t pid)
{
	sigset_t handled;
	handled_signals(&handled);
	/* Signals forwarded meanwhile do not put it off. */
	long long release_at = monotonic_ms() + RELEASE_AFTER_MS;
	int released = 0;
	for (;;) {
		int st;
		pid_t w;
		while ((w = waitpid(-1, &st, WNOHANG)) > 0)
			if (w == pid && (WIFEXITED(st) || WIFSIGNALED(st)))
				return st;
		if (w < 0 && errno == ECHILD)
			return 0;
		siginfo_t si;
		int sig;
		if (!released) {
			long long left = release_at - monotonic_ms();
			if (left < 0)
				left = 0;
			struct timespec ts = {.tv_sec = left / 1000, .tv_nsec = left % 1000 * 1000000};
			sig = sigtimedwait(&handled, &si, &ts);
			if (sig < 0 && errno == EAGAIN) {
				/* The clock's vDSO goes with it. */
				release_setup();
				released = 1;
			}
		} else {
			sig = sigwaitinfo(&handled, &si);
		}
		if (sig < 0 || sig == SIGCHLD)
			continue;
		if (sig == SIG_KILL_ALL) {
			kill_tree();
			continue;
		}
		if (kill(-pid, sig))
			kill(pid, sig);
	}
}

static void early_failed(struct early_step *s, const char *op, const char *path)
{
	s->failed = 1;
	s->err_no = err.no;
	memcpy(s->detail, err.detail, sizeof s->detail);
	s->op = op;
	s->path = path;
}

static void __attribute__((noreturn)) early_error(const struct early_step *s, const char *field)
{
	err.no = s->err_no;
	memcpy(err.detail, s->detail, sizeof err.detail);
	setup_error(field, s->op, s->path);
}

/*
 * From the command's start the init only waits, for as long as the session
 * lasts, and what it waits with is all an idle session keeps of it. It
 * runs on a stack of its own, so that the main thread's stack, which the
 * setup ran deep on, can go with the vDSO, which nothing from here on
 * calls: each of the two sits in a corner of the address space of its
 * own, with page-table pages of its own.
 *
 * That stack is thread-local: the C library's own thread-local variables
 * (errno among them) follow it in the same page, which the setup has
 * written already and so is the init's own rather than the spawner's. The
 * idle loop's frames fit in the part of that page below them, so waiting
 * writes no other page; a .bss stack kept a page of its own written
 * (`/proc/PID/smaps`: two private dirty pages per idle init, one with
 * this). Page alignment puts the variables at IDLE_TOP of their page
 * whatever the C library reserves beside them; the pages below it are
 * only touched by the calls that end a session (kill_tree, the exit
 * report), and the lowest is a guard.
 */
enum { GUARD = 4096, IDLE_PAGES = 15, IDLE_TOP = 0xE00 };
static __thread char idle_stack[GUARD + IDLE_PAGES * 4096 + IDLE_TOP] __attribute__((aligned(4096)));

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

/* unmap_corners unmaps the main stack and the vDSO with its data pages,
 * unless this runs on that stack after all. Without /proc they stay. */
static void unmap_corners(void)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	size_t n = 0;
	while (n < sizeof setup.line - 1) {
		ssize_t r = read(fd, setup.line + n, sizeof setup.line - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	setup.line[n] = '\0';
	uintptr_t sp = (uintptr_t)&fd;
	/* Each whole line is "START-END PERMS OFFSET DEV INODE [NAME]". */
	for (char *l = setup.line, *nl; (nl = strchr(l, '\n')); l = nl + 1) {
		*nl = '\0';
		if (!ends_with(l, " [stack]") && !ends_with(l, " [vdso]") && !ends_with(l, " [vvar]") && !ends_with(l, " [vvar_vclock]"))
			continue;
		char *end;
		uintptr_t lo = strtoul(l, &end, 16), hi = *end == '-' ? strtoul(end + 1, NULL, 16) : 0;
		if (lo < hi && !(sp >= lo && sp < hi))
			munmap((void *)lo, hi - lo);
	}
}

/* release_setup gives back what the setup used and the idle init does
 * not: the stack and vDSO, the setup's memory and buffers. */
static void release_setup(void)
{
	unmap_corners();
	for (struct chunk *c = setup.chunks, *next; c; c = next) {
		next = c->next;
		munmap(c, c->size);
	}
	madvise(&setup, sizeof setup, MADV_DONTNEED);
	madvise(&err, sizeof err, MADV_DONTNEED);
	release_staging();
}

static void __attribute__((noreturn)) idle_main(int pid, int ns)
{
	int st = reap_until(pid);
	if (!ns)
		kill_descendants();
	struct message m = {.type = "exit"};
	if (WIFSIGNALED(st))
		m.signal = WTERMSIG(st);
	else
		m.code = WEXITSTATUS(st);
	send_message(&m);
	exit(0);
}

/* go_idle continues on the idle stack, above its guard; should it not get
 * there, it stays on this one. */
static void __attribute__((noreturn)) go_idle(pid_t pid, int ns)
{
	ucontext_t uc;
	if (mprotect(idle_stack, GUARD, PROT_NONE) == 0 && getcontext(&uc) == 0) {
		uc.uc_stack.ss_sp = idle_stack + GUARD;
		uc.uc_stack.ss_size = sizeof idle_stack - GUARD;
		uc.uc_link = NULL;
		makecontext(&uc, (void (*)(void))idle_main, 2, (int)pid, ns);
		setcontext(&uc);
	}
	idle_main(pid, ns);
}

int run_init(uint32_t spawn_flags)
{
	/* Held from the start: a signal the daemon forwards while the sandbox
	 * is still being built waits for the command instead of ending the
	 * init by its default action. SIGPIPE stays blocked so that a report
	 * to a daemon gone is an error, not the init's end. Set, not added:
	 * the spawner hands over with every signal blocked, and a signal the
	 * init neither handles nor needs (a real-time one a client or the
	 * sandbox sends) must not queue up pending for the init's life. */
	sigset_t blocked;
	handled_signals(&blocked);
	sigaddset(&blocked, SIGPIPE);
	sigprocmask(SIG_SETMASK, &blocked, NULL);
	/* No fd of the init reaches the command but its stdio: the report
	 * pipe would let it forge its own exit status, and whatever the
	 * daemon inherited without close-on-exec is none of its business. */
	if (syscall(SYS_close_range, 3U, ~0U, 4U /* CLOSE_RANGE_CLOEXEC */))
		return 1;
	/* What needs the namespaces and not the plan is done before the
	 * plan is read: an init the daemon started ahead does it before its
	 * launch, and one started for a launch while the daemon encodes the
	 * plan. */
	struct early_step *root_step = &setup.root_step, *loopback_step = &setup.loopback_step;
	int old_root = -1;
	if (spawn_flags & SPAWN_NAMESPACES) {
		const char *op, *path;
		root_step->done = 1;
		if ((old_root = prepare_root(&op, &path)) < 0)
			early_failed(root_step, op, path);
		else
			stage_system(old_root);
		/* The init itself never executes a program, so its bounding set
		 * limits nothing of its own; emptied now, it is off the launch's
		 * path (should this fail, the command's process tries again). */
		setup.bounding_dropped = drop_bounding_set(0) == 0;
	}
	if (spawn_flags & SPAWN_NETNS) {
		loopback_step->done = 1;
		if (loopback_up())
			early_failed(loopback_step, "loopback up", "lo");
	}
	size_t len;
	char *buf = read_plan(&len);
	if (!buf)
		setup_error("process", "read plan", NULL);
	struct plan plan;
	const char *derr;
	if (plan_decode(buf, len, &plan, &derr)) {
		fail_msg("%s", derr);
		setup_error("process", "read plan", NULL);
	}
	struct plan *p = &plan;
	int ns = !!(p->flags & FLAG_NAMESPACES);
	note_personality();
	/* Not dumpable: the command, though the same host uid, must not open
	 * /proc/1/exe or ptrace the init. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)) {
		fail_errno(errno);
		setup_error("process", "prctl(PR_SET_DUMPABLE)", NULL);
	}
	if (spawn_flags && (ns != !!(spawn_flags & SPAWN_NAMESPACES) || !!(p->flags & FLAG_NETNS) != !!(spawn_flags & SPAWN_NETNS))) {
		fail_msg("the plan's namespaces are not those the init was started with");
		setup_error("process", "read plan", NULL);
	}
	if (ns) {
		const char *field, *op, *path;
		if (root_step->failed)
			early_error(root_step, "process");
		if (!root_step->done && (old_root = prepare_root(&op, &path)) < 0)
			setup_error("process", op, path);
		if (setup_root(p, old_root, &field, &op, &path))
			setup_error(field, op, path);
		if (loopback_step->failed)
			early_error(loopback_step, "network.mode");
		if ((p->flags & FLAG_NETNS) && !loopback_step->done && loopback_up())
			setup_error("network.mode", "loopback up", "lo");
		if (p->has_proxy) {
			char name[64];
			/* Made here, in the sandbox's network namespace; the
			 * daemon accepts on it from outside. */
			if (pass_listener(PASS_PROXY, p->proxy_addr, p->proxy_port, name, sizeof name))
				setup_error("network.allow", "listen for the proxy", name);
			static const uint8_t loopback[4] = {127, 0, 0, 1};
			for (size_t i = 0; i < p->n_forwards; i++)
				if (pass_listener(PASS_FORWARD, loopback, p->forwards[i], name, sizeof name))
					setup_error("network.allow", "listen to forward to the host's loopback", name);
		}
		if (sethostname(p->hostname, strlen(p->hostname))) {
			fail_errno(errno);
			setup_error("process", "sethostname", p->hostname);
		}
	} else if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) {
		/* Without a pid namespace, being the subreaper is what keeps
		 * every descendant within reach of the final kill. */
		fail_errno(errno);
		setup_error("process", "prctl(PR_SET_CHILD_SUBREAPER)", NULL);
	}
	int stdio[3];
	char *tty = setup.tty;
	if (!(p->flags & FLAG_TERMINAL)) {
		if (pass_recv(PASS_STDIO, stdio, 3))
			setup_error("process", "receive stdio from daemon", NULL);
	} else {
		int replica = open_terminal(p, tty, sizeof setup.tty);
		if (replica < 0)
			setup_error("process", "allocate terminal", "/dev/ptmx");
		stdio[0] = stdio[1] = stdio[2] = replica;
		if (p->flags & FLAG_TERMINAL_RULE) {
			p->ll_rules[p->n_ll_rules].path = tty;
			p->ll_rules[p->n_ll_rules].access = (LL_READ_FILE | LL_WRITE_FILE | LL_IOCTL_DEV) & p->ll_handled;
			p->n_ll_rules++;
		}
	}
	int cgroup[16] = {0}, ncgroup = (int)p->cgroup_tasks;
	if (ncgroup > 16) {
		fail_msg("%d cgroup files, at most 16", ncgroup);
		setup_error("limits", "receive cgroup files from daemon", NULL);
	}
	if (ncgroup > 0 && pass_recv(PASS_CGROUP, cgroup, ncgroup))
		setup_error("limits", "receive cgroup files from daemon", NULL);
	pid_t pid = start_command(p, stdio, cgroup, ncgroup);
	for (int i = 0; i < ncgroup; i++)
		close(cgroup[i]);
	if (!(p->flags & FLAG_TERMINAL)) {
		/* The command has them now; the init holding them too would keep
		 * the daemon from seeing their end. */
		for (int i = 0; i < 3; i++)
			close(stdio[i]);
	}
	if (p->flags & FLAG_LISTENER) {
		/* The command's root is the init's: nothing in the sandbox may
		 * chroot or pivot_root. Sent rather than opened by the daemon as
		 * /proc/PID/root, as the init may be gone by the time it would. */
		int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (root < 0 || pass_send(PASS_ROOT_DIR, root)) {
			if (root < 0)
				fail_errno(errno);
			started_error(ns, "process", "send root directory to daemon", "/");
		}
		close(root);
		if (p->flags & FLAG_NETNS) {
			/* With it the daemon tells a unix socket the sandbox
			 * listens on from any other: only the sandbox's own are in
			 * its namespace. */
			int diag = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
			if (diag < 0 || pass_send(PASS_DIAG, diag)) {
				if (diag < 0)
					fail_errno(errno);
				started_error(ns, "network.mode", "send a sock_diag socket to daemon", NULL);
			}
			close(diag);
		}
	}
	close(PASS_FD);
	struct message started = {.type = "started"};
	send_message(&started);
	go_idle(pid, ns);
}

/* hold_userns holds the user namespace it was cloned into until its stdin
 * reaches its end: the daemon opens that namespace to ID-map write roots
 * with, and a namespace needs a process to be made. */
static int hold_userns(void)
{
	char c;
	for (;;) {
		ssize_t n = read(0, &c, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return 0;
	}
}

int main(int argc, char **argv)
{
	if (argc > 0 && strcmp(argv[0], INIT_ARG0) == 0)
		return run_init(0);
	if (argc > 0 && strcmp(argv[0], USERNS_ARG0) == 0)
		return hold_userns();
	if (argc > 0 && strcmp(argv[0], SPAWNER_ARG0) == 0)
		return run_spawner(argc, argv);
	fprintf(stderr, "%s is started by sandboxd as the init of each sandbox (argv[0] \"%s\"); it is not run by hand\n",
		argc > 0 ? argv[0] : "sandboxd-init", INIT_ARG0);
	return 2;
}
