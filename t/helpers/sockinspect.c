/*
 * sockinspect: print the kernel's view of one TCP socket held by another
 * process (the httpd child serving a test connection), as key=value lines.
 *
 * Usage:
 *   sockinspect --local-port SPORT --remote-port CPORT
 *       find the ESTABLISHED socket whose local port is SPORT (the server's
 *       listening port) and whose peer port is CPORT (the test client's
 *       local port), via /proc/net/tcp{,6} and /proc/PID/fd
 *   sockinspect --pid PID --fd FD
 *       inspect file descriptor FD of process PID directly
 *
 * The socket is duplicated into this process with pidfd_open(2) +
 * pidfd_getfd(2) (needs CAP_SYS_PTRACE over the target, i.e. root), then
 * read with getsockopt: SO_SNDBUF, SO_BUF_LOCK (Linux >= 5.15) and TCP_INFO.
 * Only reads; nothing on the socket is changed.
 *
 * Exit status: 0 ok, 2 usage, 3 socket not found, 4 pidfd/getfd failed,
 * 5 getsockopt(SO_SNDBUF) failed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>
#include <netinet/in.h>
#include <linux/tcp.h>

#ifndef SO_BUF_LOCK
#define SO_BUF_LOCK 72
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

#define TCP_ESTABLISHED_STATE 1

static void usage(void)
{
    fprintf(stderr,
            "usage: sockinspect --local-port SPORT --remote-port CPORT\n"
            "       sockinspect --pid PID --fd FD\n");
    exit(2);
}

static long parse_num(const char *s, long max)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0 || v > max) {
        fprintf(stderr, "sockinspect: bad number '%s'\n", s);
        exit(2);
    }
    return v;
}

/* Find the inode of an ESTABLISHED socket local:sport <-> peer:cport. */
static unsigned long find_inode(const char *table, unsigned sport,
                                unsigned cport)
{
    char line[512];
    FILE *f = fopen(table, "r");
    unsigned long found = 0;

    if (!f) {
        return 0;
    }
    if (!fgets(line, sizeof(line), f)) {     /* header */
        fclose(f);
        return 0;
    }
    while (fgets(line, sizeof(line), f)) {
        char local[64], remote[64];
        unsigned st, lport, rport;
        unsigned long inode;
        char *lc, *rc;

        if (sscanf(line, " %*d: %63s %63s %x %*s %*s %*s %*u %*u %lu",
                   local, remote, &st, &inode) != 4) {
            continue;
        }
        lc = strrchr(local, ':');
        rc = strrchr(remote, ':');
        if (!lc || !rc) {
            continue;
        }
        lport = (unsigned)strtoul(lc + 1, NULL, 16);
        rport = (unsigned)strtoul(rc + 1, NULL, 16);
        if (lport == sport && rport == cport
            && st == TCP_ESTABLISHED_STATE && inode != 0) {
            found = inode;
            break;
        }
    }
    fclose(f);
    return found;
}

/* Scan /proc/PID/fd/N for "socket:[inode]". */
static int find_owner(unsigned long inode, pid_t *pid, int *fd)
{
    char want[64], path[PATH_MAX], link[128];
    DIR *proc = opendir("/proc");
    struct dirent *p;

    if (!proc) {
        return -1;
    }
    snprintf(want, sizeof(want), "socket:[%lu]", inode);
    while ((p = readdir(proc)) != NULL) {
        DIR *fds;
        struct dirent *d;

        if (p->d_name[0] < '0' || p->d_name[0] > '9') {
            continue;
        }
        snprintf(path, sizeof(path), "/proc/%s/fd", p->d_name);
        fds = opendir(path);
        if (!fds) {
            continue;
        }
        while ((d = readdir(fds)) != NULL) {
            ssize_t n;

            if (d->d_name[0] == '.') {
                continue;
            }
            snprintf(path, sizeof(path), "/proc/%s/fd/%s", p->d_name,
                     d->d_name);
            n = readlink(path, link, sizeof(link) - 1);
            if (n <= 0) {
                continue;
            }
            link[n] = '\0';
            if (strcmp(link, want) == 0) {
                *pid = (pid_t)atol(p->d_name);
                *fd = atoi(d->d_name);
                closedir(fds);
                closedir(proc);
                return 0;
            }
        }
        closedir(fds);
    }
    closedir(proc);
    return -1;
}

/* Print a tcp_info field only when the kernel filled it in. */
#define TI_COVERS(len, field) \
    ((len) >= offsetof(struct tcp_info, field) \
              + sizeof(((struct tcp_info *)0)->field))
#define TI_PRINT(ti, len, field, fmt, cast) \
    do { \
        if (TI_COVERS(len, field)) { \
            printf(#field "=" fmt "\n", (cast)(ti).field); \
        } \
    } while (0)

int main(int argc, char **argv)
{
    long sport = -1, cport = -1, lpid = -1, lfd = -1;
    pid_t pid = 0;
    int tfd = -1, pidfd, sock, val, i;
    socklen_t len;
    struct tcp_info ti;

    for (i = 1; i < argc; i++) {
        if (i + 1 >= argc) {
            usage();
        }
        if (strcmp(argv[i], "--local-port") == 0) {
            sport = parse_num(argv[++i], 65535);
        }
        else if (strcmp(argv[i], "--remote-port") == 0) {
            cport = parse_num(argv[++i], 65535);
        }
        else if (strcmp(argv[i], "--pid") == 0) {
            lpid = parse_num(argv[++i], INT_MAX);
        }
        else if (strcmp(argv[i], "--fd") == 0) {
            lfd = parse_num(argv[++i], INT_MAX);
        }
        else {
            usage();
        }
    }

    if (lpid >= 0 && lfd >= 0) {
        pid = (pid_t)lpid;
        tfd = (int)lfd;
    }
    else if (sport >= 0 && cport >= 0) {
        unsigned long inode = find_inode("/proc/net/tcp", (unsigned)sport,
                                         (unsigned)cport);
        if (!inode) {
            inode = find_inode("/proc/net/tcp6", (unsigned)sport,
                               (unsigned)cport);
        }
        if (!inode) {
            fprintf(stderr, "sockinspect: no established socket "
                    "local port %ld peer port %ld\n", sport, cport);
            return 3;
        }
        if (find_owner(inode, &pid, &tfd) != 0) {
            fprintf(stderr, "sockinspect: no process holds socket "
                    "inode %lu (not root?)\n", inode);
            return 3;
        }
        printf("inode=%lu\n", inode);
    }
    else {
        usage();
    }

    pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0) {
        fprintf(stderr, "sockinspect: pidfd_open(%d): %s\n", (int)pid,
                strerror(errno));
        return 4;
    }
    sock = (int)syscall(SYS_pidfd_getfd, pidfd, tfd, 0);
    if (sock < 0) {
        fprintf(stderr, "sockinspect: pidfd_getfd(%d, %d): %s\n", (int)pid,
                tfd, strerror(errno));
        return 4;
    }
    printf("pid=%d\nfd=%d\n", (int)pid, tfd);

    len = sizeof(val);
    if (getsockopt(sock, SOL_SOCKET, SO_SNDBUF, &val, &len) != 0) {
        fprintf(stderr, "sockinspect: getsockopt(SO_SNDBUF): %s\n",
                strerror(errno));
        return 5;
    }
    printf("so_sndbuf=%d\n", val);

    len = sizeof(val);
    if (getsockopt(sock, SOL_SOCKET, SO_BUF_LOCK, &val, &len) == 0) {
        printf("so_buf_lock=%d\n", val);
        printf("sndbuf_locked=%d\n", (val & 1) ? 1 : 0);
    }
    else {
        /* kernel < 5.15: the lock cannot be read */
        printf("so_buf_lock=unsupported\n");
    }

    len = sizeof(val);
    if (getsockopt(sock, SOL_SOCKET, SO_RCVBUF, &val, &len) == 0) {
        printf("so_rcvbuf=%d\n", val);
    }

    memset(&ti, 0, sizeof(ti));
    len = sizeof(ti);
    if (getsockopt(sock, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0) {
        printf("tcpi_len=%u\n", (unsigned)len);
        TI_PRINT(ti, len, tcpi_state, "%u", unsigned);
        TI_PRINT(ti, len, tcpi_snd_mss, "%u", unsigned);
        TI_PRINT(ti, len, tcpi_snd_cwnd, "%u", unsigned);
        TI_PRINT(ti, len, tcpi_rtt, "%u", unsigned);
        TI_PRINT(ti, len, tcpi_rttvar, "%u", unsigned);
        TI_PRINT(ti, len, tcpi_unacked, "%u", unsigned);
        TI_PRINT(ti, len, tcpi_bytes_acked, "%llu", unsigned long long);
        TI_PRINT(ti, len, tcpi_notsent_bytes, "%u", unsigned);
        TI_PRINT(ti, len, tcpi_min_rtt, "%u", unsigned);
        TI_PRINT(ti, len, tcpi_delivery_rate, "%llu", unsigned long long);
        TI_PRINT(ti, len, tcpi_busy_time, "%llu", unsigned long long);
        TI_PRINT(ti, len, tcpi_rwnd_limited, "%llu", unsigned long long);
        TI_PRINT(ti, len, tcpi_sndbuf_limited, "%llu", unsigned long long);
    }

    close(sock);
    close(pidfd);
    return 0;
}
