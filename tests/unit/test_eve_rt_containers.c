/* The Eve runtime library (src/eve_rt, eve_rt.h): vector, set and map,
 * their elements' references and their run-time errors (in forked
 * children), and temporaries and buffers. */
#define _DEFAULT_SOURCE /* kill, setenv */

#include "eve_rt_test.h"

/* ---- containers -------------------------------------------------------------------------------- */

static int dtor_calls;

struct thing {
    eve_obj_t h;
    int id;
};

static void thing_dtor(eve_obj_t *o)
{
    (void)o;
    dtor_calls++;
}

static struct thing *thing_new(int id)
{
    struct thing *t = eve_obj_new(sizeof *t, thing_dtor);
    t->id = id;
    return t;
}

#define I(x) ((eve_val_t){.i = (x)})
#define P(x) ((eve_val_t){.p = (x)})

static void test_vector(void)
{
    eve_vec_t *v = eve_vec_new(EVE_K_INT);
    for (int i = 0; i < 100; i++)
        eve_vec_push(v, I(i % 10));
    ASSERT_EQ(eve_vec_size(v), 100);
    ASSERT_EQ(eve_vec_get(v, 37, NULL).i, 7);
    eve_vec_set(v, 0, I(99), NULL);
    ASSERT(eve_vec_contains(v, I(99)));
    eve_vec_remove(v, I(3));
    ASSERT_EQ(eve_vec_size(v), 90);
    ASSERT(!eve_vec_contains(v, I(3)));
    ASSERT_EQ(eve_vec_pop(v, NULL).i, 9);
    eve_vec_clear(v);
    ASSERT_EQ(eve_vec_size(v), 0);
    eve_release(v);

    /* Strings: the vector's references come and go. */
    eve_str_t *a = S("alpha"), *b = S("beta");
    eve_vec_t *vs = eve_vec_new(EVE_K_STR);
    eve_vec_push(vs, P(a));
    eve_vec_push(vs, P(b));
    eve_vec_push(vs, P(a));
    ASSERT_EQ(rc_of(a), 3);
    eve_str_t *a2 = S("alpha");
    ASSERT(eve_vec_contains(vs, P(a2))); /* by content */
    eve_vec_remove(vs, P(a2));
    ASSERT_EQ(rc_of(a), 1);
    ASSERT_EQ(eve_vec_size(vs), 1);
    eve_vec_set(vs, 0, P(a), NULL);
    ASSERT_EQ(rc_of(b), 1);
    ASSERT_EQ(rc_of(a), 2);
    eve_val_t popped = eve_vec_pop(vs, NULL); /* owned */
    ASSERT(popped.p == a);
    ASSERT_EQ(rc_of(a), 2);
    eve_release(popped.p);
    eve_vec_push(vs, P(b));
    eve_release(vs); /* destroys it: releases b */
    ASSERT_EQ(rc_of(b), 1);
    eve_release(a);
    eve_release(a2);
    eve_release(b);

    /* Objects: each freed exactly once. */
    dtor_calls = 0;
    eve_vec_t *vo = eve_vec_new(EVE_K_OBJ);
    struct thing *t[5];
    for (int i = 0; i < 5; i++) {
        t[i] = thing_new(i);
        eve_vec_push(vo, P(t[i]));
        eve_vec_push(vo, P(t[i]));
        eve_release(t[i]); /* the vector holds them now */
    }
    eve_vec_remove(vo, P(t[2]));
    ASSERT_EQ(dtor_calls, 1);
    eve_vec_clear(vo);
    ASSERT_EQ(dtor_calls, 5);
    for (int i = 0; i < 3; i++) {
        struct thing *x = thing_new(10 + i);
        eve_vec_push(vo, P(x));
        eve_release(x);
    }
    eve_release(vo);
    ASSERT_EQ(dtor_calls, 8);

    eve_vec_t *r = eve_range(-2, 3);
    ASSERT_EQ(eve_vec_size(r), 5);
    ASSERT_EQ(eve_vec_get(r, 0, NULL).i, -2);
    ASSERT_EQ(eve_vec_get(r, 4, NULL).i, 2);
    eve_release(r);
    r = eve_range(5, 5);
    ASSERT_EQ(eve_vec_size(r), 0);
    eve_release(r);
}

static void fail_vec_index(void *arg)
{
    (void)arg;
    eve_vec_t *v = eve_vec_new(EVE_K_INT);
    eve_vec_push(v, I(1));
    eve_vec_get(v, 1, "v.eve:9:9");
}

static void fail_vec_pop(void *arg)
{
    (void)arg;
    eve_vec_pop(eve_vec_new(EVE_K_INT), "v.eve:9:10");
}

static void fail_map_get(void *arg)
{
    (void)arg;
    eve_map_t *m = eve_map_new(EVE_K_STR, EVE_K_INT);
    eve_map_get(m, P(S("nope")), "v.eve:9:11");
}

static void test_set(void)
{
    eve_set_t *s = eve_set_new(EVE_K_INT);
    for (int i = 0; i < 1000; i++)
        eve_set_add(s, I(i * 7 % 1000));
    ASSERT_EQ(eve_set_size(s), 1000);
    for (int i = 0; i < 1000; i += 2)
        eve_set_remove(s, I(i));
    ASSERT_EQ(eve_set_size(s), 500);
    ASSERT(eve_set_contains(s, I(1)));
    ASSERT(!eve_set_contains(s, I(2)));
    /* Insertion order, holes skipped. */
    size_t it = 0;
    eve_val_t x;
    int n = 0, expect = 0;
    while (eve_set_next(s, &it, &x)) {
        while ((expect * 7 % 1000) % 2 == 0)
            expect++;
        ASSERT_EQ(x.i, expect * 7 % 1000);
        expect++;
        n++;
    }
    ASSERT_EQ(n, 500);
    /* Removing each element as the loop reaches it sees each exactly once. */
    it = 0;
    n = 0;
    while (eve_set_next(s, &it, &x)) {
        eve_set_remove(s, x);
        n++;
    }
    ASSERT_EQ(n, 500);
    ASSERT_EQ(eve_set_size(s), 0);
    /* Churn: memory stays bounded (holes squeezed out), contents right. */
    for (int round = 0; round < 100; round++) {
        for (int i = 0; i < 50; i++)
            eve_set_add(s, I(round * 1000 + i));
        for (int i = 0; i < 50; i += 2)
            eve_set_remove(s, I(round * 1000 + i));
    }
    ASSERT_EQ(eve_set_size(s), 2500);
    ASSERT(eve_set_contains(s, I(99 * 1000 + 49)));
    ASSERT(!eve_set_contains(s, I(99 * 1000 + 48)));
    eve_set_clear(s);
    ASSERT_EQ(eve_set_size(s), 0);
    eve_release(s);

    eve_set_t *ss = eve_set_new(EVE_K_STR);
    eve_str_t *a = S("a"), *a2 = S("a"), *b = S("b");
    eve_set_add(ss, P(a));
    eve_set_add(ss, P(a2)); /* equal: not added */
    eve_set_add(ss, P(b));
    ASSERT_EQ(eve_set_size(ss), 2);
    ASSERT_EQ(rc_of(a), 2);
    ASSERT_EQ(rc_of(a2), 1);
    eve_set_remove(ss, P(a2));
    ASSERT_EQ(rc_of(a), 1);
    eve_release(ss);
    ASSERT_EQ(rc_of(b), 1);
    eve_release(a);
    eve_release(a2);
    eve_release(b);

    dtor_calls = 0;
    eve_set_t *so = eve_set_new(EVE_K_OBJ);
    for (int i = 0; i < 20; i++) {
        struct thing *t = thing_new(i);
        eve_set_add(so, P(t));
        eve_set_add(so, P(t)); /* identity: once */
        eve_release(t);
    }
    ASSERT_EQ(eve_set_size(so), 20);
    ASSERT_EQ(dtor_calls, 0);
    eve_release(so);
    ASSERT_EQ(dtor_calls, 20);

    eve_set_t *sf = eve_set_new(EVE_K_FLOAT);
    eve_set_add(sf, (eve_val_t){.f = 0.0});
    ASSERT(eve_set_contains(sf, (eve_val_t){.f = -0.0}));
    eve_release(sf);
}

static void test_map(void)
{
    eve_map_t *m = eve_map_new(EVE_K_STR, EVE_K_OBJ);
    dtor_calls = 0;
    eve_str_t *k1 = S("one"), *k2 = S("two"), *k1b = S("one");
    struct thing *t1 = thing_new(1), *t2 = thing_new(2), *t3 = thing_new(3);
    eve_map_put(m, P(k1), P(t1));
    eve_map_put(m, P(k2), P(t2));
    ASSERT_EQ(rc_of(k1), 2);
    ASSERT_EQ(rc_of(t1), 2);
    eve_map_put(m, P(k1b), P(t3)); /* replaces the value, keeps the key */
    ASSERT_EQ(rc_of(k1b), 1);
    ASSERT_EQ(rc_of(t1), 1);
    ASSERT_EQ(eve_map_size(m), 2);
    ASSERT(eve_map_get(m, P(k1b), NULL).p == t3);
    ASSERT(eve_map_contains(m, P(k2)));
    size_t it = 0;
    eve_val_t key;
    ASSERT(eve_map_next(m, &it, &key) && key.p == k1);
    ASSERT(eve_map_next(m, &it, &key) && key.p == k2);
    ASSERT(!eve_map_next(m, &it, &key));
    eve_map_remove(m, P(k2));
    ASSERT_EQ(rc_of(k2), 1);
    ASSERT_EQ(rc_of(t2), 1);
    eve_release(t1);
    eve_release(t2);
    eve_release(t3);
    ASSERT_EQ(dtor_calls, 2); /* t3 is still in the map */
    eve_map_clear(m);
    ASSERT_EQ(dtor_calls, 3);
    ASSERT_EQ(rc_of(k1), 1);
    eve_map_put(m, P(k1), P(thing_new(4))); /* the map's and the caller's */
    eve_release(eve_map_get(m, P(k1), NULL).p); /* drop the caller's */
    eve_release(m);
    ASSERT_EQ(dtor_calls, 4);
    eve_release(k1);
    eve_release(k2);
    eve_release(k1b);

    eve_map_t *mi = eve_map_new(EVE_K_INT, EVE_K_INT);
    for (int i = 0; i < 5000; i++)
        eve_map_put(mi, I(i), I(i * i));
    for (int i = 0; i < 5000; i += 3)
        eve_map_remove(mi, I(i));
    for (int i = 0; i < 5000; i++) {
        ASSERT_EQ(eve_map_contains(mi, I(i)), i % 3 != 0);
        if (i % 3)
            ASSERT_EQ(eve_map_get(mi, I(i), NULL).i, (int64_t)i * i);
    }
    eve_release(mi);
}

static void test_container_errors(void)
{
    expect_fail(fail_vec_index, NULL,
                "v.eve:9:9: run-time error: index 1 out of range for a vector of size 1\n");
    expect_fail(fail_vec_pop, NULL, "v.eve:9:10: run-time error: pop from an empty vector\n");
    expect_fail(fail_map_get, NULL, "v.eve:9:11: run-time error: the map has no key \"nope\"\n");
}

/* ---- temporaries and buffers --------------------------------------------------------------- */

static void test_temps(void)
{
    eve_cx_t cx;
    eve_cx_init(&cx);
    dtor_calls = 0;
    struct thing *keep = eve_tmp(&cx, thing_new(0));
    size_t mark = cx.ntmp;
    for (int i = 0; i < 100; i++) /* past the inline array */
        eve_tmp(&cx, thing_new(i + 1));
    ASSERT_EQ(cx.ntmp, 101);
    eve_tmp_drain(&cx, mark);
    ASSERT_EQ(dtor_calls, 100);
    ASSERT_EQ(cx.ntmp, 1);
    ASSERT_EQ(keep->id, 0);
    eve_str_t *s = eve_tmp(&cx, eve_str_concat(&eve_str_empty, &eve_str_empty));
    ASSERT(s == &eve_str_empty);
    eve_cx_done(&cx); /* drains everything */
    ASSERT_EQ(dtor_calls, 101);
    ASSERT_EQ(cx.ntmp, 0);

    eve_wbuf_t *w = eve_wbuf_new();
    for (int i = 0; i < 1000; i++)
        eve_wbuf_append_byte(w, 0x100 + i);
    ASSERT_EQ(eve_wbuf_size(w), 1000);
    ASSERT_EQ(w->bytes[999], (999 + 0x100) & 0xff);
    eve_wbuf_append(w, w->bytes, w->len); /* itself */
    ASSERT_EQ(eve_wbuf_size(w), 2000);
    ASSERT_MEM_EQ(w->bytes, w->bytes + 1000, 1000);
    eve_wbuf_clear(w);
    ASSERT_EQ(eve_wbuf_size(w), 0);
    eve_release(w);
    w = eve_wbuf_new(); /* maybe the same one again, empty */
    ASSERT_EQ(eve_wbuf_size(w), 0);
    ASSERT_EQ(rc_of(w), 1);
    eve_release(w);
    eve_rbuf_t *r = eve_rbuf_new();
    ASSERT_EQ(eve_rbuf_size(r), 0);
    eve_str_t *rs = eve_rbuf_to_string(r);
    ASSERT_EQ(rs->len, 0);
    eve_release(rs);
    eve_release(r);
    eve_box_t *box = eve_box_new(true);
    ASSERT(box->v.p == &eve_str_empty);
    box->v.p = S("boxed");
    eve_release(box);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"vector", test_vector},
        {"set", test_set},
        {"map", test_map},
        {"container_errors", test_container_errors},
        {"temps", test_temps},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
