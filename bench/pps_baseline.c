/* Minimal C baseline for bench/hostlib_pps.py: AF_PACKET + sendmmsg/recvmmsg, no rings.
 *
 *   pps_baseline client IFNAME COUNT WINDOW SRC_MAC DST_MAC SRC_IP DST_IP PORT
 *       keeps WINDOW 318-byte p4reduce DATA frames in flight (a new one per frame
 *       received) until COUNT came back; prints "packets seconds".
 *   pps_baseline reflect IFNAME SECONDS
 *       answers every p4reduce frame like an N=1 switch (docs/protocol.md 6-12: the
 *       result of a single contributor is its own packet): RESULT type, addresses swapped,
 *       source port 0x5030, the fingerprint range (70 bytes) after an ANNOUNCE, zero
 *       values for a SKIP. Offsets follow hostlib/protocol.py (protocol 2, 20-byte header).
 *
 * Both are what a C worker/switch loop costs in the kernel and in user space with one
 * syscall per batch, which is the bar hostlib's Python loop is compared with. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH 256
#define WIDTH 318      /* FRAME_BYTES_WITH_VALUES */
#define HDR 62         /* EXTENSION_OFFSET: Ethernet + IPv4 + UDP + the 20-byte header */
#define ANNOUNCED 70   /* FRAME_BYTES_WITH_FINGERPRINT */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int open_sock(const char *ifname) {
    int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_IP));
    if (fd < 0) { perror("socket"); exit(1); }
    struct sockaddr_ll sll = {0};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_IP);
    sll.sll_ifindex = if_nametoindex(ifname);
    if (!sll.sll_ifindex) { perror("if_nametoindex"); exit(1); }
    if (bind(fd, (struct sockaddr *)&sll, sizeof sll) < 0) { perror("bind"); exit(1); }
    int one = 1, big = 8 << 20;
    setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
    return fd;
}

static uint16_t csum(const uint8_t *p, int n) {
    uint32_t s = 0;
    for (int i = 0; i < n; i += 2) s += (p[i] << 8) | p[i + 1];
    while (s >> 16) s = (s & 0xffff) + (s >> 16);
    return (uint16_t)~s;
}

static int is_p4r(const uint8_t *f, int len) {
    return len >= HDR && f[12] == 8 && f[13] == 0 && f[23] == 17 && f[36] == 0x50 &&
           (f[37] & 0xf0) == 0x30;
}

static uint8_t rx[BATCH][2048], tx[BATCH][WIDTH];
static struct iovec rxiov[BATCH], txiov[BATCH];
static struct mmsghdr rxm[BATCH], txm[BATCH];

static void setup_vecs(void) {
    for (int i = 0; i < BATCH; i++) {
        rxiov[i].iov_base = rx[i]; rxiov[i].iov_len = sizeof rx[i];
        rxm[i].msg_hdr.msg_iov = &rxiov[i]; rxm[i].msg_hdr.msg_iovlen = 1;
        txiov[i].iov_base = tx[i]; txiov[i].iov_len = WIDTH;
        txm[i].msg_hdr.msg_iov = &txiov[i]; txm[i].msg_hdr.msg_iovlen = 1;
    }
}

static void send_all(int fd, int n) {
    int done = 0;
    while (done < n) {
        int r = sendmmsg(fd, txm + done, n - done, 0);
        if (r < 0) { struct pollfd p = {fd, POLLOUT, 0}; poll(&p, 1, 1); continue; }
        done += r;
    }
}

static void parse_mac(const char *s, uint8_t *m) {
    unsigned v[6];
    sscanf(s, "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]);
    for (int i = 0; i < 6; i++) m[i] = (uint8_t)v[i];
}

static int client(char **a) {
    int fd = open_sock(a[0]);
    long count = atol(a[1]);
    int window = atoi(a[2]);
    uint8_t f[WIDTH] = {0};
    parse_mac(a[4], f); parse_mac(a[3], f + 6);
    f[12] = 8; f[14] = 0x45; f[16] = 304 >> 8; f[17] = 304 & 0xff;   /* IPv4 total length 304 */
    f[20] = 0x40; f[22] = 64; f[23] = 17;
    inet_pton(AF_INET, a[5], f + 26); inet_pton(AF_INET, a[6], f + 30);
    uint16_t c = csum(f + 14, 20); f[24] = c >> 8; f[25] = c & 0xff;
    int port = atoi(a[7]);
    f[34] = port >> 8; f[35] = port & 0xff; f[36] = 0x50; f[37] = 0x30;
    f[38] = 284 >> 8; f[39] = 284 & 0xff;   /* UDP length 284 */
    f[42] = 0x22;                       /* protocol 2, DATA */
    f[44] = 0; f[45] = 7;               /* job 7 */
    f[53] = 1;                          /* epoch 1 */
    f[59] = f[60] = f[61] = 0xff;       /* next_block END_OF_STREAM */
    for (int i = 0; i < BATCH; i++) memcpy(tx[i], f, WIDTH);
    setup_vecs();
    long sent = 0, got = 0;
    double t0 = now();
    while (sent < window && sent < count) {
        int n = (int)((window - sent) < BATCH ? (window - sent) : BATCH);
        for (int i = 0; i < n; i++) { tx[i][47] = (uint8_t)(sent + i); }
        send_all(fd, n);
        sent += n;
    }
    while (got < count) {
        struct timespec to = {1, 0};
        int r = recvmmsg(fd, rxm, BATCH, MSG_WAITFORONE, &to);
        if (r <= 0) { if (now() - t0 > 60) break; continue; }
        int ok = 0;
        for (int i = 0; i < r; i++) ok += is_p4r(rx[i], rxm[i].msg_len) && (rx[i][42] & 0xf) == 4;
        got += ok;
        int n = ok;
        if (sent + n > count) n = (int)(count - sent);
        if (n > 0) {
            for (int i = 0; i < n; i++) { tx[i][47] = (uint8_t)(sent + i); }
            send_all(fd, n);
            sent += n;
        }
    }
    printf("%ld %.6f\n", got, now() - t0);
    return 0;
}

static int reflect(char **a) {
    int fd = open_sock(a[0]);
    double until = now() + atof(a[1]);
    setup_vecs();
    while (now() < until) {
        struct timespec to = {0, 100000000};
        int r = recvmmsg(fd, rxm, BATCH, MSG_WAITFORONE, &to);
        if (r <= 0) continue;
        int n = 0;
        for (int i = 0; i < r; i++) {
            uint8_t *f = rx[i], *o = tx[n];
            if (!is_p4r(f, rxm[i].msg_len)) continue;
            int type = f[42] & 0xf, len = type == 1 ? ANNOUNCED : WIDTH;
            memcpy(o, f + 6, 6); memcpy(o + 6, f, 6); memcpy(o + 12, f + 12, 14);
            memcpy(o + 26, f + 30, 4); memcpy(o + 30, f + 26, 4);
            o[34] = 0x50; o[35] = 0x30; o[36] = f[34]; o[37] = f[35];
            o[16] = (len - 14) >> 8; o[17] = (len - 14) & 0xff; o[22] = 64;
            o[24] = o[25] = 0;
            uint16_t c = csum(o + 14, 20); o[24] = c >> 8; o[25] = c & 0xff;
            o[38] = (len - 34) >> 8; o[39] = (len - 34) & 0xff; o[40] = o[41] = 0;
            memcpy(o + 42, f + 42, HDR - 42);
            o[42] = 0x24; o[43] &= 0x80;                 /* RESULT, version kept, flags 0 */
            if (type == 2) memcpy(o + HDR, f + HDR, WIDTH - HDR);
            else if (type == 1) memcpy(o + HDR, f + HDR, ANNOUNCED - HDR);
            else memset(o + HDR, 0, WIDTH - HDR);
            txiov[n].iov_len = len;
            n++;
        }
        if (n) send_all(fd, n);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 10 && !strcmp(argv[1], "client")) return client(argv + 2);
    if (argc >= 4 && !strcmp(argv[1], "reflect")) return reflect(argv + 2);
    fprintf(stderr, "usage: %s client IF COUNT WINDOW SRC_MAC DST_MAC SRC_IP DST_IP PORT\n"
                    "       %s reflect IF SECONDS\n", argv[0], argv[0]);
    return 2;
}
