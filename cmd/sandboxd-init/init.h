/* What the parts of the sandbox init share. */
#ifndef SANDBOXD_INIT_H
#define SANDBOXD_INIT_H

#include "plan.h"

#include <stdint.h>

/*
 * The init gets its plan on fd 3 and reports on fd 4, one JSON line a
 * message (sandboxinit.Message). On fd 5, a unix socket, it and the daemon
 * hand each other fds, each message one tag byte (sandboxinit's Pass*).
 */
enum { PLAN_FD = 3, REPORT_FD = 4, PASS_FD = 5 };

enum {
	PASS_TERMINAL = 'T',
	PASS_LISTENER = 'N',
	PASS_ROOT_DIR = 'R',
	PASS_CGROUP = 'C',
	PASS_PROXY = 'P',
	PASS_DIAG = 'D',
	PASS_FORWARD = 'F',
	PASS_MOUNT = 'M',
	PASS_STDIO = 'S',
};

/*
 * note_personality records, where personality(2) may not be queried (a
 * container's seccomp profile), the personality /proc/self/personality
 * shows, while this process may still open its own files there: the
 * spawner at its start, for the inits it forks, which change their ids and
 * stop being dumpable; an init started on its own before it stops being
 * dumpable. noted_personality is -1 where it is unknown.
 */
void note_personality(void);
extern int noted_personality;

/*
 * A failed step leaves its errno in err.no and a sentence in err.detail, as
 * the Go init's wrapped errors read (for example "open target: permission
 * denied"), for the report. They fill a page of their own, which the idle
 * init gives back.
 */
struct step_error {
	int no;
	char detail[4096 - sizeof(int)];
};
extern struct step_error err;

/* fail sets the error to "FMT: strerror(e)" and returns -1. */
int fail(int e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* fail_errno sets the error to strerror(e) alone and returns -1. */
int fail_errno(int e);
/* wrap puts "FMT: " before the error's detail and returns -1. */
int wrap(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* fail_msg sets the error to msg with no errno and returns -1. */
int fail_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* setup_alloc returns n zeroed bytes of the setup's memory, which is
 * never freed but given back whole once the command runs; NULL when
 * there is none. */
void *setup_alloc(size_t n);

int pass_send(char tag, int fd);
int pass_recv(char tag, int *fds, int n);

/* prepare_root puts the init's mount namespace on a tmpfs of its own, the
 * host's tree beneath it, and returns an fd of that tree. It needs no plan,
 * so an init started ahead of its launch does it then. On failure it
 * returns -1 with *op and *path naming the step. */
int prepare_root(const char **op, const char **path);
/* stage_system applies, with old_root from prepare_root, the steps of
 * /proc and /dev that every plan with namespaces has, for setup_root to
 * take if the plan has them. Failing, it leaves the plan to apply them. */
void stage_system(int old_root);
/* release_staging gives back the page staging wrote, once the command
 * runs: nothing reads it after. */
void release_staging(void);
/* setup_root builds the sandbox's root from old_root, prepare_root's, and
 * enters it. On failure it returns -1 with *field, *op and *path
 * naming the step. */
int setup_root(const struct plan *p, int old_root, const char **field, const char **op, const char **path);

int loopback_up(void);
/* run_init is the sandbox init, from reading its plan to its exit, which
 * it makes itself; it returns only if it cannot begin. spawn_flags are the
 * namespaces the spawner made for it (spawn.h), 0 for an init started
 * otherwise. */
int run_init(uint32_t spawn_flags);
int apply_landlock(const struct plan *p);
int hidden_by_except(int fd, const struct plan *p);
int apply_seccomp(const struct plan *p, int *listener);
int own_keyring(const struct plan *p);
/* drop_bounding_set empties the bounding set; optional lets it stop where
 * it may not (EPERM). */
int drop_bounding_set(int optional);
int drop_capabilities(int bounding_optional, int bounding_done);

/* Landlock rights the init grants itself (include/uapi/linux/landlock.h). */
#define LL_EXECUTE (1ULL << 0)
#define LL_WRITE_FILE (1ULL << 1)
#define LL_READ_FILE (1ULL << 2)
#define LL_TRUNCATE (1ULL << 14)
#define LL_IOCTL_DEV (1ULL << 15)
#define LL_FILE_RIGHTS (LL_EXECUTE | LL_WRITE_FILE | LL_READ_FILE | LL_TRUNCATE | LL_IOCTL_DEV)

#endif
