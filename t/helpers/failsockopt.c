/*
 * failsockopt.so: an LD_PRELOAD shim that makes the socket calls a
 * seccomp or LSM filter may refuse fail with EPERM, so that tests can see
 * what the module does when the kernel says no (t/apache/failed_release.t).
 * apache2 gets it through SBT_HTTPD_PRELOAD (t/bin/httpd), after any
 * sanitizer runtime.
 *
 *   SBT_FAILSOCKOPT=buf_lock          setsockopt(SOL_SOCKET, SO_BUF_LOCK)
 *                                     fails
 *   SBT_FAILSOCKOPT=buf_lock,restore  and so does the next
 *                                     setsockopt(SOL_SOCKET, SO_SNDBUF) on
 *                                     the same socket, the one that would
 *                                     put back the size a release shrank
 *
 * Every other call goes through untouched.  Built by t/run:
 *   cc -shared -fPIC -o t/helpers/failsockopt.so t/helpers/failsockopt.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#ifndef SO_BUF_LOCK
#define SO_BUF_LOCK 72
#endif

#define MAX_FD 65536

typedef int (*setsockopt_fn)(int, int, int, const void *, socklen_t);

/* Sockets whose SO_BUF_LOCK was just refused: their next SO_SNDBUF is. */
static unsigned char refused[MAX_FD];

static int mode(const char *what)
{
    const char *m = getenv("SBT_FAILSOCKOPT");

    return m && strstr(m, what) != NULL;
}

static int refuse(int fd, int level, int opt)
{
    int known = fd >= 0 && fd < MAX_FD;

    if (level != SOL_SOCKET) {
        return 0;
    }
    if (opt == SO_BUF_LOCK && mode("buf_lock")) {
        if (known) {
            __atomic_store_n(&refused[fd], 1, __ATOMIC_RELAXED);
        }
        return 1;
    }
    return opt == SO_SNDBUF && known && mode("restore")
           && __atomic_exchange_n(&refused[fd], 0, __ATOMIC_RELAXED);
}

int setsockopt(int fd, int level, int opt, const void *val, socklen_t len)
{
    static setsockopt_fn next;

    if (refuse(fd, level, opt)) {
        errno = EPERM;
        return -1;
    }
    if (!next) {
        next = (setsockopt_fn)dlsym(RTLD_NEXT, "setsockopt");
    }
    return next(fd, level, opt, val, len);
}
