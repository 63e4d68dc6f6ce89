// Linux interfaces that Swift's Glibc module leaves out: epoll, signalfd, eventfd, timerfd, and a
// few GNU extensions.
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
