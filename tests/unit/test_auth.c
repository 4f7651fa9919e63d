/*
 * Shared-secret authentication: SHA-256 (OpenSSL's libcrypto underneath)
 * against the FIPS 180 vectors (and lengths around the padding edges), HMAC-SHA256 against RFC 4231, the
 * exchange over a real socketpair with a forked child as the peer (right
 * and wrong keys both ways, a peer that closes, one that never answers, and
 * a hand-built peer that pins the byte layout of agg/auth.h), loading the
 * secret from the environment and from files, and loopback detection.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agg/auth.h"
#include "agg/sock.h"
#include "agg/status.h"

/* The layout documented in agg/auth.h. */
_Static_assert(sizeof(agg_auth_challenge_t) == 40, "challenge size");
_Static_assert(offsetof(agg_auth_challenge_t, version) == 4, "challenge.version");
_Static_assert(offsetof(agg_auth_challenge_t, nonce) == 8, "challenge.nonce");
_Static_assert(sizeof(agg_auth_response_t) == 72, "response size");
_Static_assert(offsetof(agg_auth_response_t, version) == 4, "response.version");
_Static_assert(offsetof(agg_auth_response_t, nonce) == 8, "response.nonce");
_Static_assert(offsetof(agg_auth_response_t, proof) == 40, "response.proof");
_Static_assert(sizeof(agg_auth_verdict_t) == 40, "verdict size");
_Static_assert(offsetof(agg_auth_verdict_t, proof) == 8, "verdict.proof");

#define TMO 2000 /* ms, for exchanges that should finish at once */

/* ---- helpers -------------------------------------------------------- */

static void assert_hex(const uint8_t *got, const char *want)
{
    char hex[65];
    int i;

    for (i = 0; i < 32; i++) {
        snprintf(hex + 2 * i, 3, "%02x", got[i]);
    }
    assert_string_equal(hex, want);
}

static agg_auth_t key_of(const char *s)
{
    agg_auth_t a = {.len = strlen(s), .set = 1};

    memcpy(a.key, s, a.len);
    return a;
}

/* What the forked peer does on its end of the socketpair. */
typedef enum peer_kind { PEER_SERVER, PEER_CLIENT, PEER_CLOSE, PEER_SILENT } peer_kind_t;

typedef struct peer {
    pid_t pid;
    int   fd;     /* the test's end of the socketpair */
    int   report; /* the child writes its agg_status_t here */
    int   hold;   /* closing it releases a silent child */
} peer_t;

static void peer_start(peer_t *p, peer_kind_t kind, const char *key)
{
    int sv[2], rep[2], hold[2];
    agg_auth_t a = key_of(key);
    int32_t st   = AGG_OK;
    char why[256], c;

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    assert_int_equal(pipe(rep), 0);
    assert_int_equal(pipe(hold), 0);
    p->pid = fork();
    assert_true(p->pid >= 0);
    if (p->pid == 0) {
        /* no cmocka in here: the verdict goes back through the pipe */
        close(sv[0]);
        close(rep[0]);
        close(hold[1]);
        if (kind == PEER_SERVER) {
            st = agg_auth_server(sv[1], &a, TMO, why, sizeof(why));
        } else if (kind == PEER_CLIENT) {
            st = agg_auth_client(sv[1], &a, TMO, why, sizeof(why));
        } else if (kind == PEER_CLOSE) {
            close(sv[1]);
        } else {
            while (read(hold[0], &c, 1) > 0) {
            }
        }
        _exit(write(rep[1], &st, sizeof(st)) == sizeof(st) ? 0 : 1);
    }
    close(sv[1]);
    close(rep[1]);
    close(hold[0]);
    p->fd     = sv[0];
    p->report = rep[0];
    p->hold   = hold[1];
}

/* Closes the test's end, reaps the child and returns its status. */
static agg_status_t peer_finish(peer_t *p)
{
    int32_t st = 1;
    int wstatus;

    close(p->fd);
    close(p->hold);
    assert_int_equal(read(p->report, &st, sizeof(st)), sizeof(st));
    close(p->report);
    assert_int_equal(waitpid(p->pid, &wstatus, 0), p->pid);
    assert_true(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
    return (agg_status_t)st;
}

/* ---- SHA-256 and HMAC ------------------------------------------------ */

static void test_sha256_fips(void **state)
{
    static const struct {
        const char *msg, *digest;
    } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopq"
         "klmnopqrlmnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
    };
    uint8_t out[32];
    char *million;
    size_t i;

    for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        agg_sha256(v[i].msg, strlen(v[i].msg), out);
        assert_hex(out, v[i].digest);
    }
    million = malloc(1000000);
    assert_non_null(million);
    memset(million, 'a', 1000000);
    agg_sha256(million, 1000000, out);
    free(million);
    assert_hex(out, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

/* Messages of 'a's whose length puts the padding on each side of a block edge. */
static void test_sha256_padding(void **state)
{
    static const struct {
        size_t      len;
        const char *digest;
    } v[] = {
        {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
        {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
        {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
        {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
        {119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"},
        {120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c"},
    };
    char msg[120];
    uint8_t out[32];
    size_t i;

    memset(msg, 'a', sizeof(msg));
    for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        agg_sha256(msg, v[i].len, out);
        assert_hex(out, v[i].digest);
    }
}

static void test_hmac_rfc4231(void **state)
{
    uint8_t k0b[20], kaa20[20], k25[25], kaa131[131], ddd[50], dcd[50], out[32];
    const char *d6 = "Test Using Larger Than Block-Size Key - Hash Key First";
    const char *d7 = "This is a test using a larger than block-size key and a larger than "
                     "block-size data. The key needs to be hashed before being used by the "
                     "HMAC algorithm.";
    int i;

    memset(k0b, 0x0b, sizeof(k0b));
    memset(kaa20, 0xaa, sizeof(kaa20));
    memset(kaa131, 0xaa, sizeof(kaa131));
    memset(ddd, 0xdd, sizeof(ddd));
    memset(dcd, 0xcd, sizeof(dcd));
    for (i = 0; i < 25; i++) {
        k25[i] = (uint8_t)(i + 1);
    }
    agg_hmac_sha256(k0b, sizeof(k0b), "Hi There", 8, out);
    assert_hex(out, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    agg_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, out);
    assert_hex(out, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    agg_hmac_sha256(kaa20, sizeof(kaa20), ddd, sizeof(ddd), out);
    assert_hex(out, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
    agg_hmac_sha256(k25, sizeof(k25), dcd, sizeof(dcd), out);
    assert_hex(out, "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
    agg_hmac_sha256(kaa131, sizeof(kaa131), d6, strlen(d6), out);
    assert_hex(out, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    agg_hmac_sha256(kaa131, sizeof(kaa131), d7, strlen(d7), out);
    assert_hex(out, "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

/* ---- the exchange ---------------------------------------------------- */

static void test_auth_right_key(void **state)
{
    agg_auth_t a = key_of("correct horse battery staple");
    char why[256] = "";
    peer_t p;

    peer_start(&p, PEER_CLIENT, "correct horse battery staple");
    assert_int_equal(agg_auth_server(p.fd, &a, TMO, why, sizeof(why)), AGG_OK);
    assert_int_equal(peer_finish(&p), AGG_OK);

    /* the other way round, on a non-blocking socket */
    peer_start(&p, PEER_SERVER, "correct horse battery staple");
    assert_int_equal(fcntl(p.fd, F_SETFL, O_NONBLOCK), 0);
    assert_int_equal(agg_auth_client(p.fd, &a, TMO, why, sizeof(why)), AGG_OK);
    assert_int_equal(peer_finish(&p), AGG_OK);
}

static void test_auth_wrong_key(void **state)
{
    agg_auth_t a = key_of("secret-one");
    char why[256] = "";
    peer_t p;

    peer_start(&p, PEER_CLIENT, "secret-two");
    assert_int_equal(agg_auth_server(p.fd, &a, TMO, why, sizeof(why)), AGG_ERR_AUTH);
    assert_non_null(strstr(why, "wrong shared secret"));
    assert_int_equal(peer_finish(&p), AGG_ERR_AUTH);

    /* a key that is a prefix of the other is still another key */
    why[0] = '\0';
    peer_start(&p, PEER_SERVER, "secret-one!");
    assert_int_equal(agg_auth_client(p.fd, &a, TMO, why, sizeof(why)), AGG_ERR_AUTH);
    assert_non_null(strstr(why, "refused"));
    assert_non_null(strstr(why, "wrong shared secret"));
    assert_int_equal(peer_finish(&p), AGG_ERR_AUTH);
}

static void test_auth_peer_closes(void **state)
{
    agg_auth_t a = key_of("k");
    char why[256] = "";
    peer_t p;

    peer_start(&p, PEER_CLOSE, "k");
    assert_int_equal(agg_auth_server(p.fd, &a, TMO, why, sizeof(why)), AGG_ERR_IO);
    assert_non_null(strstr(why, "connection lost"));
    peer_finish(&p);

    peer_start(&p, PEER_CLOSE, "k");
    assert_int_equal(agg_auth_client(p.fd, &a, TMO, why, sizeof(why)), AGG_ERR_IO);
    peer_finish(&p);
}

static void test_auth_peer_silent(void **state)
{
    agg_auth_t a = key_of("k");
    char why[256] = "";
    int64_t t0, ms;
    peer_t p;

    peer_start(&p, PEER_SILENT, "k");
    t0 = agg_time_ms();
    assert_int_equal(agg_auth_server(p.fd, &a, 300, why, sizeof(why)), AGG_ERR_TIMEOUT);
    ms = agg_time_ms() - t0;
    assert_in_range(ms, 290, 800);
    assert_non_null(strstr(why, "timed out"));
    peer_finish(&p);

    peer_start(&p, PEER_SILENT, "k");
    t0 = agg_time_ms();
    assert_int_equal(agg_auth_client(p.fd, &a, 300, why, sizeof(why)), AGG_ERR_TIMEOUT);
    ms = agg_time_ms() - t0;
    assert_in_range(ms, 290, 800);
    peer_finish(&p);
}

static void test_auth_no_key(void **state)
{
    agg_auth_t none = {.set = 0};
    char why[256] = "";

    assert_int_equal(agg_auth_server(-1, &none, TMO, why, sizeof(why)), AGG_ERR_INVALID_PARAM);
    assert_non_null(strstr(why, "no shared secret"));
    assert_int_equal(agg_auth_client(-1, NULL, TMO, why, sizeof(why)), AGG_ERR_INVALID_PARAM);
}

/* The test plays the client byte by byte, as agg/auth.h describes it. */
static void test_auth_wire_layout(void **state)
{
    static const char key[] = "pinned-layout-key";
    uint8_t ch[40], rsp[72], vd[40], msg[70], want[32];
    int i;
    peer_t p;

    peer_start(&p, PEER_SERVER, key);
    assert_int_equal(agg_sock_recv_all(p.fd, ch, sizeof(ch), TMO), AGG_OK);
    assert_memory_equal(ch, "AGAU\x01\0\0\0", 8);

    memcpy(rsp, "AGAU\x01\0\0\0", 8);
    for (i = 0; i < 32; i++) {
        rsp[8 + i] = (uint8_t)(0xc0 + i); /* Nc */
    }
    memcpy(msg, "client", 6);
    memcpy(msg + 6, ch + 8, 32);
    memcpy(msg + 38, rsp + 8, 32);
    agg_hmac_sha256(key, strlen(key), msg, sizeof(msg), rsp + 40);
    assert_int_equal(agg_sock_send_all(p.fd, rsp, sizeof(rsp), TMO), AGG_OK);

    assert_int_equal(agg_sock_recv_all(p.fd, vd, sizeof(vd), TMO), AGG_OK);
    assert_memory_equal(vd, "\0\0\0\0\0\0\0\0", 8);
    memcpy(msg, "server", 6);
    memcpy(msg + 6, rsp + 8, 32);
    memcpy(msg + 38, ch + 8, 32);
    agg_hmac_sha256(key, strlen(key), msg, sizeof(msg), want);
    assert_memory_equal(vd + 8, want, 32);
    assert_int_equal(peer_finish(&p), AGG_OK);

    /* two challenges never share a nonce */
    peer_start(&p, PEER_SERVER, key);
    assert_int_equal(agg_sock_recv_all(p.fd, rsp, 40, TMO), AGG_OK);
    assert_memory_not_equal(rsp + 8, ch + 8, 32);
    assert_int_equal(peer_finish(&p), AGG_ERR_IO);
}

/* A server that does not know the key cannot pass by saying "accepted". */
static void test_auth_impostor_server(void **state)
{
    uint8_t ch[40] = "AGAU\x01", rsp[72], vd[40];
    peer_t p;

    memset(vd, 0, sizeof(vd));
    memset(vd + 8, 0x5a, 32);
    peer_start(&p, PEER_CLIENT, "k");
    assert_int_equal(agg_sock_send_all(p.fd, ch, sizeof(ch), TMO), AGG_OK);
    assert_int_equal(agg_sock_recv_all(p.fd, rsp, sizeof(rsp), TMO), AGG_OK);
    assert_int_equal(agg_sock_send_all(p.fd, vd, sizeof(vd), TMO), AGG_OK);
    assert_int_equal(peer_finish(&p), AGG_ERR_AUTH);
}

/* A peer that speaks something else, or another version, is told apart from a wrong key. */
static void test_auth_foreign_peer(void **state)
{
    uint8_t buf[72];
    peer_t p;

    /* a challenge from a later version */
    memset(buf, 0x11, sizeof(buf));
    memcpy(buf, "AGAU\x02\0\0\0", 8);
    peer_start(&p, PEER_CLIENT, "k");
    assert_int_equal(agg_sock_send_all(p.fd, buf, 40, TMO), AGG_OK);
    assert_int_equal(peer_finish(&p), AGG_ERR_VERSION);

    /* an answer to the challenge from something that is no client of ours */
    peer_start(&p, PEER_SERVER, "k");
    assert_int_equal(agg_sock_recv_all(p.fd, buf, 40, TMO), AGG_OK);
    memset(buf, 'x', sizeof(buf));
    memcpy(buf, "GET / HTTP/1.0\r\n", 16);
    assert_int_equal(agg_sock_send_all(p.fd, buf, sizeof(buf), TMO), AGG_OK);
    assert_int_equal(peer_finish(&p), AGG_ERR_PROTOCOL);
}

/* ---- loading the secret ---------------------------------------------- */

static char tmpdir[64];

static int load_setup(void **state)
{
    strcpy(tmpdir, "/tmp/test_auth.XXXXXX");
    unsetenv(AGG_AUTH_ENV);
    return mkdtemp(tmpdir) == NULL ? -1 : 0;
}

static int load_teardown(void **state)
{
    char cmd[128];

    unsetenv(AGG_AUTH_ENV);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Writes `len` bytes to tmpdir/name with `mode`; returns the path (static). */
static const char *key_file(const char *name, const void *data, size_t len, mode_t mode)
{
    static char path[128];
    int fd;

    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    assert_int_equal(fchmod(fd, mode), 0);
    close(fd);
    return path;
}

static void test_load_env(void **state)
{
    const char *loose = key_file("loose", "x\n", 2, 0644);
    char why[256] = "", big[AGG_AUTH_KEY_MAX + 2];
    agg_auth_t a;

    /* the variable wins over the file, which is then not even looked at */
    assert_int_equal(setenv(AGG_AUTH_ENV, "from-the-env", 1), 0);
    assert_int_equal(agg_auth_load(&a, loose, why, sizeof(why)), AGG_OK);
    assert_int_equal(a.set, 1);
    assert_int_equal(a.len, 12);
    assert_memory_equal(a.key, "from-the-env", 12);

    memset(big, 's', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(setenv(AGG_AUTH_ENV, big, 1), 0);
    assert_int_equal(agg_auth_load(&a, NULL, why, sizeof(why)), AGG_ERR_INVALID_PARAM);
    assert_non_null(strstr(why, AGG_AUTH_ENV));

    /* empty is unset: no secret at all */
    assert_int_equal(setenv(AGG_AUTH_ENV, "", 1), 0);
    assert_int_equal(agg_auth_load(&a, NULL, why, sizeof(why)), AGG_OK);
    assert_int_equal(a.set, 0);
    assert_int_equal(agg_auth_load(&a, "", why, sizeof(why)), AGG_OK);
    assert_int_equal(a.set, 0);
    unsetenv(AGG_AUTH_ENV);
}

static void test_load_file(void **state)
{
    char why[256] = "", big[AGG_AUTH_KEY_MAX + 1];
    const char *path;
    agg_auth_t a;

    path = key_file("good", "file-secret\n", 12, 0600);
    assert_int_equal(agg_auth_load(&a, path, why, sizeof(why)), AGG_OK);
    assert_int_equal(a.set, 1);
    assert_int_equal(a.len, 11);
    assert_memory_equal(a.key, "file-secret", 11);

    path = key_file("crlf", "dos\r\n", 5, 0400);
    assert_int_equal(agg_auth_load(&a, path, why, sizeof(why)), AGG_OK);
    assert_int_equal(a.len, 3);

    /* exactly the longest secret, with and without a newline after it */
    memset(big, 'k', AGG_AUTH_KEY_MAX);
    big[AGG_AUTH_KEY_MAX] = '\n';
    path = key_file("max", big, AGG_AUTH_KEY_MAX + 1, 0600);
    assert_int_equal(agg_auth_load(&a, path, why, sizeof(why)), AGG_OK);
    assert_int_equal(a.len, AGG_AUTH_KEY_MAX);
    big[AGG_AUTH_KEY_MAX] = 'k';
    path = key_file("long", big, AGG_AUTH_KEY_MAX + 1, 0600);
    assert_int_equal(agg_auth_load(&a, path, why, sizeof(why)), AGG_ERR_INVALID_PARAM);
    assert_non_null(strstr(why, path));
    assert_non_null(strstr(why, "longer"));
}

static void test_load_file_refused(void **state)
{
    char why[256] = "";
    const char *path;
    agg_auth_t a = {.set = 7};

    path = key_file("world", "s3cret\n", 7, 0644);
    assert_int_equal(agg_auth_load(&a, path, why, sizeof(why)), AGG_ERR_INVALID_PARAM);
    assert_non_null(strstr(why, path));
    assert_non_null(strstr(why, "0644"));
    assert_int_equal(a.set, 7); /* untouched */

    path = key_file("group", "s3cret\n", 7, 0640);
    assert_int_equal(agg_auth_load(&a, path, why, sizeof(why)), AGG_ERR_INVALID_PARAM);
    assert_non_null(strstr(why, path));

    path = key_file("empty", "", 0, 0600);
    assert_int_equal(agg_auth_load(&a, path, why, sizeof(why)), AGG_ERR_INVALID_PARAM);
    assert_non_null(strstr(why, path));
    assert_non_null(strstr(why, "empty"));
    path = key_file("newline", "\n", 1, 0600);
    assert_int_equal(agg_auth_load(&a, path, why, sizeof(why)), AGG_ERR_INVALID_PARAM);
    assert_non_null(strstr(why, "empty"));

    assert_int_equal(agg_auth_load(&a, tmpdir, why, sizeof(why)), AGG_ERR_INVALID_PARAM);
    assert_non_null(strstr(why, "not a regular file"));
    assert_int_equal(agg_auth_load(&a, "/nonexistent/agg.key", why, sizeof(why)),
                     AGG_ERR_INVALID_PARAM);
    assert_non_null(strstr(why, "/nonexistent/agg.key"));
    assert_int_equal(a.set, 7);
}

/* ---- loopback -------------------------------------------------------- */

static void test_loopback(void **state)
{
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    struct sockaddr_in s4 = {.sin_family = AF_INET};

    assert_true(agg_auth_host_is_loopback("127.0.0.1"));
    assert_true(agg_auth_host_is_loopback("127.5.5.5"));
    assert_true(agg_auth_host_is_loopback("::1"));
    assert_true(agg_auth_host_is_loopback("::ffff:127.0.0.1"));
    assert_false(agg_auth_host_is_loopback("10.0.0.1"));
    assert_false(agg_auth_host_is_loopback("128.0.0.1"));
    assert_false(agg_auth_host_is_loopback("0.0.0.0"));
    assert_false(agg_auth_host_is_loopback("::"));
    assert_false(agg_auth_host_is_loopback("::ffff:10.0.0.1"));
    assert_false(agg_auth_host_is_loopback("::2"));
    assert_false(agg_auth_host_is_loopback("localhost"));
    assert_false(agg_auth_host_is_loopback(NULL));

    s4.sin_addr.s_addr = htonl(0x7f000001);
    assert_true(agg_auth_addr_is_loopback((struct sockaddr *)&s4));
    s4.sin_addr.s_addr = htonl(0x0a000001);
    assert_false(agg_auth_addr_is_loopback((struct sockaddr *)&s4));
    assert_false(agg_auth_addr_is_loopback((struct sockaddr *)&un));
    assert_false(agg_auth_addr_is_loopback(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_fips),
        cmocka_unit_test(test_sha256_padding),
        cmocka_unit_test(test_hmac_rfc4231),
        cmocka_unit_test(test_auth_right_key),
        cmocka_unit_test(test_auth_wrong_key),
        cmocka_unit_test(test_auth_peer_closes),
        cmocka_unit_test(test_auth_peer_silent),
        cmocka_unit_test(test_auth_no_key),
        cmocka_unit_test(test_auth_wire_layout),
        cmocka_unit_test(test_auth_impostor_server),
        cmocka_unit_test(test_auth_foreign_peer),
        cmocka_unit_test_setup_teardown(test_load_env, load_setup, load_teardown),
        cmocka_unit_test_setup_teardown(test_load_file, load_setup, load_teardown),
        cmocka_unit_test_setup_teardown(test_load_file_refused, load_setup, load_teardown),
        cmocka_unit_test(test_loopback),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
