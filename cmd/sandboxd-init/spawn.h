/*
 * The spawner's requests and answers; the daemon's side is
 * launcher_linux/spawner_linux.go, which must lay them out the same.
 */
#ifndef SANDBOXD_SPAWN_H
#define SANDBOXD_SPAWN_H

#include <stdint.h>

enum {
	/* New user, mount, pid, ipc, uts and cgroup namespaces. */
	SPAWN_NAMESPACES = 1 << 0,
	/* And a network namespace. */
	SPAWN_NETNS = 1 << 1,
	/* Become uid and gid, with no supplementary group (a root daemon). */
	SPAWN_SET_IDS = 1 << 2,
	/* Leave setgroups allowed in the new user namespace (a root daemon). */
	SPAWN_SETGROUPS = 1 << 3,
};

struct spawn_request {
	uint32_t flags, uid, gid, pdeathsig;
	/* The capabilities the init keeps, a bit each. */
	uint64_t caps;
};

/* SPAWN_STAGE_REPLY: the init ran, but the reply that passes its pidfd
 * could not be sent (memory, or too many fds in flight); it is killed. */
enum { SPAWN_STAGE_CLONE = 1, SPAWN_STAGE_IDENTITY = 2, SPAWN_STAGE_START = 3, SPAWN_STAGE_REPLY = 4 };

struct spawn_reply {
	/* 0 when the init runs, else the errno of the stage that failed. */
	int32_t err, stage, pid, pad;
};

int run_spawner(int argc, char **argv);

#endif
