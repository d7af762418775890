/*
 * The spawner: one process beside the daemon that clones every sandbox init
 * for it, the init running on in the clone. The daemon is a large Go
 * program; cloning an init from it with CLONE_NEWUSER is a full fork that
 * copies its page tables on every launch, while this process is a few
 * pages. The daemon starts it once, with a SOCK_SEQPACKET socket as fd 3;
 * each request on it is a struct spawn_request with the init's plan, report
 * and pass fds, and each answer a struct spawn_reply with, when the init
 * runs, a pidfd of it. The spawner reaps the inits as they end; the daemon
 * waits for them on their pidfds. It exits when the daemon's end of the
 * socket closes, and its inits then get their parent-death signal.
 */
#define _GNU_SOURCE
#include "init.h"
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/sched.h>

#define SOCK_FD 3

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = (ssize_t)strlen(s);
	int r = write(fd, s, (size_t)n) == n ? 0 : -1;
	int e = errno;
	close(fd);
	errno = e;
	return r;
}

/*
 * The init's side of the clone: the identity, capabilities and fds the
 * init runs with, then the init itself, in this process. It is not started
 * with an execve: the spawner is the same program, and an execve would cost
 * every launch the loading of it again and the C library's start, whose CPU
 * feature probes are slow under a hypervisor. A failure goes to the spawner
 * on errpipe as a stage and an errno; errpipe's end says the init runs.
 */
static void __attribute__((noreturn)) child(const struct spawn_request *rq, const int fds[3], int sync_r, int errpipe, pid_t parent)
{
	int32_t out[2] = {SPAWN_STAGE_IDENTITY, 0};
	char c;
	/* The maps are written by the spawner once the clone returns. */
	if (read(sync_r, &c, 1) != 1)
		_exit(127);
	int ns = rq->flags & SPAWN_NAMESPACES;
	if (rq->flags & SPAWN_SET_IDS) {
		if ((ns && prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0)) || setgroups(0, NULL) || setresgid(rq->gid, rq->gid, rq->gid) ||
		    setresuid(rq->uid, rq->uid, rq->uid) || (ns && prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0)))
			goto fail;
	}
	if (ns) {
		/* A new user namespace gave this process every capability in
		 * it; it keeps only those the init needs, which it clears
		 * before it forks the command. A namespace-less init keeps the
		 * spawner's, which an execve of the spawner left as its ambient
		 * set (none for a root daemon's: setresuid cleared them). */
		struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
		struct __user_cap_data_struct data[2];
		memset(data, 0, sizeof data);
		for (int i = 0; i < 2; i++)
			data[i].permitted = data[i].effective = (uint32_t)(rq->caps >> (32 * i));
		if (syscall(SYS_capset, &hdr, data))
			goto fail;
	}
	out[0] = SPAWN_STAGE_START;
	if (setsid() < 0)
		goto fail;
	if (prctl(PR_SET_PDEATHSIG, rq->pdeathsig, 0, 0, 0))
		goto fail;
	/* The spawner may have gone between the clone and the prctl; in a new
	 * pid namespace the parent shows as 0, and the spawner waits for the
	 * init's start anyway. */
	if (!ns && getppid() != parent)
		kill(getpid(), (int)rq->pdeathsig);
	/* Out of the way of the three fds the init takes as 3, 4 and 5. */
	if (errpipe <= PASS_FD && (errpipe = fcntl(errpipe, F_DUPFD_CLOEXEC, PASS_FD + 1)) < 0)
		_exit(127);
	int high[3];
	for (int i = 0; i < 3; i++)
		if ((high[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 10)) < 0)
			goto fail;
	for (int i = 0; i < 3; i++)
		if (dup2(high[i], PLAN_FD + i) < 0)
			goto fail;
	/* Nothing of the spawner's stays open in the init: its socket and
	 * signalfd, the other inits' fds it received. */
	if ((errpipe > PASS_FD + 1 && syscall(SYS_close_range, PASS_FD + 1U, (unsigned)errpipe - 1U, 0U)) ||
	    syscall(SYS_close_range, (unsigned)errpipe + 1U, ~0U, 0U))
		goto fail;
	/* Every signal blocked before errpipe closes, which tells the
	 * spawner that the init runs: until run_init sets the mask it keeps,
	 * no signal may end the init by its default action or be dropped
	 * (hardening: the daemon forwards signals only after the init's
	 * "started", but the spawner's death signal or a host process of the
	 * same uid could reach it). The command's mask is emptied before its
	 * execve. */
	sigset_t all;
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	close(errpipe);
	exit(run_init(rq->flags & (SPAWN_NAMESPACES | SPAWN_NETNS)));
fail:
	out[1] = errno;
	if (write(errpipe, out, sizeof out)) {
	}
	_exit(127);
}

static void reap(void)
{
	while (waitpid(-1, NULL, WNOHANG) > 0) {
	}
}

/* The daemon's end is closed: the spawner's, and by their parent-death
 * signal its inits', end. Any other failure is this request's or passes. */
static int daemon_gone(int e)
{
	return e == EPIPE || e == ECONNRESET || e == ENOTCONN;
}

/* Tries after a failure for memory or buffers before the shortage is
 * taken as lasting: a second of pauses. */
#define MAX_NOMEM 100

/* A failure that passes: memory, or buffers. The spawner waits a little
 * and tries again rather than spin. */
static void pause_briefly(void)
{
	struct timespec ts = {.tv_nsec = 10 * 1000 * 1000};
	nanosleep(&ts, NULL);
}

/* send_reply sends rp, with pidfd unless it is -1; 0 when sent, else the
 * errno. */
static int send_reply(struct spawn_reply *rp, int pidfd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	memset(cbuf, 0, sizeof cbuf);
	struct iovec riov = {.iov_base = rp, .iov_len = sizeof *rp};
	struct msghdr reply = {.msg_iov = &riov, .msg_iovlen = 1};
	if (pidfd >= 0) {
		reply.msg_control = cbuf;
		reply.msg_controllen = sizeof cbuf;
		struct cmsghdr *c = CMSG_FIRSTHDR(&reply);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &pidfd, sizeof pidfd);
	}
	ssize_t w;
	do
		w = sendmsg(SOCK_FD, &reply, MSG_NOSIGNAL);
	while (w < 0 && errno == EINTR);
	return w < 0 ? errno : 0;
}

/* spawn clones and starts one init; its answer goes into *rp, with the
 * init's pidfd in *pidfd. */
static void spawn(const struct spawn_request *rq, const int fds[3], struct spawn_reply *rp, int *pidfd)
{
	int sync[2], errp[2];
	*pidfd = -1;
	rp->stage = SPAWN_STAGE_CLONE;
	if (pipe2(sync, O_CLOEXEC) || pipe2(errp, O_CLOEXEC)) {
		rp->err = errno;
		return;
	}
	unsigned long flags = SIGCHLD;
	if (rq->flags & SPAWN_NAMESPACES) {
		flags |= CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;
		if (rq->flags & SPAWN_NETNS)
			flags |= CLONE_NEWNET;
	}
	pid_t parent = getpid();
	pid_t pid = (pid_t)syscall(SYS_clone, flags, NULL, NULL, NULL, 0);
	if (pid == 0) {
		close(sync[1]);
		close(errp[0]);
		child(rq, fds, sync[0], errp[1], parent);
	}
	int e = errno;
	close(sync[0]);
	close(errp[1]);
	if (pid < 0) {
		rp->err = e;
		close(sync[1]);
		close(errp[0]);
		return;
	}
	rp->pid = pid;
	rp->stage = SPAWN_STAGE_IDENTITY;
	int r = 0;
	if (rq->flags & SPAWN_NAMESPACES) {
		/* The sandbox uid is the only uid of its user namespace, the same
		 * number inside as on the host. setgroups stays allowed for a
		 * root spawner, which drops its supplementary groups; one
		 * without the right must deny it to map a gid. */
		char path[64], map[64];
		snprintf(map, sizeof map, "%u %u 1\n", rq->uid, rq->uid);
		snprintf(path, sizeof path, "/proc/%d/uid_map", pid);
		r = write_file(path, map);
		if (!r && !(rq->flags & SPAWN_SETGROUPS)) {
			snprintf(path, sizeof path, "/proc/%d/setgroups", pid);
			r = write_file(path, "deny");
		}
		if (!r) {
			snprintf(map, sizeof map, "%u %u 1\n", rq->gid, rq->gid);
			snprintf(path, sizeof path, "/proc/%d/gid_map", pid);
			r = write_file(path, map);
		}
	}
	if (r)
		goto fail;
	/* Non-blocking (PIDFD_NONBLOCK is O_NONBLOCK), so that the daemon's
	 * runtime polls it instead of a thread waiting on it. */
	*pidfd = (int)syscall(SYS_pidfd_open, pid, O_NONBLOCK);
	if (*pidfd < 0)
		goto fail;
	/* A clone that never hears it may go on ends without a word on
	 * errpipe, which would read as an init that runs. */
	ssize_t w = write(sync[1], "x", 1);
	if (w != 1) {
		if (w >= 0)
			errno = EPIPE;
		goto fail;
	}
	close(sync[1]);
	int32_t got[2];
	ssize_t n;
	do
		n = read(errp[0], got, sizeof got);
	while (n < 0 && errno == EINTR);
	close(errp[0]);
	if (n == (ssize_t)sizeof got) {
		rp->stage = got[0];
		rp->err = got[1];
		close(*pidfd);
		*pidfd = -1;
		waitpid(pid, NULL, 0);
		return;
	}
	rp->err = 0;
	return;
fail:
	rp->err = errno;
	if (*pidfd >= 0) {
		close(*pidfd);
		*pidfd = -1;
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(sync[1]);
	close(errp[0]);
}

/*
 * without_randomization re-executes the spawner, once, with the
 * ADDR_NO_RANDOMIZE personality. Each idle init is a clone of this process,
 * and its address space is what the spawner's was: the text, data and .bss
 * of a non-PIE binary at fixed addresses, and the heap, which the kernel
 * otherwise starts at a random distance past the .bss (up to 32 MiB on
 * x86-64), in a 2 MiB of its own that costs every idle init a page-table
 * page. Without randomization the heap starts right after the .bss, in the
 * text's 2 MiB. The text of a non-PIE binary is at a fixed address anyway,
 * and the idle init runs on a thread-local stack; what loses its random
 * place is the setup's stack, heap and mappings. A position-independent
 * build (static-pie) would lose its text's, so it is left randomized. The
 * init clears ADDR_NO_RANDOMIZE again before the command's execve
 * (run_command), so the command is randomized as before.
 *
 * The re-executed image gets the process's name as argv[1], which marks
 * it: an execve that gains privileges (a set-ID or file-capability init, a
 * security label that changes) clears the flag each time, and the spawner
 * must not re-execute again and again. The name is set back because the
 * kernel names a process after what it executes, here "exe", and every
 * init would show so in ps and to the sandbox.
 *
 * Where the personality may not be set (a container's seccomp profile
 * allows only a few), the spawner runs on randomized; so it does, its
 * personality put back, when the execve fails, rather than end: its stderr
 * reaches no one, and the daemon would see every launch fail.
 */
static void without_randomization(int argc, char **argv)
{
	extern const ElfW(Ehdr) __ehdr_start;
	if (argc > 1) {
		prctl(PR_SET_NAME, argv[1], 0, 0, 0);
		return;
	}
	if (__ehdr_start.e_type != ET_EXEC)
		return;
	int persona = personality(0xffffffff);
	if (persona < 0 || (persona & ADDR_NO_RANDOMIZE))
		return;
	char name[17] = {0};
	if (prctl(PR_GET_NAME, name, 0, 0, 0) < 0)
		return;
	if (personality((unsigned long)persona | ADDR_NO_RANDOMIZE) < 0)
		return;
	int now = personality(0xffffffff);
	if (now < 0 || !(now & ADDR_NO_RANDOMIZE))
		return;
	char *args[] = {argv[0], name, NULL};
	execve("/proc/self/exe", args, environ);
	personality((unsigned long)persona);
}

int run_spawner(int argc, char **argv)
{
	without_randomization(argc, argv);
	note_personality();
	/*
	 * Nothing of the daemon's reaches the spawner's inits or commands;
	 * each init closes the spawner's own. What the daemon was started
	 * with and passed on (a shell's fd 251, say) is closed here rather
	 * than marked close-on-exec: a clone copies an fd table as large as
	 * its highest open fd needs, and every idle init would keep one of
	 * 256 entries (2.2 KiB) where the 64 in the process's own block do.
	 */
	if (syscall(SYS_close_range, 4U, ~0U, 0U) || fcntl(SOCK_FD, F_SETFD, FD_CLOEXEC))
		return 1;
	/* The inits are reaped as they end, between requests: an init that
	 * has ended stays no zombie until the next launch. */
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0)
		return 1;
	/* Consecutive failures for memory, of each call. */
	int poll_nomem = 0, recv_nomem = 0;
	for (;;) {
		struct pollfd pfd[2] = {{.fd = SOCK_FD, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
		if (poll(pfd, 2, -1) < 0) {
			/* Only a passing failure is tried again. Any other
			 * (EINVAL, say, after RLIMIT_NOFILE fell below 2)
			 * lasts: retrying it would leave the daemon waiting
			 * for a reply forever, and a spawner that no longer
			 * polls would not see the daemon end. */
			if (errno == EINTR)
				continue;
			if (errno != ENOMEM || ++poll_nomem > MAX_NOMEM)
				return 1;
			pause_briefly();
			continue;
		}
		poll_nomem = 0;
		if (pfd[1].revents & POLLIN) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof si) > 0) {
			}
			reap();
		}
		if (!(pfd[0].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)))
			continue;
		struct spawn_request rq;
		int fds[3] = {-1, -1, -1};
		union {
			char buf[CMSG_SPACE(3 * sizeof(int))];
			struct cmsghdr align;
		} u;
		struct iovec iov = {.iov_base = &rq, .iov_len = sizeof rq};
		struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
		ssize_t n = recvmsg(SOCK_FD, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
		if (n == 0 || (n < 0 && daemon_gone(errno)))
			/* The daemon is gone: so are we, and with us, by their
			 * parent-death signal, the inits. */
			return 0;
		if (n < 0) {
			/* A request, if any, stays queued for the next try;
			 * but a lasting failure (EACCES or EPERM from an LSM)
			 * would never take it, nor would a hang-up that cannot
			 * be read. The spawner exits then, which the daemon
			 * sees as the end of its socket, rather than leave
			 * the daemon waiting for a reply. */
			if (pfd[0].revents & (POLLHUP | POLLERR | POLLNVAL))
				return 1;
			if (errno == EAGAIN || errno == EINTR)
				continue;
			if ((errno != ENOMEM && errno != ENOBUFS) || ++recv_nomem > MAX_NOMEM)
				return 1;
			pause_briefly();
			continue;
		}
		recv_nomem = 0;
		int nfds = 0;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			for (int i = 0; i < k; i++) {
				int fd;
				memcpy(&fd, CMSG_DATA(c) + (size_t)i * sizeof(int), sizeof fd);
				if (nfds < 3)
					fds[nfds++] = fd;
				else
					close(fd);
			}
		}
		struct spawn_reply rp = {0};
		int pidfd = -1;
		if (n != (ssize_t)sizeof rq || nfds != 3) {
			rp.stage = SPAWN_STAGE_CLONE;
			rp.err = EINVAL;
		} else {
			spawn(&rq, fds, &rp, &pidfd);
		}
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		int e = send_reply(&rp, pidfd);
		if (pidfd >= 0)
			close(pidfd);
		if (e && !daemon_gone(e) && pidfd >= 0) {
			/* The pidfd could not be passed (ENOMEM, ENOBUFS,
			 * ETOOMANYREFS: too many fds in flight): the daemon
			 * would hold an init it cannot wait for. That one init
			 * goes, not the spawner, whose end would end every
			 * session it cloned; the reply, without the fd, says
			 * why. */
			kill(rp.pid, SIGKILL);
			waitpid(rp.pid, NULL, 0);
			rp = (struct spawn_reply){.err = e, .stage = SPAWN_STAGE_REPLY};
			e = send_reply(&rp, -1);
		}
		/* A reply without fds that fails for memory is tried again,
		 * for as long as a wait for memory is (the daemon waits for
		 * it, holding the lane). Any other failure, or one that
		 * lasts, ends the spawner, which cannot answer. */
		for (int tries = 0; (e == ENOMEM || e == ENOBUFS) && tries < MAX_NOMEM; tries++) {
			pause_briefly();
			e = send_reply(&rp, -1);
		}
		if (e)
			return 0;
	}
}
