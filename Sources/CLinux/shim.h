// Linux interfaces that Swift's Glibc module leaves out: epoll, signalfd, eventfd, timerfd, sock_diag
// (the owner of a local TCP peer), and a few GNU extensions.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>

// struct ucred needs _GNU_SOURCE, which Swift's Glibc module is not built with; this is the same
// layout (socket(7), SO_PEERCRED).
#include <sys/types.h>
struct obsd_ucred {
    pid_t pid;
    uid_t uid;
    gid_t gid;
};

// accept4(2) is declared only under _GNU_SOURCE too; glibc always exports it.
#include <sys/socket.h>
extern int accept4(int sockfd, struct sockaddr *addr, socklen_t *addrlen, int flags);

// pipe2(2) too: obsctl's pipes are made close-on-exec as they are created.
#include <unistd.h>
extern int pipe2(int pipefd[2], int flags);

// pthread_getattr_np(3) is a GNU extension too: the engine reads its thread's stack bounds with it,
// to refuse an evaluation nested too deep for the stack rather than overflow it.
#include <pthread.h>
extern int pthread_getattr_np(pthread_t thread, pthread_attr_t *attr);

// A hint that `address` will be read soon: the engine's queue walks issue it for nodes a few
// places ahead, so that a graph larger than the caches is not walked one cache miss at a time.
static inline void obs_prefetch(const void *address) { __builtin_prefetch(address, 0, 3); }

// The calling thread's thread pointer (the address of its thread control block): a number that
// tells threads apart, read with one instruction where pthread_self(3) is a call. The engine's
// lock compares it on every read of a value, to know whether the reader is inside already.
#include <stdint.h>
#if defined(__x86_64__) || defined(__aarch64__)
static inline uintptr_t obs_thread_pointer(void) { return (uintptr_t)__builtin_thread_pointer(); }
#else
static inline uintptr_t obs_thread_pointer(void) { return (uintptr_t)pthread_self(); }
#endif

// mallinfo2(3): heap bytes in use, for obsbench's bytes-per-node figures.
#include <malloc.h>

// The uid that owns the socket at the other end of `fd`, a TCP connection from a process on this
// machine: NETLINK_SOCK_DIAG looks that socket up by its addresses and ports (its own are `fd`'s
// peer's, its peer's are `fd`'s own), which gives its owner, the user who made it. One request
// and one answer, from the kernel at once (the answer is waited for a second at most). 0 with
// *uid set; -1 when it cannot be told (a peer on another machine, gone already, or no sock_diag).
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/time.h>
static inline int obs_tcp_peer_uid(int fd, uid_t *uid) {
    struct sockaddr_storage local, peer;
    socklen_t local_length = sizeof local, peer_length = sizeof peer;
    if (getsockname(fd, (struct sockaddr *)&local, &local_length) != 0 ||
        getpeername(fd, (struct sockaddr *)&peer, &peer_length) != 0 || local.ss_family != peer.ss_family) {
        return -1;
    }
    struct {
        struct nlmsghdr header;
        struct inet_diag_req_v2 request;
    } message;
    memset(&message, 0, sizeof message);
    message.header.nlmsg_len = sizeof message;
    message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    message.header.nlmsg_flags = NLM_F_REQUEST;
    message.request.sdiag_family = (unsigned char)local.ss_family;
    message.request.sdiag_protocol = IPPROTO_TCP;
    message.request.idiag_states = ~0U;
    message.request.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
    message.request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    struct inet_diag_sockid *id = &message.request.id;
    if (local.ss_family == AF_INET) {
        const struct sockaddr_in *mine = (const struct sockaddr_in *)&local, *theirs = (const struct sockaddr_in *)&peer;
        id->idiag_sport = theirs->sin_port;
        id->idiag_dport = mine->sin_port;
        memcpy(id->idiag_src, &theirs->sin_addr, 4);
        memcpy(id->idiag_dst, &mine->sin_addr, 4);
    } else if (local.ss_family == AF_INET6) {
        const struct sockaddr_in6 *mine = (const struct sockaddr_in6 *)&local, *theirs = (const struct sockaddr_in6 *)&peer;
        id->idiag_sport = theirs->sin6_port;
        id->idiag_dport = mine->sin6_port;
        memcpy(id->idiag_src, &theirs->sin6_addr, 16);
        memcpy(id->idiag_dst, &mine->sin6_addr, 16);
    } else {
        return -1;
    }
    int diag = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (diag < 0) return -1;
    struct timeval second = {1, 0};
    setsockopt(diag, SOL_SOCKET, SO_RCVTIMEO, &second, sizeof second);
    struct sockaddr_nl kernel;
    memset(&kernel, 0, sizeof kernel);
    kernel.nl_family = AF_NETLINK;
    union {
        struct nlmsghdr header;
        char bytes[4096];
    } answer;
    ssize_t length = -1;
    if (sendto(diag, &message, sizeof message, 0, (struct sockaddr *)&kernel, sizeof kernel) == (ssize_t)sizeof message) {
        do { length = recv(diag, &answer, sizeof answer, 0); } while (length < 0 && errno == EINTR);
    }
    close(diag);
    // Not found is an NLMSG_ERROR answer; the one found must be the socket asked for.
    if (length < 0 || !NLMSG_OK(&answer.header, (size_t)length) || answer.header.nlmsg_type != SOCK_DIAG_BY_FAMILY ||
        answer.header.nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg))) {
        return -1;
    }
    const struct inet_diag_msg *found = (const struct inet_diag_msg *)NLMSG_DATA(&answer.header);
    if (found->id.idiag_sport != id->idiag_sport || found->id.idiag_dport != id->idiag_dport) return -1;
    *uid = found->idiag_uid;
    return 0;
}
