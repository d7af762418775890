/*
 * plandump is the test harness of the plan decoder, not part of the init:
 * it reads plans from stdin, each a little-endian uint32 length and that many
 * bytes, decodes each and answers with a uint32 length and the plan printed
 * as sandboxinit.FormatPlan prints it, or "error: " and why.
 */
#include "../plan.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *plan_calloc(size_t n, size_t size) { return calloc(n, size); }

void plan_release(void *ptr) { free(ptr); }

static char *out;
static size_t out_len, out_cap;

static void put(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void put(const char *fmt, ...)
{
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(out + out_len, out_cap - out_len, fmt, ap);
		va_end(ap);
		if (n < 0)
			abort();
		if ((size_t)n < out_cap - out_len) {
			out_len += (size_t)n;
			return;
		}
		out_cap = 2 * out_cap + (size_t)n + 1;
		out = realloc(out, out_cap);
		if (!out)
			abort();
	}
}

static void hex(const char *s, size_t n)
{
	put("[");
	for (size_t i = 0; i < n; i++)
		put("%02x", (unsigned char)s[i]);
	put("]");
}

static void str(const char *s) { hex(s, strlen(s)); }

static const char *tf(int b) { return b ? "true" : "false"; }

static void dump(const struct plan *p)
{
	put("namespaces %s netns %s terminal %s terminal_rule %s listener %s strict %s\n",
	    tf(p->flags & FLAG_NAMESPACES), tf(p->flags & FLAG_NETNS), tf(p->flags & FLAG_TERMINAL),
	    tf(p->flags & FLAG_TERMINAL_RULE), tf(p->flags & FLAG_LISTENER), tf(p->flags & FLAG_STRICT));
	put("hostname ");
	str(p->hostname);
	put("\n");
	if (p->has_proxy)
		put("proxy %u.%u.%u.%u:%u\n", p->proxy_addr[0], p->proxy_addr[1], p->proxy_addr[2], p->proxy_addr[3], p->proxy_port);
	for (size_t i = 0; i < p->n_forwards; i++)
		put("forward %u\n", p->forwards[i]);
	for (size_t i = 0; i < p->n_mounts; i++) {
		const struct mount_step *m = &p->mounts[i];
		put("mount %s ro %s optional %s idmapped %s shared %s mode %o source ", mount_kind_names[m->kind],
		    tf(m->read_only), tf(m->optional), tf(m->idmapped), tf(m->shared), m->mode);
		str(m->source);
		put(" target ");
		str(m->target);
		put(" content ");
		hex(m->content, m->content_len);
		put(" field ");
		str(m->field);
		put(" via ");
		str(m->via);
		put("\n");
	}
	for (size_t i = 0; i < p->n_argv; i++) {
		put("arg ");
		str(p->argv[i]);
		put("\n");
	}
	for (size_t i = 0; i < p->n_env; i++) {
		put("env ");
		str(p->env[i]);
		put("\n");
	}
	put("cwd ");
	str(p->cwd);
	put("\n");
	put("uid %u gid %u rows %u cols %u cgroup_tasks %u\n", p->uid, p->gid, p->rows, p->cols, p->cgroup_tasks);
	put("landlock abi %u handled 0x%llx scoped 0x%llx read_access 0x%llx\n", p->ll_abi, (unsigned long long)p->ll_handled,
	    (unsigned long long)p->ll_scoped, (unsigned long long)p->ll_read_access);
	for (size_t i = 0; i < p->n_ll_rules; i++) {
		put("rule 0x%llx ", (unsigned long long)p->ll_rules[i].access);
		str(p->ll_rules[i].path);
		put("\n");
	}
	for (size_t i = 0; i < p->n_ll_except; i++) {
		put("except ");
		str(p->ll_except[i]);
		put("\n");
	}
	for (size_t i = 0; i < p->n_seccomp; i++)
		put("bpf 0x%x %u %u 0x%x\n", p->seccomp[i].code, p->seccomp[i].jt, p->seccomp[i].jf, p->seccomp[i].k);
	for (size_t i = 0; i < p->n_write_roots; i++) {
		put("write_root ");
		str(p->write_roots[i]);
		put("\n");
	}
}

int main(void)
{
	unsigned char h[4];
	out_cap = 4096;
	out = malloc(out_cap);
	if (!out)
		return 1;
	while (fread(h, 1, 4, stdin) == 4) {
		size_t n = (size_t)h[0] | (size_t)h[1] << 8 | (size_t)h[2] << 16 | (size_t)h[3] << 24;
		/* Exactly n bytes, so that the sanitizers see any read past them. */
		char *buf = malloc(n ? n : 1);
		if (!buf || fread(buf, 1, n, stdin) != n)
			return 1;
		struct plan p;
		const char *err;
		out_len = 0;
		if (plan_decode(buf, n, &p, &err)) {
			put("error: %s\n", err);
		} else {
			dump(&p);
			plan_free(&p);
		}
		free(buf);
		unsigned char l[4] = {(unsigned char)out_len, (unsigned char)(out_len >> 8), (unsigned char)(out_len >> 16),
				      (unsigned char)(out_len >> 24)};
		if (fwrite(l, 1, 4, stdout) != 4 || fwrite(out, 1, out_len, stdout) != out_len || fflush(stdout))
			return 1;
	}
	return 0;
}
