#ifndef RECEIPTD_CEPOLL_SHIM_H
#define RECEIPTD_CEPOLL_SHIM_H

// Linux readiness notification for HTTP1Server's event loops. Swift's Glibc module leaves these headers out.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
// getrandom: request ids come from the kernel's CSPRNG, fetched in batches.
#include <sys/random.h>

// glibc declares accept4 only under _GNU_SOURCE, which the Glibc module is not built with; the function is always
// there. It sets O_NONBLOCK and FD_CLOEXEC atomically with the accept (no window for a forked child to inherit it).
extern int accept4(int sockfd, struct sockaddr *addr, socklen_t *addrlen, int flags);

#endif
