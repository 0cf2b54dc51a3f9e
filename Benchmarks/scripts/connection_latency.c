// A closed-loop HTTP/1.1 client that keeps each request's latency and its connection: wrk reports one distribution
// for all connections, which cannot show whether some connections (those of one event loop) wait longer than others.
//   connection_latency PORT CONNECTIONS SECONDS BODY_FILE
// Posts BODY_FILE to /v1/validate on CONNECTIONS keep-alive connections, one request outstanding on each, for
// SECONDS after a one-second warm-up, and prints the rate, the latency percentiles, and the spread of the
// connections' mean latencies (and of connections opened at even and odd positions, which the server deals to
// its two loops in turn when it has two).
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { maxConnections = 1024, bufferBytes = 65536 };

typedef struct {
    int descriptor;
    double sentAt;
    char buffer[bufferBytes];
    int length;
    long answered;
    double latencySum;
} Connection;

static Connection connections[maxConnections];

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int compareFloats(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static void sendAll(int descriptor, const char *bytes, int count) {
    while (count > 0) {
        ssize_t sent = write(descriptor, bytes, count);
        if (sent <= 0) { perror("write"); exit(1); }
        bytes += sent;
        count -= sent;
    }
}

int main(int argc, char **argv) {
    if (argc != 5) { fprintf(stderr, "usage: %s PORT CONNECTIONS SECONDS BODY_FILE\n", argv[0]); return 2; }
    int port = atoi(argv[1]), count = atoi(argv[2]);
    double seconds = atof(argv[3]);
    if (count < 2 || count > maxConnections) { fprintf(stderr, "2 to %d connections\n", maxConnections); return 2; }
    FILE *file = fopen(argv[4], "rb");
    if (!file) { perror(argv[4]); return 1; }
    static char request[1 << 20];
    static char body[(1 << 20) - 512];
    int bodyLength = (int)fread(body, 1, sizeof body, file);
    fclose(file);
    int requestLength = sprintf(request, "POST /v1/validate HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", bodyLength);
    memcpy(request + requestLength, body, bodyLength);
    requestLength += bodyLength;

    long capacity = 20000000;
    float *latencies = malloc(capacity * sizeof(float));
    long recorded = 0;
    int poll = epoll_create1(0);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(0x7f000001)};
    for (int index = 0; index < count; index++) {
        int descriptor = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(descriptor, (struct sockaddr *)&address, sizeof address) != 0) { perror("connect"); return 1; }
        int one = 1;
        setsockopt(descriptor, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        connections[index].descriptor = descriptor;
        struct epoll_event event = {.events = EPOLLIN, .data.u32 = index};
        epoll_ctl(poll, EPOLL_CTL_ADD, descriptor, &event);
    }
    double start = now(), warm = start + 1, end = warm + seconds;
    for (int index = 0; index < count; index++) {
        connections[index].sentAt = now();
        sendAll(connections[index].descriptor, request, requestLength);
    }
    struct epoll_event events[maxConnections];
    while (now() < end) {
        int ready = epoll_wait(poll, events, maxConnections, 100);
        for (int k = 0; k < ready; k++) {
            Connection *c = &connections[events[k].data.u32];
            ssize_t received = read(c->descriptor, c->buffer + c->length, bufferBytes - 1 - c->length);
            if (received <= 0) { fprintf(stderr, "connection %u closed\n", events[k].data.u32); return 1; }
            c->length += received;
            c->buffer[c->length] = 0;
            char *headEnd = strstr(c->buffer, "\r\n\r\n");
            if (!headEnd) continue;
            char *lengthField = strcasestr(c->buffer, "content-length:");
            int total = (int)(headEnd + 4 - c->buffer) + (lengthField && lengthField < headEnd ? atoi(lengthField + 15) : 0);
            if (c->length < total) continue;
            double answeredAt = now(), latency = (answeredAt - c->sentAt) * 1e3;
            if (answeredAt > warm && recorded < capacity) {
                latencies[recorded++] = (float)latency;
                c->answered++;
                c->latencySum += latency;
            }
            memmove(c->buffer, c->buffer + total, c->length - total);
            c->length -= total;
            c->sentAt = now();
            sendAll(c->descriptor, request, requestLength);
        }
    }
    if (recorded == 0) { fprintf(stderr, "no answers\n"); return 1; }
    double least = 1e9, most = 0, sums[2] = {0, 0};
    long answered[2] = {0, 0};
    for (int index = 0; index < count; index++) {
        Connection *c = &connections[index];
        double mean = c->answered ? c->latencySum / c->answered : 1e9;
        if (mean < least) least = mean;
        if (mean > most) most = mean;
        sums[index % 2] += c->latencySum;
        answered[index % 2] += c->answered;
    }
    qsort(latencies, recorded, sizeof(float), compareFloats);
    double sum = 0;
    for (long i = 0; i < recorded; i++) sum += latencies[i];
    printf("%.0f req/s, mean %.2f ms, p50 %.2f, p90 %.2f, p99 %.2f, max %.2f; connection means %.2f to %.2f ms; "
           "even/odd connections %.2f/%.2f ms\n",
        recorded / seconds, sum / recorded, latencies[recorded / 2], latencies[recorded * 9 / 10],
        latencies[recorded * 99 / 100], latencies[recorded - 1], least, most,
        answered[0] ? sums[0] / answered[0] : 0, answered[1] ? sums[1] / answered[1] : 0);
    return 0;
}
