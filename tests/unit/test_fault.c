/*
 * Injected faults (agg/fault.h): the spec's words, every mistake named,
 * and the decisions: "at N" meets exactly that message of its way, a
 * percentage meets about that share, the same seed the same messages, a
 * direction word confines the rules after it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "agg/fault.h"

static void test_parse(void **state)
{
    agg_fault_t f;
    char why[256];

    (void)state;
    assert_int_equal(agg_fault_parse(&f, "", why, sizeof(why)), AGG_OK);
    assert_int_equal(f.num, 0);
    assert_int_equal(agg_fault_parse(&f, NULL, why, sizeof(why)), AGG_OK);
    assert_int_equal(f.num, 0);
    assert_int_equal(agg_fault_parse(&f, "loss 1% duplicate 0.5%, seed 9", why, sizeof(why)),
                     AGG_OK);
    assert_int_equal(f.num, 2);
    assert_int_equal(f.rule[0].what, AGG_FAULT_LOSS);
    assert_int_equal(f.rule[0].ppm, 10000);
    assert_int_equal(f.rule[1].what, AGG_FAULT_DUP);
    assert_int_equal(f.rule[1].ppm, 5000);
    assert_int_equal(f.seed, 9);
    assert_int_equal(agg_fault_parse(&f, "in delay 5ms 2% out stall 200 at 50 both kill at 7",
                                     why, sizeof(why)), AGG_OK);
    assert_int_equal(f.num, 3);
    assert_int_equal(f.rule[0].what, AGG_FAULT_HOLD);
    assert_int_equal(f.rule[0].ms, 5);
    assert_int_equal(f.rule[0].ppm, 20000);
    assert_int_equal(f.rule[0].dirs, 1u << AGG_FAULT_IN);
    assert_int_equal(f.rule[1].ms, 200);
    assert_int_equal(f.rule[1].at, 50);
    assert_int_equal(f.rule[1].dirs, 1u << AGG_FAULT_OUT);
    assert_int_equal(f.rule[2].what, AGG_FAULT_KILL);
    assert_int_equal(f.rule[2].dirs, 3);
    assert_int_equal(agg_fault_parse(&f, "out corrupt 0.1% in corrupt at 4", why, sizeof(why)),
                     AGG_OK);
    assert_int_equal(f.rule[0].what, AGG_FAULT_CORRUPT);
    assert_int_equal(f.rule[0].ppm, 1000);
    assert_int_equal(f.rule[1].at, 4);
    /* a delay with no share delays every message */
    assert_int_equal(agg_fault_parse(&f, "delay 3", why, sizeof(why)), AGG_OK);
    assert_int_equal(f.rule[0].ppm, 1000000);
}

static void test_parse_errors(void **state)
{
    static const struct {
        const char *spec, *says;
    } bad[] = {
        {"lose 1%", "'lose' is not a fault"},
        {"loss", "'loss' wants a percentage or 'at N'"},
        {"loss 101%", "not a percentage from 0% to 100%"},
        {"loss 1", "not a percentage"},
        {"loss at 0", "loss at '0': not a message number from 1"},
        {"loss at x", "not a message number"},
        {"delay", "wants milliseconds"},
        {"delay 0ms", "not milliseconds from 1"},
        {"delay 5s", "not milliseconds"},
        {"stall 100", "wants 'at N'"},
        {"stall 100 5%", "wants 'at N'"},
        {"kill 5%", "wants 'at N'"},
        {"corrupt", "'corrupt' wants a percentage or 'at N'"},
        {"seed 0", "seed '0' is not a number from 1"},
    };
    agg_fault_t f = {.num = 77};
    char why[256];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
        why[0] = '\0';
        assert_int_equal(agg_fault_parse(&f, bad[i].spec, why, sizeof(why)), AGG_ERR_PARSE);
        if (strstr(why, bad[i].says) == NULL) {
            fail_msg("\"%s\": said \"%s\", not \"%s\"", bad[i].spec, why, bad[i].says);
        }
        assert_int_equal(f.num, 77); /* untouched */
    }
}

static void test_at(void **state)
{
    agg_fault_t f;
    char why[256];
    uint32_t ms;
    unsigned k, what;

    (void)state;
    assert_int_equal(agg_fault_parse(&f, "in loss at 3 out duplicate at 2 in stall 40 at 5",
                                     why, sizeof(why)), AGG_OK);
    for (k = 1; k <= 10; ++k) {
        what = agg_fault_next(&f, AGG_FAULT_IN, &ms);
        assert_int_equal(what, k == 3 ? AGG_FAULT_LOSS : k == 5 ? AGG_FAULT_HOLD : 0);
        if (k == 5) {
            assert_int_equal(ms, 40);
        }
        what = agg_fault_next(&f, AGG_FAULT_OUT, &ms);
        assert_int_equal(what, k == 2 ? AGG_FAULT_DUP : 0);
    }
    assert_true(agg_fault_on(&f, AGG_FAULT_IN));
    assert_int_equal(agg_fault_parse(&f, "in loss 5%", why, sizeof(why)), AGG_OK);
    assert_false(agg_fault_on(&f, AGG_FAULT_OUT));
}

static void test_share_and_seed(void **state)
{
    agg_fault_t a, b, c;
    char why[256];
    unsigned k, lost = 0, dup = 0, same = 0, wa, wb, wc, differ = 0;
    uint32_t ms;

    (void)state;
    assert_int_equal(agg_fault_parse(&a, "loss 1% duplicate 2% seed 5", why, sizeof(why)), AGG_OK);
    assert_int_equal(agg_fault_parse(&b, "loss 1% duplicate 2% seed 5", why, sizeof(why)), AGG_OK);
    assert_int_equal(agg_fault_parse(&c, "loss 1% duplicate 2% seed 6", why, sizeof(why)), AGG_OK);
    for (k = 0; k < 100000; ++k) {
        wa = agg_fault_next(&a, AGG_FAULT_IN, &ms);
        wb = agg_fault_next(&b, AGG_FAULT_IN, &ms);
        wc = agg_fault_next(&c, AGG_FAULT_IN, &ms);
        lost += (wa & AGG_FAULT_LOSS) != 0;
        dup += (wa & AGG_FAULT_DUP) != 0;
        same += wa == wb;
        differ += wa != wc;
    }
    assert_int_equal(same, 100000);
    assert_in_range(lost, 850, 1150);
    assert_in_range(dup, 1750, 2250);
    assert_true(differ > 1000); /* another seed, other messages */
    /* the other way is counted apart: its first messages meet other faults */
    assert_int_equal(a.seen[AGG_FAULT_IN], 100000);
    assert_int_equal(a.seen[AGG_FAULT_OUT], 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_at),
        cmocka_unit_test(test_share_and_seed),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
