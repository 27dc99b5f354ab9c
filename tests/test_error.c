/* test_error.c - status strings and the per-thread last-error sentence. */
#include "testutil.h"

#include <pthread.h>

static void test_strerror_every_code(void **state)
{
    (void)state;
    const int codes[] = { HIVE_OK, HIVE_EINVAL, HIVE_ENOMEM, HIVE_EFULL, HIVE_ENOENT,
                          HIVE_ETIMEDOUT, HIVE_ECANCELED, HIVE_ETASK, HIVE_EDEAD,
                          HIVE_ESHUTDOWN, HIVE_ESTATE, HIVE_ETOPO };
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        const char *s = hive_strerror(codes[i]);
        assert_non_null(s);
        assert_string_not_equal(s, "unknown error");
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(s, hive_strerror(codes[j]));
    }
    assert_string_equal(hive_strerror(-12345), "unknown error");
    assert_string_equal(hive_strerror(7), "unknown error");
}

static void *other_thread(void *arg)
{
    (void)arg;
    /* a new thread has no error of its own yet */
    if (strcmp(hive_last_error(), "") != 0)
        return (void *)1;
    hive_t *h;
    if (hive_init(NULL, NULL) != HIVE_EINVAL)
        return (void *)2;
    (void)h;
    return strstr(hive_last_error(), "out is NULL") ? NULL : (void *)3;
}

static void test_last_error_is_per_thread(void **state)
{
    (void)state;
    hive_config_t cfg = { .workers = 100000 };
    hive_t *h = NULL;
    ASSERT_FAILS_WITH(hive_init(&cfg, &h), HIVE_EINVAL, "100000");
    assert_null(h);
    pthread_t t;
    void *res;
    assert_int_equal(pthread_create(&t, NULL, other_thread, NULL), 0);
    assert_int_equal(pthread_join(t, &res), 0);
    assert_null(res);
    /* ours is untouched by the other thread's failure */
    assert_non_null(strstr(hive_last_error(), "100000"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strerror_every_code),
        cmocka_unit_test(test_last_error_is_per_thread),
    };
    return cmocka_run_group_tests_name("error", tests, NULL, NULL);
}
